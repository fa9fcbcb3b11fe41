// ecoserve profile engine: prefill and batched-decode throughput of one model.
// ecoserve profile cost: the step-time table (CostProfile) EcoServe's cost model reads.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/ecoserve/commands.h"
#include "base/clock.h"
#include "engine/cost_profiler.h"
#include "engine/model_runner.h"
#include "kernels/attention.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/machine_peak.h"
#include "kernels/matmul.h"
#include "loadgen/length_distribution.h"
#include "model/llama_model.h"
#include "policy/profiled_cost_model.h"

namespace ecoserve::apps {

namespace {

struct ProfileArgs {
  bool mmap = false;  // map the GGUF instead of reading it into huge pages
  std::string model;
  std::vector<int32_t> threads = {1, 2};
  int32_t prompt_len = 512;
  std::vector<int32_t> batches = {1, 8, 32, 64};
  int32_t context = 128;
  int32_t decode_steps = 32;
  int32_t repeats = 2;
  int32_t block_size = 16;
  engine::KvCacheType kv_cache_type = engine::KvCacheType::kF32;
  kernels::Isa isa = kernels::default_isa();
  bool json = false;
  bool roofline = false;  // also print each figure's roofline bound from measured machine peaks
  bool phases = false;    // also print where each test's step time goes (ModelRunner::set_phase_clock)
};

// What one token costs the model: the matmul work and the weight bytes a step
// reads once whatever its batch (layers + output projection), and the KV bytes
// and attention work per token of context.
struct ModelCost {
  double weight_bytes = 0;        // all linear-layer weights
  double made_weight_bytes = 0;   // the same with the made tiles read in place of their matrices
  double output_weight_bytes = 0;       // of which the output projection's
  double output_made_weight_bytes = 0;  // the same with its made tiles, if made
  double macs_per_token = 0;      // linear layers + output projection
  double layer_macs_per_token = 0;  // linear layers only (prefill samples one token)
  double kv_bytes_per_ctx = 0;    // K and V of one context token, all layers
  double attn_macs_per_ctx = 0;   // q.k and p.v per context token, all layers
  bool int8 = false;              // quantized weights: int8 dot kernels, else float FMA
};

// tiles: the bf16 tiles made at load (Bf16WeightTiles), or null.
ModelCost model_cost(const model::LlamaModel& m, engine::KvCacheType kv_type, const kernels::Bf16WeightTiles* tiles) {
  ModelCost c;
  auto add = [&](const kernels::WeightView& w, bool layer) {
    const double bytes = static_cast<double>(w.row_bytes) * w.rows;
    c.weight_bytes += bytes;
    const bool made = tiles != nullptr && tiles->find(w) != nullptr;
    c.made_weight_bytes += made ? static_cast<double>(kernels::Bf16WeightTiles::bytes_for(w)) : bytes;
    c.macs_per_token += static_cast<double>(w.rows) * w.cols;
    if (layer) c.layer_macs_per_token += static_cast<double>(w.rows) * w.cols;
  };
  for (const auto& l : m.layers()) {
    for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) add(*w, true);
  }
  add(m.output(), false);
  c.output_weight_bytes = static_cast<double>(m.output().row_bytes) * m.output().rows;
  c.output_made_weight_bytes = tiles != nullptr && tiles->find(m.output()) != nullptr
                                   ? static_cast<double>(kernels::Bf16WeightTiles::bytes_for(m.output()))
                                   : c.output_weight_bytes;
  const auto& cfg = m.config();
  c.kv_bytes_per_ctx = static_cast<double>(engine::ModelRunner::kv_bytes_per_block(cfg, 1, kv_type));
  c.attn_macs_per_ctx = 2.0 * cfg.n_layer * cfg.n_head * cfg.head_dim;
  const auto t = m.layers().empty() ? kernels::GgmlType::kF32 : m.layers()[0].wq.type;
  c.int8 = !(t == kernels::GgmlType::kF32 || t == kernels::GgmlType::kF16 || t == kernels::GgmlType::kBF16);
  return c;
}

// Roofline: a step can go no faster than reading its bytes at the measured
// bandwidth, nor than its multiply-adds at the measured per-core peak times
// the thread count (attention counted at the float peak). That bound lets the
// linear layers' compute hide attention's KV reads; the phase sum does not: the
// linear layers' bound (max of weight reads and int8/float multiply-adds) plus
// attention's (max of KV reads and float multiply-adds), the bound of a step that
// runs them one after the other, as each layer's data dependencies make every
// engine run them. (The two differ where a batch's KV reads are as large as its
// weights: batched decode at long contexts.)
// The instructions a part of a step is bounded by: int8 dots of the level (on
// avx512amx: AMX tiles where its kernels run them, repacked Q8_0 or Q4_K weights and 16+
// tokens, else the level's zmm vpdpbusd), or float FMAs on 256- or 512-bit registers; with
// the bf16 tiles (ECOSERVE_AMX_BF16, on by default), bf16 tiles from amx_bf16_min_tokens
// tokens for the weights they take (amx_bf16_takes: those two, and F32, F16, BF16, Q6_K);
// vdpbf16ps on zmm for a prompt's attention on AVX512-BF16 vectors (ECOSERVE_ATTENTION_BF16)
// and for batches of bf16_vectors_min_tokens+ tokens of the weights bf16_vectors_takes
// (ECOSERVE_MATMUL_BF16).
// kBf16Scores: decode attention scoring on vdpbf16ps and weighing V on 512-bit FMAs
// (AttentionDims::bf16_scores), half its multiply-adds at each peak.
enum class Peak { kInt8, kAmx, kAmxBf16, kBf16Dot, kBf16Scores, kFma256, kFma512 };
const char* peak_name(Peak p) {
  switch (p) {
    case Peak::kInt8: return "int8";
    case Peak::kAmx: return "amx";
    case Peak::kAmxBf16: return "amx-bf16";
    case Peak::kBf16Dot: return "bf16-dot";
    case Peak::kBf16Scores: return "bf16-dot+fma512";
    case Peak::kFma512: return "fma512";
    case Peak::kFma256: return "fma256";
  }
  return "";
}

struct Bound {
  double tokens_per_second = 0;
  const char* limit = "";                // "memory" or "compute"
  double phase_sum_tokens_per_second = 0;  // the linear layers' bound plus attention's
  Peak linear_peak = Peak::kFma256;  // the peaks counted
  Peak attention_peak = Peak::kFma256;
};

// The spread of a decode test's step times, seconds (nearest-rank percentiles). On a
// shared host a few slow steps (another tenant's burst of memory traffic) can pull the
// mean well below what most steps run at; the median is the speed of a typical step.
struct StepSpread {
  double min = 0, median = 0, p90 = 0, max = 0;
};

StepSpread step_spread(std::vector<double> s) {
  if (s.empty()) return {};
  std::sort(s.begin(), s.end());
  auto rank = [&](double p) {  // the smallest value with at least p of the steps at or below it
    const auto k = static_cast<size_t>(std::ceil(p * static_cast<double>(s.size())));
    return s[std::min(s.size(), std::max<size_t>(k, 1)) - 1];
  };
  return {s.front(), rank(0.5), rank(0.9), s.back()};
}

double seconds(double bytes, double gbps, double macs, double gmacs) {
  return std::max(bytes / (gbps * 1e9), macs / (gmacs * 1e9));
}

Bound decode_bound(const ModelCost& c, int32_t batch, int32_t context, double gbps, double peak_gmacs,
                   double fma_gmacs) {
  const double kv_bytes = static_cast<double>(batch) * context * c.kv_bytes_per_ctx;
  const double attn_macs = static_cast<double>(batch) * context * c.attn_macs_per_ctx;
  const double mem_s = (c.weight_bytes + kv_bytes) / (gbps * 1e9);
  const double compute_s = batch * c.macs_per_token / (peak_gmacs * 1e9) + attn_macs / (fma_gmacs * 1e9);
  const double phases_s = seconds(c.weight_bytes, gbps, batch * c.macs_per_token, peak_gmacs) +
                          seconds(kv_bytes, gbps, attn_macs, fma_gmacs);
  return {batch / std::max(mem_s, compute_s), mem_s >= compute_s ? "memory" : "compute", batch / phases_s};
}

Bound prefill_bound(const ModelCost& c, int32_t len, double gbps, double peak_gmacs, double fma_gmacs) {
  const double mem_s = c.weight_bytes / (gbps * 1e9);
  // Causal attention: token i attends to i + 1 positions (reading at least the
  // prompt's own K and V once).
  const double attn = c.attn_macs_per_ctx * (static_cast<double>(len) * (len + 1) / 2);
  const double linear_macs = len * c.layer_macs_per_token + (c.macs_per_token - c.layer_macs_per_token);
  const double compute_s = linear_macs / (peak_gmacs * 1e9) + attn / (fma_gmacs * 1e9);
  const double phases_s = seconds(c.weight_bytes, gbps, linear_macs, peak_gmacs) +
                          seconds(len * c.kv_bytes_per_ctx, gbps, attn, fma_gmacs);
  return {len / std::max(mem_s, compute_s), mem_s >= compute_s ? "memory" : "compute", len / phases_s};
}

// The bounds of a step's two large phases alone (engine::StepPhase), seconds: the decoder
// layers' linear layers (their weights without the output projection, and their
// multiply-adds at the peak of the kernels that run them) and attention (KV reads and
// multiply-adds at its peak), each the slower of its reads and its multiply-adds.
struct PhaseBounds {
  double linear_s = 0;
  double attention_s = 0;
};

PhaseBounds decode_phase_bounds(const ModelCost& c, int32_t batch, int32_t context, double gbps, double peak_gmacs,
                                double fma_gmacs) {
  const double ctx = static_cast<double>(batch) * context;
  return {seconds(c.weight_bytes - c.output_weight_bytes, gbps, batch * c.layer_macs_per_token, peak_gmacs),
          seconds(ctx * c.kv_bytes_per_ctx, gbps, ctx * c.attn_macs_per_ctx, fma_gmacs)};
}

PhaseBounds prefill_phase_bounds(const ModelCost& c, int32_t len, double gbps, double peak_gmacs, double fma_gmacs) {
  const double attn = c.attn_macs_per_ctx * (static_cast<double>(len) * (len + 1) / 2);
  return {seconds(c.weight_bytes - c.output_weight_bytes, gbps, len * c.layer_macs_per_token, peak_gmacs),
          seconds(len * c.kv_bytes_per_ctx, gbps, attn, fma_gmacs)};
}

// Tokens/s of prefilling one prompt_len-token prompt (best of `repeats`); with --phases,
// the best run's phase times into *phases.
StatusOr<double> measure_prefill(engine::ModelRunner& r, const ProfileArgs& a, std::mt19937& rng,
                                 engine::StepPhaseTimes* phases) {
  const StepPlan plan = engine::synthetic_step(1, 0, a.prompt_len, (a.prompt_len + a.block_size - 1) / a.block_size,
                                               r.model().config().n_vocab, rng);
  const SteadyClock clock;
  if (a.phases) r.set_phase_clock(&clock);
  double best = 0;
  for (int32_t rep = 0; rep < a.repeats; ++rep) {
    StatusOr<double> seconds = engine::time_step(r, plan, clock);
    const engine::StepPhaseTimes p = r.take_phase_times();
    if (!seconds.ok()) {
      r.set_phase_clock(nullptr);
      return seconds.status();
    }
    if (a.prompt_len / *seconds > best) {
      best = a.prompt_len / *seconds;
      *phases = p;
    }
  }
  r.set_phase_clock(nullptr);
  return best;
}

// Tokens/s of decode steps for `batch` sequences that each hold `context` tokens (their
// whole time over all steps: the mean); each step's own seconds into *step_seconds; with
// --phases, the timed steps' phase times into *phases.
StatusOr<double> measure_decode(engine::ModelRunner& r, const ProfileArgs& a, int32_t batch, std::mt19937& rng,
                                engine::StepPhaseTimes* phases, std::vector<double>* step_seconds) {
  const int32_t per_seq = (a.context + a.decode_steps + a.block_size - 1) / a.block_size;
  // Fill the contexts (untimed).
  ECO_RETURN_IF_ERROR(engine::fill_synthetic_context(r, batch, a.context, per_seq, rng));
  StepPlan plan = engine::synthetic_step(batch, a.context, 1, per_seq, r.model().config().n_vocab, rng);
  const SteadyClock clock;
  if (a.phases) r.set_phase_clock(&clock);
  step_seconds->clear();
  const TimePoint t0 = clock.now();
  for (int32_t step = 0; step < a.decode_steps; ++step) {
    for (auto& s : plan.seqs) s.num_computed = a.context + step;
    const TimePoint s0 = clock.now();
    StatusOr<StepOutput> o = r.execute(plan);
    if (!o.ok()) {
      r.set_phase_clock(nullptr);
      return o.status();
    }
    step_seconds->push_back(to_seconds(clock.now() - s0));
    for (int32_t i = 0; i < batch; ++i) plan.seqs[i].tokens[0] = o->seqs[i].token;
  }
  const double tokens_per_second = static_cast<double>(batch) * a.decode_steps / to_seconds(clock.now() - t0);
  r.set_phase_clock(nullptr);
  *phases = r.take_phase_times();
  return tokens_per_second;
}

int run_profile(const ProfileArgs& a) {
  auto model = model::LlamaModel::load(a.model, a.mmap ? model::GgufFile::Load::kMmap : model::GgufFile::Load::kReadHugePages);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  const auto& c = (*model)->config();
  const int32_t max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  const int32_t per_seq = (a.context + a.decode_steps + a.block_size - 1) / a.block_size;
  const int32_t need_blocks = std::max(max_batch * per_seq, (a.prompt_len + a.block_size - 1) / a.block_size);
  if (a.prompt_len > c.n_ctx_train || a.context + a.decode_steps > c.n_ctx_train) {
    std::fprintf(stderr,
                 "error: prompt/context longer than the model's context of %d tokens (model synth "
                 "--context-length writes one that takes more)\n",
                 c.n_ctx_train);
    return 1;
  }
  nlohmann::json results = nlohmann::json::array();
  const engine::KvCacheType kv_type = a.kv_cache_type;
  // Per-core peaks, each with the instructions of the kernels it bounds: int8 dots of
  // the level (quantized weights), float FMAs on 256-bit registers (the float tiles,
  // attention), and on 512-bit ones where the float-weight matmul (tokens in lanes) or
  // the decode or prefill attention kernel runs on them.
  const kernels::CpuFeatures cpu = kernels::detect_cpu_features();
  const bool amx = a.isa == kernels::Isa::kAvx512Amx;
  const kernels::WeightView& wq0 = (*model)->layers()[0].wq;
  // The batch from which the linear layers run AMX tiles (0: never).
  const int64_t amx_from = amx && wq0.layout == kernels::WeightLayout::kRows8 ? kernels::amx_min_tokens(wq0.type) : 0;
  // Which bf16 products run: the AMX bf16 tiles (KernelContext::amx_bf16) or, at the
  // avx512vnni-zmm level, AVX512-BF16 vectors (KernelContext::bf16_vectors); either reads
  // the made tiles.
  const kernels::Bf16WeightsReader bf16_reader =
      kernels::bf16_weights_reader(a.isa, kernels::default_amx_bf16(), kernels::default_matmul_bf16(), cpu);
  const bool bf16_on = bf16_reader == kernels::Bf16WeightsReader::kTiles;
  const bool vec_on = bf16_reader == kernels::Bf16WeightsReader::kVectors;
  // Whether their tiles are made at load (EngineOptions::bf16_weights): those batches then
  // read the tiles' 2 bytes per weight, not the weights, and start lower. Decided and made
  // here, once, by the engine's own rule, and shared by the runner of every thread count.
  std::shared_ptr<const kernels::Bf16WeightTiles> bf16_tiles;
  std::string bf16_decision = "off";
  if (bf16_reader != kernels::Bf16WeightsReader::kNone) {
    engine::EngineOptions eo;
    eo.isa = a.isa;
    ThreadPool pool(*std::max_element(a.threads.begin(), a.threads.end()));
    const int64_t kv_bytes = int64_t{need_blocks} * engine::ModelRunner::kv_bytes_per_block(c, a.block_size, kv_type);
    auto tiles = engine::make_bf16_weights(**model, eo, kv_bytes, pool);
    if (!tiles.ok()) {
      std::fprintf(stderr, "error: %s\n", tiles.status().message().c_str());
      return 1;
    }
    bf16_tiles = tiles->tiles;
    bf16_decision = tiles->decision;
  }
  const ModelCost cost = model_cost(**model, kv_type, bf16_tiles.get());
  const bool made = bf16_tiles != nullptr && bf16_tiles->find(wq0) != nullptr;
  // The batch from which the linear layers run bf16 tiles instead (0: never).
  const int64_t bf16_from =
      bf16_on && kernels::amx_bf16_takes(wq0) ? kernels::amx_bf16_min_tokens(wq0.type, made) : 0;
  // Or, at the avx512vnni-zmm level, on AVX512-BF16 vectors (KernelContext::bf16_vectors).
  const int64_t bf16_vec_from =
      vec_on && kernels::bf16_vectors_takes(wq0) ? kernels::bf16_vectors_min_tokens(wq0.type, made) : 0;
  // Whether the prompt's attention runs on bf16 tiles (AttentionDims::amx_bf16).
  const bool attn_bf16 = kernels::prefill_attention_amx_bf16(bf16_on, a.isa, c.head_dim, a.prompt_len);
  // Or on AVX512-BF16 vectors (AttentionDims::bf16_vectors).
  const bool attn_bf16_vec =
      kernels::prefill_attention_bf16_vectors(kernels::default_attention_bf16(), a.isa, c.head_dim, a.prompt_len);
  // Whether decode attention scores on AVX512-BF16 vectors (AttentionDims::bf16_scores).
  const bool attn_bf16_scores = kernels::decode_attention_bf16_scores(
      kernels::default_attention_bf16(), kernels::default_attention_fp16_math(), a.isa,
      kv_type == engine::KvCacheType::kF16, c.n_head / std::max(1, c.n_head_kv), c.head_dim);
  double fma_gmacs = 0, fma512_gmacs = 0, int8_gmacs = 0, amx_gmacs = 0, bf16_gmacs = 0, bf16_dot_gmacs = 0;
  if (a.roofline) {
    fma_gmacs = kernels::measure_f32_fma_gmacs(0.5);
    fma512_gmacs = cpu.avx512f ? kernels::measure_f32_fma_gmacs(0.5, 512) : fma_gmacs;
    int8_gmacs = kernels::measure_int8_dot_gmacs(amx ? kernels::Isa::kAvx512VnniZmm : a.isa, 0.5);
    if (amx) amx_gmacs = kernels::measure_int8_dot_gmacs(kernels::Isa::kAvx512Amx, 0.5);
    if (bf16_from > 0 || attn_bf16) bf16_gmacs = kernels::measure_amx_bf16_gmacs(0.5);
    if (attn_bf16_vec || bf16_vec_from > 0 || attn_bf16_scores) {
      bf16_dot_gmacs = kernels::measure_avx512_bf16_gmacs(0.5);
    }
  }
  const bool attn512 = kernels::decode_attention_vector_bits(a.isa, c.head_dim, c.n_head / std::max(1, c.n_head_kv),
                                                             kv_type == engine::KvCacheType::kF16,
                                                             kernels::default_attention_f32_wide()) == 512;
  // The linear layers' peak for a step of `tokens` tokens, and decode attention's.
  auto linear_peak = [&](int64_t tokens) {
    if (bf16_from > 0 && tokens >= bf16_from) return Peak::kAmxBf16;
    if (bf16_vec_from > 0 && tokens >= bf16_vec_from) return Peak::kBf16Dot;
    if (cost.int8) return amx_from > 0 && tokens >= amx_from ? Peak::kAmx : Peak::kInt8;
    return kernels::float_matmul_vector_bits(a.isa, tokens) == 512 ? Peak::kFma512 : Peak::kFma256;
  };
  auto gmacs = [&](int32_t th, Peak peak) {
    switch (peak) {
      case Peak::kInt8: return th * int8_gmacs;
      case Peak::kAmx: return th * amx_gmacs;
      case Peak::kAmxBf16: return th * bf16_gmacs;
      case Peak::kBf16Dot: return th * bf16_dot_gmacs;
      case Peak::kBf16Scores: return th * 2.0 / (1.0 / bf16_dot_gmacs + 1.0 / fma512_gmacs);
      case Peak::kFma512: return th * fma512_gmacs;
      case Peak::kFma256: break;
    }
    return th * fma_gmacs;
  };
  // The kernels a float-weight model's prompt of n tokens runs on.
  auto float_prefill_name = [&](int64_t n) {
    if (bf16_from > 0 && n >= bf16_from) return std::string("bf16 tiles");
    if (bf16_vec_from > 0 && n >= bf16_vec_from) return std::string("bf16 vectors");
    return kernels::float_matmul_kernel_name(kernels::float_matmul_kernel(a.isa, n));
  };
  const Peak decode_attn_peak = attn_bf16_scores ? Peak::kBf16Scores : attn512 ? Peak::kFma512 : Peak::kFma256;
  const bool prefill_attn512 = kernels::prefill_attention_vector_bits(a.isa, c.head_dim) == 512;
  const Peak prefill_attn_peak = attn_bf16       ? Peak::kAmxBf16
                                 : attn_bf16_vec ? Peak::kBf16Dot
                                 : prefill_attn512 ? Peak::kFma512
                                                   : Peak::kFma256;
  if (!a.json) {
    std::printf("model: %s (%s, %.1fM params, %s)\n", a.model.c_str(), c.arch.c_str(), c.num_params / 1e6,
                std::string(kernels::type_name((*model)->layers()[0].wq.type)).c_str());
    std::printf("cpu: %s (%s); kernels: %s (int8 dot: %s; batch-1 int8 GEMV on %s; GEMV prefetch: %s%s); "
                "OpenBLAS: %s\n",
                cpu.brand.c_str(), cpu.flags().c_str(), std::string(kernels::isa_name(a.isa)).c_str(),
                std::string(kernels::isa_int8_dot(a.isa)).c_str(),
                kernels::gemv_streams_summary(kernels::default_gemv_streams()).c_str(),
                kernels::gemv_prefetch_summary(kernels::default_gemv_prefetch()).c_str(),
                a.isa >= kernels::Isa::kAvx512VnniZmm
                    ? ("; Q4_K tiles: " +
                       kernels::q4k_tile_summary(kernels::default_q4k_tile_pairs(), cpu.gfni,
                                                 kernels::default_q4k_lanes()) +
                       "; Q8_0 tiles: " + kernels::q8_tile_summary(kernels::default_q8_lanes()) +
                       "; Q6_K tiles: " + kernels::q6k_tile_summary(kernels::default_q6k_lanes()) +
                       (bf16_from > 0 ? "; bf16 tiles (ECOSERVE_AMX_BF16) for batches of " +
                                            std::to_string(bf16_from) + "+"
                        : bf16_vec_from > 0 ? "; bf16 vectors (ECOSERVE_MATMUL_BF16) for batches of " +
                                                  std::to_string(bf16_vec_from) + "+"
                                            : std::string()))
                          .c_str()
                    : "",
                kernels::openblas_core().c_str());
    std::printf("prefill: one %d-token prompt (best of %d); decode: %d steps per batch from context %d; KV cache %s\n",
                a.prompt_len, a.repeats, a.decode_steps, a.context, engine::kv_cache_type_name(kv_type));
    if (bf16_decision != "off") {
      std::printf("bf16 weights %s%s\n", bf16_decision.c_str(),
                  made ? (", read by batches of " + std::to_string(bf16_from > 0 ? bf16_from : bf16_vec_from) + "+")
                                 .c_str()
                       : "");
    }
    if (a.roofline) {
      std::printf("roofline inputs: %.1f MB of weights per step, %.1f M multiply-adds per token; per core, measured "
                  "now: %.1f G float FMA-MAC/s on 256-bit registers",
                  cost.weight_bytes / 1e6, cost.macs_per_token / 1e6, fma_gmacs);
      if (cpu.avx512f) std::printf(", %.1f G on 512-bit", fma512_gmacs);
      if (amx) {
        std::printf(", %.1f G int8-dot MAC/s (vpdpbusd, zmm), %.1f G on AMX tiles (tdpbssd: counted for %s)\n",
                    int8_gmacs, amx_gmacs,
                    amx_from == 0 ? "nothing here: the model has no repacked Q8_0 or Q4_K"
                    : bf16_from > 0 && bf16_from <= amx_from
                        ? ("nothing here: the bf16 tiles take batches of " + std::to_string(bf16_from) + "+").c_str()
                        : ("batches of " + std::to_string(amx_from) + "+" +
                           (bf16_from > 0 ? " up to " + std::to_string(bf16_from - 1) : std::string()))
                              .c_str());
        if (bf16_from > 0 || attn_bf16) {
          std::printf("bf16 tiles (ECOSERVE_AMX_BF16): %.1f G bf16 MAC/s (tdpbf16ps), counted for %s%s\n", bf16_gmacs,
                      bf16_from > 0 ? ("batches of " + std::to_string(bf16_from) + "+").c_str() : "",
                      attn_bf16 ? (bf16_from > 0 ? " and the prompt's attention" : "the prompt's attention") : "");
        }
      } else {
        std::printf(", %.1f G int8-dot MAC/s (%s)\n", int8_gmacs, std::string(kernels::isa_int8_dot(a.isa)).c_str());
      }
      if (attn_bf16_vec || bf16_vec_from > 0 || attn_bf16_scores) {
        std::string uses;
        auto use = [&uses](const std::string& what) { uses += (uses.empty() ? "" : ", ") + what; };
        if (bf16_vec_from > 0) use("linear layers of " + std::to_string(bf16_vec_from) + "+ tokens");
        if (attn_bf16_vec) use("the prompt's attention");
        if (attn_bf16_scores) use("decode attention's scores");
        std::printf("bf16 vectors (ECOSERVE_ATTENTION_BF16, ECOSERVE_MATMUL_BF16): %.1f G bf16 MAC/s (vdpbf16ps, "
                    "zmm), counted for %s\n",
                    bf16_dot_gmacs, uses.c_str());
      }
      const int64_t n_prompt = a.prompt_len;
      std::printf("float FMAs counted at: %s for decode attention, %s for prefill attention, ",
                  attn_bf16_scores ? "512-bit (its values; its scores on bf16 vectors)"
                  : attn512        ? "512-bit"
                                   : "256-bit",
                  attn_bf16       ? "bf16 tiles"
                  : attn_bf16_vec ? "bf16 vectors"
                  : prefill_attn512 ? "512-bit"
                                    : "256-bit");
      if (bf16_from > 0 || bf16_vec_from > 0) {
        std::printf("256-bit for the rest (linear layers of %lld+ tokens: the bf16 %s)",
                    static_cast<long long>(bf16_from > 0 ? bf16_from : bf16_vec_from),
                    bf16_from > 0 ? "tiles" : "vectors");
      } else {
        std::printf("%d-bit for float-weight prefill (%s), 256-bit for the rest",
                    kernels::float_matmul_vector_bits(a.isa, n_prompt), float_prefill_name(n_prompt).c_str());
      }
      // Decode batches on 512-bit float kernels.
      for (int64_t n = 5; bf16_from == 0 && bf16_vec_from == 0 && n < a.prompt_len; ++n) {
        if (kernels::float_matmul_vector_bits(a.isa, n) == 512) {
          std::printf(" (512-bit for float-weight decode batches of %lld+)", static_cast<long long>(n));
          break;
        }
      }
      std::printf("\n");
      std::printf("phase sum: the linear layers' roofline plus attention's, as a step runs them (see --help)\n");
      std::printf("%-8s %-22s %12s %12s %6s  %-8s %10s %6s\n", "threads", "test", "tokens/s", "roofline", "%", "bound",
                  "phase sum", "%");
    } else {
      std::printf("%-8s %-22s %12s\n", "threads", "test", "tokens/s");
    }
  }
  std::mt19937 rng(1234);
  double first_gbps = 0;  // the first thread count's read probe, compared at the end
  for (int32_t th : a.threads) {
    engine::EngineOptions eo;
    eo.num_threads = th;
    eo.block_size = a.block_size;
    eo.num_kv_blocks = need_blocks;
    eo.kv_cache_type = kv_type;
    eo.isa = a.isa;
    if (bf16_reader != kernels::Bf16WeightsReader::kNone) {  // decided above (elsewhere: 1 fails in the engine)
      eo.bf16_tiles = bf16_tiles;
      eo.bf16_weights = kernels::Bf16WeightsMode::kOff;
    }
    auto runner = engine::ModelRunner::create(*model, eo);
    if (!runner.ok()) {
      std::fprintf(stderr, "error: %s\n", runner.status().message().c_str());
      return 1;
    }
    double gbps = 0;
    if (a.roofline) {
      ThreadPool pool(th);
      gbps = kernels::measure_read_gbps(pool, 512u << 20);
      if (first_gbps == 0) first_gbps = gbps;
      if (!a.json) std::printf("%-8d read bandwidth %.1f GB/s (measured now)\n", th, gbps);
    }
    // With --phases: each phase's mean seconds per step, share of the step, and (with
    // --roofline) the linear layers' and attention's own bounds against their time.
    auto phase_json = [&](const engine::StepPhaseTimes& p, const PhaseBounds& pbounds) {
      nlohmann::json j = nlohmann::json::object();
      const double steps = static_cast<double>(std::max<int64_t>(1, p.steps));
      const double total = std::max(1e-12, to_seconds(p.total()));
      for (engine::StepPhase ph : engine::kAllStepPhases) {
        const double sec = to_seconds(p[ph]);
        nlohmann::json e = {{"seconds_per_step", sec / steps}, {"share", sec / total}};
        const double bound_s = ph == engine::StepPhase::kLinear      ? pbounds.linear_s
                               : ph == engine::StepPhase::kAttention ? pbounds.attention_s
                                                                      : 0.0;
        if (a.roofline && bound_s > 0 && sec > 0) e["roofline_pct"] = 100.0 * bound_s * steps / sec;
        j[std::string(engine::step_phase_key(ph))] = e;
      }
      return j;
    };
    auto print_phases = [&](const nlohmann::json& j) {
      std::printf("%-8s phases per step:", "");
      const char* sep = " ";
      for (engine::StepPhase ph : engine::kAllStepPhases) {
        const nlohmann::json& e = j[std::string(engine::step_phase_key(ph))];
        std::printf("%s%s %.2f ms (%.0f%%", sep, std::string(engine::step_phase_name(ph)).c_str(),
                    1e3 * e["seconds_per_step"].get<double>(), 100.0 * e["share"].get<double>());
        if (e.contains("roofline_pct")) std::printf(", %.0f%% of its roofline", e["roofline_pct"].get<double>());
        std::printf(")");
        sep = ", ";
      }
      std::printf("\n");
    };
    // steps: a decode test's step times (null for the prompt, timed as a whole).
    auto report = [&](const std::string& test, StatusOr<double> v, const Bound& bound,
                      const engine::StepPhaseTimes& phases, const PhaseBounds& pbounds, int32_t batch = 0,
                      const std::vector<double>* steps = nullptr) {
      if (!v.ok()) {
        std::fprintf(stderr, "error: %s\n", v.status().message().c_str());
        return false;
      }
      const nlohmann::json pj = a.phases ? phase_json(phases, pbounds) : nlohmann::json();
      const bool spread = steps != nullptr && !steps->empty();
      const StepSpread sp = spread ? step_spread(*steps) : StepSpread{};
      if (a.json) {
        nlohmann::json r = {{"threads", th}, {"test", test}, {"tokens_per_second", *v},
                            {"kv_cache_type", engine::kv_cache_type_name(kv_type)},
                            {"isa", std::string(kernels::isa_name(a.isa))},
                            {"gemv_streams", kernels::default_gemv_streams()},
                            {"gemv_prefetch", kernels::default_gemv_prefetch()},
                            {"q4k_tile_pairs", kernels::default_q4k_tile_pairs()},
                            {"q4k_gfni", kernels::cpu_has_gfni()},
                            {"q8_lanes", kernels::default_q8_lanes()},
                            {"q4k_lanes", kernels::default_q4k_lanes()},
                            {"q6k_lanes", kernels::default_q6k_lanes()},
                            {"amx_bf16", bf16_on},
                            {"bf16_weights", made},
                            {"matmul_bf16_vectors", bf16_vec_from > 0},
                            {"openblas_core", kernels::openblas_core()}};
        if (test.starts_with("decode")) {
          r["context"] = a.context;
          r["decode_steps"] = a.decode_steps;
          if (spread) {
            r["step_seconds"] = {{"min", sp.min}, {"median", sp.median}, {"p90", sp.p90}, {"max", sp.max}};
            r["median_tokens_per_second"] = batch / sp.median;
          }
        } else {
          r["prompt_len"] = a.prompt_len;
          // The kernels a float-weight model's prompt runs on (quantized weights: the int8 tiles).
          r["float_matmul_kernel"] = float_prefill_name(a.prompt_len);
        }
        if (a.roofline) {
          r["roofline_tokens_per_second"] = bound.tokens_per_second;
          r["bound"] = bound.limit;
          r["phase_sum_roofline_tokens_per_second"] = bound.phase_sum_tokens_per_second;
          r["linear_peak"] = peak_name(bound.linear_peak);
          r["attention_peak"] = peak_name(bound.attention_peak);
        }
        if (a.phases) r["phases"] = pj;
        results.push_back(r);
      } else if (a.roofline) {
        std::printf("%-8d %-22s %12.1f %12.1f %5.0f%%  %-8s %10.1f %5.0f%%\n", th, test.c_str(), *v,
                    bound.tokens_per_second, 100.0 * *v / bound.tokens_per_second, bound.limit,
                    bound.phase_sum_tokens_per_second, 100.0 * *v / bound.phase_sum_tokens_per_second);
      } else {
        std::printf("%-8d %-22s %12.1f\n", th, test.c_str(), *v);
      }
      if (!a.json && spread) {
        std::printf("%-8s steps: median %.2f ms = %.1f tokens/s", "", 1e3 * sp.median, batch / sp.median);
        if (a.roofline) std::printf(" (%.0f%% of the roofline)", 100.0 * batch / sp.median / bound.tokens_per_second);
        std::printf(", p90 %.2f ms, min %.2f, max %.2f%s\n", 1e3 * sp.p90, 1e3 * sp.min, 1e3 * sp.max,
                    sp.max > 1.5 * sp.median ? " (slow steps: the host's noise, in the mean above)" : "");
      }
      if (a.phases && !a.json) print_phases(pj);
      std::fflush(stdout);
      return true;
    };
    // The cost of a step of n tokens: with the tiles made at load, batches on them read the tiles.
    auto step_cost = [&](int64_t n) {
      ModelCost sc = cost;
      const Peak peak = linear_peak(n);
      if (made && (peak == Peak::kAmxBf16 || peak == Peak::kBf16Dot)) {
        sc.weight_bytes = cost.made_weight_bytes;
        sc.output_weight_bytes = cost.output_made_weight_bytes;
      }
      return sc;
    };
    Bound pb;
    PhaseBounds ppb;
    if (a.roofline) {
      pb = prefill_bound(step_cost(a.prompt_len), a.prompt_len, gbps, gmacs(th, linear_peak(a.prompt_len)),
                         gmacs(th, prefill_attn_peak));
      pb.linear_peak = linear_peak(a.prompt_len);
      pb.attention_peak = prefill_attn_peak;
      ppb = prefill_phase_bounds(step_cost(a.prompt_len), a.prompt_len, gbps, gmacs(th, linear_peak(a.prompt_len)),
                                 gmacs(th, prefill_attn_peak));
    }
    auto decode_roof = [&](int32_t b) {
      Bound db =
          decode_bound(step_cost(b), b, a.context, gbps, gmacs(th, linear_peak(b)), gmacs(th, decode_attn_peak));
      db.linear_peak = linear_peak(b);
      db.attention_peak = decode_attn_peak;
      return db;
    };
    engine::StepPhaseTimes phases;
    if (!report("prefill pp" + std::to_string(a.prompt_len), measure_prefill(**runner, a, rng, &phases), pb, phases,
                ppb)) {
      return 1;
    }
    std::vector<std::pair<int32_t, double>> decoded;  // batch, tok/s
    for (int32_t b : a.batches) {
      const Bound db = a.roofline ? decode_roof(b) : Bound{};
      const PhaseBounds dpb = a.roofline ? decode_phase_bounds(step_cost(b), b, a.context, gbps,
                                                               gmacs(th, linear_peak(b)), gmacs(th, decode_attn_peak))
                                         : PhaseBounds{};
      std::vector<double> steps;
      StatusOr<double> v = measure_decode(**runner, a, b, rng, &phases, &steps);
      if (v.ok()) decoded.emplace_back(b, *v);
      if (!report("decode batch " + std::to_string(b), v, db, phases, dpb, b, &steps)) return 1;
      // Batch 1 reads every weight once per token, so its rate proves a read
      // bandwidth; when that beats the probe, the roofline uses it from here on.
      const double implied = b == 1 ? *v * (cost.weight_bytes + a.context * cost.kv_bytes_per_ctx) / 1e9 : 0.0;
      if (a.roofline && implied > gbps) {
        gbps = implied;
        if (!a.json) std::printf("%-8d (batch 1 read weights at %.1f GB/s, above the probe: the roofline uses that)\n",
                                 th, gbps);
      }
    }
    // Batched decode against batch 1, measured and at the roofline (which a
    // batch-B / batch-1 target must fit under on this machine).
    const auto one = std::find_if(decoded.begin(), decoded.end(), [](const auto& d) { return d.first == 1; });
    if (a.roofline && !a.json && one != decoded.end() && decoded.size() > 1) {
      const double roof1 = decode_roof(1).tokens_per_second;
      std::printf("%-8d speed-up over batch 1:", th);
      for (const auto& [b, v] : decoded) {
        if (b == 1) continue;
        std::printf("  batch %d %.1fx (roofline %.1fx)", b, v / one->second,
                    decode_roof(b).tokens_per_second / roof1);
      }
      std::printf("\n");
    }
  }
  // A shared or throttled host can change speed within a run, and every % above divides a
  // figure by peaks measured at its start: the 256-bit FMA peak and the first thread
  // count's read probe measured again now say by how much the machine moved meanwhile.
  if (a.roofline) {
    ThreadPool pool(a.threads.front());
    const double fma_end = kernels::measure_f32_fma_gmacs(0.5);
    const double gbps_end = kernels::measure_read_gbps(pool, 512u << 20);
    const double fma_drift = 100.0 * (fma_end - fma_gmacs) / fma_gmacs;
    const double read_drift = 100.0 * (gbps_end - first_gbps) / first_gbps;
    if (a.json) {
      for (auto& r : results) {
        r["fma_peak_drift_pct"] = fma_drift;
        r["read_drift_pct"] = read_drift;
      }
    } else {
      std::printf("peaks measured again at the end: 256-bit FMA %.1f -> %.1f G (%+.0f%%), read (%d thread%s) %.1f -> "
                  "%.1f GB/s (%+.0f%%)%s\n",
                  fma_gmacs, fma_end, fma_drift, a.threads.front(), a.threads.front() == 1 ? "" : "s", first_gbps,
                  gbps_end, read_drift,
                  std::abs(fma_drift) > 10 || std::abs(read_drift) > 10
                      ? ": this machine's speed moved during the run, so its % figures are no better than that"
                      : "");
    }
  }
  if (a.json) std::printf("%s\n", results.dump(2).c_str());
  return 0;
}

struct CostArgs {
  bool mmap = false;
  std::string model;
  int32_t threads = 0;  // 0 = all hardware threads
  engine::KvCacheType kv_cache_type = engine::KvCacheType::kF32;
  kernels::Isa isa = kernels::default_isa();
  std::string out;      // empty: engine::default_cost_profile_path(model)
  int32_t max_prefill = 512;
  int32_t max_batch = 32;
  int32_t repeats = 3;
  int32_t block_size = 16;
};

// One table of a profile as a grid: a row per context, a column per size ("-"
// where a point was left out because it did not fit the context).
template <typename P, typename SizeOf>
void print_table(const char* title, const char* size_name, const std::vector<P>& points, const SizeOf& size_of) {
  std::set<int32_t> sizes, contexts;
  for (const P& p : points) {
    sizes.insert(size_of(p));
    contexts.insert(p.context);
  }
  std::printf("%s, ms per step (rows: context; columns: %s)\n%8s", title, size_name, "");
  for (int32_t s : sizes) std::printf(" %8d", s);
  std::printf("\n");
  for (int32_t c : contexts) {
    std::printf("%8d", c);
    for (int32_t s : sizes) {
      const auto it = std::find_if(points.begin(), points.end(),
                                   [&](const P& p) { return p.context == c && size_of(p) == s; });
      if (it == points.end()) {
        std::printf(" %8s", "-");
      } else {
        std::printf(" %8.2f", it->seconds * 1e3);
      }
    }
    std::printf("\n");
  }
}

int run_profile_cost(const CostArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  };
  auto model = model::LlamaModel::load(a.model, a.mmap ? model::GgufFile::Load::kMmap : model::GgufFile::Load::kReadHugePages);
  if (!model.ok()) return fail(model.status());
  const SteadyClock clock;
  engine::CostProfilerOptions po;
  po.clock = &clock;
  po.max_prefill_tokens = a.max_prefill;
  po.min_prefill_tokens = std::min(po.min_prefill_tokens, a.max_prefill);
  po.max_batch = a.max_batch;
  po.repeats = a.repeats;
  po.model_id = engine::model_file_id(a.model);
  po.on_progress = [](const std::string& line) {
    std::fprintf(stderr, "[profile cost] %s\n", line.c_str());
    std::fflush(stderr);
  };
  engine::EngineOptions eo;
  eo.num_threads = a.threads;
  eo.block_size = a.block_size;
  eo.kv_cache_type = a.kv_cache_type;
  eo.isa = a.isa;
  const int32_t max_context = (*model)->config().n_ctx_train;
  eo.num_kv_blocks = std::max(1, engine::cost_profile_blocks_needed(po, a.block_size, max_context));
  auto runner = engine::ModelRunner::create(*model, eo);
  if (!runner.ok()) return fail(runner.status());
  const auto& c = (*model)->config();
  std::fprintf(stderr, "[profile cost] %s (%.1fM params, %s): %d threads, KV %s, %d blocks of %d tokens (%.0f MiB)\n",
               a.model.c_str(), c.num_params / 1e6, std::string(kernels::type_name((*model)->layers()[0].wq.type)).c_str(),
               (*runner)->num_threads(), engine::kv_cache_type_name(a.kv_cache_type), (*runner)->num_kv_blocks(),
               a.block_size, (*runner)->num_kv_blocks() * static_cast<double>((*runner)->kv_bytes_per_block()) / (1 << 20));
  const TimePoint t0 = clock.now();
  auto profile = engine::measure_cost_profile(**runner, po);
  if (!profile.ok()) return fail(profile.status());
  // The profile must make a cost model (it always should; this catches a broken grid early).
  auto cost_model = policy::ProfiledCostModel::create(*profile);
  if (!cost_model.ok()) return fail(cost_model.status());
  const std::string out = a.out.empty() ? engine::default_cost_profile_path(a.model) : a.out;
  if (Status s = engine::save_cost_profile(*profile, out); !s.ok()) return fail(s);

