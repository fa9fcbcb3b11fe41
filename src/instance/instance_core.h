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
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "base/ids.h"
#include "base/status.h"
#include "instance/instance_types.h"
#include "policy/scheduler.h"

namespace ecoserve::instance {

struct InstanceCoreOptions {
  std::string policy = "chunked";  // "prefill-first" | "chunked" (policy::make_instance_policy)
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t chunk_size = 512;
  bool enable_prefix_caching = true;
  std::string preemption_mode = "recompute";  // | "swap" (the executor's host blocks)
  int32_t vocab_size = 0;                     // prompt token ids must be below this (0 = unchecked)
  std::vector<int32_t> eog_token_ids;         // end-of-generation tokens: finish with "stop"
  uint64_t seed = 0x5eed;                     // seeds requests that bring no seed
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

  // One iteration: plan with the policy at `now`, run the plan on `executor`,
  // emit token and final events.
  StepReport step(TimePoint now, Executor& executor);

  bool has_unfinished() const { return scheduler_->has_unfinished(); }
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

  InstanceCore(std::unique_ptr<policy::Scheduler> scheduler, const InstanceCoreOptions& options, int32_t max_context);
  void emit_final(RequestId id, const std::string& reason, const policy::FinishedInfo* info, const std::string& error);

  std::unique_ptr<policy::Scheduler> scheduler_;
  InstanceCoreOptions options_;
  int32_t max_context_ = 0;
  std::unordered_map<RequestId, Tracked> tracked_;
  std::mt19937_64 seed_rng_;
  std::vector<policy::SampledToken> sampled_;  // step() scratch
  int64_t prompt_tokens_total_ = 0;
  int64_t generation_tokens_total_ = 0;
};

}  // namespace ecoserve::instance
