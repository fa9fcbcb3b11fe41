// SLO attainment and goodput (DistServe's metric): the share of a simulated run's
// requests that met both latency targets, and the highest request rate at which
// that share stays at the target attainment.
//
//   attainment(run) = #{requests that succeeded, TTFT <= ttft_s and TPOT <= tpot_s} / #requests
//   TTFT = first_token_s - arrival_s
//   TPOT = (end_s - first_token_s) / (output_tokens - 1)   (a 1-token request needs only the TTFT)
//
// Rejected and failed requests count as misses; an empty run has attainment 1
// (nothing was missed). A target of 0 (or less) for ttft_s or tpot_s means "no
// limit" (DistServe measures a prefill-only instance by TTFT alone).
//
// Goodput search: the rate is probed with whole simulations (the caller's
// run_at_rate), so it is expensive; the search is a plain bracketing + bisection
// with a fixed number of probes, deterministic when run_at_rate is.
//
// Pure functions; thread-compatible (run_at_rate is called on the caller's thread).
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "sim/sim_cluster.h"

namespace ecoserve::sim {

struct SloSpec {
  double ttft_s = 0.0;       // <= 0: no TTFT limit
  double tpot_s = 0.0;       // <= 0: no TPOT limit
  double attainment = 0.9;   // share of requests that must meet both, in (0, 1]
};

// INVALID_ARGUMENT unless attainment is in (0, 1] and at least one of the limits is set.
Status validate_slo(const SloSpec& slo);

// TTFT and TPOT of one request (seconds); TPOT is 0 for a request with fewer than 2 tokens.
double ttft_seconds(const SimRequestResult& r);
double tpot_seconds(const SimRequestResult& r);
// The request succeeded and met both limits (see above).
bool meets_slo(const SimRequestResult& r, const SloSpec& slo);
// Share of requests meeting the SLO (1 for no requests).
double slo_attainment(const SimResult& result, const SloSpec& slo);

struct GoodputProbe {
  double rate = 0.0;
  double attainment = 0.0;
  bool pass = false;  // attainment >= slo.attainment
};

struct GoodputSearch {
  double goodput = 0.0;              // the highest passing rate probed (0: even lo failed)
  double first_failing_rate = 0.0;   // the lowest failing rate probed (0: none failed)
  std::vector<GoodputProbe> probes;  // in probing order
};

// How far the bracket may grow when `hi` passes: hi, 2 hi, 4 hi, ... at most this many doublings.
inline constexpr int kMaxBracketDoublings = 6;

// The search:
//  1. probe lo; failing -> goodput 0 (nothing else is probed).
//  2. probe hi; while it passes (at most kMaxBracketDoublings times) lo = hi,
//     hi = 2 hi and probe again; if the last hi still passes it is the goodput.
//  3. `steps` bisections: mid = (lo + hi) / 2; pass -> lo = mid, else hi = mid.
//  goodput = lo (a rate that was probed and passed).
// INVALID_ARGUMENT for 0 < lo < hi not holding, steps < 0 or a bad SLO; errors of
// run_at_rate are returned as they are.
StatusOr<GoodputSearch> search_goodput(const std::function<StatusOr<SimResult>(double rate)>& run_at_rate,
                                       const SloSpec& slo, double lo, double hi, int steps);
// search_goodput(...).goodput.
StatusOr<double> max_goodput(const std::function<StatusOr<SimResult>(double rate)>& run_at_rate, const SloSpec& slo,
                             double lo, double hi, int steps);

}  // namespace ecoserve::sim
