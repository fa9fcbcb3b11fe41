#include "policy/freeness_router.h"

#include <limits>

namespace ecoserve::policy {

double FreenessRouter::freeness_with(const InstanceLoad& inst, bool with_requests, const RouteRequest& req) const {
  if (inst.draining || !inst.healthy) return -std::numeric_limits<double>::infinity();
  RequestLoad r;
  r.num_tokens = req.prompt_len;
  r.max_tokens = req.max_tokens;
  r.priority = req.priority;
  r.running = false;
  InstanceUsage u = instance_usage(inst, with_requests, options_);
  u.virtual_blocks += virtual_usage_blocks(r, inst.block_size > 0 ? inst.block_size : 1, options_);
  return freeness_of(inst, u);
}

std::optional<InstanceId> FreenessRouter::route(const ClusterView& view, const RouteRequest& req) {
  int64_t best = -1;
  double best_f = 0.0;
  RequestLoad r;
  r.num_tokens = req.prompt_len;
  r.max_tokens = req.max_tokens;
  r.priority = req.priority;
  r.running = false;
  int32_t cached_block_size = -1;  // the new request's usage, per block size (usually one for all)
  int64_t cached_usage = 0;
  for (size_t i = 0; i < view.instances.size(); ++i) {
    const InstanceLoad& l = view.instances[i];
    if (!l.healthy || l.draining || l.role != InstanceRole::kMixed) continue;
    const int32_t block_size = l.block_size > 0 ? l.block_size : 1;
    if (block_size != cached_block_size) {
      cached_block_size = block_size;
      cached_usage = virtual_usage_blocks(r, block_size, options_);
    }
    InstanceUsage u = instance_usage(l, view.with_requests, options_);
    u.virtual_blocks += cached_usage;
    const double f = freeness_of(l, u);  // the same as freeness_with(l, view.with_requests, req)
    if (best < 0 || f > best_f) {
      best = static_cast<int64_t>(i);
      best_f = f;
    }
  }
  if (best < 0) return std::nullopt;
  return view.instances[static_cast<size_t>(best)].id;
}

}  // namespace ecoserve::policy
