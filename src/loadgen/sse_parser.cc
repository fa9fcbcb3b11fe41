#include "loadgen/sse_parser.h"

#include <cmath>
#include <cstdint>
#include <utility>

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

namespace {

// usage.<key> as a token count: absent or null is 0; a non-negative integer (or
// an integral float below 2^53) is taken; anything else is an error, never an
// exception or an out-of-range conversion (found by fuzz/sse_parser_fuzz.cc:
// 1e185 converted to int64 is undefined behaviour).
StatusOr<std::int64_t> usage_count(const nlohmann::json& usage, const char* key) {
  auto f = usage.find(key);
  if (f == usage.end() || f->is_null()) return std::int64_t{0};
  if (f->is_number_unsigned()) {
    const auto u = f->get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(u);
  } else if (f->is_number_integer()) {
    const auto i = f->get<std::int64_t>();
    if (i >= 0) return i;
  } else if (f->is_number_float()) {
    const double d = f->get<double>();
    if (d >= 0 && d < 9007199254740992.0 && d == std::floor(d)) return static_cast<std::int64_t>(d);
  }
  std::string shown = f->dump();
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  return invalid_argument_error("stream chunk: usage.{} is not a token count: {}", key, shown);
}

}  // namespace

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
    for (auto [key, out] : {std::pair{"prompt_tokens", &c.prompt_tokens}, std::pair{"completion_tokens", &c.completion_tokens}}) {
      auto v = usage_count(*it, key);
      if (!v.ok()) return v.status();
      *out = *v;
    }
  }
  return c;
}

}  // namespace ecoserve::loadgen
