// InstanceCore: one instance's serving logic without a thread — admission,
// sampler seeding, aborts, the scheduler (blocks, prefix cache, preemption) and
// token events — driven one step at a time:
//
//   core.add_request(request, sink, arrival);   // any number, between steps
//   core.abort(id);
//   StepReport r = core.step(now, executor);     // plan -> execute -> events
//
// The live InstanceLoop calls it from its thread with engine::ModelRunner as the
// Executor; the simulator calls it with a cost-model executor and simulated time;
// tests call it with fakes. Like vLLM's EngineCore.step() inside EngineCoreProc.
//
// Owns the requests (through policy::Scheduler) and their event sinks; borrows
// the executor per step. Time comes in as arguments: the core never reads a clock
// and never sleeps. Not thread-safe: one thread owns it. Sinks are called from
// inside add_request/abort/step/abort_all on that thread and must not call back
// into the core. Every added request gets exactly one final event.
#pragma once

#include <cstdint>
#include <memory>
#include <deque>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "base/ids.h"
#include "base/status.h"
#include "base/instance_types.h"
#include "policy/cost_model.h"
#include "policy/scheduler.h"

namespace ecoserve::instance {

// INVALID_ARGUMENT with the OpenAI-style message when a prompt of `prompt_tokens`
// plus `max_tokens` exceeds `max_context`.
Status check_context(int64_t prompt_tokens, int64_t max_tokens, int32_t max_context);

struct InstanceCoreOptions {
  // "prefill-first" | "chunked" | "prefill-only" | "decode-only" (policy::make_instance_policy).
  // With "prefill-only" a request ends after its first token with the final event
  // "prefill_done" and its blocks held for export_held() (disaggregated prefill).
  std::string policy = "chunked";
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t chunk_size = 512;
  bool enable_prefix_caching = true;
  std::string preemption_mode = "recompute";  // | "swap" (the executor's host blocks)
  int32_t vocab_size = 0;                     // prompt token ids must be below this (0 = unchecked)
  std::vector<int32_t> eog_token_ids;         // end-of-generation tokens: finish with "stop"
  uint64_t seed = 0x5eed;                     // seeds requests that bring no seed
  // Predicts step times for the time-aware policies ("temporal"); optional, shared.
  std::shared_ptr<const policy::CostModel> cost_model;
};

// What one step did.
struct StepReport {
  bool ran = false;  // a plan was executed (false: nothing to run, or nothing fits now)
  int32_t num_seqs = 0;
  int64_t num_tokens = 0;  // tokens through the forward pass
  int32_t num_prefill_seqs = 0;
  int32_t num_decode_seqs = 0;
  int64_t prompt_tokens = 0;     // prompt tokens computed (a recomputed request counts again, like vLLM)
  int64_t generated_tokens = 0;  // token events emitted
  int32_t phase = 0;             // the policy's phase after the step (policy::InstancePhase)
  Status error;                  // the executor failed: the plan's requests finished with "error"
};

class InstanceCore {
 public:
  // INVALID_ARGUMENT for an unknown policy or preemption mode or bad sizes. The
  // KV geometry (block size, device and host blocks, context) is the executor's;
  // every executor later passed to step() must have the same geometry.
  static StatusOr<std::unique_ptr<InstanceCore>> create(const InstanceCoreOptions& options, const Executor& geometry);

  // Checks a request against the context and the vocabulary without adding it.
  // Pure (thread-safe): INVALID_ARGUMENT with the OpenAI-style message.
  Status validate(const GenerationRequest& request) const;

  // Queues a request that arrived at `arrival`. A request the scheduler refuses
  // gets its final event ("error") at once.
  void add_request(GenerationRequest request, EventSink sink, TimePoint arrival);
  // Finishes the request with "abort" and frees its blocks (its final event is
  // emitted now). Unknown ids are ignored.
  void abort(std::span<const RequestId> ids);
  // Every request finishes with "abort" (stopping).
  void abort_all();

  // One iteration: admit the prefilled requests whose blocks are free, plan with
  // the policy at `now`, run the plan on `executor`, emit token and final events.
  StepReport step(TimePoint now, Executor& executor);

  // --- KV transfer (disaggregated prefill, FuDG) ---
  // Sending side: the KV of a request that ended with "prefill_done" (its prompt's
  // positions), while its blocks are held. NOT_FOUND when nothing is held for it.
  StatusOr<std::vector<uint8_t>> export_held(RequestId id, const Executor& executor) const;
  // Frees the held blocks once the transfer is complete (or abandoned).
  Status release_held(RequestId id);
  int32_t num_held() const { return static_cast<int32_t>(held_.size()); }
  // Receiving side: a request whose prompt was prefilled elsewhere. `output_tokens`
  // are the tokens already sampled there (at least the first, already emitted to
  // the client), `kv` the exported prompt KV. The request waits in the state
  // "waiting for remote KV" until its blocks are free, is then loaded into its
  // reserved blocks (by step(), on this thread) and decodes from there; its sink
  // sees the tokens after output_tokens. A blob that cannot be imported ends the
  // request with an "error" final event; so does a request that can never fit.
  void add_prefilled_request(GenerationRequest request, std::vector<int32_t> output_tokens, std::vector<uint8_t> kv,
                             EventSink sink, TimePoint arrival);
  int32_t num_waiting_for_kv() const { return static_cast<int32_t>(remote_waiting_.size()); }

