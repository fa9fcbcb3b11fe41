// ModelRunner: executes one StepPlan as one batched forward pass.
//
// Owns the KV cache tensors (per layer, K and V in blocks of block_size tokens,
// float32 or fp16, [block][token][kv_head][head_dim]), a thread pool and scratch
// buffers; shares the read-only LlamaModel. A plan mixes prefill chunks of any
// length (continuing after tokens already cached) and single decode tokens for
// many sequences: all tokens go through the linear layers together (weights are
// read once per step), attention reads each sequence's K/V through its block
// table (paged attention), causal within a chunk. Sequences marked `sample` get
// a sampled token (and logits when asked).
// The plan is the only input: the runner keeps no per-sequence state. It is the
// live Executor (base/executor.h).
// Not thread-safe: one instance loop thread calls it. Several runners (with
// their own pools) can live in one process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/executor.h"
#include "base/ids.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/sampler.h"
#include "engine/step_phases.h"
#include "kernels/attention.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "model/llama_model.h"
#include "base/step_plan.h"

namespace ecoserve::engine {

// Element type of the KV cache. F32 (the default) keeps attention exact
// against the float reference; F16 halves the cache's memory and the bytes
// decode attention reads (values rounded to nearest-even fp16 when written,
// widened exactly when read; llama.cpp's default cache type and vLLM's for
// fp16 models).
enum class KvCacheType { kF32, kF16 };
const char* kv_cache_type_name(KvCacheType t);  // "f32" | "f16"
// INVALID_ARGUMENT naming the accepted values for anything but "f32" / "f16".
StatusOr<KvCacheType> parse_kv_cache_type(std::string_view name);

struct EngineOptions {
  int32_t num_threads = 0;            // 0 = all hardware threads
  int32_t block_size = 16;            // tokens per KV block
  int64_t kv_cache_bytes = 256ll << 20;  // KV memory budget; sets the number of blocks
  int32_t num_kv_blocks = 0;          // > 0 overrides kv_cache_bytes
  int32_t max_context = 0;            // 0 = the model's training context
  int32_t num_host_blocks = 0;        // host-memory swap pool (StepPlan::swap_out / swap_in)
  KvCacheType kv_cache_type = KvCacheType::kF32;
  // Kernel path (kernels/cpu_features.h): default the best this CPU has, capped by ECOSERVE_ISA.
  kernels::Isa isa = kernels::default_isa();
  // kernels::KernelContext::amx_bf16 and kernels::AttentionDims::amx_bf16: batches of 32+
  // tokens through the linear layers, and prompt chunks of 32+ tokens through attention, on
  // AMX bf16 tiles where the CPU has them (faster prompts, not the bits of batch 1).
  // Default: ECOSERVE_AMX_BF16 (unset: on; false where a caller needs every batch to give
  // the bits of batch 1).
  bool amx_bf16 = kernels::default_amx_bf16();
  // kernels::AttentionDims::fp16_math: decode attention of an fp16 cache multiplies V (and,
  // for GQA groups of 4 and 8, scores) in half precision where the CPU has AVX512-FP16. Default:
  // ECOSERVE_ATTENTION_FP16_MATH (unset: on).
  bool attention_fp16_math = kernels::default_attention_fp16_math();
  // kernels::AttentionDims::bf16_vectors: prompt chunks of 32+ tokens through attention on
  // AVX512-BF16 vectors at the avx512vnni-zmm level (faster prompts; the query, K, V and the
  // softmax weights rounded to bf16, as amx_bf16's tiles do), and AttentionDims::bf16_scores:
  // decode of fp16 caches with GQA groups of 8 scores on vdpbf16ps (the query and K rounded to
  // bf16). Default: ECOSERVE_ATTENTION_BF16 (unset: on where CpuFeatures::fast_bf16_dot).
  bool attention_bf16 = kernels::default_attention_bf16();
  // kernels::KernelContext::bf16_vectors: batches of 32+ tokens through the linear layers of
  // F32, F16, BF16 and Q6_K weights on AVX512-BF16 vectors at the avx512vnni-zmm level
  // (faster prompts; weights and activations rounded to bf16). Default: ECOSERVE_MATMUL_BF16
  // (unset: on where CpuFeatures::fast_bf16_dot; false where a caller needs every batch to give
  // the bits of batch 1).
  bool matmul_bf16 = kernels::default_matmul_bf16();
  // kernels::Bf16WeightTiles: every matrix the bf16 tiles take made into their bf16 B tiles
  // once, at create(), instead of on every call of 8-32+ tokens (the same bits; 2 more bytes
  // per weight: a Q8_0 model's memory about 3x, an F16 one's 2x). kOn needs amx_bf16 on a CPU
  // with AMX-BF16 at the avx512amx level (else create() fails with FAILED_PRECONDITION);
  // kAuto makes them there when they fit bf16_weights_share of the memory available at
  // create() less kv_cache_bytes (kernels::bf16_weights_auto_fits), else runs without.
  // Default: ECOSERVE_BF16_WEIGHTS (unset: auto).
  kernels::Bf16WeightsMode bf16_weights = kernels::default_bf16_weights();
  double bf16_weights_share = kernels::kBf16WeightsAutoShare;
  // Tiles already made for this model (make_bf16_weights below), shared by the engines of one
  // process over one model (serve's in-process instances): when set, create() uses them and
  // does not consult bf16_weights. Tiles of another model are never found, and then cost
  // only their memory.
  std::shared_ptr<const kernels::Bf16WeightTiles> bf16_tiles;
};

// Header of an exported sequence's KV (little-endian, fixed layout).
struct KvExportHeader {
  uint32_t magic = 0x564B4345;  // "ECKV"
  uint32_t version = 2;
  uint64_t model_fingerprint = 0;
  uint32_t n_layer = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t block_size = 0;
  uint32_t dtype = 0;  // kernels::GgmlType of the stored values (F32 or F16)
  uint32_t num_tokens = 0;
  uint32_t first_token = 0;  // position of the first exported token in its sequence
};

// The bf16 tiles an engine with `options` makes for `model` (EngineOptions::bf16_weights) on
// `pool`'s threads, and what was decided (ModelRunner::bf16_weights_decision's wording):
// tiles null when none are made (off; auto where the tiles do not run, do not fit beside
// kv_bytes of KV cache, or cannot be allocated); FAILED_PRECONDITION for kOn where the bf16
// tiles do not run, its allocation error where they cannot be made. ModelRunner::create calls
// it; serve calls it once for in-process instances that share a model (EngineOptions::bf16_tiles).
struct Bf16Weights {
  std::shared_ptr<const kernels::Bf16WeightTiles> tiles;
  std::string decision = "off";
};
StatusOr<Bf16Weights> make_bf16_weights(const model::LlamaModel& model, const EngineOptions& options,
                                        int64_t kv_bytes, ThreadPool& pool);

class ModelRunner final : public Executor {
 public:
  static StatusOr<std::unique_ptr<ModelRunner>> create(std::shared_ptr<const model::LlamaModel> model,
                                                       const EngineOptions& options);
  ~ModelRunner() override;

