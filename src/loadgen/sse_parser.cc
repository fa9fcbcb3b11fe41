#include "loadgen/sse_parser.h"

#include <nlohmann/json.hpp>

namespace ecoserve::loadgen {

void SseParser::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n') {
      if (last_was_cr_) {  // "\r\n": the line was already ended by '\r'
        last_was_cr_ = false;
        continue;
      }
      line(partial_);
      partial_.clear();
    } else if (c == '\r') {
      line(partial_);
      partial_.clear();
      last_was_cr_ = true;
      continue;
    } else {
      partial_.push_back(c);
    }
    last_was_cr_ = false;
  }
}

void SseParser::finish() {
  if (!partial_.empty()) {
    line(partial_);
    partial_.clear();
  }
  dispatch();
}

void SseParser::line(std::string_view l) {
  if (l.empty()) {
    dispatch();
    return;
  }
  if (l[0] == ':') return;
  auto colon = l.find(':');
  std::string_view field = l.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (have_data_) event_.data.push_back('\n');
    event_.data.append(value);
    have_data_ = true;
  } else if (field == "event") {
    event_.type = std::string(value);
  } else if (field == "error") {
    event_.type = "error";
    if (have_data_) event_.data.push_back('\n');
    event_.data.append(value);
    have_data_ = true;
  }
}

void SseParser::dispatch() {
  if (have_data_) handler_(event_);
  event_ = SseEvent{};
  have_data_ = false;
}

StatusOr<StreamChunk> parse_stream_data(std::string_view data) {
  StreamChunk c;
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) trimmed.remove_suffix(1);
  if (trimmed == "[DONE]") {
    c.done = true;
    return c;
  }
  nlohmann::json j = nlohmann::json::parse(trimmed, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument_error("stream chunk is not a JSON object: '{}'",
                                  trimmed.substr(0, std::min<std::size_t>(trimmed.size(), 120)));
  if (auto it = j.find("error"); it != j.end() && !it->is_null()) {
    if (it->is_object() && it->contains("message") && (*it)["message"].is_string())
      c.error = (*it)["message"].get<std::string>();
    else
      c.error = it->dump();
    if (c.error.empty()) c.error = "error";
    return c;
  }
  if (auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
    const auto& ch = (*it)[0];
    auto append = [&](const nlohmann::json& obj, const char* key) {
      if (auto f = obj.find(key); f != obj.end() && f->is_string()) c.text += f->get<std::string>();
    };
    if (ch.is_object()) {
      append(ch, "text");
      for (const char* holder : {"delta", "message"}) {
        if (auto d = ch.find(holder); d != ch.end() && d->is_object()) {
          append(*d, "reasoning_content");
          append(*d, "content");
        }
      }
    }
  }
  if (auto it = j.find("usage"); it != j.end() && it->is_object()) {
    c.has_usage = true;
    c.prompt_tokens = it->value("prompt_tokens", std::int64_t{0});
    c.completion_tokens = it->value("completion_tokens", std::int64_t{0});
  }
  return c;
}

}  // namespace ecoserve::loadgen
