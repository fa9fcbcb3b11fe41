#include "policy/router_policy.h"

#include <algorithm>

#include "policy/freeness_router.h"

namespace ecoserve::policy {

namespace {

bool candidate(const InstanceLoad& l) { return l.healthy && l.role == InstanceRole::kMixed; }

// a is less loaded than b.
bool less_loaded(const InstanceLoad& a, const InstanceLoad& b) {
  if (a.load_tokens() != b.load_tokens()) return a.load_tokens() < b.load_tokens();
  return a.num_requests() < b.num_requests();
}

}  // namespace

int32_t least_loaded_position(const ClusterView& view) {
  int32_t best = -1;
  for (size_t i = 0; i < view.instances.size(); ++i) {
    const InstanceLoad& l = view.instances[i];
    if (!candidate(l)) continue;
    if (best < 0 || less_loaded(l, view.instances[static_cast<size_t>(best)])) best = static_cast<int32_t>(i);
  }
  return best;
}

std::optional<InstanceId> RoundRobinRouter::route(const ClusterView& view, const RouteRequest&) {
  const size_t n = view.instances.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_ + k) % n;
    if (candidate(view.instances[i])) {
      next_ = (i + 1) % n;
      return view.instances[i].id;
    }
  }
  return std::nullopt;
}

std::optional<InstanceId> LeastLoadedRouter::route(const ClusterView& view, const RouteRequest&) {
  const int32_t p = least_loaded_position(view);
  if (p < 0) return std::nullopt;
  return view.instances[static_cast<size_t>(p)].id;
}

std::optional<InstanceId> CacheAwareRouter::route(const ClusterView& view, const RouteRequest& req) {
  const int32_t least = least_loaded_position(view);
  if (least < 0) return std::nullopt;
  int64_t min_load = INT64_MAX, max_load = 0;
  for (const InstanceLoad& l : view.instances) {
    if (!candidate(l)) continue;
    min_load = std::min(min_load, l.load_tokens());
    max_load = std::max(max_load, l.load_tokens());
  }
  const bool imbalanced = max_load - min_load > options_.balance_abs_tokens &&
                          static_cast<double>(max_load) > options_.balance_rel * static_cast<double>(min_load);
  int32_t chosen = least;
  if (!imbalanced && !req.block_hashes.empty()) {
    // The longest match among candidates; ties go to the less loaded, then the lower position.
    int32_t best = -1, best_blocks = 0;
    for (const PrefixIndex::Match& m : index_.match(req.block_hashes)) {
      int32_t pos = -1;
      for (size_t i = 0; i < view.instances.size(); ++i) {
        if (view.instances[i].id == m.instance) {
          pos = static_cast<int32_t>(i);
          break;
        }
      }
      if (pos < 0 || !candidate(view.instances[static_cast<size_t>(pos)])) continue;
      const InstanceLoad& l = view.instances[static_cast<size_t>(pos)];
      if (best < 0 || m.num_blocks > best_blocks ||
          (m.num_blocks == best_blocks &&
           (less_loaded(l, view.instances[static_cast<size_t>(best)]) ||
            (!less_loaded(view.instances[static_cast<size_t>(best)], l) && pos < best)))) {
        best = pos;
        best_blocks = m.num_blocks;
      }
    }
    if (best >= 0 &&
        static_cast<double>(best_blocks) >= options_.cache_threshold * static_cast<double>(req.block_hashes.size())) {
      chosen = best;
    }
  }
  const InstanceId id = view.instances[static_cast<size_t>(chosen)].id;
  index_.insert(id, req.block_hashes);
  return id;
}

StatusOr<std::unique_ptr<RouterPolicy>> make_router_policy(std::string_view name, const RouterOptions& options) {
  if (name == "round-robin") return std::unique_ptr<RouterPolicy>(new RoundRobinRouter());
  if (name == "least-loaded") return std::unique_ptr<RouterPolicy>(new LeastLoadedRouter());
  if (name == "cache-aware") return std::unique_ptr<RouterPolicy>(new CacheAwareRouter(options));
  if (name == "freeness") return std::unique_ptr<RouterPolicy>(new FreenessRouter(FreenessOptions{}));
  return invalid_argument_error("unknown router '{}' (round-robin, least-loaded, cache-aware, freeness)", name);
}

}  // namespace ecoserve::policy
