#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace ecoserve::server {

namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    case json::value_t::number_float: return "number";
    default: return "integer";
  }
}

ApiError wrong_type(const std::string& field, const char* want, const json& v) {
  return bad_request(fmt::format("'{}' must be {}, got {}", field, want, type_name(v)), field);
}

// Each getter: absent or null -> leaves `out` unchanged and returns nullopt;
// wrong type -> ApiError.
std::optional<ApiError> get_bool(const json& o, const std::string& key, bool& out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return wrong_type(key, "a boolean", *it);
  out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> get_number(const json& o, const std::string& key, double& out, bool& present) {
  present = false;
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return wrong_type(key, "a number", *it);
  out = it->get<double>();
  if (!std::isfinite(out)) return bad_request(fmt::format("'{}' must be a finite number", key), key);
  present = true;
  return std::nullopt;
}

std::optional<ApiError> get_int(const json& o, const std::string& key, int64_t& out, bool& present) {
  present = false;
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer()) {
    out = it->get<int64_t>();
  } else if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e18) return wrong_type(key, "an integer", *it);
    out = static_cast<int64_t>(d);
  } else {
    return wrong_type(key, "an integer", *it);
  }
  present = true;
  return std::nullopt;
}

// Integer in [lo, hi] stored into `out` (int32), when present.
std::optional<ApiError> get_int_in(const json& o, const std::string& key, int64_t lo, int64_t hi, int32_t& out,
                                   bool* present_out = nullptr) {
  int64_t v = 0;
  bool present = false;
  if (auto e = get_int(o, key, v, present)) return e;
  if (present_out) *present_out = present;
  if (!present) return std::nullopt;
  if (v < lo || v > hi) {
    if (hi == std::numeric_limits<int32_t>::max())
      return bad_request(fmt::format("'{}' must be at least {}, got {}", key, lo, v), key);
    return bad_request(fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, v), key);
  }
  out = static_cast<int32_t>(v);
  return std::nullopt;
}

