// GenerationBackend: what the HTTP server generates with. One instance
// (InstanceBackend) or a cluster of them behind a router (Router) implement it,
// so the server's handlers do not know how many instances there are or how
// prefill and decode are split between them.
//
// Thread-safety: every method may be called from any thread. Event sinks are
// called on backend threads and must not block (post to your own executor);
// every accepted request gets exactly one final event, also when cancelled,
// when its instance fails, or when the backend stops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "base/instance_types.h"
#include "model/llama_model.h"

namespace ecoserve::cluster {

// One instance as operators see it (/metrics labels, /admin/cluster).
struct InstanceReport {
  std::string name;            // "0", "1", ... or the remote address
  std::string role = "mixed";  // "mixed" | "prefill" | "decode"
  bool healthy = true;
  instance::InstanceStatus status;
  // Cluster membership: "active", or "removing" (gets no new requests; stops
  // when its requests have finished).
  std::string state = "active";
  // padg (router-side): the macro instance it belongs to (-1: none), the
  // predicted prefill seconds of its requests without a first token, and the mean
  // saved TPOT of its decodes that have a TPOT SLO (num_slo_decoding of them).
  int32_t macro = -1;
  double pending_prefill_seconds = 0.0;
  int32_t num_slo_decoding = 0;
  double mean_saved_tpot_seconds = 0.0;
};

// A macro instance (padg): its id and members' names in ring order.
struct MacroReport {
  int32_t id = 0;
  std::vector<std::string> members;
};

// One live migration (llumnix), for /admin/timeline and the downtime figures.
struct MigrationRecord {
  RequestId request;
  std::string from, to;      // instance names
  std::string reason;        // "load_balance" | "defragment" | "drain" | "manual"
  std::string outcome;       // "completed" or the abort reason
  int32_t context_tokens = 0;  // positions moved (prompt + generated - 1) at stop-and-copy
  int32_t stages = 0;          // copy stages, stop-and-copy included
  int64_t bytes = 0;
  TimePoint started{}, stopped{}, finished{};  // stopped: stop-and-copy sent (zero if never)
  double downtime_seconds = 0.0;  // stop-and-copy sent -> the destination runs it
};

// Upper bounds (seconds) of the migration downtime histogram's buckets (+Inf implied).
inline constexpr double kMigrationDowntimeBuckets[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0};

// What a router adds to an instance's counters (all zero for one instance).
struct ClusterStats {
  int64_t routed = 0;                // requests routed to an instance
  int64_t rejected = 0;              // requests no healthy instance could take
  double route_seconds_total = 0.0;  // time spent in routing decisions
  int32_t unhealthy_instances = 0;   // at the last routing decision
  int64_t kv_transfers = 0;          // fudg: prompt KV moved from a prefill to a decode instance
  int64_t kv_transfer_bytes = 0;
  double kv_transfer_seconds = 0.0;  // from "prefill_done" to the blob handed to the decode instance
  int64_t kv_transfer_failures = 0;
  int64_t local_prefills = 0;        // fudg: prompts prefilled on their decode instance (conditional)
  int64_t retries = 0;               // requests sent to another instance before their first token
  int64_t instances_added = 0;       // by add_instance (not the initial ones)
  int64_t instances_removed = 0;     // stopped after remove_instance
  // padg: macro-layout changes (an instance handle joining, moving between or
  // leaving macro instances by the mitosis rules) and how long the last took
  // (planning and publishing it to the routing policy; nothing restarts).
  int64_t layout_changes = 0;
  double last_layout_change_seconds = 0.0;
  std::vector<MacroReport> macros;   // padg: the macro instances, oldest first
  // llumnix: live migrations started, completed and aborted (by reason: "finished",
  // "cancelled", "preempted", "destination_full", "destination_failed",
  // "source_failed", "timeout"), the KV bytes moved by completed and aborted
  // ones, and the downtime of each completed one (cumulative bucket counts over
  // kMigrationDowntimeBuckets, then +Inf; and the sum).
  int64_t migrations_started = 0;
  int64_t migrations_completed = 0;
  std::vector<std::pair<std::string, int64_t>> migrations_aborted;
  int64_t migrated_bytes = 0;
  std::vector<int64_t> migration_downtime_buckets;
  double migration_downtime_seconds_total = 0.0;
  std::vector<MigrationRecord> recent_migrations;  // the last 256, oldest first
  int64_t freeness_scale_ups = 0, freeness_scale_downs = 0;
};

// The recent steps of one instance.
struct InstanceTimeline {
  std::string name;
  std::string role = "mixed";
  std::vector<instance::StepRecord> steps;
};

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;

