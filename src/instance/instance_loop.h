// InstanceLoop: one serving instance on its own thread — an InstanceCore and an
// Executor (engine::ModelRunner live) stepped in a loop, with a queue in front
// (plan -> execute -> emit token events, step after step: iteration-level
// scheduling), like vLLM's EngineCoreProc around EngineCore.
//
// Thread-safety: submit(), cancel(), status() and the lifecycle calls may be
// called from any thread; requests reach the loop thread through a queue.
// Event sinks are invoked ON THE LOOP THREAD and must not block (post the event
// to your own executor). Every submitted request gets exactly one final event
// (finished = true), also when cancelled or when the loop stops.
// The clock is injected; the thread waits on a condition variable (woken by
// submissions and cancels, or every idle_heartbeat to publish its heartbeat).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "base/ids.h"
#include "base/status.h"
#include "instance/instance_core.h"
#include "base/instance_types.h"

namespace ecoserve::instance {

struct InstanceOptions {
  std::string policy = "chunked";  // "prefill-first" | "chunked"
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t chunk_size = 512;
  int32_t max_waiting = 256;  // submit() fails with RESOURCE_EXHAUSTED beyond this
  bool enable_prefix_caching = true;
  std::string preemption_mode = "recompute";  // | "swap" (the executor's host blocks)
  int32_t vocab_size = 0;                     // prompt ids must be below this (0 = unchecked)
  std::vector<int32_t> eog_token_ids;         // the model's end-of-generation tokens
  Duration idle_heartbeat = from_ms(200);     // how often an idle loop wakes to beat
  int32_t timeline_capacity = 20000;          // steps kept for timeline() (a ring)
  StepObserver on_step;                       // called on the loop thread after every step (optional)
  // Predicts step times for the time-aware policies ("temporal", padg); optional, shared.
  std::shared_ptr<const policy::CostModel> cost_model;

  InstanceCoreOptions core_options() const;
};

class InstanceLoop {
 public:
  static StatusOr<std::unique_ptr<InstanceLoop>> create(std::unique_ptr<Executor> executor,
                                                        const InstanceOptions& options, const Clock* clock);
  ~InstanceLoop();  // stops the thread; pending requests get a final "abort" event

  void start();
  // Stops taking new requests; running and waiting ones continue. Returns at once.
  void begin_drain();
  // True when no request is waiting, running, or suspended or arriving for a migration.
  bool idle() const;
  // Stops the thread; every unfinished request gets a final "abort" event.
  void stop();

  // RESOURCE_EXHAUSTED when the waiting queue is at max_waiting, UNAVAILABLE when
  // draining/stopped, INVALID_ARGUMENT when prompt + max_tokens exceeds the context.
  Status submit(GenerationRequest request, EventSink sink);
  // The request finishes with "abort" at the next step and its blocks are freed.
  void cancel(RequestId id);

  // Runs `task` on the loop thread between steps, with the core and the executor
  // (KV export/import for disaggregation, migration stages). Tasks run in order;
  // tasks still queued when the loop stops run on the stopping thread, so every
  // accepted task runs exactly once. Returns false (the task is dropped, never
  // run) once stop() has begun. Tasks must not block.
  using CoreTask = std::function<void(InstanceCore&, Executor&)>;
  bool post(CoreTask task);
  // Continues a request prefilled on another instance (InstanceCore::add_prefilled_request).
  // UNAVAILABLE when stopped.
  Status submit_prefilled(GenerationRequest request, std::vector<int32_t> output_tokens, std::vector<uint8_t> kv,
                          EventSink sink);
  // Test hook: the loop thread blocks for `d` as a hung engine would (no steps, no
  // heartbeat), while everything around it keeps answering.
  void freeze_for_testing(Duration d);

  InstanceStatus status() const;
  // The steps that started at or after `since`, oldest first (at most timeline_capacity).
  std::vector<StepRecord> timeline(TimePoint since) const;
  int32_t max_context() const;
  const InstanceOptions& options() const;

 private:
  struct Impl;
  explicit InstanceLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ecoserve::instance