std::optional<ApiError> get_float_in(const json& o, const std::string& key, double lo, double hi, bool lo_open,
                                     float& out) {
  double v = 0;
  bool present = false;
  if (auto e = get_number(o, key, v, present)) return e;
  if (!present) return std::nullopt;
  if (v < lo || v > hi || (lo_open && v == lo)) {
    return bad_request(fmt::format("'{}' must be in {}{}, {}], got {}", key, lo_open ? "(" : "[", lo, hi, v), key);
  }
  out = static_cast<float>(v);
  return std::nullopt;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> get_content(const json& m, size_t index, std::string& out) {
  const std::string field = fmt::format("messages[{}].content", index);
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::nullopt;  // e.g. assistant with tool calls
  if (it->is_string()) {
    out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) return wrong_type(field, "a string or an array of content parts", *it);
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    if (!part.is_object()) return wrong_type(fmt::format("{}[{}]", field, k), "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || *type != "text")
      return bad_request(fmt::format("{}[{}]: only content parts of type 'text' are supported", field, k), field);
    auto text = part.find("text");
    if (text == part.end() || !text->is_string())
      return bad_request(fmt::format("{}[{}].text must be a string", field, k), field);
    out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> parse_prompt(const json& o, CompletionRequest& r) {
  auto it = o.find("prompt");
  if (it == o.end() || it->is_null()) return bad_request("'prompt' is required", "prompt");
  const json& p = *it;
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array()) {
    if (p.empty()) return bad_request("'prompt' must not be empty", "prompt");
    if (p.size() == 1 && p[0].is_string()) {
      r.prompt = p[0].get<std::string>();
    } else if (p[0].is_number_integer()) {
      r.prompt_is_tokens = true;
      for (const json& t : p) {
        if (!t.is_number_integer()) return wrong_type("prompt", "a string or an array of token ids", t);
        int64_t id = t.get<int64_t>();
        if (id < 0 || id > std::numeric_limits<int32_t>::max())
          return bad_request(fmt::format("'prompt' token id {} is out of range", id), "prompt");
        r.prompt_tokens.push_back(static_cast<int32_t>(id));
      }
    } else if (p[0].is_string()) {
      return bad_request("'prompt' with several prompts is not supported; send one request per prompt", "prompt");
    } else {
      return wrong_type("prompt", "a string or an array of token ids", p[0]);
    }
  } else {
    return wrong_type("prompt", "a string or an array of token ids", p);
  }
  if (!r.prompt_is_tokens && r.prompt.empty()) return bad_request("'prompt' must not be empty", "prompt");
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& o, CompletionRequest& r) {
  auto it = o.find("messages");
  if (it == o.end() || it->is_null()) return bad_request("'messages' is required", "messages");
  if (!it->is_array()) return wrong_type("messages", "an array", *it);
  if (it->empty()) return bad_request("'messages' must contain at least one message", "messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object()) return wrong_type(fmt::format("messages[{}]", i), "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad_request(fmt::format("'messages[{}].role' must be a string", i), "messages");
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role.empty()) return bad_request(fmt::format("'messages[{}].role' must not be empty", i), "messages");
    if (auto e = get_content(m, i, msg.content)) return e;
    r.messages.push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const json& o, CompletionRequest& r) {
  auto it = o.find("stop");
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    if (!it->get<std::string>().empty()) r.stop.push_back(it->get<std::string>());
    return std::nullopt;
  }
  if (!it->is_array()) return wrong_type("stop", "a string or an array of strings", *it);
  if (it->size() > static_cast<size_t>(kMaxStopStrings))
    return bad_request(fmt::format("'stop' may hold at most {} strings, got {}", kMaxStopStrings, it->size()), "stop");
  for (const json& s : *it) {
    if (!s.is_string()) return wrong_type("stop", "a string or an array of strings", s);
    if (!s.get<std::string>().empty()) r.stop.push_back(s.get<std::string>());
  }
  return std::nullopt;
}

std::optional<ApiError> parse_object(const json& o, Endpoint endpoint, CompletionRequest& r) {
  const bool chat = endpoint == Endpoint::kChatCompletions;
  if (auto it = o.find("model"); it != o.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("model", "a string", *it);
    r.model = it->get<std::string>();
  }
  if (chat) {
    if (auto e = parse_messages(o, r)) return e;
  } else {
    if (auto e = parse_prompt(o, r)) return e;
  }
  if (auto e = get_bool(o, "stream", r.stream)) return e;
  if (auto it = o.find("stream_options"); it != o.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("stream_options", "an object", *it);
    if (!r.stream) return bad_request("'stream_options' can only be set when 'stream' is true", "stream_options");
    if (auto it2 = it->find("include_usage"); it2 != it->end() && !it2->is_null()) {
      if (!it2->is_boolean()) return wrong_type("stream_options.include_usage", "a boolean", *it2);
      r.include_usage = it2->get<bool>();
    }
  }
  if (auto e = get_int_in(o, "n", 1, kMaxChoices, r.n)) return e;
  if (auto e = parse_stop(o, r)) return e;

  int32_t max_tokens = 0;
  bool present = false;
  if (auto e = get_int_in(o, "max_tokens", 1, std::numeric_limits<int32_t>::max(), max_tokens, &present)) return e;
  if (present) r.max_tokens = max_tokens;
  if (chat) {
    if (auto e = get_int_in(o, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max(), max_tokens, &present))
      return e;
    if (present) r.max_tokens = max_tokens;
  }

  SamplingParams& s = r.sampling;
  if (auto e = get_float_in(o, "temperature", 0.0, 100.0, false, s.temperature)) return e;
  if (auto e = get_float_in(o, "top_p", 0.0, 1.0, true, s.top_p)) return e;
  int32_t top_k = 0;
  if (auto e = get_int_in(o, "top_k", -1, std::numeric_limits<int32_t>::max(), top_k)) return e;
  s.top_k = top_k < 0 ? 0 : top_k;  // -1 (vLLM) and 0 mean off
  if (auto e = get_float_in(o, "min_p", 0.0, 1.0, false, s.min_p)) return e;
  if (auto e = get_float_in(o, "frequency_penalty", -2.0, 2.0, false, s.frequency_penalty)) return e;
  if (auto e = get_float_in(o, "presence_penalty", -2.0, 2.0, false, s.presence_penalty)) return e;
  if (auto e = get_float_in(o, "repetition_penalty", 0.0, 10.0, true, s.repetition_penalty)) return e;
  if (auto e = get_bool(o, "ignore_eos", s.ignore_eos)) return e;
  int64_t seed = 0;
  if (auto e = get_int(o, "seed", seed, present)) return e;
  if (present) {
    r.has_seed = true;
    r.seed = seed;
  }
  if (auto e = get_int_in(o, "priority", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(),
                          r.priority))
    return e;
  if (auto e = get_float_in(o, "slo_ttft_ms", 0.0, 1e7, true, r.slo_ttft_ms)) return e;
  if (auto e = get_float_in(o, "slo_tpot_ms", 0.0, 1e7, true, r.slo_tpot_ms)) return e;
  if (auto it = o.find("stop_token_ids"); it != o.end() && !it->is_null()) {
    if (!it->is_array()) return wrong_type("stop_token_ids", "an array of integers", *it);
    for (const json& t : *it) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
        return bad_request("'stop_token_ids' must hold non-negative token ids", "stop_token_ids");
      s.stop_token_ids.push_back(t.get<int32_t>());
    }
  }

  if (chat) {
    if (auto e = get_bool(o, "logprobs", r.logprobs)) return e;
    bool has_top = false;
    if (auto e = get_int_in(o, "top_logprobs", 0, kMaxTopLogprobs, r.top_logprobs, &has_top)) return e;
    if (has_top && r.top_logprobs > 0 && !r.logprobs)
      return bad_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  } else {
    auto it = o.find("logprobs");
    if (it != o.end() && !it->is_null()) {
      if (it->is_boolean()) return wrong_type("logprobs", "an integer (number of top alternatives)", *it);
      bool has = false;
      if (auto e = get_int_in(o, "logprobs", 0, kMaxTopLogprobs, r.top_logprobs, &has)) return e;
      r.logprobs = has;
    }
    if (auto e = get_bool(o, "echo", r.echo)) return e;
    if (r.echo) return bad_request("'echo' is not supported", "echo");
    if (auto it2 = o.find("suffix"); it2 != o.end() && !it2->is_null())
      return bad_request("'suffix' is not supported", "suffix");
    int32_t best_of = 1;
    if (auto e = get_int_in(o, "best_of", 1, kMaxChoices, best_of)) return e;
    if (best_of != 1 && best_of != r.n) return bad_request("'best_of' other than n is not supported", "best_of");
  }
  if (auto it = o.find("tools"); chat && it != o.end() && !it->is_null() && !(it->is_array() && it->empty()))
    return bad_request("'tools' are not supported", "tools");
  return std::nullopt;
}

