#include "sim/slo.h"

#include <cmath>

namespace ecoserve::sim {

Status validate_slo(const SloSpec& slo) {
  if (!(slo.attainment > 0.0 && slo.attainment <= 1.0)) {
    return invalid_argument_error("SLO attainment must be in (0, 1], got {}", slo.attainment);
  }
  if (!(slo.ttft_s > 0.0) && !(slo.tpot_s > 0.0)) {
    return invalid_argument_error("an SLO needs a TTFT or a TPOT limit (got ttft {} s, tpot {} s)", slo.ttft_s,
                                  slo.tpot_s);
  }
  return ok_status();
}

double ttft_seconds(const SimRequestResult& r) { return r.first_token_s - r.arrival_s; }

double tpot_seconds(const SimRequestResult& r) {
  if (r.output_tokens < 2) return 0.0;
  return (r.end_s - r.first_token_s) / (r.output_tokens - 1);
}

bool meets_slo(const SimRequestResult& r, const SloSpec& slo) {
  if (!r.success || r.first_token_s < 0.0 || r.end_s < 0.0) return false;
  if (slo.ttft_s > 0.0 && ttft_seconds(r) > slo.ttft_s) return false;
  if (slo.tpot_s > 0.0 && r.output_tokens >= 2 && tpot_seconds(r) > slo.tpot_s) return false;
  return true;
}

double slo_attainment(const SimResult& result, const SloSpec& slo) {
  if (result.requests.empty()) return 1.0;
  int64_t met = 0;
  for (const SimRequestResult& r : result.requests) met += meets_slo(r, slo);
  return static_cast<double>(met) / static_cast<double>(result.requests.size());
}

StatusOr<GoodputSearch> search_goodput(const std::function<StatusOr<SimResult>(double rate)>& run_at_rate,
                                       const SloSpec& slo, double lo, double hi, int steps) {
  ECO_RETURN_IF_ERROR(validate_slo(slo));
  if (!(lo > 0.0 && lo < hi && std::isfinite(hi))) {
    return invalid_argument_error("goodput search needs 0 < lo < hi (got lo {}, hi {})", lo, hi);
  }
  if (steps < 0) return invalid_argument_error("goodput search steps must be >= 0, got {}", steps);
  GoodputSearch s;
  auto probe = [&](double rate) -> StatusOr<bool> {
    ECO_ASSIGN_OR_RETURN(SimResult r, run_at_rate(rate));
    GoodputProbe p;
    p.rate = rate;
    p.attainment = slo_attainment(r, slo);
    p.pass = p.attainment >= slo.attainment;
    s.probes.push_back(p);
    if (!p.pass && (s.first_failing_rate == 0.0 || rate < s.first_failing_rate)) s.first_failing_rate = rate;
    return p.pass;
  };
  ECO_ASSIGN_OR_RETURN(bool lo_pass, probe(lo));
  if (!lo_pass) return s;
  ECO_ASSIGN_OR_RETURN(bool hi_pass, probe(hi));
  for (int d = 0; hi_pass && d < kMaxBracketDoublings; ++d) {
    lo = hi;
    hi *= 2.0;
    ECO_ASSIGN_OR_RETURN(hi_pass, probe(hi));
  }
  if (hi_pass) {
    s.goodput = hi;
    return s;
  }
  for (int i = 0; i < steps; ++i) {
    const double mid = 0.5 * (lo + hi);
    ECO_ASSIGN_OR_RETURN(bool pass, probe(mid));
    (pass ? lo : hi) = mid;
  }
  s.goodput = lo;
  return s;
}

StatusOr<double> max_goodput(const std::function<StatusOr<SimResult>(double rate)>& run_at_rate, const SloSpec& slo,
                             double lo, double hi, int steps) {
  ECO_ASSIGN_OR_RETURN(GoodputSearch s, search_goodput(run_at_rate, slo, lo, hi, steps));
  return s.goodput;
}

}  // namespace ecoserve::sim
