// StopStringMatcher: finds OpenAI `stop` strings in a stream of text pieces.
// Text is released only once it cannot be the start of a stop string; the stop
// string itself (and anything after it) is never released. With no stop
// strings every piece passes straight through.
// One per generated sequence; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ecoserve::server {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was completed: emit `text`, then finish
  };
  // Adds a piece of generated text. After a stop, further pieces are ignored.
  Result push(std::string_view piece);
  // End of generation without a stop: releases the text held back.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ecoserve::server
