#include "sim/config_text.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <string>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace ecoserve::sim {

namespace {

using nlohmann::json;

// Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): what
// nlohmann::json::dump accepts.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // bounds of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      const auto ck = static_cast<unsigned char>(s[i + k]);
      if (ck < 0x80 || ck > 0xbf) return false;
    }
    i += len;
  }
  return true;
}

const char* json_type_name(const json& j) {
  if (j.is_array()) return "a list";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  return "not a map";
}

// ---- JSON -------------------------------------------------------------------------

// Line and column (1-based) of the first '[' or '{' of valid JSON text that opens
// nesting level max_depth + 1.
std::pair<int64_t, int64_t> json_too_deep_at(std::string_view text, int32_t max_depth) {
  int64_t line = 1, column = 0;
  int32_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    ++column;
    if (c == '\n') {
      ++line;
      column = 0;
      continue;
    }
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return {line, column};
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return {line, column};
}

// JSON text, or the parser's error (its message names the line and column).
// `not_json` is set when the text is not valid JSON at all (kAuto then tries YAML).
StatusOr<json> parse_json(std::string_view text, const ConfigTextLimits& limits, bool& not_json) {
  not_json = false;
  bool too_deep = false;
  int64_t values = 0;
  // Keeps no value nested deeper than max_depth (so nothing deep is ever built)
  // and counts the values.
  const json::parser_callback_t limit = [&](int depth, json::parse_event_t event, json&) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) {
      ++values;
      if (depth + 1 > limits.max_depth) too_deep = true;
      return !too_deep;
    }
    if (event == json::parse_event_t::value || event == json::parse_event_t::key) ++values;
    return !too_deep;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), limit, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    not_json = true;
    std::string_view what = e.what();
    if (const size_t p = what.find("] "); what.starts_with("[json.exception.") && p != std::string_view::npos) {
      what.remove_prefix(p + 2);
    }
    return invalid_argument_error("{}", what);
  }
  if (too_deep) {
    const auto [line, column] = json_too_deep_at(text, limits.max_depth);
    return invalid_argument_error("line {}, column {}: maps and lists nested deeper than {}", line, column,
                                  limits.max_depth);
  }
  if (values > limits.max_values) {
    return invalid_argument_error("more than {} keys and values", limits.max_values);
  }
  if (j.is_null()) return json::object();
  if (!j.is_object()) {
    return invalid_argument_error("the top level is {}, expected a map of settings", json_type_name(j));
  }
  return j;
}

// ---- YAML -------------------------------------------------------------------------

std::string at(const YAML::Mark& m) {
  if (m.is_null()) return "";
  return fmt::format("line {}, column {}: ", m.line + 1, m.column + 1);
}

// A plain scalar's JSON value (see the header).
json scalar_value(const std::string& s) {
  if (s == "true" || s == "false") return s == "true";
  if (s.empty()) return s;
  const char* const begin = s.c_str();
  const char* const end_of_s = begin + s.size();
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(begin, &end, 10);
  if (end == end_of_s && errno != ERANGE) return i;
  errno = 0;
  const double d = std::strtod(begin, &end);
  if (end == end_of_s && std::isfinite(d)) return d;
  return s;
}

// YAML nodes to JSON, depth-first, within the limits (aliases are visited each
// time they are referenced, so the budgets bound the expanded document).
class YamlToJson {
 public:
  explicit YamlToJson(const ConfigTextLimits& limits) : limits_(limits) {}