  // Starts the instances' threads.
  virtual void start() = 0;
  // RESOURCE_EXHAUSTED when the queues are full, UNAVAILABLE when draining or no
  // instance can take it, INVALID_ARGUMENT when prompt + max_tokens exceeds the
  // context. On error the sink is never called.
  virtual Status submit(instance::GenerationRequest request, instance::EventSink sink) = 0;
  // The request finishes with "abort" soon; unknown ids are ignored.
  virtual void cancel(RequestId id) = 0;

  // The served model (tokenizer, chat template, config): read-only, shared.
  virtual std::shared_ptr<const model::LlamaModel> model() const = 0;
  // Tokens per request (prompt + completion) at most.
  virtual int32_t max_context() const = 0;

  // The whole backend: queue lengths and counters summed over the instances, KV
  // usage averaged, `running` when any healthy instance runs, the newest heartbeat.
  virtual instance::InstanceStatus status() const = 0;
  // Per instance, in a stable order.
  virtual std::vector<InstanceReport> instances() const = 0;
  // Every instance's steps that started at or after `since`.
  virtual std::vector<InstanceTimeline> timeline(TimePoint since) const = 0;
  // Routing counters (a single instance has none).
  virtual ClusterStats cluster_stats() const { return {}; }

  // --- Disaggregation (fudg): the two sides of the KV connector ---
  // Sending side: exports the KV held for a request that ended with "prefill_done"
  // and frees the held blocks; `done` gets the blob or the error, on a backend thread.
  virtual void take_prefilled_kv(RequestId id, std::function<void(StatusOr<std::vector<uint8_t>>)> done) {
    (void)id;
    done(unimplemented_error("this backend does not hold KV for transfer"));
  }
  // Receiving side: continues a request prefilled elsewhere (`output_tokens` already
  // sampled and sent to the client, `kv` its prompt's KV): the request waits for
  // blocks, loads the KV and decodes; errors arrive as its final event.
  virtual Status submit_prefilled(instance::GenerationRequest request, std::vector<int32_t> output_tokens,
                                  std::vector<uint8_t> kv, instance::EventSink sink) {
    (void)request;
    (void)output_tokens;
    (void)kv;
    (void)sink;
    return unimplemented_error("this backend cannot take prefilled requests");
  }

  // --- Live migration (llumnix): both sides, driven by the router ---
  // Every call returns at once; `done` runs exactly once, on a backend thread (or
  // at once on error). See instance::InstanceCore's migrate_* for the semantics.
  using ChunkDone = std::function<void(StatusOr<instance::MigrationChunk>)>;
  using StatusDone = std::function<void(Status)>;
  // Source: the KV of positions [begin, computed) of running request `id`; with
  // `stop`, stop-and-copy (suspends it and adds the handover).
  virtual void migrate_out(RequestId id, int32_t begin, bool stop, ChunkDone done) {
    (void)id, (void)begin, (void)stop;
    done(unimplemented_error("this backend cannot migrate requests"));
  }
  // Source: after stop-and-copy, `committed` drops the request here (the destination
  // continues it); otherwise it resumes here.
  virtual void migrate_out_finish(RequestId id, bool committed, StatusDone done) {
    (void)id, (void)committed;
    done(unimplemented_error("this backend cannot migrate requests"));
  }
  // Destination: reserve blocks for `num_tokens` positions; load a stage; commit
  // (the last stage, then the request runs here and `sink` gets its events); cancel
  // (frees the reservation; unknown ids are ignored).
  virtual void migrate_in_reserve(RequestId id, int32_t num_tokens, StatusDone done) {
    (void)id, (void)num_tokens;
    done(unimplemented_error("this backend cannot take migrated requests"));
  }
  virtual void migrate_in_load(RequestId id, instance::MigrationChunk chunk, StatusDone done) {
    (void)id, (void)chunk;
    done(unimplemented_error("this backend cannot take migrated requests"));
  }
  virtual void migrate_in_commit(instance::MigrationChunk last, instance::EventSink sink, StatusDone done) {
    (void)last, (void)sink;
    done(unimplemented_error("this backend cannot take migrated requests"));
  }
  virtual void migrate_in_cancel(RequestId id) { (void)id; }

  // Scaling (routers): adds an instance (embedded when `address` is empty, else
  // the running instance at `address`) and returns its name; removes one after
  // its requests have finished. UNIMPLEMENTED for a backend of fixed size.
  virtual StatusOr<std::string> add_instance(const std::string& address) {
    (void)address;
    return unimplemented_error("this server runs a fixed set of instances (start it with --instances N or a router)");
  }
  virtual Status remove_instance(const std::string& name) {
    (void)name;
    return unimplemented_error("this server runs a fixed set of instances (start it with --instances N or a router)");
  }

  // Stops taking new requests; running ones continue. Returns at once.
  virtual void begin_drain() = 0;
  // True when no request is queued or running anywhere.
  virtual bool idle() const = 0;
  // Stops every instance; unfinished requests end with "abort". Idempotent.
  virtual void stop() = 0;
};

}  // namespace ecoserve::cluster
