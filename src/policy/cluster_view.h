// ClusterView: what a cluster policy (routing, prefill/decode dispatch, later
// EcoServe's inter-instance algorithm and Llumnix's migration pairs) sees of the
// instances behind one endpoint, and the request it decides for. Plain data,
// built by cluster::Router live and by the simulator; read-only for policies.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/ids.h"
#include "kv/prefix_cache.h"
#include "policy/instance_policy.h"

namespace ecoserve::policy {

// One request as cluster policies that move requests (llumnix) see it: from the
// router's own accounting, listed per instance only when the policy asks for it
// (ClusterView::with_requests).
struct RequestLoad {
  RequestId id;
  int32_t priority = 0;       // the scheduling priority (higher = more important; > 0 = Llumnix's "high" class)
  int32_t num_tokens = 0;     // prompt + generated tokens so far (its KV once running)
  int32_t num_generated = 0;  // output tokens so far
  int32_t max_tokens = 0;     // output tokens it may still reach at most (its sampling max_tokens)
  bool running = false;       // has its first token (holds KV); else queued: its demand counts
  bool migrating = false;     // being migrated now: neither a candidate nor a destination's concern
};

// One instance as the router sees it.
struct InstanceLoad {
  InstanceId id;
  InstanceRole role = InstanceRole::kMixed;
  bool healthy = true;
  int32_t num_waiting = 0;          // requests not started yet
  int32_t num_running = 0;          // requests producing tokens
  int64_t num_waiting_tokens = 0;   // prompt tokens still to compute
  int64_t num_running_tokens = 0;   // context tokens (prompt + generated) of running requests
  int32_t num_free_blocks = 0;      // allocatable KV blocks
  int32_t num_total_blocks = 0;
  int32_t max_num_seqs = 0;         // 0 = unknown / unlimited
  int32_t block_size = 16;
  int32_t node = -1;                // the machine it runs on (KV moves faster inside one); -1 = unknown
  // Time-aware strategies (padg, llumnix), from the router's own accounting:
  // predicted prefill seconds of the requests routed here that have no first
  // token yet, and the decodes' saved TPOT (RequestView::saved_tpot) - their
  // mean over num_slo_decoding decodes that have a TPOT SLO.
  double pending_prefill_seconds = 0.0;
  int32_t num_slo_decoding = 0;
  double mean_saved_tpot_seconds = 0.0;
  // The instance's phase (InstancePolicy::phase) and when it last switched.
  InstancePhase phase = InstancePhase::kMixed;
  TimePoint last_phase_switch{};
  // llumnix: the instance is being drained (scale-in): its virtual usage is
  // infinite, so it takes no requests and its requests migrate away.
  bool draining = false;
  // llumnix: the instance's sum of virtual usage (policy/freeness.h) kept by the
  // router's own accounting as requests arrive, grow and leave, so routing by
  // freeness needs no request list; -1 = not known.
  int64_t virtual_blocks = -1;
  // llumnix: its requests (only when ClusterView::with_requests), queued ones in
  // arrival order.
  std::vector<RequestLoad> requests;

  int64_t load_tokens() const { return num_waiting_tokens + num_running_tokens; }
  int32_t num_requests() const { return num_waiting + num_running; }
};

// Instances in a stable order (position = the router's index; ids need not be dense).
struct ClusterView {
  std::vector<InstanceLoad> instances;
  bool with_requests = false;  // InstanceLoad::requests are filled
};

struct RouteRequest {
  int32_t prompt_len = 0;
  int32_t max_tokens = 0;
  int32_t priority = 0;
  // Hash chain of the prompt's full blocks (kv::PrefixCache::extend_hashes); may be
  // empty when the router does not use prefixes. Borrowed for the call.
  std::span<const kv::BlockHash> block_hashes;
  // When it is routed, and its SLOs (zero = the policy's defaults).
  TimePoint now{};
  Duration slo_ttft{};
  Duration slo_tpot{};
};

}  // namespace ecoserve::policy
