// DecodeOnlyPolicy: the policy of a decode instance (disaggregated serving).
//
// Requests arrive with their prompt's KV present (Scheduler::add_computed_request).
// Every step runs one token for each running decode (a large batch: set
// max_num_seqs high); leftover budget re-prefills requests preempted by
// recompute and resumes swapped ones, as ChunkedPrefillPolicy does. Fresh prompts
// (no generated token) are never admitted here.
// Stateless apart from its options; see instance_policy.h for the contract.
#pragma once

#include "policy/instance_policy.h"

namespace ecoserve::policy {

class DecodeOnlyPolicy final : public InstancePolicy {
 public:
  explicit DecodeOnlyPolicy(PolicyOptions options) : options_(options) {}
  PolicyDecision plan(const InstanceView& view, TimePoint now) override;
  InstanceRole role() const override { return InstanceRole::kDecode; }
  std::string_view name() const override { return "decode-only"; }
  const PolicyOptions& options() const override { return options_; }

 private:
  PolicyOptions options_;
};

}  // namespace ecoserve::policy
