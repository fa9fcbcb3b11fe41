// Instance policies by name, and validation of their options (CLI and config input).
#pragma once

#include <memory>
#include <string_view>

#include "base/status.h"
#include "policy/cost_model.h"
#include "policy/instance_policy.h"

namespace ecoserve::policy {

// "prefill-first" | "chunked" | "prefill-only" | "decode-only" | "temporal" (padg).
inline constexpr std::string_view kInstancePolicyNames = "prefill-first, chunked, prefill-only, decode-only, temporal";

// INVALID_ARGUMENT naming the bad field: max_num_seqs >= 1, max_num_batched_tokens >=
// max_num_seqs (else decodes starve), chunk_size >= 0, watermark_blocks >= 0.
Status validate_policy_options(const PolicyOptions& options);

// The policy called `name` (see kInstancePolicyNames), or INVALID_ARGUMENT for an
// unknown name or bad options. `cost_model` (optional, shared) predicts step times
// for the policies that check time constraints ("temporal").
StatusOr<std::unique_ptr<InstancePolicy>> make_instance_policy(std::string_view name, const PolicyOptions& options,
                                                                std::shared_ptr<const CostModel> cost_model = nullptr);

}  // namespace ecoserve::policy
