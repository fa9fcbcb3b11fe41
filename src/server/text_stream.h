// TextStream: the text of one generated sequence (one choice), token by token.
// Detokenizes incrementally (model::IncrementalDetokenizer, keeping the leading
// space of the first token since the text continues the prompt; never splits a
// UTF-8 character) and applies the stop strings (StopStringMatcher: the stop
// string is never emitted). Keeps the full text and the token count.
// One per choice; not thread-safe. The tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "server/stop_matcher.h"

namespace ecoserve::server {

class TextStream {
 public:
  TextStream(const model::Tokenizer& tokenizer, std::vector<std::string> stops);

  // Text to emit for this token (possibly empty). stopped() turns true when a
  // stop string completed: the caller ends the sequence with finish_reason "stop".
  std::string push(int32_t token);
  // End of the sequence (not by a stop string): the text still held back.
  std::string finish();

  bool stopped() const { return matcher_.stopped(); }
  const std::string& text() const { return text_; }
  int32_t num_tokens() const { return num_tokens_; }

 private:
  model::IncrementalDetokenizer detok_;
  StopStringMatcher matcher_;
  std::string text_;
  int32_t num_tokens_ = 0;
};

}  // namespace ecoserve::server
