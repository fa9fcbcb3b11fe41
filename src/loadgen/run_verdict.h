// RunVerdict: whether a finished `ecoserve bench` run counts as a failure, so a
// CI job can tell a broken server (exit 1) from a slow one (exit 0).
//
// The rule, a pure function of the counts:
//   - no request succeeded (including a run of zero requests)          -> exit 1
//   - failed / (succeeded + failed) > max_failure_rate                 -> exit 1
//   - otherwise                                                       -> exit 0
// A share exactly equal to max_failure_rate passes. max_failure_rate is a share in
// [0, 1]: 0 = any failure fails the run, 1 (the default) = only "nothing succeeded".
// The report is printed and written before the caller exits with the code.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "base/status.h"

namespace ecoserve::loadgen {

struct RunVerdict {
  int exit_code = 0;   // 0 or 1
  std::string reason;  // one line without a trailing newline; empty when exit_code == 0
};

RunVerdict judge_run(std::int64_t succeeded, std::int64_t failed, double max_failure_rate);

// judge_run(...).exit_code.
int bench_exit_code(std::int64_t succeeded, std::int64_t failed, double max_failure_rate);

// OK for a number in [0, 1]; INVALID_ARGUMENT (naming --max-failure-rate) otherwise, NaN included.
Status validate_max_failure_rate(double max_failure_rate);

// "http_401 x4 (incorrect API key provided), timeout x1": each error key with its
// count and, when known, its first message (cut to 120 bytes); the most frequent
// first. `examples` maps an error key to a message; keys missing there get none.
std::string summarize_errors(const std::map<std::string, std::int64_t>& counts,
                             const std::map<std::string, std::string>& examples);

}  // namespace ecoserve::loadgen
