// PrefillFirstPolicy: vLLM V0's default scheduler.
//
// A step either prefills or decodes. While prompts are waiting (and nothing is
// swapped out), it admits them in schedule order (priority, then FCFS) while
// max_num_seqs, max_num_batched_tokens and the free blocks allow, prefilling whole
// prompts; a prompt longer than the remaining budget is taken only as the first
// of the step, chunked to the budget (continued first in the next steps).
// Admission stops at the first prompt that does not fit (no overtaking), except
// that a higher-priority prompt may preempt lower-priority running requests.
// With no prefill to do, it runs one decode token for every running request,
// preempting the last ones in schedule order when blocks run out, and then, if
// nothing was preempted, resumes swapped requests.
// Stateless apart from its options; see instance_policy.h for the contract.
#pragma once

#include "policy/instance_policy.h"

namespace ecoserve::policy {

class PrefillFirstPolicy final : public InstancePolicy {
 public:
  explicit PrefillFirstPolicy(PolicyOptions options) : options_(options) {}
  PolicyDecision plan(const InstanceView& view, TimePoint now) override;
  InstanceRole role() const override { return InstanceRole::kMixed; }
  std::string_view name() const override { return "prefill-first"; }
  const PolicyOptions& options() const override { return options_; }

 private:
  PolicyOptions options_;
};

}  // namespace ecoserve::policy
