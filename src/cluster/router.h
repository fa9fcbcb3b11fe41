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
// Health: an instance whose loop is not running, whose heartbeat is older than
// Options::heartbeat_timeout between steps, or whose step has run longer than
// Options::step_timeout (instance::loop_alive) is unhealthy: it gets no new
// requests and cache-aware routing ignores the prefixes it holds.
//
// Membership (nodg, padg): add_instance() adds one while serving (its slot is
// published only once it runs); remove_instance() stops routing to one at once,
// lets its requests finish (they keep streaming) and then stops it (the
// watchdog notices it is empty). Under padg the macro instances follow the
// mitosis rules: instances move between them as handles, nothing restarts.
// Slots are never reused, so an InstanceId (the slot) stays valid; a removed
// instance leaves the reports.
//
// Thread-safety: every method may be called from any thread; routing and the
// accounting are under one mutex (event sinks take it briefly on the instance
// threads). Owns the instances; stop() stops them all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "cluster/generation_backend.h"
#include "policy/cluster_view.h"
#include "policy/cost_model.h"
#include "policy/freeness_scaler.h"
#include "policy/load_account.h"
#include "policy/migration_planner.h"
#include "policy/mitosis_scaler.h"
#include "policy/padg_router.h"
#include "policy/pd_dispatch.h"
#include "policy/router_policy.h"

namespace ecoserve::cluster {

struct RouterOptions {
  // "nodg": every instance mixes prefill and decode, `router` spreads requests.
  // "fudg": the first num_prefill_instances instances only prefill (their
  // backends run the prefill-only policy); the rest decode. policy::pd_dispatch
  // picks both per request; the prompt's KV moves after the first token.
  std::string strategy = "nodg";
  int32_t num_prefill_instances = 0;
  policy::PdDispatchOptions dispatch;   // fudg: conditional disaggregation
  // "padg" (EcoServe): the instances run the temporal policy; they are grouped
  // into macro instances by the mitosis rules (macro_min/macro_max) and each
  // request is routed by policy::PadgRouter (Algorithms 1 and 2) with
  // predictions from `cost_model` (required for padg). A request rejected by
  // padg.reject_unmeetable fails with RESOURCE_EXHAUSTED and the reason.
  policy::PadgRouterOptions padg;
  policy::MitosisOptions mitosis;
  std::shared_ptr<const policy::CostModel> cost_model;
  std::string router = "least-loaded";  // policy::make_router_policy: round-robin | least-loaded | cache-aware
  policy::RouterOptions policy;         // the routing policy's tuning
  // An instance is unhealthy when its loop stopped, or its heartbeat is older than
  // heartbeat_timeout while it is between steps, or its current step has run longer
  // than step_timeout (a hung engine; a long prefill chunk on a CPU is not one).
  Duration heartbeat_timeout = from_ms(5000);
  Duration step_timeout = std::chrono::seconds(300);
  // How often the watchdog looks for requests held by unhealthy instances (0 = never).
  Duration watchdog_interval = from_ms(500);
  // A request that fails (or whose instance stops beating) before its first token is
  // sent once to another instance; after its first token it fails fast.
  bool retry_before_first_token = true;
  // Readiness probe: every probe_interval the watchdog sends each instance a real
  // one-token greedy request; an instance whose probe fails, or has not finished
  // within probe_timeout without a single engine step in that time (a step still
  // running within step_timeout counts as one), is not ready
  // (unhealthy) until a later probe succeeds. A port or a beating loop is not a
  // working engine; a long queue in front of the probe is not a broken one.
  // 0 = no probes.
  Duration probe_interval = from_ms(5000);
  Duration probe_timeout = from_ms(10000);
  // Most instances over the router's life (slots are not reused).
  int32_t max_instances = 256;
  // Makes the instance POST /admin/instances asks for: `address` empty for an
  // embedded one (a new engine in this process), else a running `ecoserve
  // instance`'s address. Unset: add_instance(address) is UNIMPLEMENTED.
  std::function<StatusOr<std::unique_ptr<GenerationBackend>>(const std::string& address)> make_instance;
  // Autoscaling (nodg, padg; needs make_instance): every `autoscale_window` the
  // router judges the requests that finished in it (SLO attainment: both their
  // TTFT and TPOT SLOs met, a failed request never) and the active instances'
  // mean KV usage with policy::decide_scaling; kScaleUp adds an instance
  // (make_instance("")), kScaleDown removes one (padg: the one the mitosis rules
  // pick; nodg: the newest), within [autoscale_min, autoscale_max] active ones.
  bool autoscale = false;
  Duration autoscale_window = std::chrono::seconds(30);
  int32_t autoscale_min = 1;
  int32_t autoscale_max = 8;
  policy::AutoscaleOptions autoscale_policy;
  // "llumnix": nodg instances, new requests to the freest (router "freeness" unless
  // `router` names another), and live migration of running requests: every
  // migrate_interval (0 = never) policy::MigrationPlanner pairs the least free
  // instances with the freest and each order moves one request in stages (copy
  // while it decodes, up to migrate_max_stages, until at most
  // migrate_last_stage_tokens positions are left, then stop-and-copy; the source
  // commits only after the destination has it). A migration that fails, or runs
  // longer than migrate_timeout before its stop-and-copy, aborts and the request
  // continues on the source. remove_instance() drains by migration.
  policy::MigrationPlannerOptions migration;
  Duration migrate_interval{};
  int32_t migrate_max_stages = 4;
  int32_t migrate_last_stage_tokens = 0;  // 0 = one block
  Duration migrate_timeout = std::chrono::seconds(10);
  // llumnix scaling (needs make_instance): every watchdog pass samples the mean
  // freeness of the active instances; policy::FreenessScaler decides.
  bool scale_by_freeness = false;
  policy::FreenessScalingOptions freeness_scaling;
  // Test hook: called (on whichever thread drives the migration) just before each
  // stage is sent: "reserve" and "copy"/"stop" (to the source), "load" and
  // "commit" (to the destination; called on the source's thread).
  std::function<void(RequestId, std::string_view)> on_migration_stage;
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
  std::vector<InstanceTimeline> timeline(TimePoint since) const override;
  void begin_drain() override;
  bool idle() const override;
  void stop() override;

