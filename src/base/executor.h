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
#include <span>
#include <vector>

#include "base/ids.h"
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

  // KV transfer by token range (disaggregated prefill today; staged migration
  // later): the KV of positions [begin, end) of a sequence whose block table is
  // `blocks`, as a self-describing blob. Called between steps on the executor's
  // thread. Executors that hold no KV contents (the simulator's) return UNIMPLEMENTED.
  virtual StatusOr<std::vector<uint8_t>> export_kv(std::span<const BlockId> blocks, int32_t begin,
                                                   int32_t end) const {
    (void)blocks;
    (void)begin;
    (void)end;
    return unimplemented_error("this executor does not hold KV contents");
  }
  // Writes a blob into the same positions of a sequence whose block table is
  // `blocks` (blocks reserved by the caller). Returns the number of tokens written.
  // FAILED_PRECONDITION when the blob comes from another model, shape, block size
  // or KV type; INVALID_ARGUMENT when it is corrupt or does not fit.
  virtual StatusOr<int32_t> import_kv(std::span<const uint8_t> blob, std::span<const BlockId> blocks) {
    (void)blob;
    (void)blocks;
    return unimplemented_error("this executor does not hold KV contents");
  }
};

}  // namespace ecoserve
