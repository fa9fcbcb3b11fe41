// ProfileCsv: one CSV file of a GPU operator profile (the files of
// ../shared/data/profiles/h100-bf16 that GpuProfile reads), parsed from its text.
//
// The format is the profiler's plain CSV: lines end in "\n" (a "\r" before it is
// dropped), fields are split at every ',' (no quoting: no field of a profile holds
// a comma), the first line must be exactly the expected header, blank lines are
// skipped and every other line must have as many fields as the header.
//
// parse_profile_csv is a pure function of its arguments (no I/O, never throws);
// ProfileCsv is a plain value. Errors are INVALID_ARGUMENT "FILE line N: ...".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ecoserve::sim {

struct ProfileCsvRow {
  int32_t line = 0;  // 1-based line number in the file (the header is line 1)
  std::vector<std::string> fields;
};

struct ProfileCsv {
  std::string file;  // base name, for messages
  std::vector<std::string> columns;
  std::vector<ProfileCsvRow> rows;
};

// `text` is the whole file; `file_name` names it in messages. INVALID_ARGUMENT for an
// empty file, a header other than `header`, a row with another number of fields, or
// more lines than an int32 counts.
[[nodiscard]] StatusOr<ProfileCsv> parse_profile_csv(std::string_view text, std::string_view header,
                                                     std::string_view file_name);

}  // namespace ecoserve::sim
