#include "policy/prefill_only_policy.h"

#include "policy/batch_builder.h"

namespace ecoserve::policy {

PolicyDecision PrefillOnlyPolicy::plan(const InstanceView& view, TimePoint /*now*/) {
  return plan_decode_first(view, options_, /*run_decodes=*/false, /*admit_fresh_prompts=*/true);
}

}  // namespace ecoserve::policy