  std::printf("model: %s  machine: %s  threads: %d  KV: %s  (measured in %.1f s, median of %d)\n",
              profile->model_id.c_str(), profile->machine.c_str(), profile->threads, profile->kv_cache_dtype.c_str(),
              to_seconds(clock.now() - t0), a.repeats);
  print_table("prefill (one sequence)", "new tokens", profile->prefill,
              [](const CostProfile::PrefillPoint& p) { return p.tokens; });
  print_table("decode", "batch", profile->decode, [](const CostProfile::DecodePoint& p) { return p.batch; });
  std::printf("step overhead a mixed step pays once (the smaller table intercept): %.2f ms\n",
              (*cost_model)->step_overhead_seconds() * 1e3);
  std::printf("saved: %s\n", out.c_str());
  return 0;
}

struct SloArgs {
  std::string model;
  std::string profile;
  std::string preset;
  std::string input_len;
  std::string output_len;
  double length_scale = 1.0;
  double ttft_factor = 5.0;
  double tpot_factor = 5.0;
  int32_t chunk_size = 512;
};

// SLOs from a saved cost profile and a workload's mean lengths (EcoServe Table 4's
// rule); one shell-friendly line on stdout, the working on stderr.
int run_profile_slo(const SloArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  };
  const std::string path = !a.profile.empty() ? a.profile : engine::default_cost_profile_path(a.model);
  auto profile = engine::load_cost_profile(path);
  if (!profile.ok()) {
    if (profile.status().code() == StatusCode::kNotFound && a.profile.empty()) {
      return fail(not_found_error("no cost profile at {}: measure one with 'ecoserve profile cost -m {} -t THREADS'",
                                  path, a.model));
    }
    return fail(profile.status());
  }
  auto model = policy::ProfiledCostModel::create(*profile);
  if (!model.ok()) return fail(model.status());
  const std::string in_spec = !a.input_len.empty() ? a.input_len : a.preset;
  const std::string out_spec = !a.output_len.empty() ? a.output_len : a.preset;
  if (in_spec.empty() || out_spec.empty()) {
    return fail(invalid_argument_error("give --preset, or --input-len and --output-len"));
  }
  auto in = loadgen::LengthDistribution::parse(in_spec, loadgen::LengthSide::kInput);
  if (!in.ok()) return fail(in.status());
  auto out = loadgen::LengthDistribution::parse(out_spec, loadgen::LengthSide::kOutput);
  if (!out.ok()) return fail(out.status());
  policy::SloRule rule;
  rule.mean_prompt_tokens = in->mean() * a.length_scale;
  rule.mean_output_tokens = out->mean() * a.length_scale;
  rule.ttft_factor = a.ttft_factor;
  rule.tpot_factor = a.tpot_factor;
  rule.chunk_size = a.chunk_size;
  const policy::SloTargets t = policy::derive_slos(**model, rule);
  std::fprintf(stderr,
               "[profile slo] %s (%s, %d threads): mean prompt %.1f tokens, mean output %.1f; TTFT SLO = %g x "
               "prefill of the mean prompt, TPOT SLO = %g x a batch-1 decode step at context %.0f\n",
               path.c_str(), profile->machine.c_str(), profile->threads, rule.mean_prompt_tokens,
               rule.mean_output_tokens, a.ttft_factor, a.tpot_factor,
               rule.mean_prompt_tokens + rule.mean_output_tokens / 2);
  std::printf("slo_ttft_ms=%lld slo_tpot_ms=%lld\n", std::llround(t.ttft_seconds * 1e3), std::llround(t.tpot_seconds * 1e3));
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "profile", "Measure engine speed (prefill and batched decode tokens/s) or the cost model's step-time table");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ProfileArgs>();
  auto* eng = cmd->add_subcommand("engine", "Prefill tok/s for one prompt and decode tok/s at several batch sizes");
  eng->add_option("-m,--model", args->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  eng->add_flag("--mmap", args->mmap,
                  "map the model file (shared page cache, less memory) instead of reading it into huge-page "
                  "memory (faster decode; Q8_0 and Q4_K matrices repacked for faster int8 kernels: ~2x prefill)");
  eng->add_option("-t,--threads", args->threads, "thread counts to measure")->capture_default_str()->delimiter(',');
  eng->add_option("--prompt-len", args->prompt_len, "prefill prompt length")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eng->add_option("--batches", args->batches, "decode batch sizes")->capture_default_str()->delimiter(',');
  eng->add_option("--context", args->context,
                  "tokens already in each decoding sequence (at most the model's context length; their KV is a " +
                      std::to_string(engine::kFillPrefillTokens) +
                      "-token prefill's, its blocks copied over the rest, so long contexts are ready in seconds)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  eng->add_option("--decode-steps", args->decode_steps,
                  "timed decode steps per batch size (tokens/s: all of them, the mean; under each row the median "
                  "step with its tokens/s, p90, min and max: the median shows a typical step where a shared host "
                  "slows a few)")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  eng->add_option("--repeats", args->repeats, "prefill repetitions (best is reported)")->capture_default_str()->check(CLI::Range(1, 100));
  eng->add_option("--block-size", args->block_size, "KV block size")->capture_default_str()->check(CLI::Range(1, 4096));
  add_kv_cache_dtype_option(eng, args->kv_cache_type);
  add_isa_option(eng, args->isa);
  eng->add_flag("--json", args->json, "print JSON instead of a table");
  eng->add_flag("--phases", args->phases,
                "also print where each test's step time goes: the decoder layers' linear layers (with the FFN's "
                "SiLU gating), attention, the output layer, sampling and the rest (norms, RoPE, KV writes, residuals), "
                "mean ms per step and "
                "share; with --roofline, the linear layers' and attention's time against their own bounds (the "
                "layers' weights or multiply-adds; the KV reads or attention's multiply-adds)");
  eng->add_flag("--roofline", args->roofline,
                "measure this machine's peak multiply-add rates (with the instructions and register width each part "
                "runs: int8 dots of the level, float FMAs on 256- or 512-bit registers) and read bandwidth, and print "
                "beside each figure the fastest any kernel could go (memory- or compute-bound) and the share reached; "
                "also the phase sum, "
                "the linear layers' bound plus attention's (each the slower of its reads and its multiply-adds), "
                "which is the bound when the two run one after the other, as a layer's data dependencies make them");
  eng->callback([args, &exit_code] { exit_code = run_profile(*args); });

  auto cost_args = std::make_shared<CostArgs>();
  const engine::CostProfilerOptions grid;
  auto* cost = cmd->add_subcommand(
      "cost", "Measure the step-time table EcoServe's cost model interpolates: prefill-only steps (one sequence, "
                  "chunks of " + std::to_string(grid.min_prefill_tokens) + "..max-prefill tokens, doubling) at "
                  "contexts 0, 1/4 and 1/2 of the model's, and decode-only steps (batch 1..max-batch, doubling) at "
                  "contexts 32, 1/4 and 1/2 of the model's; the median of --repeats runs each (points past the "
                  "model's context are left out). Saves JSON for the cost model; takes seconds to a minute");
  cost->add_option("-m,--model", cost_args->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cost->add_flag("--mmap", cost_args->mmap, "map the model file instead of reading it into huge-page memory");
  cost->add_option("-t,--threads", cost_args->threads, "engine threads (0 = all hardware threads)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  add_kv_cache_dtype_option(cost, cost_args->kv_cache_type);
  add_isa_option(cost, cost_args->isa);
  cost->add_option("-o,--output", cost_args->out, "where to save the profile (default: MODEL.profile.json beside the model)");
  cost->add_option("--max-prefill", cost_args->max_prefill, "largest prefill chunk measured (tokens)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cost->add_option("--max-batch", cost_args->max_batch, "largest decode batch measured")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cost->add_option("--repeats", cost_args->repeats, "runs per grid point (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cost->add_option("--block-size", cost_args->block_size, "KV block size")->capture_default_str()->check(CLI::Range(1, 4096));
  cost->callback([cost_args, &exit_code] { exit_code = run_profile_cost(*cost_args); });

  auto slo_args = std::make_shared<SloArgs>();
  auto* slo = cmd->add_subcommand(
      "slo", "Derive TTFT and TPOT SLOs for a workload from a saved cost profile, the way EcoServe's Table 4 sets them: "
             "TTFT = --ttft-factor x the prefill of a mean prompt, TPOT = --tpot-factor x a batch-1 decode step at the "
             "mean context. Prints 'slo_ttft_ms=N slo_tpot_ms=M' (for serve's and bench's --slo-ttft-ms and "
             "--slo-tpot-ms)");
  auto* src = slo->add_option_group("profile", "where the cost profile is");
  src->add_option("-m,--model", slo_args->model, "model file whose MODEL.profile.json to read")
      ->check(CLI::ExistingFile);
  src->add_option("--profile", slo_args->profile, "cost profile JSON ('ecoserve profile cost -o')")
      ->check(CLI::ExistingFile);
  src->require_option(1);
  slo->add_option("--preset", slo_args->preset, "alpaca, sharegpt or longbench (both lengths)");
  slo->add_option("--input-len", slo_args->input_len, "prompt lengths, as bench's --input-len (instead of the preset's)");
  slo->add_option("--output-len", slo_args->output_len, "output lengths, as bench's --output-len");
  slo->add_option("--length-scale", slo_args->length_scale, "multiply the lengths by this (as bench's)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  slo->add_option("--ttft-factor", slo_args->ttft_factor, "TTFT SLO in mean-prompt prefills")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  slo->add_option("--tpot-factor", slo_args->tpot_factor, "TPOT SLO in batch-1 decode steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  slo->add_option("--chunk-size", slo_args->chunk_size, "the server's prefill chunk")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  slo->callback([slo_args, &exit_code] { exit_code = run_profile_slo(*slo_args); });
}

}  // namespace ecoserve::apps
