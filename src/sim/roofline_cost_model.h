// RooflineCostModel: step times of any ModelSpec on any GpuSpec from FLOPs and
// bytes, for the GPUs and models no profile covers.
//
// One step is one forward pass of every layer plus lm_head on the sampled rows
// (one per prefill sequence - every prefill chunk is assumed to end its prompt -
// and one per decode). With T = prefill_tokens + decode_seqs rows, a layer on one
// GPU of a tp-way shard (nh = heads/tp, kv = ceil(kv_heads/tp), f = ffn/tp,
// d = head_dim, b = dtype_bytes, h = hidden) runs these operators:
//
//   qkv          GEMM T x h x (nh + 2 kv) d
//   attn_prefill n sequences of q = P/n new tokens over c = C/n cached ones (means
//                of the step's P prefill tokens and C context tokens):
//                FLOPs 4 d nh n q (c + q/2), bytes b (2 P nh d + (C + P) 2 kv d)
//   attn_decode  B sequences over K_sum context tokens in all:
//                FLOPs 4 d nh K_sum,         bytes b (2 B nh d + K_sum 2 kv d)
//   o            GEMM T x nh d x h
//   mlp_up       GEMM T x h x 2f (gated) or T x h x f
//   mlp_down     GEMM T x f x h
//   elementwise  two norms, two residual adds, the activation: bytes
//                elementwise_traffic x b T (2 x 2h + 2 x 3h + 3f (gated) or 2f)
//
// A GEMM M x K x N does 2MKN FLOPs and moves b (KN + MK + MN) bytes (weights read
// once per step, activations in and out). Each operator takes
//
//   max(FLOPs / (peak_flops x ce(tokens)), bytes / (hbm_bytes_per_s x memory_efficiency))
//   ce(tokens) = compute_efficiency_max x (1 - exp(-tokens / compute_efficiency_tokens))
//
// (tokens: T for the GEMMs, P for prefill attention, B for decode attention) and a
// layer adds layer_overhead_seconds (kernel gaps and the small kernels the FLOP and
// byte counts miss). Tensor parallelism adds two ring all-reduces of T x h x b
// bytes per layer (gpu_spec.h's ring_allreduce_seconds). lm_head is a GEMM of the
// sampled rows R x h x ceil(vocab/tp) (the logits gather is not counted).
//
// Pipeline parallelism: the layers are split over pp stages and each stage hands
// T x h x b bytes of activations to the next (send_seconds). The simulator runs
// one step at a time per instance, so a step's latency is the sum over the stages
// (every layer, then lm_head, plus pp - 1 sends) and while one stage works the
// others idle: the pipeline bubble is (pp - 1)/pp of each GPU's time. pp therefore
// buys memory (kv_capacity_tokens), never speed, in this model.
//
// Calibration: the defaults below were fitted by calibrate_roofline()
// (gpu_profile_cost_model.h) to the H100 profile predictor's layer times over 745
// step shapes of the 9 profiled (model, tp) pairs; see docs/cost_models.md for the
// fit and its error (mean 3.9%, max 14.7% on layer_mixed.csv's CUDA-graph column). The profile's layers run
// eager-PyTorch norms and activations (several unfused kernels each): that is why elementwise traffic is ~5x the fused
// minimum; use 1 for an engine with fused kernels.
//
// Immutable after create(); const methods may be called from any thread.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "policy/cost_model.h"
#include "sim/gpu_spec.h"
#include "sim/model_spec.h"

