// Goodput search: the highest request rate whose SLO attainment is at least a target.
//
// Bisection over [min_rate, max_rate] with `steps` probes: each probe runs the
// benchmark at the midpoint of the current interval; a pass (attainment >= target)
// raises the lower end, a fail lowers the upper end. The answer is the highest
// passing probe, so it lies within (max_rate - min_rate) / 2^steps of the knee.
// If no midpoint passes, min_rate itself is probed; if it fails too there is no answer.
// Attainment is assumed to fall as the rate grows. Pure logic: the probe is a callback.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "base/status.h"

namespace ecoserve::loadgen {

struct GoodputSearchOptions {
  double min_rate = 0.5;
  double max_rate = 64;
  int steps = 6;
  double target_attainment = 0.9;  // fraction
};

struct GoodputProbe {
  double rate = 0;
  double attainment = 0;  // fraction
  double goodput = 0;     // req/s
  bool pass = false;
};

struct GoodputSearchResult {
  std::optional<double> best_rate;
  std::optional<double> best_goodput;
  std::vector<GoodputProbe> probes;  // in probe order
  double resolution = 0;             // width of the final interval
};

// The probe returns attainment and goodput for a rate (pass is filled in here).
using GoodputProbeFn = std::function<StatusOr<GoodputProbe>(double rate)>;

StatusOr<GoodputSearchResult> goodput_search(const GoodputSearchOptions& options,
                                             const GoodputProbeFn& probe,
                                             const std::function<void(const GoodputProbe&)>& on_probe = {});

}  // namespace ecoserve::loadgen
