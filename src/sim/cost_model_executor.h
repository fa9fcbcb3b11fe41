// CostModelExecutor: the simulator's Executor. It runs no model: for each
// StepPlan it computes the step's shape (prefill chunks and decodes with their
// contexts), asks a policy::CostModel how long that step takes, remembers the
// answer for the caller (SimInstance advances simulated time by it) and
// "samples" token `sample_token` for every sequence that samples. It holds no
// KV contents: export_kv returns a 12-byte descriptor of the positions it
// stands for (the bytes a real transfer moves are the caller's to compute from
// the model's KV bytes per token), import_kv checks and accepts such a
// descriptor, so InstanceCore's transfer and migration paths run unchanged.
//
// Swaps (preemption by swapping to host memory) are charged at
// host_bytes_per_second over the blocks moved. Not thread-safe: one thread (the
// simulation's) calls it, like every Executor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "base/executor.h"
#include "policy/cost_model.h"

namespace ecoserve::sim {

struct CostModelExecutorOptions {
  int32_t block_size = 16;
  int32_t num_kv_blocks = 0;
  int32_t num_host_blocks = 0;
  int32_t max_context = 4096;
  int64_t kv_bytes_per_token = 0;     // for swap time (0: swaps are free)
  double host_bytes_per_second = 25e9;  // device <-> host copies (swap)
  double step_overhead_seconds = 0.0;   // added to every step that runs (scheduling, launch)
  int32_t sample_token = 1;           // the token every sampled sequence "generates"
  // Sees every plan before it is costed (tests compare plans with a live run's).
  std::function<void(const StepPlan&)> on_plan;
};

// The shape of a plan as a cost model sees it. A sequence is a decode when it
// runs one token at the end of a request that already has output tokens;
// anything else (prompt chunks, recomputation after preemption) is prefill.
policy::StepShape step_shape(const StepPlan& plan);

class CostModelExecutor final : public Executor {
 public:
  CostModelExecutor(CostModelExecutorOptions options, std::shared_ptr<const policy::CostModel> cost_model);

  StatusOr<StepOutput> execute(const StepPlan& plan) override;
  int32_t block_size() const override { return options_.block_size; }
  int32_t num_kv_blocks() const override { return options_.num_kv_blocks; }
  int32_t num_host_blocks() const override { return options_.num_host_blocks; }
  int32_t max_context() const override { return options_.max_context; }
  StatusOr<std::vector<uint8_t>> export_kv(std::span<const BlockId> blocks, int32_t begin,
                                           int32_t end) const override;
  StatusOr<int32_t> import_kv(std::span<const uint8_t> blob, std::span<const BlockId> blocks) override;

  // Seconds the last execute() took in simulated time, and its shape.
  double last_seconds() const { return last_seconds_; }
  const policy::StepShape& last_shape() const { return last_shape_; }
  const policy::CostModel& cost_model() const { return *cost_model_; }

 private:
  CostModelExecutorOptions options_;
  std::shared_ptr<const policy::CostModel> cost_model_;
  double last_seconds_ = 0.0;
  policy::StepShape last_shape_;
};

// A CostModel charging fixed seconds per step part, for golden tests:
// step = fixed + prefill_token x prefill_tokens + decode_seq x decode_seqs (0 when empty).
class ConstantCostModel final : public policy::CostModel {
 public:
  ConstantCostModel(double fixed_seconds, double per_prefill_token_seconds, double per_decode_seq_seconds)
      : fixed_(fixed_seconds), per_prefill_token_(per_prefill_token_seconds), per_decode_seq_(per_decode_seq_seconds) {}
  double step_seconds(const policy::StepShape& s) const override;
  std::string_view name() const override { return "constant"; }

 private:
  double fixed_, per_prefill_token_, per_decode_seq_;
};

}  // namespace ecoserve::sim
