// SseParser: incremental Server-Sent-Events parser for streamed OpenAI responses.
//
// feed() takes body bytes as they arrive (any split, even mid-line) and calls the
// handler once per complete event (a blank line ends an event). Lines may end in
// "\n", "\r\n" or "\r". "data:" lines of one event are joined with '\n'; "event:"
// sets the type; a line starting with ':' is a comment. A bare "error: ..." field
// (llama-server style) is reported as an event of type "error".
// One parser per response; not thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ecoserve::loadgen {

struct SseEvent {
  std::string type;  // "" unless "event:" (or "error" for an error field)
  std::string data;
};

class SseParser {
 public:
  using Handler = std::function<void(const SseEvent&)>;
  explicit SseParser(Handler handler) : handler_(std::move(handler)) {}

  void feed(std::string_view bytes);
  // End of body: dispatches a last event that was not followed by a blank line.
  void finish();

 private:
  void line(std::string_view l);
  void dispatch();

  Handler handler_;
  std::string partial_;
  bool last_was_cr_ = false;
  SseEvent event_;
  bool have_data_ = false;
};

// What one streamed chunk (the JSON after "data: ") carries.
struct StreamChunk {
  bool done = false;          // "[DONE]"
  std::string text;           // choices[0].text / delta.content (+ delta.reasoning_content)
  bool has_usage = false;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::string error;          // non-empty when the chunk is an error object
};

// Parses one data payload (or a whole non-streamed JSON response).
StatusOr<StreamChunk> parse_stream_data(std::string_view data);

}  // namespace ecoserve::loadgen
