#include "loadgen/run_verdict.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace ecoserve::loadgen {

RunVerdict judge_run(std::int64_t succeeded, std::int64_t failed, double max_failure_rate) {
  succeeded = std::max<std::int64_t>(succeeded, 0);
  failed = std::max<std::int64_t>(failed, 0);
  const std::int64_t total = succeeded + failed;
  if (succeeded == 0) {
    if (total == 0) return {1, "no request succeeded (none was sent)"};
    return {1, fmt::format("no request succeeded ({} of {} failed)", failed, total)};
  }
  // The share is compared as a double: failed/total rounds to the same double as a
  // decimal threshold equal to it (3 of 10 against 0.3), so "equal" passes.
  const double share = static_cast<double>(failed) / static_cast<double>(total);
  if (share > max_failure_rate)
    return {1, fmt::format("{} of {} requests failed ({:.1f}%), more than --max-failure-rate {}", failed, total,
                           share * 100, max_failure_rate)};
  return {0, ""};
}

int bench_exit_code(std::int64_t succeeded, std::int64_t failed, double max_failure_rate) {
  return judge_run(succeeded, failed, max_failure_rate).exit_code;
}

Status validate_max_failure_rate(double max_failure_rate) {
  if (!(max_failure_rate >= 0 && max_failure_rate <= 1))
    return invalid_argument_error("--max-failure-rate must be a share in [0, 1], got {}", max_failure_rate);
  return ok_status();
}

std::string summarize_errors(const std::map<std::string, std::int64_t>& counts,
                             const std::map<std::string, std::string>& examples) {
  std::vector<std::pair<std::string, std::int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [key, n] : sorted) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} x{}", key, n);
    if (auto it = examples.find(key); it != examples.end() && !it->second.empty()) {
      std::string msg = it->second.substr(0, 120);
      if (it->second.size() > 120) msg += "...";
      for (char& c : msg)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      out += fmt::format(" ({})", msg);
    }
  }
  return out;
}

}  // namespace ecoserve::loadgen
