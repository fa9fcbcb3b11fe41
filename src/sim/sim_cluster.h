// SimCluster: a serving cluster in simulated time, running the live cluster
// policies over SimInstances (the live InstanceCore with a cost-model executor):
//
//   nodg     policy::RouterPolicy (round-robin, least-loaded, cache-aware, freeness)
//   fudg     policy::pd_dispatch; the prompt's KV moves from the prefill instance
//            to the decode instance over the SimNetwork after the first token
//   padg     policy::PadgRouter (EcoServe Algorithms 1-2) over macro instances laid
//            out by the mitosis rules (policy::plan_add), instances on the temporal policy
//   llumnix  policy::FreenessRouter for new requests, policy::MigrationPlanner every
//            migrate_interval, live migration in stages (policy::migration_stage_is_last)
//            whose KV copies cross the SimNetwork while the request keeps decoding
//
// The ClusterView is built the way cluster::Router builds it: the router's own
// accounting (policy::LoadAccount, updated on every token event) plus each
// instance's free blocks and phase. Requests arrive at their times (one pending
// arrival event at a time, so the simulator holds only the live requests); each
// request's token ids are generated from its id (or from its prefix block ids, so
// shared prefixes hit the prefix cache).
//
// Times: every request's arrival, first token and end (and, with
// keep_token_times, every token) in seconds from the start of the run.
// Deterministic: the same options and requests give the same result, bit for bit.
// Owns its instances, runtime and network. Single-threaded.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/instance_types.h"
#include "policy/cluster_view.h"
#include "policy/cost_model.h"
#include "policy/freeness_router.h"
#include "policy/freeness_scaler.h"
#include "policy/load_account.h"
#include "policy/migration_planner.h"
#include "policy/mitosis_scaler.h"
#include "policy/padg_router.h"
#include "policy/pd_dispatch.h"
#include "policy/prefix_index.h"
#include "policy/router_policy.h"
#include "sim/sim_instance.h"
#include "sim/sim_network.h"
#include "sim/sim_runtime.h"
#include "sim/topology.h"

