#include "loadgen/arrival_process.h"

#include <cmath>

namespace ecoserve::loadgen {

StatusOr<ArrivalProcess> ArrivalProcess::create(const ArrivalOptions& o) {
  if (!(o.rate > 0)) return invalid_argument_error("--rate must be > 0 (or inf), got {}", o.rate);
  if (!(o.burstiness > 0))
    return invalid_argument_error("--burstiness must be > 0 (or inf), got {}", o.burstiness);
  return ArrivalProcess(o);
}

double ArrivalProcess::next_interval() {
  if (std::isinf(options_.rate)) return 0.0;
  if (std::isinf(options_.burstiness)) return 1.0 / options_.rate;
  if (options_.burstiness == 1.0) {
    std::exponential_distribution<double> e(options_.rate);
    return e(rng_);
  }
  std::gamma_distribution<double> g(options_.burstiness, 1.0 / (options_.rate * options_.burstiness));
  return g(rng_);
}

std::vector<double> ArrivalProcess::times(std::size_t n) {
  std::vector<double> out;
  out.reserve(n);
  double t = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) t += next_interval();
    out.push_back(t);
  }
  return out;
}

}  // namespace ecoserve::loadgen
