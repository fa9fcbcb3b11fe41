// Fuzz target: the simulator's settings files (sim::parse_config_text, YAML or
// JSON text -> a JSON object), which `ecoserve simulate --config FILE` reads. The
// input is the whole file, read in each of the three formats.
//
// Properties: it never crashes, throws or recurses without bound (yaml-cpp is not
// instrumented, our conversion is); an error is INVALID_ARGUMENT with a message; a
// result is a JSON object nested no deeper than the limit, with no more values
// than the limit, that dumps as JSON (strings are valid UTF-8, numbers finite), and
// that dump reads back, as JSON, to the same object. Text that is valid JSON reads
// the same with kAuto as with kJson.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "sim/config_text.h"

namespace {

using ecoserve::StatusCode;
using ecoserve::sim::ConfigFormat;
using ecoserve::sim::ConfigTextLimits;
using ecoserve::sim::parse_config_text;
using nlohmann::json;

// Depth (the top-level object is 1) and number of values, without recursion.
std::pair<int32_t, int64_t> shape_of(const json& root) {
  int32_t max_depth = 0;
  int64_t values = 0;
  std::vector<std::pair<const json*, int32_t>> stack{{&root, 1}};
  while (!stack.empty()) {
    const auto [j, depth] = stack.back();
    stack.pop_back();
    ++values;
    if (!j->is_structured()) continue;
    max_depth = std::max(max_depth, depth);
    for (const json& child : *j) stack.emplace_back(&child, depth + 1);
  }
  return {max_depth, values};
}

json check_one(std::string_view text, ConfigFormat format, const ConfigTextLimits& limits, bool& ok) {
  auto parsed = parse_config_text(text, format, limits);
  ok = parsed.ok();
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == StatusCode::kInvalidArgument, parsed.status().to_string());
    FUZZ_CHECK(!parsed.status().message().empty());
    return json();
  }
  const json& j = *parsed;
  FUZZ_CHECK(j.is_object(), j.dump(-1, ' ', false, json::error_handler_t::replace));
  const auto [depth, values] = shape_of(j);
  FUZZ_CHECK(depth <= limits.max_depth, std::to_string(depth));
  // Keys and values both count against max_values; the objects' values are counted here.
  FUZZ_CHECK(values <= limits.max_values, std::to_string(values));
  std::string dumped;
  try {
    dumped = j.dump();
  } catch (const json::exception& e) {
    FUZZ_CHECK(false, std::string("dump threw: ") + e.what());
  }
  auto again = parse_config_text(dumped, ConfigFormat::kJson, limits);
  FUZZ_CHECK(again.ok(), again.status().to_string() + " on " + dumped);
  FUZZ_CHECK(*again == j, dumped + " read back as " + again->dump());
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const ConfigTextLimits limits;  // the defaults `ecoserve simulate` uses
  bool auto_ok = false, yaml_ok = false, json_ok = false;
  const json from_auto = check_one(text, ConfigFormat::kAuto, limits, auto_ok);
  check_one(text, ConfigFormat::kYaml, limits, yaml_ok);
  const json from_json = check_one(text, ConfigFormat::kJson, limits, json_ok);
  if (json_ok) {
    FUZZ_CHECK(auto_ok && from_auto == from_json, from_json.dump());
  }
  return 0;
}
