#include "policy/freeness.h"

#include <algorithm>
#include <limits>

#include "kv/block_allocator.h"

namespace ecoserve::policy {

Status validate(const FreenessOptions& options) {
  if (options.high_priority_headroom_tokens < 0) {
    return invalid_argument_error("freeness: high_priority_headroom_tokens must be >= 0, got {}",
                                  options.high_priority_headroom_tokens);
  }
  return ok_status();
}

int64_t virtual_usage_blocks(const RequestLoad& r, int32_t block_size, const FreenessOptions& options) {
  const int64_t tokens = std::max<int64_t>(0, r.num_tokens);
  // Running: its physical blocks; queued: its demand, the prompt plus the first output token.
  int64_t blocks = kv::blocks_for_tokens(r.running ? tokens : tokens + 1, block_size);
  if (r.priority > 0 && options.high_priority_headroom_tokens > 0) {
    const int64_t remaining = std::max<int64_t>(0, int64_t{r.max_tokens} - r.num_generated);
    blocks += kv::blocks_for_tokens(std::min<int64_t>(remaining, options.high_priority_headroom_tokens), block_size);
  }
  return blocks;
}

InstanceUsage instance_usage(const InstanceLoad& inst, bool with_requests, const FreenessOptions& options) {
  InstanceUsage u;
  const int32_t block_size = std::max(1, inst.block_size);
  if (with_requests) {
    for (const RequestLoad& r : inst.requests) {
      u.virtual_blocks += virtual_usage_blocks(r, block_size, options);
      if (r.running) ++u.num_running;
    }
    return u;
  }
  u.num_running = inst.num_running;
  if (inst.virtual_blocks >= 0) {
    u.virtual_blocks = inst.virtual_blocks;
    return u;
  }
  u.virtual_blocks = int64_t{inst.num_total_blocks} - inst.num_free_blocks +
                     kv::blocks_for_tokens(std::max<int64_t>(0, inst.num_waiting_tokens), block_size);
  return u;
}

double freeness_of(const InstanceLoad& inst, const InstanceUsage& usage) {
  const double batch = static_cast<double>(std::max(1, usage.num_running));
  return static_cast<double>(int64_t{inst.num_total_blocks} - usage.virtual_blocks) / batch;
}

double freeness(const InstanceLoad& inst, bool with_requests, const FreenessOptions& options) {
  if (inst.draining || !inst.healthy) return -std::numeric_limits<double>::infinity();
  return freeness_of(inst, instance_usage(inst, with_requests, options));
}

double freeness(const InstanceLoad& inst, const FreenessOptions& options) {
  return freeness(inst, !inst.requests.empty(), options);
}

}  // namespace ecoserve::policy
