#include "policy/decode_only_policy.h"

#include "policy/batch_builder.h"

namespace ecoserve::policy {

PolicyDecision DecodeOnlyPolicy::plan(const InstanceView& view, TimePoint /*now*/) {
  return plan_decode_first(view, options_, /*run_decodes=*/true, /*admit_fresh_prompts=*/false);
}

}  // namespace ecoserve::policy
