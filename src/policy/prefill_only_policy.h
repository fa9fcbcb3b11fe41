// PrefillOnlyPolicy: the policy of a prefill instance (disaggregated serving).
//
// Only prefills: partially prefilled requests first, then new prompts, in chunks
// of at most chunk_size tokens (set it to the compute-saturation size) within the
// token budget. The scheduler finishes a request after its prefill (reason
// kPrefillDone, first token sampled) and holds its blocks for the KV transfer.
// Decoding requests (none, in a prefill instance) are ignored.
// Stateless apart from its options; see instance_policy.h for the contract.
#pragma once

#include "policy/instance_policy.h"

namespace ecoserve::policy {

class PrefillOnlyPolicy final : public InstancePolicy {
 public:
  explicit PrefillOnlyPolicy(PolicyOptions options) : options_(options) {}
  PolicyDecision plan(const InstanceView& view, TimePoint now) override;
  InstanceRole role() const override { return InstanceRole::kPrefill; }
  std::string_view name() const override { return "prefill-only"; }
  const PolicyOptions& options() const override { return options_; }

 private:
  PolicyOptions options_;
};

}  // namespace ecoserve::policy
