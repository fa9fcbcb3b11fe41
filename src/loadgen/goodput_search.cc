#include "loadgen/goodput_search.h"

#include <cmath>

namespace ecoserve::loadgen {

StatusOr<GoodputSearchResult> goodput_search(const GoodputSearchOptions& o, const GoodputProbeFn& probe,
                                             const std::function<void(const GoodputProbe&)>& on_probe) {
  if (!(o.min_rate > 0) || !(o.max_rate > o.min_rate) || !std::isfinite(o.max_rate))
    return invalid_argument_error("goodput search needs 0 < --search-min-rate < --search-max-rate, got {} and {}",
                                  o.min_rate, o.max_rate);
  if (o.steps < 1 || o.steps > 30) return invalid_argument_error("--search-steps must be in [1, 30], got {}", o.steps);
  if (!(o.target_attainment > 0) || o.target_attainment > 1)
    return invalid_argument_error("--attainment must be in (0, 100], got {}", o.target_attainment * 100);
  GoodputSearchResult result;
  auto run = [&](double rate) -> StatusOr<GoodputProbe> {
    ECO_ASSIGN_OR_RETURN(GoodputProbe p, probe(rate));
    p.rate = rate;
    p.pass = p.attainment >= o.target_attainment;
    result.probes.push_back(p);
    if (on_probe) on_probe(p);
    if (p.pass && (!result.best_rate || rate > *result.best_rate)) {
      result.best_rate = rate;
      result.best_goodput = p.goodput;
    }
    return p;
  };
  double lo = o.min_rate, hi = o.max_rate;
  for (int i = 0; i < o.steps; ++i) {
    double mid = 0.5 * (lo + hi);
    ECO_ASSIGN_OR_RETURN(GoodputProbe p, run(mid));
    (p.pass ? lo : hi) = mid;
  }
  result.resolution = hi - lo;
  if (!result.best_rate) {
    ECO_ASSIGN_OR_RETURN(GoodputProbe p, run(o.min_rate));
    (void)p;
  }
  return result;
}

}  // namespace ecoserve::loadgen
