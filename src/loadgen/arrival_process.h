// ArrivalProcess: when requests are released.
//
//   rate = inf                 every request at t = 0
//   burstiness = 1 (default)   Poisson: exponential gaps with mean 1/rate
//   burstiness = k             gamma gaps, shape k, scale 1/(rate k) (mean 1/rate;
//                              k < 1 burstier, k > 1 smoother)
//   burstiness = inf           constant gaps 1/rate
// The first request is released at t = 0. Deterministic for a given seed.
// Not thread-safe (owns its RNG).
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "base/status.h"

namespace ecoserve::loadgen {

struct ArrivalOptions {
  double rate = std::numeric_limits<double>::infinity();  // requests/s
  double burstiness = 1.0;
  std::uint64_t seed = 0;
};

class ArrivalProcess {
 public:
  static StatusOr<ArrivalProcess> create(const ArrivalOptions& options);
  // Next inter-arrival gap in seconds.
  double next_interval();
  // n release times: 0, then cumulative gaps.
  std::vector<double> times(std::size_t n);

 private:
  explicit ArrivalProcess(const ArrivalOptions& o) : options_(o), rng_(o.seed) {}
  ArrivalOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace ecoserve::loadgen