namespace ecoserve::sim {

// One request of a simulated workload.
struct SimRequest {
  double arrival_s = 0.0;
  int32_t input_tokens = 0;
  int32_t output_tokens = 0;  // max_tokens; generation never stops earlier (ignore_eos)
  int32_t priority = 0;       // higher runs first (vLLM's "priority" negated, as the server does)
  double slo_ttft_s = 0.0;    // 0: none (padg uses its defaults)
  double slo_tpot_s = 0.0;
  // Shared prefixes (Mooncake's hash_ids): block i of the prompt (prefix_block_tokens
  // tokens) has the token ids of block id prefix_blocks[i]; positions after them are
  // the request's own.
  std::vector<int64_t> prefix_blocks;
  int32_t prefix_block_tokens = 512;
};

struct SimRequestResult {
  double arrival_s = 0.0;
  double first_token_s = -1.0;
  double end_s = -1.0;
  int32_t input_tokens = 0;
  int32_t output_tokens = 0;  // generated
  int32_t cached_prompt_tokens = 0;
  bool success = false;
  // "length", "stop", "error", "rejected" (no instance can take it: the server's 429/503),
  // "invalid" (prompt + max_tokens beyond the context: the server's 400), "timeout".
  std::string finish_reason;
  std::string error;          // why it failed or was rejected
  int32_t instance = -1;      // where it ended
  int32_t migrations = 0;     // completed live migrations
  std::vector<double> token_s;  // every token's time (keep_token_times)
};

struct SimInstanceSpec {
  policy::InstanceRole role = policy::InstanceRole::kMixed;
  SimInstanceOptions options;  // core.policy must fit the role (prefill-only / decode-only / mixed)
  std::shared_ptr<const policy::CostModel> cost_model;
  std::vector<GpuId> gpus;  // the GPUs it runs on (its TP x PP shards); KV moves shard to shard
};

struct SimClusterOptions {
  std::string strategy = "nodg";        // nodg | fudg | padg | llumnix
  std::string router;  // policy::make_router_policy, or "freeness"; empty: freeness under llumnix, else least-loaded
  policy::RouterOptions router_policy;
  policy::PdDispatchOptions dispatch;
  policy::PadgRouterOptions padg;
  policy::MitosisOptions mitosis;
  std::shared_ptr<const policy::CostModel> padg_cost_model;  // padg's predictions (default: instance 0's)
  policy::MigrationPlannerOptions migration;
  Duration migrate_interval = std::chrono::milliseconds(500);
  int32_t migrate_max_stages = 4;
  int32_t migrate_last_stage_tokens = 0;  // 0 = one block
  std::vector<SimInstanceSpec> instances;
  int64_t kv_bytes_per_token = 0;  // bytes a token's KV takes (all layers): what transfers move
  TopologyOptions topology;
  bool keep_token_times = false;
  uint64_t seed = 0;
  // Operator actions at set times (what POST /admin/instances, DELETE and the
  // router's migrate() do live). padg: an added instance joins the macro layout by
  // the mitosis rules (policy::plan_add: joins, or splits a full macro instance),
  // a removed one leaves by policy::plan_remove_instance (merging a macro that drops
  // below N_l); nodg/llumnix: it joins or leaves the routing set. A removed instance
  // takes no new requests and finishes (llumnix: migrates away) what it holds.
  struct Action {
    double at_s = 0.0;
    enum Kind { kAddInstance, kRemoveInstance, kMigrate } kind = kAddInstance;
    SimInstanceSpec instance;  // kAddInstance
    int32_t target = -1;       // kRemoveInstance: the instance; kMigrate: the destination
    int64_t request = -1;      // kMigrate: workload index
  };
  std::vector<Action> actions;
  // Autoscaling, as the live router does it, checked every scale_check_interval:
  //  - autoscale (nodg, padg): every autoscale_window, policy::decide_scaling on the
  //    window's SLO attainment (the requests' own SLOs) and mean KV usage adds an
  //    instance or removes one (padg: the one policy::plan_remove picks; nodg: the newest),
  //    within [autoscale_min, autoscale_max] active instances;
  //  - scale_by_freeness (llumnix): policy::FreenessScaler on the mean freeness; a
  //    scale-down drains policy::pick_instance_to_drain by migration.
  // New instances are copies of scale_template (its gpus ignored) on the first free
  // GPUs of one node; none free: no instance is added.
  bool autoscale = false;
  Duration autoscale_window = std::chrono::seconds(30);
  int32_t autoscale_min = 1;
  int32_t autoscale_max = 8;
  policy::AutoscaleOptions autoscale_policy;
  bool scale_by_freeness = false;
  policy::FreenessScalingOptions freeness_scaling;
  Duration scale_check_interval = std::chrono::milliseconds(500);
  std::optional<SimInstanceSpec> scale_template;
  // A request still running this long after its arrival is cancelled and fails with
  // "timeout" (ecoserve bench's --request-timeout; 0 = never). It bounds the queues of
  // an overloaded run, where every later request misses its SLOs anyway.
  double request_timeout_s = 0.0;
  // Instances on one node share a host (SimHost): a step is host_step_scale_alone
  // times its cost-model time when no other instance of the node is mid-step as it
  // starts, host_step_scale_shared times when one is. 1 and 1: independent (GPUs).
  // For CPU deployments, where the instances of a machine share its memory bandwidth.
  double host_step_scale_alone = 1.0;
  double host_step_scale_shared = 1.0;
  // The run stops (requests still running fail with "error") at this simulated time.
  Duration max_time = std::chrono::hours(24 * 30);
};

struct SimMigration {
  int64_t request = 0;  // workload index
  int32_t from = -1, to = -1;
  double started_s = 0.0, finished_s = 0.0;
  double downtime_s = 0.0;
  int32_t stages = 0;
  int64_t bytes = 0;
  std::string reason, outcome;  // outcome: "completed" or why it aborted
};

struct SimStats {
  int64_t completed = 0, failed = 0, rejected = 0;
  int64_t kv_transfers = 0;        // fudg hand-offs
  int64_t kv_transfer_bytes = 0;
  double kv_transfer_seconds = 0.0;  // summed over hand-offs (network time)
  int64_t local_prefills = 0;        // fudg: prefilled on the decode instance
  int64_t migrations_started = 0, migrations_completed = 0;
  int64_t migrated_bytes = 0;
  int64_t network_bytes_sent = 0, network_bytes_delivered = 0;
  int64_t preemptions = 0;
  int64_t events = 0;
  int32_t layout_changes = 0;
  int32_t scale_ups = 0, scale_downs = 0;
  std::string layout;  // padg: "m0{i0 i1} m1{i2 i3}" at the end
};

// One change of the padg macro layout (or of the instance set).
struct SimLayoutChange {
  double at_s = 0.0;
  std::string action;  // "add i2", "remove i1"
  std::string layout;  // after it
};

struct SimInstanceReport {
  std::string name;
  std::string role;
  bool removed = false;
  SimInstanceCounters counters;
  int32_t free_blocks_at_end = 0;
  int32_t total_blocks = 0;
  std::vector<instance::StepRecord> steps;  // with SimInstanceOptions::record_steps
};

struct SimResult {
  std::vector<SimRequestResult> requests;  // in workload order
  std::vector<SimMigration> migrations;
  std::vector<SimLayoutChange> layout_changes;
  std::vector<SimInstanceReport> instances;
  SimStats stats;
  double duration_s = 0.0;  // the last event's time
};

class SimCluster {
 public:
  using Progress = std::function<void(int64_t done, int64_t total)>;

