// LoadAccount: a router's own accounting of one instance's load, kept exactly as
// requests are routed there, produce tokens and leave (not a snapshot a step
// old). cluster::Router (live) and sim::SimCluster keep one per instance and build
// their ClusterView from it with fill(), so both route on the same numbers.
//
// A request counts as waiting (its prompt tokens and predicted prefill seconds)
// until its first token, then as running (prompt + generated tokens; with a TPOT
// SLO also in the saved-TPOT sums). Callers remove a request's old contribution
// (sign -1) before changing it and add the new one (sign +1).
// Plain data with two pure methods; one thread at a time.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "policy/cluster_view.h"

namespace ecoserve::policy {

// One request's contribution to its instance's account.
struct RequestAccount {
  int32_t prompt_tokens = 0;
  int32_t generated = 0;                   // tokens so far (0: waiting)
  double predicted_prefill_seconds = 0.0;  // padg: its predicted prefill alone
  double slo_tpot_seconds = 0.0;           // 0: no TPOT SLO
  double first_token_seconds = 0.0;        // when its first token came (seconds since the clock's epoch)
  int64_t virtual_blocks = 0;              // llumnix: its virtual usage (policy/freeness.h)
};

struct LoadAccount {
  int32_t waiting = 0, running = 0;
  int64_t waiting_tokens = 0, running_tokens = 0;
  // padg: predicted prefill seconds of the requests without a first token, and
  // sums over the decodes with a TPOT SLO for their mean saved TPOT:
  // saved_i = L_i x SLO_i - (now - first_i), so mean = (budget - n x now + first) / n.
  double pending_prefill_seconds = 0.0;
  int32_t slo_decoding = 0;
  double slo_budget_seconds = 0.0;  // sum of L_i x SLO_i
  double slo_first_seconds = 0.0;   // sum of first_i
  int64_t virtual_blocks = 0;       // sum of the requests' virtual usage

  // Adds (sign +1) or removes (-1) one request's contribution.
  void add(const RequestAccount& r, int sign) {
    if (r.generated == 0) {
      waiting += sign;
      waiting_tokens += sign * r.prompt_tokens;
      pending_prefill_seconds += sign * r.predicted_prefill_seconds;
    } else {
      running += sign;
      running_tokens += sign * (static_cast<int64_t>(r.prompt_tokens) + r.generated);
      if (r.slo_tpot_seconds > 0.0) {
        slo_decoding += sign;
        slo_budget_seconds += sign * r.generated * r.slo_tpot_seconds;
        slo_first_seconds += sign * r.first_token_seconds;
      }
    }
    virtual_blocks += sign * r.virtual_blocks;
    if (waiting == 0) pending_prefill_seconds = 0.0;  // no drift from float sums
    if (slo_decoding == 0) slo_budget_seconds = slo_first_seconds = 0.0;
  }
  bool empty() const { return waiting + running == 0; }
  // The mean saved TPOT of the decodes with a TPOT SLO at `now` (0 when none).
  double mean_saved_tpot_seconds(TimePoint now) const {
    if (slo_decoding <= 0) return 0.0;
    const double now_s = to_seconds(now.time_since_epoch());
    return (slo_budget_seconds - slo_decoding * now_s + slo_first_seconds) / slo_decoding;
  }
  // Sets the accounted fields of `load` (requests, tokens, padg sums; the virtual
  // usage only when `with_virtual_blocks`, else -1 = unknown).
  void fill(InstanceLoad& load, TimePoint now, bool with_virtual_blocks) const {
    load.num_waiting = waiting;
    load.num_running = running;
    load.num_waiting_tokens = waiting_tokens;
    load.num_running_tokens = running_tokens;
    load.pending_prefill_seconds = pending_prefill_seconds > 0.0 ? pending_prefill_seconds : 0.0;
    load.num_slo_decoding = slo_decoding;
    load.mean_saved_tpot_seconds = mean_saved_tpot_seconds(now);
    load.virtual_blocks = with_virtual_blocks ? virtual_blocks : -1;
  }
};

}  // namespace ecoserve::policy
