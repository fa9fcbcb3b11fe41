// GpuSpec: the datasheet numbers of one GPU type that the simulator's cost models
// and memory planning use, plus the parallel layout of an instance (Parallelism)
// and what follows from both: how many tokens of KV cache fit, how long a ring
// all-reduce or a pipeline-stage send takes.
//
// Presets quote vendor datasheets (dense bf16 Tensor Core FLOP/s: the "with
// sparsity" figure halved). Memory sizes: the datasheet's "80GB"/"48GB"/"141GB"
// taken as GiB, which is what the driver reports for the 80 GB parts (81920 MiB
// on an A100 80GB). Link bandwidth: per GPU, per direction (NVIDIA quotes NVLink
// as the bidirectional sum: 900 GB/s on H100 = 450 GB/s each way). Per-hop link
// latencies are assumptions (NCCL small-message all-reduce latencies of a few
// microseconds per ring step on NVLink); the profile has no multi-GPU data.
//
// Plain value types; the functions are pure and may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/model_spec.h"

namespace ecoserve::sim {

struct GpuSpec {
  std::string name;
  double peak_flops = 0.0;       // dense bf16 Tensor Core FLOP/s
  double hbm_bytes_per_s = 0.0;  // device memory bandwidth
  int64_t memory_bytes = 0;
  std::string intra_link;                 // "nvlink" | "pcie": how GPUs of one node talk
  double intra_link_bytes_per_s = 0.0;    // per GPU, per direction
  double intra_link_hop_latency_s = 0.0;  // one ring step / one send (assumed, see above)
};

// OK when every number is positive and intra_link is "nvlink" or "pcie".
Status validate_gpu_spec(const GpuSpec& gpu);

// Case-insensitive; INVALID_ARGUMENT listing the known names otherwise.
StatusOr<GpuSpec> gpu_preset(std::string_view name);
std::vector<std::string> gpu_preset_names();

// How one instance spreads a model: tensor parallel over `tp` GPUs (Megatron:
// heads, kv heads and ffn split, two all-reduces per layer) and pipeline parallel
// over `pp` stages (layers split, activations sent between stages).
struct Parallelism {
  int32_t tp = 1;
  int32_t pp = 1;
  int32_t gpus() const { return tp * pp; }
};

// INVALID_ARGUMENT unless tp >= 1 divides heads and ffn, tp and kv_heads divide
// one another (kv heads are split, or replicated when tp > kv_heads), and
// 1 <= pp <= layers.
Status validate_parallelism(const ModelSpec& model, Parallelism par);

// Per GPU of the instance (the fullest pipeline stage): KV heads, layers, weight bytes.
int32_t kv_heads_per_gpu(const ModelSpec& model, Parallelism par);  // ceil(kv_heads / tp)
int32_t layers_per_stage(const ModelSpec& model, Parallelism par);  // ceil(layers / pp)
// ceil(layers / pp) layers / tp, plus the embedding-sized matrices / tp: both
// (embedding and lm_head, once when tied) when pp == 1, else one (the first stage
// holds the embedding, the last the lm_head).
int64_t weight_bytes_per_gpu(const ModelSpec& model, Parallelism par);

// Memory every GPU keeps for activations, CUDA graphs and communication buffers
// on top of weights and KV (what vLLM's profiling run finds for a step of a few
// thousand tokens on these models, rounded up).
inline constexpr int64_t kActivationReserveBytesPerGpu = int64_t{1} << 30;

// Tokens of KV cache the instance holds: per GPU, memory_bytes * memory_fraction
// minus weight_bytes_per_gpu minus kActivationReserveBytesPerGpu, divided by the
// KV bytes one token takes on that GPU (2 * kv_heads_per_gpu * head_dim *
// dtype_bytes * layers_per_stage); every GPU of the instance holds the same
// tokens. RESOURCE_EXHAUSTED saying how much memory the weights need and how many
// GPUs would hold them when nothing is left for KV; INVALID_ARGUMENT for a bad
// model, GPU, layout or memory_fraction outside (0, 1].
StatusOr<int64_t> kv_capacity_tokens(const ModelSpec& model, const GpuSpec& gpu, Parallelism par,
                                     double memory_fraction = 0.9);

// Ring all-reduce of `bytes` over `ranks` GPUs on the intra-node link:
// 2 * (ranks - 1) / ranks * bytes / intra_link_bytes_per_s
// + 2 * (ranks - 1) * intra_link_hop_latency_s; 0 for ranks <= 1.
double ring_allreduce_seconds(double bytes, int32_t ranks, const GpuSpec& gpu);
// One point-to-point send (a pipeline stage handing its activations on):
// bytes / intra_link_bytes_per_s + intra_link_hop_latency_s.
double send_seconds(double bytes, const GpuSpec& gpu);

}  // namespace ecoserve::sim