  ClusterStats cluster_stats() const override;
  std::string_view policy_name() const { return policy_->name(); }

  // Adds a running-capable instance (started here when the router runs) and
  // returns its name. INVALID_ARGUMENT when it serves another context or the
  // router is full; FAILED_PRECONDITION under fudg (its roles are fixed) or
  // while shutting down.
  StatusOr<std::string> add_member(std::unique_ptr<GenerationBackend> instance);
  // GenerationBackend: options.make_instance(address), then add_member.
  StatusOr<std::string> add_instance(const std::string& address) override;
  // llumnix: moves running request `id` to instance `destination` now (what the
  // planner's orders do; also for tests and operators). Returns once it has started;
  // watch cluster_stats(). NOT_FOUND for an unknown request or instance;
  // FAILED_PRECONDITION when it has no first token yet, is being migrated, already
  // runs there, or the destination is not active.
  Status migrate(RequestId id, const std::string& destination);
  // Stops routing to instance `name` now; it is stopped once its requests have
  // finished (llumnix: once they have migrated away or finished). NOT_FOUND for an unknown or removed name; FAILED_PRECONDITION for
  // the last active instance, under fudg, or when it is already being removed.
  Status remove_instance(const std::string& name) override;

 private:
  enum class Life : int { kActive, kRemoving, kRemoved };
  struct Member {
    // Under backends_mu_ (read with backend(i)); null once removed.
    std::shared_ptr<GenerationBackend> backend;
    std::string name;
    policy::InstanceRole role = policy::InstanceRole::kMixed;
    std::atomic<int> life{static_cast<int>(Life::kActive)};  // Life; kRemoved: stopped, out of every report
    // Router accounting (under mu_): what it sent there and how far each got.
    policy::LoadAccount load;
  };
  struct InFlight {
    size_t member = 0;   // the instance that holds the request now
    uint64_t epoch = 0;  // attempt number: events of superseded attempts are dropped
    bool routed = false; // an attempt is running on `member`
    bool retried = false;
    int32_t prompt_tokens = 0;
    int32_t generated = 0;
    // fudg, remote prefill: where it decodes, what to send there, and the client's sink.
    bool remote = false;
    bool in_decode = false;
    bool cancelled = false;
    size_t decode_member = 0;
    std::shared_ptr<instance::GenerationRequest> request;
    std::vector<int32_t> output_tokens;
    std::shared_ptr<instance::EventSink> sink;
    TimePoint prefill_done{};
    // padg accounting (policy::RequestAccount).
    double predicted_prefill_seconds = 0.0;
    double predicted_ttft_seconds = 0.0;  // uncalibrated, for PadgRouter::observe_ttft
    TimePoint routed_at{};
    double slo_tpot_seconds = 0.0;
    double first_token_seconds = 0.0;
    TimePoint submitted{};  // autoscaling: TTFT and TPOT against the SLOs
    TimePoint first_token{};
    // llumnix: a migration of this request is under way; `suspended` once its
    // stop-and-copy has been sent (the source will run it no further).
    bool migrating = false;
    bool suspended = false;
    bool source_ended = false;  // the source ended it ("abort") while suspended: the migration decides
  };
  struct Migration {
    size_t source = 0, destination = 0;
    uint64_t epoch = 0;      // the request's epoch when it started (the source's attempt)
    int32_t loaded = 0;      // positions copied so far
    MigrationRecord record;
  };