  // INVALID_ARGUMENT for an unknown strategy or router, no instances, roles that
  // do not fit the strategy (fudg needs prefill and decode instances), invalid
  // policy options or topology, or a GPU outside the topology.
  static StatusOr<std::unique_ptr<SimCluster>> create(SimClusterOptions options);
  ~SimCluster();

  // Runs the workload (arrivals in non-decreasing order) to the end. Call once.
  // INVALID_ARGUMENT for unsorted arrivals or a request that can never fit.
  StatusOr<SimResult> run(std::span<const SimRequest> requests, const Progress& progress = {});

 private:
  // A request in flight (the live Router's InFlight).
  struct Flight {
    size_t member = 0;         // the instance that holds it now
    size_t decode_member = 0;  // fudg: where it decodes
    bool remote = false;       // fudg: prefilled on another instance than it decodes on
    bool in_decode = false;    // fudg: its KV reached the decode instance
    int32_t prompt_tokens = 0;
    int32_t generated = 0;
    int32_t max_tokens = 0;
    int32_t priority = 0;
    double predicted_prefill_seconds = 0.0;  // padg
    double uncalibrated_ttft_seconds = 0.0;  // padg
    TimePoint routed_at{};
    double slo_tpot_seconds = 0.0;
    double first_token_seconds = 0.0;
    std::vector<int32_t> output_tokens;  // fudg: sampled on the prefill instance
    bool migrating = false;              // llumnix
    SimRuntime::EventId timeout = SimRuntime::kNoEvent;
  };
  // The live requests' flights by workload index: slots reused through a free list
  // (memory linear in the live requests) plus a slot per workload index (4 bytes a
  // request). insert() may move the flights (one vector of slots): nobody holds a
  // Flight reference across it (only dispatch() inserts, in its own event).
  class FlightTable {
   public:
    // Empty, for workload indices [0, num_requests).
    void reset(size_t num_requests);
    Flight* find(size_t index) {
      const int32_t slot = index < slot_of_.size() ? slot_of_[index] : -1;
      return slot < 0 ? nullptr : &slots_[static_cast<size_t>(slot)].flight;
    }
    // `index` must not be live.
    void insert(size_t index, Flight flight);
    void erase(size_t index);  // no-op when not live
    size_t size() const { return slots_.size() - free_.size(); }
    // The live indices, ascending, into *out (replacing its contents).
    void live_indices(std::vector<size_t>* out) const;

