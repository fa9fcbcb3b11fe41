// SimInstance: one serving instance in simulated time — the live
// instance::InstanceCore (admission, policy, scheduler, block allocator, prefix
// cache, preemption, KV transfer and migration paths) driven by a
// CostModelExecutor on a SimRuntime, the way instance::InstanceLoop drives it
// with the engine on a thread.
//
// Time model. A step starts when the instance is free and has work: the core
// plans at that instant and "runs" the plan, and the executor says how long it
// took; the step's token and final events are delivered at its end (when a live
// loop would emit them), and the next step starts then. Work posted with post()
// (KV loads, migration stages: what the live loop takes from its queue between
// steps) runs at the next step boundary, or at once when idle. A core with
// unfinished requests that cannot run anything now (blocks held by transfers,
// a policy waiting) is tried again when something changes here (a request, an
// abort, posted work) and otherwise after idle_poll.
//
// Owns its core and executor; borrows the runtime. Events go to one handler
// (the cluster's), with this instance's id. Single-threaded: the simulation's
// thread calls everything.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/instance_types.h"
#include "instance/instance_core.h"
#include "sim/cost_model_executor.h"
#include "sim/sim_runtime.h"

namespace ecoserve::sim {

// Instances that share one host's memory system (CPU deployments: every instance of
// a node) slow each other down. A step's cost-model time is multiplied by `alone`
// when no other instance of the host is mid-step as it starts, else by `shared`.
// Owned by the cluster; the instances count their running steps in `busy`.
struct SimHost {
  double alone = 1.0;
  double shared = 1.0;
  int32_t busy = 0;  // instances of the host mid-step
};

struct SimInstanceOptions {
  std::string name;
  SimHost* host = nullptr;  // nullptr: the step times as the cost model gives them
  instance::InstanceCoreOptions core;
  CostModelExecutorOptions executor;
  Duration idle_poll = std::chrono::milliseconds(1);
  bool record_steps = false;  // keep a StepRecord per step (timeline)
};

struct SimInstanceCounters {
  int64_t steps = 0;
  double busy_seconds = 0.0;
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
};

class SimInstance {
 public:
  using EventHandler = std::function<void(InstanceId, const instance::TokenEvent&)>;

  // INVALID_ARGUMENT for bad core options or geometry.
  static StatusOr<std::unique_ptr<SimInstance>> create(InstanceId id, SimInstanceOptions options,
                                                       std::shared_ptr<const policy::CostModel> cost_model,
                                                       SimRuntime& runtime, EventHandler on_event);

  InstanceId id() const { return id_; }
  const std::string& name() const { return options_.name; }

  // Queues a request now (the live InstanceLoop::submit).
  void add_request(instance::GenerationRequest request);
  void abort(RequestId id);
  // fudg, decode side: a request prefilled elsewhere (its KV arrived).
  void add_prefilled_request(instance::GenerationRequest request, std::vector<int32_t> output_tokens,
                             std::vector<uint8_t> kv);
  // Runs `fn` with the core and executor at the next step boundary (at once when idle).
  void post(std::function<void(instance::InstanceCore&, Executor&)> fn);

  // The sink a request running here reports through (migrate_in_commit needs it).
  instance::EventSink event_sink() { return sink(); }
  instance::InstanceCore& core() { return *core_; }
  const instance::InstanceCore& core() const { return *core_; }
  const CostModelExecutor& executor() const { return executor_; }
  bool busy() const { return busy_; }
  // Free blocks and phase as a status snapshot shows them.
  int32_t num_free_blocks() const { return core_->scheduler().num_free_blocks(); }
  int32_t num_total_blocks() const { return executor_.num_kv_blocks(); }
  int32_t phase() const;
  TimePoint last_phase_switch() const;
  const SimInstanceCounters& counters() const { return counters_; }
  const std::vector<instance::StepRecord>& steps() const { return steps_; }

 private:
  SimInstance(InstanceId id, SimInstanceOptions options, std::shared_ptr<const policy::CostModel> cost_model,
              SimRuntime& runtime, EventHandler on_event);
  instance::EventSink sink();
  void kick();            // schedules a step attempt now unless one is pending or a step runs
  void try_step();        // the step attempt
  void finish_step();     // the running step ends: deliver, run posted work, next step
  void deliver(std::vector<instance::TokenEvent>& events);
  void schedule_flush();  // delivers immediate_ at now, from the event loop

  InstanceId id_;
  SimInstanceOptions options_;
  SimRuntime& runtime_;
  EventHandler on_event_;
  CostModelExecutor executor_;
  std::unique_ptr<instance::InstanceCore> core_;
  std::vector<instance::TokenEvent> buffer_;     // events of the running step
  std::vector<instance::TokenEvent> immediate_;  // events outside a step (rejections, aborts)
  std::vector<instance::TokenEvent> delivering_;  // the finished step's events being delivered
  bool in_step_ = false;
  bool flush_pending_ = false;
  std::vector<std::function<void(instance::InstanceCore&, Executor&)>> posted_;
  bool busy_ = false;             // a step is running
  bool attempt_pending_ = false;  // try_step is scheduled
  SimRuntime::EventId poll_event_ = 0;
  bool poll_pending_ = false;
  SimInstanceCounters counters_;
  std::vector<instance::StepRecord> steps_;
};

}  // namespace ecoserve::sim