  // --- Live migration (llumnix), in stages over block ranges ---
  // Source side (between steps, on the core's thread):
  //  - migrate_out_copy: the KV of positions [begin, computed) of a running request,
  //    which keeps decoding. NOT_FOUND when unknown here, FAILED_PRECONDITION when it
  //    is not running now (queued, preempted, swapped): the migration aborts. The
  //    copy is taken synchronously, so no block is freed or reused while it is read.
  //  - migrate_out_stop: stop-and-copy: suspends it (no more steps, blocks kept),
  //    returns the KV of [begin, computed) and the handover. Its sink stays here.
  //  - migrate_out_finish: committed = the destination continues it: its blocks are
  //    freed and its sink dropped without a final event; else it resumes here.
  StatusOr<MigrationChunk> migrate_out_copy(RequestId id, int32_t begin, const Executor& executor);
  StatusOr<MigrationChunk> migrate_out_stop(RequestId id, int32_t begin, const Executor& executor);
  // The two halves of a stage, for a copy that overlaps with the next steps (the
  // live loop copies on another thread): migrate_out_begin (on the core's thread)
  // checks the request, suspends it when `stop`, and pins the blocks;
  // export_source reads them (any thread: it only reads the executor's KV
  // storage at positions that no step writes any more); migrate_out_unpin (on the
  // core's thread) drops the pins.
  StatusOr<MigrationSource> migrate_out_begin(RequestId id, int32_t begin, bool stop);
  static StatusOr<MigrationChunk> export_source(const MigrationSource& source, const Executor& executor);
  void migrate_out_unpin(const MigrationSource& source);
  Status migrate_out_finish(RequestId id, bool committed);
  // Destination side:
  //  - migrate_in_reserve: reserves blocks for `num_tokens` positions (a request
  //    migrating here). RESOURCE_EXHAUSTED when they are not free.
  //  - migrate_in_load: loads a stage's KV into the reservation (grown to cover it).
  //  - migrate_in_commit: loads the last stage and continues the request from the
  //    handover; `sink` sees the tokens after handover.output_tokens. On error the
  //    reservation stays (migrate_in_cancel frees it) and the sink is not called.
  //  - migrate_in_cancel: frees the reservation (a failed migration). Unknown ids are ignored.
  Status migrate_in_reserve(RequestId id, int32_t num_tokens);
  Status migrate_in_load(RequestId id, const MigrationChunk& chunk, Executor& executor);
  Status migrate_in_commit(const MigrationChunk& last, EventSink sink, Executor& executor);
  void migrate_in_cancel(RequestId id);
  int32_t num_migrating_in() const { return static_cast<int32_t>(migrating_in_.size()); }
  int32_t num_suspended() const { return scheduler_->num_suspended(); }

  bool has_unfinished() const { return scheduler_->has_unfinished() || !remote_waiting_.empty(); }
  int32_t num_tracked() const { return static_cast<int32_t>(tracked_.size()); }
  const policy::Scheduler& scheduler() const { return *scheduler_; }
  int32_t max_context() const { return max_context_; }
  // Status fields the core knows (queues, KV usage, token and cache counters);
  // the loop adds its own (heartbeat, timings).
  void fill_status(InstanceStatus& status) const;

 private:
  struct Tracked {
    EventSink sink;
    TimePoint arrival;
    TimePoint scheduled{};
    bool was_scheduled = false;
    int32_t prompt_tokens = 0;
  };

  struct Held {
    std::vector<BlockId> blocks;
    int32_t num_tokens = 0;  // computed positions (the prompt)
  };
  struct RemoteWaiting {
    GenerationRequest request;
    std::vector<int32_t> output_tokens;
    std::vector<uint8_t> kv;
    TimePoint arrival;
  };

  InstanceCore(std::unique_ptr<policy::Scheduler> scheduler, const InstanceCoreOptions& options, int32_t max_context);
  void admit_remote(Executor& executor);
  void emit_final(RequestId id, const std::string& reason, const policy::FinishedInfo* info, const std::string& error);

  std::unique_ptr<policy::Scheduler> scheduler_;
  InstanceCoreOptions options_;
  int32_t max_context_ = 0;
  std::unordered_map<RequestId, Tracked> tracked_;
  std::unordered_map<RequestId, Held> held_;
  std::deque<RemoteWaiting> remote_waiting_;
  std::unordered_map<RequestId, int32_t> migrating_in_;  // reservations: positions loaded so far  // FIFO: waiting for blocks to load their KV into
  std::mt19937_64 seed_rng_;
  std::vector<policy::SampledToken> sampled_;  // step() scratch
  std::vector<const SeqOutput*> sampled_out_;  // step() scratch: the executor's output of sampled_[i]
  std::vector<uint64_t> stopped_;              // step() scratch: ids ended by a stop token, sorted
  std::vector<Tracked*> step_tracked_;         // step() scratch: tracked_ entry of plan.seqs[i] (or null)
  int64_t prompt_tokens_total_ = 0;
  int64_t generation_tokens_total_ = 0;
};

}  // namespace ecoserve::instance
