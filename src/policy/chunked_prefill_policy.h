// ChunkedPrefillPolicy: Sarathi-Serve's stall-free batching (vLLM's chunked prefill).
//
// Every step: first one token for each running decode (schedule order), then the
// rest of the token budget goes to prefill chunks of at most chunk_size tokens:
// partially prefilled running requests first, then swapped requests are resumed
// (only if nothing was preempted this step), then new prompts are admitted (only
// once nothing is left swapped), all in schedule order, stopping at the first
// that does not fit. Running requests are preempted last-first when blocks run
// out; a prefill chunk is first shortened to the blocks at hand.
// Stateless apart from its options; see instance_policy.h for the contract.
#pragma once

#include "policy/instance_policy.h"

namespace ecoserve::policy {

class ChunkedPrefillPolicy final : public InstancePolicy {
 public:
  explicit ChunkedPrefillPolicy(PolicyOptions options) : options_(options) {}
  PolicyDecision plan(const InstanceView& view, TimePoint now) override;
  InstanceRole role() const override { return InstanceRole::kMixed; }
  std::string_view name() const override { return "chunked"; }
  const PolicyOptions& options() const override { return options_; }

 private:
  PolicyOptions options_;
};

}  // namespace ecoserve::policy