// Parses JSON text without throwing. On a syntax error or a number out of range
// (nlohmann's parse_error / out_of_range.406, e.g. 1e400) returns the 400 to
// answer, naming the object key being parsed when the error happened.
std::variant<json, ApiError> parse_json_body(std::string_view body) {
  // The keys from the root to the value being parsed ("stream_options", "include_usage").
  std::vector<std::string> path;
  auto track = [&path](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth >= 1) {
      path.resize(static_cast<size_t>(depth - 1));
      path.push_back(parsed.is_string() ? parsed.get<std::string>() : std::string());
    }
    return true;
  };
  try {
    json o = json::parse(body, track, /*allow_exceptions=*/true);
    return o;
  } catch (const json::exception& e) {
    std::string field;
    for (const std::string& k : path) field += (field.empty() ? "" : ".") + k;
    // e.what() is "[json.exception.KIND.ID] detail": keep the detail.
    std::string detail = e.what();
    if (auto pos = detail.find("] "); pos != std::string::npos && detail.starts_with("[json.exception.")) {
      detail = detail.substr(pos + 2);
    }
    if (e.id == 406) {  // out_of_range.406: a number that does not fit a double
      return bad_request(field.empty() ? "a number in the request body is out of range: " + detail
                                       : fmt::format("'{}' is out of range: {}", field, detail),
                         field);
    }
    return bad_request("malformed JSON in the request body: " + detail, field);
  }
}

}  // namespace

std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, Endpoint endpoint) {
  auto parsed = parse_json_body(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& o = std::get<json>(parsed);
  if (!o.is_object()) return bad_request(fmt::format("the request body must be a JSON object, got {}", type_name(o)));
  CompletionRequest r;
  r.endpoint = endpoint;
  if (auto e = parse_object(o, endpoint, r)) return *e;
  return r;
}

}  // namespace ecoserve::server
