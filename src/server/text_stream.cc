#include "server/text_stream.h"

namespace ecoserve::server {

TextStream::TextStream(const model::Tokenizer& tokenizer, std::vector<std::string> stops)
    : detok_(tokenizer, /*render_special=*/false, /*strip_leading_space=*/false), matcher_(std::move(stops)) {}

std::string TextStream::push(int32_t token) {
  if (matcher_.stopped()) return {};
  ++num_tokens_;
  StopStringMatcher::Result r = matcher_.push(detok_.push(token));
  text_ += r.text;
  return std::move(r.text);
}

std::string TextStream::finish() {
  if (matcher_.stopped()) return {};
  StopStringMatcher::Result r = matcher_.push(detok_.flush());
  std::string out = std::move(r.text);
  if (!r.stopped) out += matcher_.flush();
  text_ += out;
  return out;
}

}  // namespace ecoserve::server
