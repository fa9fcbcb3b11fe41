#include "policy/make_instance_policy.h"

#include "policy/chunked_prefill_policy.h"
#include "policy/decode_only_policy.h"
#include "policy/prefill_first_policy.h"
#include "policy/prefill_only_policy.h"
#include "policy/temporal_policy.h"

namespace ecoserve::policy {

Status validate_policy_options(const PolicyOptions& o) {
  if (o.max_num_seqs < 1) return invalid_argument_error("max_num_seqs must be at least 1, got {}", o.max_num_seqs);
  if (o.max_num_batched_tokens < o.max_num_seqs) {
    return invalid_argument_error("max_num_batched_tokens ({}) must be at least max_num_seqs ({})",
                                  o.max_num_batched_tokens, o.max_num_seqs);
  }
  if (o.chunk_size < 0) return invalid_argument_error("chunk_size must be >= 0 (0 = off), got {}", o.chunk_size);
  if (o.watermark_blocks < 0) {
    return invalid_argument_error("watermark_blocks must be >= 0, got {}", o.watermark_blocks);
  }
  return ok_status();
}

StatusOr<std::unique_ptr<InstancePolicy>> make_instance_policy(std::string_view name, const PolicyOptions& options,
                                                                std::shared_ptr<const CostModel> cost_model) {
  ECO_RETURN_IF_ERROR(validate_policy_options(options));
  std::unique_ptr<InstancePolicy> p;
  if (name == "prefill-first") {
    p = std::make_unique<PrefillFirstPolicy>(options);
  } else if (name == "chunked") {
    p = std::make_unique<ChunkedPrefillPolicy>(options);
  } else if (name == "prefill-only") {
    p = std::make_unique<PrefillOnlyPolicy>(options);
  } else if (name == "decode-only") {
    p = std::make_unique<DecodeOnlyPolicy>(options);
  } else if (name == "temporal") {
    p = std::make_unique<TemporalPolicy>(options, std::move(cost_model));
  } else {
    return invalid_argument_error("unknown instance policy '{}' (expected one of: {})", name, kInstancePolicyNames);
  }
  return p;
}

}  // namespace ecoserve::policy