   private:
    static constexpr size_t kFree = static_cast<size_t>(-1);
    struct Slot {
      size_t index = kFree;
      Flight flight;
    };
    std::vector<Slot> slots_;
    std::vector<int32_t> free_;     // free slots (the last freed is reused first)
    std::vector<int32_t> slot_of_;  // workload index -> slot, -1 when not live
  };
  struct Migration {
    size_t source = 0, destination = 0;
    int32_t loaded = 0;  // positions copied so far
    TimePoint stopped{};
    SimMigration record;
  };
  explicit SimCluster(SimClusterOptions options);
  Status init();

  void arrive(size_t index);
  void dispatch(size_t index);
  void on_event(InstanceId from, const instance::TokenEvent& ev);
  void finish(size_t index, const instance::TokenEvent& ev);
  void reject(size_t index, const std::string& finish_reason, const std::string& error);
  void account(const Flight& f, int sign);
  void build_view(bool with_requests);
  instance::GenerationRequest make_request(size_t index) const;
  // fudg: request `index`'s prefill is done on its prefill instance.
  void hand_off(size_t index);
  // KV of `bytes` from instance `from` to `to`, shard to shard over the network.
  void transfer(size_t from, size_t to, int64_t bytes, std::function<void()> done);
  // llumnix
  void plan_migrations();
  Status start_migration(size_t index, size_t destination, const std::string& reason);
  void migration_stage(size_t index);
  void end_migration(size_t index, const std::string& outcome);
  // Operator actions.
  void act(const SimClusterOptions::Action& a);
  Status add_instance(const SimInstanceSpec& spec);
  Status remove_instance(size_t member);
  void publish_layout(const std::string& action);
  // Autoscaling (every scale_check_interval).
  void check_scaling();
  void record_finish(size_t index, bool ok);
  Status scale_up();
  int32_t num_active() const;

  SimClusterOptions options_;
  SimRuntime runtime_;
  std::unique_ptr<SimNetwork> network_;
  std::unique_ptr<Topology> topology_;
  std::vector<std::unique_ptr<SimInstance>> instances_;
  std::vector<policy::LoadAccount> loads_;
  std::vector<bool> removed_;  // taken out of routing by a remove action
  std::vector<int32_t> node_of_;  // each instance's node (of its first GPU; -1: none placed)
  std::vector<SimHost> hosts_;    // one per node when the host step scales are not 1 (stable addresses)
  std::vector<bool> gpu_used_;
  // Autoscaling state.
  TimePoint window_start_{};
  int64_t window_finished_ = 0, window_met_ = 0;
  std::optional<TimePoint> last_scaling_;
  std::optional<policy::FreenessScaler> freeness_scaler_;
  std::unique_ptr<policy::RouterPolicy> router_;
  policy::PadgRouter* padg_ = nullptr;
  policy::MacroLayout layout_;
  std::optional<policy::MigrationPlanner> planner_;
  policy::ClusterView view_;
  std::vector<size_t> order_;  // build_view scratch: live workload indices
  size_t view_fixed_ = 0;      // view_.instances[0, view_fixed_) have their fixed fields set
  std::vector<kv::BlockHash> hashes_;
  // fudg: which prompt blocks each decode instance probably caches (as the live router keeps it).
  policy::PrefixIndex decode_index_;
  int32_t block_size_ = 16;

  std::span<const SimRequest> requests_;
  SimResult result_;
  // Live requests and migrations by workload index (a request's id is index + 1).
  FlightTable flights_;
  std::unordered_map<size_t, Migration> migrations_;
  int64_t done_ = 0;
  Progress progress_;
  int64_t progress_every_ = 1;
};

}  // namespace ecoserve::sim