  // INVALID_ARGUMENT (naming the request) for a plan that does not fit: token id
  // out of range, block table too short or with unknown blocks, context overflow.
  StatusOr<StepOutput> execute(const StepPlan& plan) override;

  const model::LlamaModel& model() const { return *model_; }
  std::shared_ptr<const model::LlamaModel> model_ptr() const { return model_; }
  int32_t block_size() const override { return options_.block_size; }
  int32_t num_kv_blocks() const override { return num_blocks_; }
  int32_t num_host_blocks() const override { return options_.num_host_blocks; }
  int32_t max_context() const override { return max_context_; }
  int32_t num_threads() const { return pool_->num_threads(); }
  // Bytes of the bf16 tiles made at create() (EngineOptions::bf16_weights; 0 without).
  int64_t bf16_weight_bytes() const;
  // What create() did about EngineOptions::bf16_weights, for logs ("made at load: 2068.8 MB",
  // "auto: not made (...)", "shared: 2068.8 MB" with EngineOptions::bf16_tiles, "off").
  const std::string& bf16_weights_decision() const { return bf16_weights_decision_; }
  KvCacheType kv_cache_type() const { return options_.kv_cache_type; }
  int64_t kv_bytes_per_block() const {
    return kv_bytes_per_block(model_->config(), options_.block_size, options_.kv_cache_type);
  }
  // Bytes of KV one block of block_size tokens takes for a model (K and V, every layer).
  static int64_t kv_bytes_per_block(const model::LlamaConfig& config, int32_t block_size,
                                    KvCacheType type = KvCacheType::kF32);

  void copy_block(BlockId src, BlockId dst);

  // Phase timing (StepPhaseTimes): with a clock set, every execute() charges its wall
  // time to the phases it passes through (a few clock reads per layer) and adds them to
  // what take_phase_times() returns; null (the default) turns it off. Call both, like execute, from the
  // thread that runs the steps; the clock must outlive its use.
  void set_phase_clock(const Clock* clock) { phase_clock_ = clock; }
  // The phases summed since the last call (which resets them).
  StepPhaseTimes take_phase_times() { return std::exchange(phase_times_, StepPhaseTimes{}); }

  // The KV of positions [begin, end) of the sequence whose block table is `blocks`,
  // as bytes with a header (KvExportHeader, then per layer K then V rows).
  StatusOr<std::vector<uint8_t>> export_kv(std::span<const BlockId> blocks, int32_t begin,
                                           int32_t end) const override;
  // A sequence's first num_tokens tokens.
  StatusOr<std::vector<uint8_t>> export_kv(std::span<const BlockId> blocks, int32_t num_tokens) const {
    return export_kv(blocks, 0, num_tokens);
  }
  // Writes exported KV into the same positions of the sequence whose block table is
  // `blocks` (which must cover them). FAILED_PRECONDITION when the model, shapes,
  // block size or KV cache type differ. Returns the number of tokens imported.
  StatusOr<int32_t> import_kv(std::span<const uint8_t> bytes, std::span<const BlockId> blocks) override;

 private:
  struct Impl;
  ModelRunner() = default;
  Status make_bf16_weights();

  std::shared_ptr<const model::LlamaModel> model_;
  EngineOptions options_;
  int32_t num_blocks_ = 0;
  int32_t max_context_ = 0;
  std::string bf16_weights_decision_ = "off";
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Impl> impl_;
  const Clock* phase_clock_ = nullptr;
  StepPhaseTimes phase_times_;
};

}  // namespace ecoserve::engine
