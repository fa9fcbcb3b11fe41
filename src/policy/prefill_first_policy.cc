#include "policy/prefill_first_policy.h"

#include <algorithm>

#include "policy/batch_builder.h"

namespace ecoserve::policy {

PolicyDecision PrefillFirstPolicy::plan(const InstanceView& view, TimePoint /*now*/) {
  BatchBuilder b(view, options_);
  // Whole prompts only; a prompt that does not fit the remaining budget is chunked
  // only when it opens the batch.
  auto prefill_tokens = [&](const RequestView& r) -> int32_t {
    const int32_t u = r.num_uncomputed();
    if (u <= b.token_budget()) return u;
    return b.empty() ? b.token_budget() : 0;
  };
  for (size_t i = 0; i < b.alive_end(); ++i) {
    const RequestView& r = view.running[i];
    if (r.is_decode()) continue;
    const int32_t n = prefill_tokens(r);
    if (n <= 0) break;
    b.schedule_running(i, n);
  }
  if (view.swapped.empty()) {
    for (const RequestView& r : view.waiting) {
      const int32_t n = prefill_tokens(r);
      if (n <= 0 || !b.admit(r, n)) break;
    }
  }
  if (!b.empty()) return b.finish();

  b.schedule_running_decodes();
  if (!b.any_preempted()) {
    for (const RequestView& r : view.swapped) {
      const int32_t n = r.is_decode() ? std::min(1, b.token_budget()) : prefill_tokens(r);
      if (n <= 0 || !b.admit(r, n)) break;
    }
  }
  return b.finish();
}

}  // namespace ecoserve::policy
