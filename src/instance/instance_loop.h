// InstanceLoop: one serving instance. Owns one engine::ModelRunner and one
// policy::Scheduler and runs them on its own thread: plan -> execute -> emit
// token events, step after step (iteration-level scheduling).
//
// Thread-safety: submit(), cancel(), status() and the lifecycle calls may be
// called from any thread; requests reach the loop thread through a queue.
// Event sinks are invoked ON THE LOOP THREAD and must not block (post the event
// to your own executor). Every submitted request gets exactly one final event
// (finished = true), also when cancelled or when the loop stops.
// The clock is injected.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "engine/model_runner.h"
#include "policy/sampling_params.h"

namespace ecoserve::instance {

struct GenerationRequest {
  RequestId id;
  std::vector<int32_t> prompt;       // token ids, BOS included when wanted
  policy::SamplingParams sampling;   // max_tokens, stop ids, seed, logprobs...
  int32_t priority = 0;              // higher runs first under pressure
};

// One event per generated token, plus the final one.
struct TokenEvent {
  RequestId id;
  int32_t token = -1;                // -1 on a final event that carries no token
  float logprob = 0.0f;
  std::vector<engine::TokenLogprob> top_logprobs;
  bool finished = false;
  std::string finish_reason;         // "stop" | "length" | "abort" | "error" (final event only)
  std::string error;                 // when finish_reason == "error"
  int32_t prompt_tokens = 0;         // on the final event
  int32_t cached_prompt_tokens = 0;  // prefix-cache hit, on the final event
  TimePoint scheduled_time;          // when the request was first scheduled (queue time = this - arrival)
};

using EventSink = std::function<void(const TokenEvent&)>;

struct InstanceStatus {
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  int32_t num_swapped = 0;
  double kv_usage = 0.0;             // fraction of KV blocks in use (cached-but-free blocks count as free)
  TimePoint last_heartbeat;          // the loop thread's last pass (idle or busy)
  bool running = false;              // loop thread alive and not stopped
  int64_t steps = 0;
  double last_step_seconds = 0.0;
  double mean_step_seconds = 0.0;    // recent
  double mean_plan_seconds = 0.0;    // recent scheduler time per step
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t prefix_cache_queries = 0;  // tokens
  int64_t prefix_cache_hits = 0;     // tokens
  int64_t preemptions = 0;
};

// Measurements of one step, for metrics and the scheduler-overhead benchmark.
struct StepStats {
  double plan_seconds = 0.0;     // Scheduler::schedule()
  double execute_seconds = 0.0;  // ModelRunner::execute()
  int32_t num_seqs = 0;
  int64_t num_tokens = 0;        // tokens through the forward pass
  int32_t num_prefill_seqs = 0;
  int32_t num_decode_seqs = 0;
};
using StepObserver = std::function<void(const StepStats&)>;

struct InstanceOptions {
  std::string policy = "chunked";    // "prefill-first" | "chunked"
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t chunk_size = 512;
  int32_t max_waiting = 256;         // submit() fails with RESOURCE_EXHAUSTED beyond this
  bool enable_prefix_caching = true;
  std::string preemption_mode = "recompute";  // | "swap" (host blocks: EngineOptions::num_host_blocks)
  Duration idle_heartbeat = from_ms(200);   // how often an idle loop wakes to beat
  StepObserver on_step;              // called on the loop thread after every step (optional)
};

class InstanceLoop {
 public:
  static StatusOr<std::unique_ptr<InstanceLoop>> create(std::unique_ptr<engine::ModelRunner> runner,
                                                        const InstanceOptions& options, const Clock* clock);
  ~InstanceLoop();  // stops the thread; pending requests get a final "abort" event

  void start();
  // Stops taking new requests; running and waiting ones continue. Returns at once.
  void begin_drain();
  // True when no request is waiting or running.
  bool idle() const;
  // Stops the thread; every unfinished request gets a final "abort" event.
  void stop();

  // RESOURCE_EXHAUSTED when the waiting queue is at max_waiting, UNAVAILABLE when
  // draining/stopped, INVALID_ARGUMENT when prompt + max_tokens exceeds the context.
  Status submit(GenerationRequest request, EventSink sink);
  // The request finishes with "abort" at the next step and its blocks are freed.
  void cancel(RequestId id);

  InstanceStatus status() const;
  const engine::ModelRunner& runner() const;
  const InstanceOptions& options() const;

 private:
  struct Impl;
  explicit InstanceLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ecoserve::instance
