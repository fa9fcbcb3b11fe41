// Helpers for the policy tests: hand-built RequestViews. Test-only header.
#pragma once

#include <chrono>

#include "policy/instance_policy.h"

namespace ecoserve::policy::testing {

inline TimePoint at_ms(int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }

// A waiting request (nothing computed).
inline RequestView waiting(uint64_t id, int32_t prompt_len, int32_t priority = 0, int64_t arrival_ms = 0) {
  RequestView v;
  v.id = RequestId(id);
  v.prompt_len = prompt_len;
  v.priority = priority;
  v.arrival = at_ms(arrival_ms);
  v.state = RequestState::kWaiting;
  return v;
}

// A running request holding ceil(num_computed / block_size) exclusive blocks.
inline RequestView running(uint64_t id, int32_t prompt_len, int32_t num_generated, int32_t num_computed,
                           int32_t block_size, int32_t priority = 0, int64_t arrival_ms = 0) {
  RequestView v = waiting(id, prompt_len, priority, arrival_ms);
  v.state = RequestState::kRunning;
  v.num_generated = num_generated;
  v.num_computed = num_computed;
  v.num_blocks = (num_computed + block_size - 1) / block_size;
  v.num_exclusive_blocks = v.num_blocks;
  return v;
}

// A decoding request: prompt + num_generated tokens, all but the last computed.
inline RequestView decoding(uint64_t id, int32_t prompt_len, int32_t num_generated, int32_t block_size,
                            int32_t priority = 0, int64_t arrival_ms = 0) {
  return running(id, prompt_len, num_generated, prompt_len + num_generated - 1, block_size, priority, arrival_ms);
}

inline RequestView swapped(uint64_t id, int32_t prompt_len, int32_t num_generated, int32_t block_size,
                           int32_t priority = 0, int64_t arrival_ms = 0) {
  RequestView v = decoding(id, prompt_len, num_generated, block_size, priority, arrival_ms);
  v.state = RequestState::kSwapped;
  v.num_exclusive_blocks = 0;
  return v;
}

inline RunDecision run(uint64_t id, int32_t n) { return RunDecision{RequestId(id), n}; }
inline std::vector<RequestId> ids(std::initializer_list<uint64_t> l) {
  std::vector<RequestId> v;
  for (auto x : l) v.push_back(RequestId(x));
  return v;
}

// Policy limits: at most `seqs` running requests, `tokens` new tokens per step,
// `chunk` prefill tokens per request per step (0: only the token budget).
inline PolicyOptions policy_options(int32_t seqs, int32_t tokens, int32_t chunk = 0) {
  PolicyOptions o;
  o.max_num_seqs = seqs;
  o.max_num_batched_tokens = tokens;
  o.chunk_size = chunk;
  return o;
}

inline InstanceView make_view(int32_t free_blocks, int32_t total_blocks, int32_t block_size) {
  InstanceView v;
  v.num_free_blocks = free_blocks;
  v.num_total_blocks = total_blocks;
  v.block_size = block_size;
  return v;
}

}  // namespace ecoserve::policy::testing

namespace ecoserve::policy {
inline void PrintTo(const RunDecision& r, std::ostream* os) { *os << "{" << r.id.value << ":" << r.num_tokens << "}"; }
}  // namespace ecoserve::policy
