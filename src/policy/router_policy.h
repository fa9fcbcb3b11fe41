// RouterPolicy: which instance takes a new request under NoDG (every instance
// mixes prefill and decode). Pure decisions over a ClusterView: no clock, no
// threads, no I/O, so cluster::Router (live) and the simulator run the same
// code. A policy keeps only its own small state (a cursor, a prefix index) and
// is called by one thread at a time.
//
// Only healthy kMixed instances are candidates; with none, route() returns
// nullopt (the router answers 503).
//
//  - round-robin: the next candidate after the last one chosen.
//  - least-loaded (join the shortest queue): fewest waiting + running tokens,
//    then fewest requests, then the lowest position.
//  - cache-aware: the candidate holding the longest prefix of the prompt's
//    blocks (PrefixIndex), traded against load: when the cluster is imbalanced
//    (max load - min load > balance_abs_tokens and max load > balance_rel x min
//    load) or the best match covers less than cache_threshold of the prompt's
//    blocks, least-loaded decides instead. So a hot prefix draws its requests
//    to one instance only until that instance is markedly busier than the rest.
//    The chosen instance is recorded as holding the request's blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "base/status.h"
#include "policy/cluster_view.h"
#include "policy/prefix_index.h"

namespace ecoserve::policy {

struct RouterOptions {
  // cache-aware: follow the best prefix match when it covers at least this share
  // of the prompt's full blocks.
  double cache_threshold = 0.5;
  // cache-aware: the cluster is imbalanced (route least-loaded) when the busiest
  // candidate has more than balance_abs_tokens more load than the idlest AND more
  // than balance_rel times its load.
  int64_t balance_abs_tokens = 1024;
  double balance_rel = 1.5;
  PrefixIndex::Options index;
};

class RouterPolicy {
 public:
  virtual ~RouterPolicy() = default;
  // The instance to send `req` to, or nullopt when no healthy instance can take it.
  virtual std::optional<InstanceId> route(const ClusterView& view, const RouteRequest& req) = 0;
  virtual std::string_view name() const = 0;
  // The instance failed or restarted: forget what it held.
  virtual void remove_instance(InstanceId) {}
};

class RoundRobinRouter final : public RouterPolicy {
 public:
  std::optional<InstanceId> route(const ClusterView& view, const RouteRequest& req) override;
  std::string_view name() const override { return "round-robin"; }

 private:
  size_t next_ = 0;  // position to try first
};

class LeastLoadedRouter final : public RouterPolicy {
 public:
  std::optional<InstanceId> route(const ClusterView& view, const RouteRequest& req) override;
  std::string_view name() const override { return "least-loaded"; }
};

class CacheAwareRouter final : public RouterPolicy {
 public:
  explicit CacheAwareRouter(const RouterOptions& options) : options_(options), index_(options.index) {}
  std::optional<InstanceId> route(const ClusterView& view, const RouteRequest& req) override;
  std::string_view name() const override { return "cache-aware"; }
  void remove_instance(InstanceId id) override { index_.remove_instance(id); }
  const PrefixIndex& index() const { return index_; }
  PrefixIndex& index() { return index_; }

 private:
  RouterOptions options_;
  PrefixIndex index_;
};

// Position in view.instances of the least-loaded candidate (healthy, kMixed), or -1.
int32_t least_loaded_position(const ClusterView& view);

// "round-robin", "least-loaded", "cache-aware", "freeness" (FreenessRouter with default
// FreenessOptions, policy/freeness_router.h); INVALID_ARGUMENT naming them otherwise.
StatusOr<std::unique_ptr<RouterPolicy>> make_router_policy(std::string_view name, const RouterOptions& options);

}  // namespace ecoserve::policy