namespace ecoserve::sim {

// Fitted by calibrate_roofline() on ../shared/data/profiles/h100-bf16 (H100 SXM,
// bf16, PyTorch 2.11, CUDA-graph-corrected): least squares of log(roofline /
// profile predictor) over 745 one-layer shapes; rms log error 0.055, mean |error|
// 4.3%, max 15.1% against the predictor. The fit gave 0.8525, 162.75 tokens,
// 0.9219, 97.19 us and 5.313; the test checks these stay within 3% of a re-fit.
inline constexpr double kRooflineComputeEfficiencyMax = 0.85;
inline constexpr double kRooflineComputeEfficiencyTokens = 163.0;
inline constexpr double kRooflineMemoryEfficiency = 0.922;
inline constexpr double kRooflineLayerOverheadSeconds = 97.2e-6;
inline constexpr double kRooflineElementwiseTraffic = 5.31;

struct RooflineOptions {
  double compute_efficiency_max = kRooflineComputeEfficiencyMax;        // (0, 1]
  double compute_efficiency_tokens = kRooflineComputeEfficiencyTokens;  // > 0
  double memory_efficiency = kRooflineMemoryEfficiency;                 // (0, 1]
  double layer_overhead_seconds = kRooflineLayerOverheadSeconds;        // >= 0
  double elementwise_traffic = kRooflineElementwiseTraffic;             // > 0
};

// One operator of a layer (or lm_head) on one GPU.
struct RooflineOp {
  std::string_view name;  // "qkv", "attn_prefill", "attn_decode", "o", "mlp_up", "mlp_down", "elementwise", "lm_head"
  double tokens = 0.0;    // the size its compute efficiency is looked up at
  double flops = 0.0;
  double bytes = 0.0;  // for "elementwise", the fused minimum (times elementwise_traffic when timed)
  bool elementwise = false;
};

// Seconds of one operator under `options` on `gpu`; *compute_bound (when given)
// says whether the FLOP term was the larger.
double roofline_op_seconds(const RooflineOp& op, const GpuSpec& gpu, const RooflineOptions& options,
                           bool* compute_bound = nullptr);

struct RooflineOpTime {
  RooflineOp op;
  double seconds = 0.0;  // one layer (or lm_head once)
  bool compute_bound = false;
};

// Where the time of one step goes. total = compute + memory + overhead + tp_comm + pp_comm.
struct RooflineBreakdown {
  std::vector<RooflineOpTime> layer_ops;  // one layer on one GPU, then lm_head
  double compute_seconds = 0.0;           // operators whose FLOP term won, over all layers, + lm_head if so
  double memory_seconds = 0.0;            // operators whose byte term won, likewise
  double overhead_seconds = 0.0;          // layers x layer_overhead_seconds
  double tp_comm_seconds = 0.0;           // layers x 2 all-reduces
  double pp_comm_seconds = 0.0;           // (pp - 1) stage-to-stage sends
  double total_seconds = 0.0;
  double flops = 0.0;  // per GPU, whole step
  double bytes = 0.0;  // per GPU, whole step (elementwise counted with its traffic factor)
};

class RooflineCostModel final : public policy::CostModel {
 public:
  // INVALID_ARGUMENT for an invalid model or GPU, a layout validate_parallelism()
  // rejects (tp not dividing heads / ffn, tp and kv heads not dividing one
  // another, pp > layers), or options out of range.
  static StatusOr<std::unique_ptr<RooflineCostModel>> create(ModelSpec model, GpuSpec gpu, Parallelism par = {},
                                                             RooflineOptions options = {});

  double step_seconds(const policy::StepShape& shape) const override;
  std::string_view name() const override { return "roofline"; }

  RooflineBreakdown breakdown(const policy::StepShape& shape) const;
  // The operators of one layer of this step on one GPU (empty for an empty step).
  std::vector<RooflineOp> layer_ops(const policy::StepShape& shape) const;
  // lm_head over `rows` sampled rows.
  RooflineOp lm_head_op(int64_t rows) const;
  // One layer on one GPU: its operators plus layer_overhead_seconds; no communication.
  double layer_seconds(const policy::StepShape& shape) const;
  double compute_efficiency(double tokens) const;

  const ModelSpec& model() const { return model_; }
  const GpuSpec& gpu() const { return gpu_; }
  Parallelism parallelism() const { return par_; }
  const RooflineOptions& options() const { return options_; }

 private:
  static constexpr size_t kMaxLayerOps = 7;
  // breakdown(), with its per-operator list only when `with_ops`.
  RooflineBreakdown totals(const policy::StepShape& shape, bool with_ops) const;
  // layer_ops() into out[0, kMaxLayerOps) without allocating; returns the count.
  size_t fill_layer_ops(const policy::StepShape& shape, RooflineOp* out) const;
  RooflineCostModel(ModelSpec model, GpuSpec gpu, Parallelism par, RooflineOptions options)
      : model_(std::move(model)), gpu_(std::move(gpu)), par_(par), options_(options) {}

  ModelSpec model_;
  GpuSpec gpu_;
  Parallelism par_;
  RooflineOptions options_;
};

}  // namespace ecoserve::sim
