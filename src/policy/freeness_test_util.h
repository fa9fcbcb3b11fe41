// Builders of hand-made llumnix views for the policy tests (test-only header):
// requests as the router lists them, and instances whose aggregates agree with
// their request lists. Block size 16.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "policy/cluster_view.h"

namespace ecoserve::policy::testing {

inline RequestLoad running(uint64_t id, int32_t tokens, int32_t priority = 0, int32_t generated = 0,
                           int32_t max_tokens = 0) {
  RequestLoad r;
  r.id = RequestId(id);
  r.num_tokens = tokens;
  r.priority = priority;
  r.num_generated = generated;
  r.max_tokens = max_tokens;
  r.running = true;
  return r;
}

inline RequestLoad queued(uint64_t id, int32_t tokens, int32_t priority = 0, int32_t max_tokens = 0) {
  RequestLoad r = running(id, tokens, priority, 0, max_tokens);
  r.running = false;
  return r;
}

inline RequestLoad migrating(uint64_t id, int32_t tokens) {
  RequestLoad r = running(id, tokens);
  r.migrating = true;
  return r;
}

// An instance of `total_blocks` holding `requests`; the aggregates are kept consistent
// (free = total - physical blocks of the running requests).
inline InstanceLoad inst(int32_t id, int32_t total_blocks, std::vector<RequestLoad> requests = {}) {
  InstanceLoad l;
  l.id = InstanceId(id);
  l.block_size = 16;
  l.num_total_blocks = total_blocks;
  l.num_free_blocks = total_blocks;
  for (const RequestLoad& r : requests) {
    if (r.running) {
      ++l.num_running;
      l.num_running_tokens += r.num_tokens;
      l.num_free_blocks -= (r.num_tokens + 15) / 16;
    } else {
      ++l.num_waiting;
      l.num_waiting_tokens += r.num_tokens;
    }
  }
  l.requests = std::move(requests);
  return l;
}

inline ClusterView with_requests(std::vector<InstanceLoad> instances) {
  ClusterView v;
  v.instances = std::move(instances);
  v.with_requests = true;
  return v;
}

}  // namespace ecoserve::policy::testing
