// Executor: what runs a StepPlan. engine::ModelRunner runs it on the CPU with a
// real model; the simulator's cost model predicts its duration; tests use fakes.
// instance::InstanceCore drives any of them, so the same admission, scheduling
// and event code serves the live server and the simulator.
//
// An executor owns the KV cache's storage (device blocks [0, num_kv_blocks) and
// host blocks [0, num_host_blocks)); which block holds what is decided by the
// scheduler and carried by the plan. Called from one thread at a time.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "base/step_plan.h"

namespace ecoserve {

class Executor {
 public:
  virtual ~Executor() = default;

  // Runs the plan: swaps and copies, then one forward pass; samples a token for
  // every sequence marked `sample`. INVALID_ARGUMENT for a plan that does not fit.
  virtual StatusOr<StepOutput> execute(const StepPlan& plan) = 0;

  virtual int32_t block_size() const = 0;       // tokens per KV block
  virtual int32_t num_kv_blocks() const = 0;    // device blocks
  virtual int32_t num_host_blocks() const = 0;  // host (swap) blocks
  virtual int32_t max_context() const = 0;      // tokens per sequence at most
};

}  // namespace ecoserve