  Status convert(const YAML::Node& n, int32_t depth, json& out) {
    if (++values_ > limits_.max_values) {
      return invalid_argument_error("{}more than {} keys and values (aliases expanding too far?)", at(n.Mark()),
                                    limits_.max_values);
    }
    switch (n.Type()) {
      case YAML::NodeType::Map:
      case YAML::NodeType::Sequence:
        if (depth + 1 > limits_.max_depth) {
          return invalid_argument_error("{}maps and lists nested deeper than {}", at(n.Mark()), limits_.max_depth);
        }
        break;
      default:
        break;
    }
    switch (n.Type()) {
      case YAML::NodeType::Map: {
        out = json::object();
        for (const auto& kv : n) {
          std::string key;
          ECO_RETURN_IF_ERROR(key_of(kv.first, key));
          json value;
          ECO_RETURN_IF_ERROR(convert(kv.second, depth + 1, value));
          out[key] = std::move(value);
        }
        return ok_status();
      }
      case YAML::NodeType::Sequence: {
        out = json::array();
        for (const auto& v : n) {
          json value;
          ECO_RETURN_IF_ERROR(convert(v, depth + 1, value));
          out.push_back(std::move(value));
        }
        return ok_status();
      }
      case YAML::NodeType::Scalar: {
        const std::string& s = n.Scalar();
        ECO_RETURN_IF_ERROR(check_string(n, s));
        const std::string& tag = n.Tag();
        out = tag == "!" || tag == "tag:yaml.org,2002:str" ? json(s) : scalar_value(s);  // "!": quoted
        return ok_status();
      }
      default:  // Null (empty, ~, null), Undefined
        out = nullptr;
        return ok_status();
    }
  }

 private:
  Status key_of(const YAML::Node& k, std::string& key) {
    if (++values_ > limits_.max_values) {
      return invalid_argument_error("{}more than {} keys and values (aliases expanding too far?)", at(k.Mark()),
                                    limits_.max_values);
    }
    switch (k.Type()) {
      case YAML::NodeType::Scalar:
        key = k.Scalar();
        return check_string(k, key);
      case YAML::NodeType::Map:
      case YAML::NodeType::Sequence:
        return invalid_argument_error("{}a key is a {}, expected a string", at(k.Mark()),
                                      k.Type() == YAML::NodeType::Map ? "map" : "list");
      default:
        key = "null";  // as yaml-cpp's as<std::string>() reads an empty key
        return ok_status();
    }
  }

  Status check_string(const YAML::Node& n, const std::string& s) {
    string_bytes_ += static_cast<int64_t>(s.size());
    if (string_bytes_ > limits_.max_string_bytes) {
      return invalid_argument_error("{}more than {} bytes of keys and strings (aliases expanding too far?)",
                                    at(n.Mark()), limits_.max_string_bytes);
    }
    if (!valid_utf8(s)) return invalid_argument_error("{}a key or string is not valid UTF-8", at(n.Mark()));
    return ok_status();
  }

  const ConfigTextLimits& limits_;
  int64_t values_ = 0;
  int64_t string_bytes_ = 0;
};

StatusOr<json> parse_yaml(std::string_view text, const ConfigTextLimits& limits) {
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    if (root.Type() == YAML::NodeType::Null || root.Type() == YAML::NodeType::Undefined) return json::object();
    if (root.Type() != YAML::NodeType::Map) {
      return invalid_argument_error("{}the top level is a {}, expected a map of settings", at(root.Mark()),
                                    root.Type() == YAML::NodeType::Sequence ? "list" : "scalar");
    }
    json out;
    YamlToJson converter(limits);
    ECO_RETURN_IF_ERROR(converter.convert(root, 0, out));
    return out;
  } catch (const YAML::Exception& e) {
    return invalid_argument_error("{}{}", at(e.mark), e.msg);
  } catch (const std::exception& e) {
    return invalid_argument_error("yaml: {}", e.what());
  } catch (...) {
    return invalid_argument_error("yaml: unknown error");
  }
}

}  // namespace

StatusOr<nlohmann::json> parse_config_text(std::string_view text, ConfigFormat format,
                                           const ConfigTextLimits& limits) {
  try {
    if (format == ConfigFormat::kYaml) return parse_yaml(text, limits);
    bool not_json = false;
    StatusOr<json> j = parse_json(text, limits, not_json);
    if (format == ConfigFormat::kJson || !not_json) return j;
    return parse_yaml(text, limits);
  } catch (const std::exception& e) {  // e.g. bad_alloc; parse_json and parse_yaml catch the parsers' own
    return invalid_argument_error("config: {}", e.what());
  } catch (...) {
    return invalid_argument_error("config: unknown error");
  }
}

}  // namespace ecoserve::sim
