// PdDispatch: FuDG's per-request choice (DistServe / Splitwise / Mooncake) of a
// prefill instance and a decode instance, with conditional disaggregation
// (NVIDIA Dynamo): a prompt shorter than remote_prefill_min_tokens, or most of
// whose blocks the decode instance already caches, is prefilled locally on the
// decode instance instead of being moved.
//
// Decode instance: a healthy kDecode instance with a free sequence slot
// (num_requests < max_num_seqs, when known) and the most free KV blocks; ties go
// to fewer requests, then the lower position. Prefill instance: a healthy
// kPrefill instance with the fewest prompt tokens queued (num_waiting_tokens);
// ties to the lower position. No healthy prefill instance: local prefill. No
// decode instance that can take it: nullopt.
// Pure and stateless; see router_policy.h for the ClusterView contract.
#pragma once

#include <cstdint>
#include <optional>

#include "policy/cluster_view.h"
#include "policy/prefix_index.h"

namespace ecoserve::policy {

struct PdDecision {
  InstanceId prefill;
  InstanceId decode;
  bool remote_prefill = true;  // false: prefill on the decode instance (prefill == decode)
  friend bool operator==(const PdDecision&, const PdDecision&) = default;
};

struct PdDispatchOptions {
  // Prompts shorter than this prefill on their decode instance (0 = always remote).
  int32_t remote_prefill_min_tokens = 0;
  // Prefill locally when the decode instance caches at least this share of the
  // prompt's full blocks (needs a PrefixIndex of the decode instances).
  double local_prefix_fraction = 0.5;
};

std::optional<PdDecision> pd_dispatch(const ClusterView& view, const RouteRequest& req,
                                      const PdDispatchOptions& options, const PrefixIndex* decode_index = nullptr);

}  // namespace ecoserve::policy
