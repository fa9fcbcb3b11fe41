// Router: one GenerationBackend over N instances (embedded InstanceBackends
// today; remote instances over transport/ later). Each request is routed by a
// pure policy::RouterPolicy (round-robin, least-loaded, cache-aware) over a
// policy::ClusterView the router builds from its own exact accounting of what it
// sent each instance and from the instances' status snapshots.
//
// Accounting: for every request in flight the router knows its instance, its
// prompt length and how many tokens it has produced (it sees every event), so
// the load it routes on is current, not a snapshot a step old: a request counts
// as waiting (its prompt tokens) until its first token, then as running (prompt
// + generated tokens). Free KV blocks and health come from the snapshots.
//
// Health: an instance whose loop is not running or whose heartbeat is older
// than Options::heartbeat_timeout is unhealthy: it gets no new requests and
// cache-aware routing ignores the prefixes it holds.
//
// Thread-safety: every method may be called from any thread; routing and the
// accounting are under one mutex (event sinks take it briefly on the instance
// threads). Owns the instances; stop() stops them all.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "cluster/generation_backend.h"
#include "policy/cluster_view.h"
#include "policy/router_policy.h"

namespace ecoserve::cluster {

struct RouterOptions {
  std::string router = "least-loaded";  // policy::make_router_policy: round-robin | least-loaded | cache-aware
  policy::RouterOptions policy;         // the routing policy's tuning
  Duration heartbeat_timeout = from_ms(5000);
};

class Router final : public GenerationBackend {
 public:
  // The instances must serve the same model and context; they are started by start().
  static StatusOr<std::unique_ptr<Router>> create(std::vector<std::unique_ptr<GenerationBackend>> instances,
                                                  const RouterOptions& options, const Clock* clock);
  ~Router() override;

  void start() override;
  Status submit(instance::GenerationRequest request, instance::EventSink sink) override;
  void cancel(RequestId id) override;
  std::shared_ptr<const model::LlamaModel> model() const override { return model_; }
  int32_t max_context() const override { return max_context_; }
  instance::InstanceStatus status() const override;
  std::vector<InstanceReport> instances() const override;
  void begin_drain() override;
  bool idle() const override;
  void stop() override;

  ClusterStats cluster_stats() const override;
  std::string_view policy_name() const { return policy_->name(); }

 private:
  struct Member {
    std::unique_ptr<GenerationBackend> backend;
    std::string name;
    // Router accounting (under mu_).
    int32_t waiting = 0, running = 0;
    int64_t waiting_tokens = 0, running_tokens = 0;
  };
  struct InFlight {
    size_t member = 0;
    int32_t prompt_tokens = 0;
    int32_t generated = 0;
  };

  Router(std::vector<Member> members, const RouterOptions& options, const Clock* clock,
         std::unique_ptr<policy::RouterPolicy> policy);
  bool healthy(const instance::InstanceStatus& s, TimePoint now) const;
  void on_event(const instance::TokenEvent& ev);

  std::vector<Member> members_;
  RouterOptions options_;
  const Clock* clock_;
  std::shared_ptr<const model::LlamaModel> model_;
  int32_t max_context_ = 0;
  int32_t block_size_ = 16;

  mutable std::mutex mu_;
  std::unique_ptr<policy::RouterPolicy> policy_;   // under mu_
  std::unordered_map<RequestId, InFlight> in_flight_;  // under mu_
  policy::ClusterView view_;                        // under mu_ (scratch)
  std::vector<kv::BlockHash> hashes_;               // under mu_ (scratch)
  ClusterStats stats_;                              // under mu_
  bool draining_ = false;                           // under mu_
};

}  // namespace ecoserve::cluster
