// parse_config_text: the text of a settings file (`ecoserve simulate --config`,
// YAML or JSON) as a JSON object of settings.
//
// YAML scalars become JSON values the way a settings file means them: a plain
// (unquoted) scalar that reads whole as a base-10 integer (strtoll, in range)
// becomes an integer, else one that reads whole as a finite number (strtod)
// becomes a double, `true`/`false` become booleans, empty/`~`/`null` become null;
// everything else, every quoted or `!!str` scalar, and `inf`/`nan`/`1e999` (not
// finite) stay strings. Maps become objects (keys are strings; a later duplicate
// key wins), sequences arrays. Only the first YAML document is read. JSON text is
// read as JSON (numbers and strings as written). An empty file (or a top-level
// null) is an empty object; any other top level than a map is an error.
//
// Errors are INVALID_ARGUMENT with a message that names the line and column
// where the parser knows them ("line 3, column 9: ..."); the caller prefixes the
// file name. Guards against hostile input: nesting deeper than
// Limits::max_depth maps/lists, more than max_values values or max_string_bytes
// of keys and strings once YAML aliases are expanded ("billion laughs"), and
// strings that are not valid UTF-8 (the result always dumps as JSON).
//
// Pure function of its arguments: no I/O, no globals, never throws; safe to call
// from any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ecoserve::sim {

enum class ConfigFormat {
  kAuto,  // JSON if the text is valid JSON, YAML otherwise
  kYaml,  // YAML only (JSON is mostly valid YAML too, read with YAML's scalar rules)
  kJson,  // JSON only
};

struct ConfigTextLimits {
  int32_t max_depth = 64;               // nested maps and lists (the top-level map is 1)
  int64_t max_values = 100'000;         // keys and values, aliases expanded
  int64_t max_string_bytes = 1 << 24;   // bytes of keys and strings, aliases expanded
};

[[nodiscard]] StatusOr<nlohmann::json> parse_config_text(std::string_view text,
                                                         ConfigFormat format = ConfigFormat::kAuto,
                                                         const ConfigTextLimits& limits = {});

}  // namespace ecoserve::sim
