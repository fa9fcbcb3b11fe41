// PdDispatch: FuDG's per-request choice (DistServe / Splitwise / Mooncake) of a
// prefill instance and a decode instance, with conditional disaggregation
// (NVIDIA Dynamo): a prompt shorter than remote_prefill_min_tokens, or most of
// whose blocks the decode instance already caches, is prefilled locally on the
// decode instance instead of being moved.
//
// Prefill instance: a healthy kPrefill instance with the fewest prompt tokens
// queued (num_waiting_tokens); ties to the lower position. Decode instance: a
// healthy kDecode instance, preferring one with a free sequence slot
// (num_requests < max_num_seqs, when known), then one on the prefill instance's
// node (InstanceLoad::node, when known and prefer_same_node: the KV then moves
// inside the node, DistServe's low-affinity placement), then the most free KV
// blocks; ties go to fewer requests, then the lower position. When every decode
// instance is full the request queues on the best of them (as a vLLM instance
// queues), it is not refused. No healthy prefill instance: local prefill (on the
// best decode instance regardless of node). No healthy decode instance: nullopt.
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
  // Prefer a decode instance on the prefill instance's node (see above).
  bool prefer_same_node = true;
};

std::optional<PdDecision> pd_dispatch(const ClusterView& view, const RouteRequest& req,
                                      const PdDispatchOptions& options, const PrefixIndex* decode_index = nullptr);

}  // namespace ecoserve::policy