  Router(std::vector<std::unique_ptr<GenerationBackend>> instances, const RouterOptions& options, const Clock* clock,
         std::unique_ptr<policy::RouterPolicy> policy);
  // Slots in use (published with release after a slot is filled).
  size_t size() const { return size_.load(std::memory_order_acquire); }
  Life life(size_t i) const { return static_cast<Life>(members_[i].life.load()); }
  // Fills slot size() and publishes it (under mu_).
  void add_slot(std::unique_ptr<GenerationBackend> backend, const std::string& name, policy::InstanceRole role);
  // Member i's backend (a reference that keeps it alive while used), null once removed.
  std::shared_ptr<GenerationBackend> backend(size_t i) const;
  instance::InstanceStatus status_of(size_t i) const;  // a removed member's: not running
  // padg: counts a layout change that began at `start` and logs the new layout (under mu_).
  void note_layout_change(TimePoint start);
  std::string layout_summary() const;  // "[0 1] [2 3]" (under mu_)
  // padg: hands the macro layout to the routing policy (under mu_).
  void publish_layout();
  // Stops the members being removed that hold no request any more (watchdog).
  void finish_removals();
  // Autoscaling: counts a finished request against its SLOs (under mu_), and
  // decides once per window (watchdog).
  void record_finish(const InFlight& f, bool ok, TimePoint now);
  void autoscale(TimePoint now);
  bool healthy(size_t member, const instance::InstanceStatus& s, TimePoint now) const;
  void probe(size_t member, TimePoint now);
  enum class Delivery { kForward, kDrop, kRetry };
  Delivery on_event(RequestId id, uint64_t epoch, const instance::TokenEvent& ev);
  void deliver(RequestId id, uint64_t epoch, const instance::TokenEvent& ev, const instance::EventSink& client);
  // Routes request `id` (tracked in in_flight_) and submits it; `exclude` is an
  // instance it just failed on.
  Status dispatch(RequestId id, std::optional<size_t> exclude);
  void watchdog();
  void check_instances();
  // Builds view_ from snapshots and the router's accounting (under mu_).
  int32_t build_view(const std::vector<instance::InstanceStatus>& snaps, TimePoint now);
  void account(const InFlight& f, int sign);  // adds (+1) or removes (-1) f's load from its member (under mu_)
  // fudg: the prefill instance finished request `id`'s prefill (on its thread).
  void on_prefill_done(RequestId id, uint64_t epoch);
  void on_kv_exported(RequestId id, uint64_t epoch, StatusOr<std::vector<uint8_t>> blob);
  void fail(RequestId id, const std::string& reason, const std::string& error);
  bool fudg() const { return options_.strategy == "fudg"; }
  bool llumnix() const { return options_.strategy == "llumnix"; }
  // --- llumnix (router_migration.cc) ---
  // Adds the in-flight requests to view_ (under mu_).
  void add_requests_to_view();
  // What the freeness policies see of one in-flight request.
  policy::RequestLoad load_of(RequestId id, const InFlight& f) const;
  // Runs the migration planner (watchdog).
  void plan_migrations(TimePoint now);
  // Starts migrating `id` from its instance to `destination` (not under mu_).
  Status start_migration(RequestId id, size_t destination, const std::string& reason);
  // The next stage of `id`'s migration, after the previous one succeeded.
  void migration_copy(RequestId id);
  void on_migration_chunk(RequestId id, StatusOr<instance::MigrationChunk> chunk);
  void on_migration_committed(RequestId id, uint64_t new_epoch, Status s);
  // Ends `id`'s migration before the stop-and-copy: frees the reservation (under no lock).
  void abort_migration(RequestId id, const std::string& reason);
  // Records the end of a migration (under mu_) and erases it.
  void end_migration(RequestId id, const std::string& outcome);
  // llumnix scaling by freeness (watchdog).
  void scale_by_freeness(TimePoint now);
  bool padg() const { return options_.strategy == "padg"; }

  std::unique_ptr<Member[]> members_;  // options_.max_instances slots; [0, size()) in use
  std::atomic<size_t> size_{0};
  mutable std::mutex backends_mu_;  // guards Member::backend; never held while calling a backend
  RouterOptions options_;
  const Clock* clock_;
  std::shared_ptr<const model::LlamaModel> model_;
  int32_t max_context_ = 0;
  int32_t block_size_ = 16;

  mutable std::mutex mu_;
  std::unique_ptr<policy::RouterPolicy> policy_;   // under mu_
  policy::PadgRouter* padg_ = nullptr;              // policy_ when padg (under mu_)
  policy::MacroLayout layout_;                      // padg: the macro instances (under mu_)
  std::unordered_map<RequestId, InFlight> in_flight_;  // under mu_
  std::unordered_map<RequestId, Migration> migrations_;  // llumnix, under mu_
  std::optional<policy::MigrationPlanner> planner_;      // llumnix
  std::optional<policy::FreenessScaler> freeness_scaler_;  // llumnix scaling (watchdog thread)
  TimePoint last_migration_plan_{};                      // watchdog thread
  policy::ClusterView view_;                        // under mu_ (scratch)
  std::vector<kv::BlockHash> hashes_;               // under mu_ (scratch)
  // fudg: which prompt blocks each decode instance probably caches (for
  // conditional disaggregation: a mostly cached prompt prefills locally).
  policy::PrefixIndex decode_index_;                // under mu_
  ClusterStats stats_;                              // under mu_
  bool draining_ = false;                           // under mu_
  bool stopping_ = false;                           // under mu_
  bool started_ = false;                            // under mu_
  // Autoscaling (watchdog thread, counters under mu_).
  TimePoint window_start_{};
  int64_t window_finished_ = 0, window_met_ = 0;     // under mu_
  std::optional<TimePoint> last_scaling_;
  uint64_t seed_state_ = 0x9e3779b97f4a7c15ull;     // under mu_: seeds for requests without one (fudg)

  // Readiness (probes): per member, set by probe results on instance threads.
  std::unique_ptr<std::atomic<bool>[]> ready_;
  struct Probe {
    std::atomic<bool> in_flight{false};  // cleared by the probe's final event (an instance thread)
    RequestId id;
    TimePoint sent{};          // sent, or last seen making progress (steps advancing) while late
    int64_t steps_at_send = 0;  // the instance's step count then
    TimePoint last{};
    bool ever = false;
  };
  std::unique_ptr<Probe[]> probes_;  // watchdog thread only (but in_flight)
  uint64_t next_probe_id_ = 0;  // watchdog thread only

  std::thread watchdog_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;  // under watchdog_mu_
};

}  // namespace ecoserve::cluster
