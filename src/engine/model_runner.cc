#include "engine/model_runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "base/memory_info.h"
#include "base/zeroed_buffer.h"
#include "kernels/attention.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/ops.h"

namespace ecoserve::engine {

namespace {

using kernels::WeightView;

const SamplingParams& greedy_params() {
  static const SamplingParams kGreedy = [] {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }();
  return kGreedy;
}

}  // namespace

// One piece of a layer's attention: a sequence's whole chunk for one KV head (GEMM
// path), or one token's all heads (attend_token), or the heads of a range of KV heads
// of one token (attend_kv_heads), or a position range of one token's context
// (attend_partial into partial slot `part`, merged after the pass).
struct AttnUnit {
  int32_t seq;
  int32_t head;   // KV head for chunk units
  int64_t row;    // token row (non-chunk units)
  bool chunk;
  int32_t begin = 0, end = 0;  // position range of a split unit
  int32_t part = -1;           // partial slot of a split unit, -1 if not split
  int32_t kv_begin = 0, kv_end = 0;  // KV heads of a head-split unit (kv_begin < kv_end), else 0, 0
};

// Runs of at least this many tokens use the GEMM attention kernel.
constexpr int64_t kChunkAttentionMinTokens = 8;
// When a step has fewer decode tokens than threads, each decode token is split across
// the pool's threads so that one sequence does not leave threads idle: a context of at
// least this many positions by position range (flash-decoding), a shorter one by KV
// heads when there are at least as many as threads (nothing to merge).
constexpr int64_t kSplitAttentionMinContext = 1024;

struct ModelRunner::Impl {
  Impl(ThreadPool* pool, kernels::Isa isa) : kctx(pool, isa), attn_scratch(pool->num_threads()) {}

  kernels::KernelContext kctx;
  // EngineOptions::bf16_weights's tiles or EngineOptions::bf16_tiles (kctx points at them), or null.
  std::shared_ptr<const kernels::Bf16WeightTiles> bf16_weights;
  // Per layer: [block][slot][kv_head][head_dim] values of elem_bytes each.
  std::vector<ZeroedBuffer<uint8_t>> k_cache, v_cache;
  // Host swap pool, same layout: [host block][slot][kv_head][head_dim] per layer.
  std::vector<ZeroedBuffer<uint8_t>> k_host, v_host;
  size_t elem_bytes = sizeof(float);  // 4 (F32) or 2 (F16)

  // Per-step scratch, grown as needed and reused.
  std::vector<int32_t> tok, pos, seq_of;
  std::vector<float> x, xn, q, k, v, attn, tmp, gate, up, cos_sin, logits;
  std::vector<AttnUnit> attn_units;
  std::vector<int64_t> seq_first_row;
  std::vector<kernels::AttentionScratch> attn_scratch;  // one per pool thread
  std::vector<kernels::AttentionPartial> attn_partials;  // split units' states
  std::vector<std::pair<int64_t, int32_t>> attn_splits;  // (row, first partial slot) per split token
};

ModelRunner::~ModelRunner() = default;

const char* kv_cache_type_name(KvCacheType t) { return t == KvCacheType::kF16 ? "f16" : "f32"; }

StatusOr<KvCacheType> parse_kv_cache_type(std::string_view name) {
  if (name == "f32") return KvCacheType::kF32;
  if (name == "f16") return KvCacheType::kF16;
  return invalid_argument_error("unknown KV cache type '{}' (expected f32 or f16)", name);
}

namespace {
size_t kv_elem_bytes(KvCacheType t) { return t == KvCacheType::kF16 ? 2 : 4; }
kernels::GgmlType kv_ggml_type(KvCacheType t) {
  return t == KvCacheType::kF16 ? kernels::GgmlType::kF16 : kernels::GgmlType::kF32;
}
}  // namespace

int64_t ModelRunner::kv_bytes_per_block(const model::LlamaConfig& c, int32_t block_size, KvCacheType type) {
  return 2ll * c.n_layer * block_size * c.kv_dim() * static_cast<int64_t>(kv_elem_bytes(type));
}

StatusOr<Bf16Weights> make_bf16_weights(const model::LlamaModel& model, const EngineOptions& options,
                                        int64_t kv_bytes, ThreadPool& pool) {
  using kernels::Bf16WeightsMode;
  const Bf16WeightsMode mode = options.bf16_weights;
  Bf16Weights out;
  if (mode == Bf16WeightsMode::kOff) return out;
  // Who reads the tiles: the AMX bf16 tiles, or the avx512vnni-zmm level's bf16 vectors
  // (their types only: Q8_0 and Q4_K stay on the int8 kernels there).
  const kernels::Bf16WeightsReader reader = kernels::bf16_weights_reader(
      options.isa, options.amx_bf16, options.matmul_bf16, kernels::detect_cpu_features());
  const bool on_tiles = reader == kernels::Bf16WeightsReader::kTiles;
  if (reader == kernels::Bf16WeightsReader::kNone) {
    if (mode == Bf16WeightsMode::kAuto) {
      out.decision = "auto: not made (neither the bf16 tiles nor the bf16 vectors run here)";
      return out;
    }
    return failed_precondition_error(
        "engine: bf16_weights (ECOSERVE_BF16_WEIGHTS) needs the bf16 tiles (a CPU with AMX-BF16 and AVX-512 BF16 "
        "at the avx512amx level, amx_bf16 on: ECOSERVE_AMX_BF16) or the bf16 vectors (AVX-512 BF16 at the "
        "avx512vnni-zmm level, matmul_bf16 on: ECOSERVE_MATMUL_BF16)");
  }
  std::vector<const kernels::WeightView*> views = {&model.output()};
  for (const model::LayerWeights& l : model.layers()) {
    for (const kernels::WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) views.push_back(v);
  }
  std::erase_if(views, [&](const kernels::WeightView* v) { return !kernels::bf16_weights_reader_takes(reader, *v); });
  int64_t tile_bytes = 0;
  for (const kernels::WeightView* v : views) tile_bytes += kernels::Bf16WeightTiles::bytes_for(*v);
  const double mb = static_cast<double>(tile_bytes) / 1e6;
  if (tile_bytes == 0) {  // e.g. Q8_0 at the avx512vnni-zmm level: its int8 kernels read the weights
    out.decision = fmt::format("{}not made (no matrix the bf16 {} take)",
                               mode == Bf16WeightsMode::kAuto ? "auto: " : "", on_tiles ? "tiles" : "vectors");
    return out;
  }
  if (mode == Bf16WeightsMode::kAuto) {
    const StatusOr<int64_t> available = mem_available_bytes();
    if (!available.ok()) {
      out.decision = fmt::format("auto: not made ({})", available.status().message());
      return out;
    }
    if (!kernels::bf16_weights_auto_fits(tile_bytes, *available, kv_bytes, options.bf16_weights_share)) {
      out.decision = fmt::format(
          "auto: not made ({:.1f} MB of tiles > {:.0f}% of {:.1f} MB available less {:.1f} MB of KV cache; "
          "ECOSERVE_BF16_WEIGHTS=1 makes them)",
          mb, 100 * options.bf16_weights_share, static_cast<double>(*available) / 1e6,
          static_cast<double>(kv_bytes) / 1e6);
      return out;
    }
  }
  auto tiles = std::make_shared<kernels::Bf16WeightTiles>();
  for (const kernels::WeightView* v : views) {
    const Status st = tiles->add(*v, pool);
    if (st.ok()) continue;
    if (mode == Bf16WeightsMode::kOn) return st.with_prefix("engine: bf16 weights");
    out.decision = fmt::format("auto: not made ({})", st.message());  // run without, as if they did not fit
    return out;
  }
  out.tiles = std::move(tiles);
  out.decision = fmt::format("{}made at load: {:.1f} MB{}", mode == Bf16WeightsMode::kAuto ? "auto: " : "", mb,
                             on_tiles ? "" : " (for the bf16 vectors)");
  return out;
}

Status ModelRunner::make_bf16_weights() {
  if (options_.bf16_tiles != nullptr) {
    impl_->bf16_weights = options_.bf16_tiles;
    bf16_weights_decision_ = fmt::format("shared: {:.1f} MB", static_cast<double>(options_.bf16_tiles->bytes()) / 1e6);
  } else {
    const int64_t kv_bytes = int64_t{num_blocks_} * kv_bytes_per_block();
    ECO_ASSIGN_OR_RETURN(Bf16Weights made, engine::make_bf16_weights(*model_, options_, kv_bytes, *pool_));
    impl_->bf16_weights = std::move(made.tiles);
    bf16_weights_decision_ = std::move(made.decision);
  }
  impl_->kctx.bf16_weights = impl_->bf16_weights.get();
  return ok_status();
}

int64_t ModelRunner::bf16_weight_bytes() const { return impl_->bf16_weights ? impl_->bf16_weights->bytes() : 0; }

StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::create(std::shared_ptr<const model::LlamaModel> model,
                                                           const EngineOptions& options) {
  if (!model) return invalid_argument_error("engine: no model");
  if (options.block_size <= 0 || options.block_size > 4096) {
    return invalid_argument_error("engine: block_size {} must be in [1, 4096]", options.block_size);
  }
  if (!kernels::isa_supported(options.isa, kernels::detect_cpu_features())) {
    return invalid_argument_error("engine: this CPU cannot run the {} kernels", kernels::isa_name(options.isa));
  }
  std::unique_ptr<ModelRunner> r(new ModelRunner());
  r->model_ = std::move(model);
  r->options_ = options;
  const auto& c = r->model_->config();
  r->max_context_ = options.max_context > 0 ? options.max_context : c.n_ctx_train;
  if (options.num_kv_blocks > 0) {
    r->num_blocks_ = options.num_kv_blocks;
  } else {
    r->num_blocks_ = static_cast<int32_t>(std::min<int64_t>(
        std::numeric_limits<int32_t>::max(), options.kv_cache_bytes / r->kv_bytes_per_block()));
  }
  if (r->num_blocks_ <= 0) {
    return invalid_argument_error("engine: KV budget of {} bytes holds no block of {} bytes", options.kv_cache_bytes,
                                  r->kv_bytes_per_block());
  }
  r->pool_ = std::make_unique<ThreadPool>(options.num_threads);
  r->impl_ = std::make_unique<Impl>(r->pool_.get(), options.isa);
  r->impl_->kctx.amx_bf16 = options.amx_bf16;
  r->impl_->kctx.bf16_vectors = options.matmul_bf16;
  ECO_RETURN_IF_ERROR(r->make_bf16_weights());
  r->impl_->elem_bytes = kv_elem_bytes(options.kv_cache_type);
  const size_t per_layer = static_cast<size_t>(r->num_blocks_) * options.block_size * c.kv_dim() * r->impl_->elem_bytes;
  if (options.num_host_blocks < 0) return invalid_argument_error("engine: negative num_host_blocks");
  const size_t host_per_layer =
      static_cast<size_t>(options.num_host_blocks) * options.block_size * c.kv_dim() * r->impl_->elem_bytes;
  // Reserved, not committed: pages appear as blocks are first written.
  for (int32_t l = 0; l < c.n_layer; ++l) {
    for (auto [pool, n] : {std::pair{&r->impl_->k_cache, per_layer}, std::pair{&r->impl_->v_cache, per_layer},
                           std::pair{&r->impl_->k_host, host_per_layer}, std::pair{&r->impl_->v_host, host_per_layer}}) {
      auto buf = ZeroedBuffer<uint8_t>::create(n);
      if (!buf.ok()) return buf.status().with_prefix("engine: KV cache");
      pool->push_back(std::move(buf).value());
    }
  }
  return r;
}

void ModelRunner::copy_block(BlockId src, BlockId dst) {
  const auto& c = model_->config();
  const size_t n = static_cast<size_t>(options_.block_size) * c.kv_dim() * impl_->elem_bytes;  // bytes per block
  for (int32_t l = 0; l < c.n_layer; ++l) {
    std::memcpy(impl_->k_cache[l].data() + dst.value * n, impl_->k_cache[l].data() + src.value * n, n);
    std::memcpy(impl_->v_cache[l].data() + dst.value * n, impl_->v_cache[l].data() + src.value * n, n);
  }
}

StatusOr<StepOutput> ModelRunner::execute(const StepPlan& plan) {
  const auto& c = model_->config();
  const int32_t B = options_.block_size;
  Impl& m = *impl_;

  // Validate the whole plan before touching the cache.
  const int32_t host_blocks = options_.num_host_blocks;
  for (const auto& copy : plan.swap_out) {
    if (copy.src.value < 0 || copy.src.value >= num_blocks_ || copy.dst.value < 0 || copy.dst.value >= host_blocks) {
      return invalid_argument_error("engine: swap-out {} -> host {} outside the pools ({} device, {} host blocks)",
                                    copy.src.value, copy.dst.value, num_blocks_, host_blocks);
    }
  }
  for (const auto& copy : plan.swap_in) {
    if (copy.src.value < 0 || copy.src.value >= host_blocks || copy.dst.value < 0 || copy.dst.value >= num_blocks_) {
      return invalid_argument_error("engine: swap-in host {} -> {} outside the pools ({} device, {} host blocks)",
                                    copy.src.value, copy.dst.value, num_blocks_, host_blocks);
    }
  }
  for (const auto& copy : plan.copies) {
    if (copy.src.value < 0 || copy.src.value >= num_blocks_ || copy.dst.value < 0 || copy.dst.value >= num_blocks_) {
      return invalid_argument_error("engine: block copy {} -> {} outside [0, {})", copy.src.value, copy.dst.value,
                                    num_blocks_);
    }
  }
  int64_t T = 0;
  for (const auto& s : plan.seqs) {
    if (s.tokens.empty()) return invalid_argument_error("engine: request {} has no tokens in the step", s.id.value);
    if (s.num_computed < 0) return invalid_argument_error("engine: request {} has negative num_computed", s.id.value);
    const int64_t end = static_cast<int64_t>(s.num_computed) + static_cast<int64_t>(s.tokens.size());
    if (end > max_context_) {
      return invalid_argument_error("engine: request {} reaches position {} beyond the context of {} tokens",
                                    s.id.value, end, max_context_);
    }
    if (static_cast<int64_t>(s.block_table.size()) * B < end) {
      return invalid_argument_error("engine: request {} has {} blocks of {} tokens for {} tokens", s.id.value,
                                    s.block_table.size(), B, end);
    }
    for (BlockId b : s.block_table) {
      if (b.value < 0 || b.value >= num_blocks_) {
        return invalid_argument_error("engine: request {} uses block {} outside [0, {})", s.id.value, b.value,
                                      num_blocks_);
      }
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= c.n_vocab) {
        return invalid_argument_error("engine: request {} has token id {} outside the vocabulary of {}", s.id.value,
                                      t, c.n_vocab);
      }
    }
    T += static_cast<int64_t>(s.tokens.size());
  }
  // A valid plan's step, timed by phase when a phase clock is set (swaps and copies: other).
  PhaseTimer timer(phase_clock_, &phase_times_, StepPhase::kOther);
  {
    const size_t n = static_cast<size_t>(B) * c.kv_dim() * m.elem_bytes;  // bytes per block
    auto move_block = [&](std::vector<ZeroedBuffer<uint8_t>>& from, std::vector<ZeroedBuffer<uint8_t>>& to,
                          BlockId src, BlockId dst) {
      for (int32_t l = 0; l < c.n_layer; ++l) {
        std::memcpy(to[l].data() + dst.value * n, from[l].data() + src.value * n, n);
      }
    };
    for (const auto& s : plan.swap_out) {
      move_block(m.k_cache, m.k_host, s.src, s.dst);
      move_block(m.v_cache, m.v_host, s.src, s.dst);
    }
    for (const auto& s : plan.swap_in) {
      move_block(m.k_host, m.k_cache, s.src, s.dst);
      move_block(m.v_host, m.v_cache, s.src, s.dst);
    }
  }
  for (const auto& copy : plan.copies) copy_block(copy.src, copy.dst);
  StepOutput out;
  if (T == 0) return out;

  const int64_t d = c.n_embd, hd = c.head_dim, kv_dim = c.kv_dim(), q_dim = static_cast<int64_t>(c.n_head) * hd;
  const int32_t group = c.n_head / c.n_head_kv;
  m.tok.resize(T);
  m.pos.resize(T);
  m.seq_of.resize(T);
  {
    int64_t t = 0;
    for (size_t s = 0; s < plan.seqs.size(); ++s) {
      const auto& seq = plan.seqs[s];
      for (size_t i = 0; i < seq.tokens.size(); ++i, ++t) {
        m.tok[t] = seq.tokens[i];
        m.pos[t] = seq.num_computed + static_cast<int32_t>(i);
        m.seq_of[t] = static_cast<int32_t>(s);
      }
    }
  }
  // Attention work units, the same for every layer: a long run of one sequence is one
  // GEMM unit per KV head, other tokens one unit per token (all heads in one pass over
  // its K/V), or per position range when a few long decode tokens are split across
  // the threads; largest first.
  m.attn_units.clear();
  m.seq_first_row.resize(plan.seqs.size());
  {
    int64_t t = 0;
    std::vector<std::pair<int64_t, AttnUnit>> costed;
    int64_t decode_tokens = 0;
    for (const auto& seq : plan.seqs) {
      const int64_t n_q = static_cast<int64_t>(seq.tokens.size());
      if (n_q < kChunkAttentionMinTokens) decode_tokens += n_q;
    }
    const int32_t threads = pool_->num_threads();
    m.attn_splits.clear();
    int32_t partials_used = 0;  // m.attn_partials only grows, so its buffers are reused
    for (size_t s = 0; s < plan.seqs.size(); ++s) {
      const auto& seq = plan.seqs[s];
      const int64_t n_q = static_cast<int64_t>(seq.tokens.size());
      m.seq_first_row[s] = t;
      if (n_q >= kChunkAttentionMinTokens) {
        const int64_t cost = n_q * (seq.num_computed + n_q) * group;
        for (int32_t kvh = 0; kvh < c.n_head_kv; ++kvh) costed.push_back({cost, AttnUnit{static_cast<int32_t>(s), kvh, -1, true}});
      } else {
        for (int64_t i = 0; i < n_q; ++i) {
          const int64_t n_ctx = seq.num_computed + i + 1;
          const bool few = decode_tokens < threads;
          const int32_t parts = few && n_ctx >= kSplitAttentionMinContext ? threads : 1;
          if (parts == 1 && few && c.n_head_kv >= threads) {
            for (int32_t p = 0; p < threads; ++p) {
              AttnUnit u{static_cast<int32_t>(s), -1, t + i, false};
              u.kv_begin = static_cast<int32_t>(int64_t{c.n_head_kv} * p / threads);
              u.kv_end = static_cast<int32_t>(int64_t{c.n_head_kv} * (p + 1) / threads);
              costed.push_back({n_ctx * int64_t{u.kv_end - u.kv_begin} * group, u});
            }
            continue;
          }
          if (parts == 1) {
            costed.push_back({n_ctx * c.n_head, AttnUnit{static_cast<int32_t>(s), -1, t + i, false}});
            continue;
          }
          const int32_t first = partials_used;
          partials_used += parts;
          if (m.attn_partials.size() < static_cast<size_t>(partials_used)) m.attn_partials.resize(partials_used);
          m.attn_splits.push_back({t + i, first});
          for (int32_t p = 0; p < parts; ++p) {
            AttnUnit u{static_cast<int32_t>(s), -1, t + i, false};
            u.begin = static_cast<int32_t>(n_ctx * p / parts);
            u.end = static_cast<int32_t>(n_ctx * (p + 1) / parts);
            u.part = first + p;
            costed.push_back({(u.end - u.begin) * int64_t{c.n_head}, u});
          }
        }
      }
      t += n_q;
    }
    std::stable_sort(costed.begin(), costed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [cost, unit] : costed) m.attn_units.push_back(unit);
  }
  m.x.resize(T * d);
  m.xn.resize(T * d);
  m.q.resize(T * q_dim);
  m.k.resize(T * kv_dim);
  m.v.resize(T * kv_dim);
  m.attn.resize(T * q_dim);
  m.tmp.resize(T * d);
  m.gate.resize(T * c.n_ff);
  m.up.resize(T * c.n_ff);
  m.cos_sin.resize(T * c.rope_dim);
  ThreadPool& pool = *pool_;
  // Per-token work (norms, RoPE, KV writes) goes to the threads in runs of at least this
  // many tokens: a 32-token decode step is split, a single token is not dispatched.
  const int64_t row_grain = 8;

  // Each token's row is normed for the first layer's attention while it is in L1; later
  // layers' attention norms run with the residual add that ends the layer before.
  pool.parallel_for(T, row_grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      model_->embed(m.tok[t], m.x.data() + t * d);
      kernels::rope_cos_sin(m.pos[t], c.rope_dim, c.rope_freq_base, c.rope_freq_scale,
                            m.cos_sin.data() + t * c.rope_dim);
      if (c.n_layer > 0) {
        kernels::rms_norm(m.x.data() + t * d, model_->layers()[0].attn_norm.data(), d, c.rms_eps, m.xn.data() + t * d);
      }
    }
  });

  // x += tmp per token row, then (norm != nullptr) xn = rms_norm(x) of the row while it is in L1.
  auto residual_add_and_norm = [&](const float* norm) {
    pool.parallel_for(T, row_grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        kernels::add_inplace(m.x.data() + t * d, m.tmp.data() + t * d, d);
        if (norm != nullptr) kernels::rms_norm(m.x.data() + t * d, norm, d, c.rms_eps, m.xn.data() + t * d);
      }
    });
  };

  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const model::LayerWeights& w = model_->layers()[l];
    const kernels::MatmulTarget qkv[] = {{&w.wq, m.q.data()}, {&w.wk, m.k.data()}, {&w.wv, m.v.data()}};
    timer.enter(StepPhase::kLinear);
    kernels::matmul_many(qkv, m.xn.data(), T, m.kctx);
    timer.enter(StepPhase::kOther);

    uint8_t* kc = m.k_cache[l].data();
    uint8_t* vc = m.v_cache[l].data();
    const bool f16 = options_.kv_cache_type == KvCacheType::kF16;
    pool.parallel_for(T, row_grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        float* qt = m.q.data() + t * q_dim;
        float* kt = m.k.data() + t * kv_dim;
        float* vt = m.v.data() + t * kv_dim;
        if (c.qkv_bias) {
          kernels::add_inplace(qt, w.bq.data(), q_dim);
          kernels::add_inplace(kt, w.bk.data(), kv_dim);
          kernels::add_inplace(vt, w.bv.data(), kv_dim);
        }
        const float* cs = m.cos_sin.data() + t * c.rope_dim;
        kernels::rope_apply(qt, c.n_head, hd, c.rope_dim, c.rope_neox, cs);
        kernels::rope_apply(kt, c.n_head_kv, hd, c.rope_dim, c.rope_neox, cs);
        const auto& table = plan.seqs[m.seq_of[t]].block_table;
        const int32_t p = m.pos[t];
        const size_t slot = (static_cast<size_t>(table[p / B].value) * B + p % B) * kv_dim;  // in values
        if (f16) {
          kernels::fp32_to_fp16_row(kt, reinterpret_cast<uint16_t*>(kc) + slot, kv_dim);
          kernels::fp32_to_fp16_row(vt, reinterpret_cast<uint16_t*>(vc) + slot, kv_dim);
        } else {
          std::memcpy(reinterpret_cast<float*>(kc) + slot, kt, kv_dim * sizeof(float));
          std::memcpy(reinterpret_cast<float*>(vc) + slot, vt, kv_dim * sizeof(float));
        }
      }
    });

    // Paged attention, causal over each sequence's cache; units handed out dynamically.
    // A thread claims its next unit while it starts one, so that a decode token's
    // prefetch runs on into the next token's context (kernels::DecodeStream), except
    // for the last 2 units per thread (claimed as they are reached, so no thread waits
    // with a unit claimed by one still busy).
    kernels::AttentionDims dims{c.n_head, c.n_head_kv, static_cast<int32_t>(hd), scale, options_.isa};
    dims.amx_bf16 = options_.amx_bf16;
    dims.fp16_math = options_.attention_fp16_math;
    dims.bf16_vectors = options_.attention_bf16;
    dims.bf16_scores = options_.attention_bf16;
    timer.enter(StepPhase::kAttention);
    std::atomic<size_t> next_unit{0};
    const size_t n_units = m.attn_units.size();
    const size_t tail = 2 * static_cast<size_t>(pool.num_threads());
    auto token_unit = [&](size_t u) {
      const AttnUnit& a = m.attn_units[u];
      return !a.chunk && a.kv_begin == a.kv_end && a.part < 0;
    };
    pool.run([&](int thread, int) {
      kernels::AttentionScratch& scratch = m.attn_scratch[thread];
      bool started = false;  // this unit's first positions were prefetched by the one before
      size_t ahead = n_units;  // the unit claimed ahead, if any
      for (size_t u = next_unit.fetch_add(1); u < n_units;) {
        if (next_unit.load(std::memory_order_relaxed) + tail < n_units) ahead = next_unit.fetch_add(1);
        const bool warm = started;
        started = false;
        const AttnUnit& unit = m.attn_units[u];
        const auto& seq = plan.seqs[unit.seq];
        const kernels::PagedKvView kv{kc, vc, kv_dim, B, seq.block_table, f16};
        if (unit.chunk) {
          const int64_t t0 = m.seq_first_row[unit.seq];
          kernels::attend_chunk(m.q.data() + t0 * q_dim, q_dim, static_cast<int32_t>(seq.tokens.size()),
                                seq.num_computed, unit.head, kv, dims, m.attn.data() + t0 * q_dim, q_dim, scratch);
        } else if (unit.kv_begin < unit.kv_end) {
          const int64_t t = unit.row;
          kernels::attend_kv_heads(m.q.data() + t * q_dim, unit.kv_begin, unit.kv_end, m.pos[t] + 1, kv, dims,
                                   m.attn.data() + t * q_dim, scratch);
        } else if (unit.part < 0) {
          const int64_t t = unit.row;
          kernels::DecodeStream stream;
          stream.started = warm;
          kernels::PagedKvView next_kv;
          if (ahead < n_units && token_unit(ahead)) {
            const AttnUnit& nu = m.attn_units[ahead];
            next_kv = kernels::PagedKvView{kc, vc, kv_dim, B, plan.seqs[nu.seq].block_table, f16};
            stream.next = &next_kv;
            stream.next_n_ctx = m.pos[nu.row] + 1;
          }
          kernels::attend_token(m.q.data() + t * q_dim, m.pos[t] + 1, kv, dims, m.attn.data() + t * q_dim, scratch,
                                stream);
          started = stream.next != nullptr;
        } else {
          kernels::attend_partial(m.q.data() + unit.row * q_dim, unit.begin, unit.end, kv, dims,
                                  m.attn_partials[unit.part], scratch);
        }
        u = ahead < n_units ? ahead : next_unit.fetch_add(1);
        ahead = n_units;
      }
    });
    const size_t parts = static_cast<size_t>(pool.num_threads());  // every split token has one part per thread
    for (const auto& [row, first] : m.attn_splits) {
      kernels::merge_partials(std::span<const kernels::AttentionPartial>(m.attn_partials.data() + first, parts),
                              c.n_head, static_cast<int32_t>(hd), m.attn.data() + row * q_dim);
    }

    timer.enter(StepPhase::kLinear);
    kernels::matmul(w.wo, m.attn.data(), T, m.tmp.data(), m.kctx);
    timer.enter(StepPhase::kOther);
    // Residual add and the FFN norm, per token on the threads (a serial add of a 512-token
    // prompt kept the other thread waiting).
    residual_add_and_norm(w.ffn_norm.data());
    const kernels::MatmulTarget gate_up[] = {{&w.w_gate, m.gate.data()}, {&w.w_up, m.up.data()}};
    timer.enter(StepPhase::kLinear);
    kernels::matmul_many(gate_up, m.xn.data(), T, m.kctx);
    // SiLU and the product with up, then the down projection: one call, so that the bf16
    // products make silu(gate) * up in their packing of the activations (linear-layer time).
    kernels::matmul_gated(w.w_down, m.gate.data(), m.up.data(), T, m.tmp.data(), m.kctx);
    timer.enter(StepPhase::kOther);
    // The residual add, and the next layer's attention norm.
    residual_add_and_norm(l + 1 < c.n_layer ? model_->layers()[l + 1].attn_norm.data() : nullptr);
  }

  // Logits only for the sequences that sample: the last token of their run.
  std::vector<size_t> sampled;
  std::vector<int64_t> last_row;
  {
    int64_t t = 0;
    for (size_t s = 0; s < plan.seqs.size(); ++s) {
      t += static_cast<int64_t>(plan.seqs[s].tokens.size());
      if (plan.seqs[s].sample || plan.seqs[s].return_logits) {
        sampled.push_back(s);
        last_row.push_back(t - 1);
      }
    }
  }
  const int64_t S = static_cast<int64_t>(sampled.size());
  if (S == 0) return out;
  timer.enter(StepPhase::kOutput);
  for (int64_t i = 0; i < S; ++i) {
    kernels::rms_norm(m.x.data() + last_row[i] * d, model_->output_norm().data(), d, c.rms_eps, m.xn.data() + i * d);
  }
  m.logits.resize(S * c.n_vocab);
  kernels::matmul(model_->output(), m.xn.data(), S, m.logits.data(), m.kctx);

  timer.enter(StepPhase::kSampling);
  out.seqs.resize(S);
  pool.parallel_for(S, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto& seq = plan.seqs[sampled[i]];
      SeqOutput& o = out.seqs[i];
      o.id = seq.id;
      std::span<float> row(m.logits.data() + i * c.n_vocab, c.n_vocab);
      if (seq.return_logits) o.logits.assign(row.begin(), row.end());
      if (!seq.sample) continue;
      const SamplingParams& sp = seq.sampling ? *seq.sampling : greedy_params();
      SampleResult r = sample_token(row, sp, seq.prompt_tokens, seq.output_tokens, seq.seed);
      o.token = r.token;
      o.logprob = r.logprob;
      o.top_logprobs = std::move(r.top_logprobs);
    }
  });
  return out;
}

StatusOr<std::vector<uint8_t>> ModelRunner::export_kv(std::span<const BlockId> blocks, int32_t begin,
                                                      int32_t end) const {
  const auto& c = model_->config();
  const int32_t B = options_.block_size;
  if (begin < 0 || end < begin || static_cast<int64_t>(blocks.size()) * B < end) {
    return invalid_argument_error("engine: export of tokens [{}, {}) from {} blocks of {}", begin, end, blocks.size(),
                                  B);
  }
  const int32_t num_tokens = end - begin;
  for (BlockId b : blocks) {
    if (b.value < 0 || b.value >= num_blocks_) return invalid_argument_error("engine: export of unknown block {}", b.value);
  }
  KvExportHeader h;
  h.model_fingerprint = model_->fingerprint();
  h.n_layer = c.n_layer;
  h.n_head_kv = c.n_head_kv;
  h.head_dim = c.head_dim;
  h.block_size = B;
  h.dtype = static_cast<uint32_t>(kv_ggml_type(options_.kv_cache_type));
  h.num_tokens = static_cast<uint32_t>(num_tokens);
  h.first_token = static_cast<uint32_t>(begin);
  const size_t row = static_cast<size_t>(c.kv_dim()) * impl_->elem_bytes;
  std::vector<uint8_t> bytes(sizeof(h) + 2ull * c.n_layer * num_tokens * row);
  std::memcpy(bytes.data(), &h, sizeof(h));
  uint8_t* p = bytes.data() + sizeof(h);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    for (const auto* cache : {&impl_->k_cache[l], &impl_->v_cache[l]}) {
      for (int32_t t = begin; t < end; ++t, p += row) {
        const size_t slot = (static_cast<size_t>(blocks[t / B].value) * B + t % B) * row;  // in bytes
        std::memcpy(p, cache->data() + slot, row);
      }
    }
  }
  return bytes;
}

StatusOr<int32_t> ModelRunner::import_kv(std::span<const uint8_t> bytes, std::span<const BlockId> blocks) {
  const auto& c = model_->config();
  const int32_t B = options_.block_size;
  KvExportHeader h;
  if (bytes.size() < sizeof(h)) return invalid_argument_error("engine: KV blob of {} bytes has no header", bytes.size());
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != KvExportHeader{}.magic || h.version != KvExportHeader{}.version) {
    return invalid_argument_error("engine: not an ecoserve KV export (bad magic or version)");
  }
  if (h.model_fingerprint != model_->fingerprint()) {
    return failed_precondition_error("engine: KV was exported by another model (fingerprint {:016x}, this {:016x})",
                                     h.model_fingerprint, model_->fingerprint());
  }
  if (h.n_layer != static_cast<uint32_t>(c.n_layer) || h.n_head_kv != static_cast<uint32_t>(c.n_head_kv) ||
      h.head_dim != static_cast<uint32_t>(c.head_dim)) {
    return failed_precondition_error("engine: KV shape {}x{}x{} does not match this engine's {}x{}x{}", h.n_layer,
                                     h.n_head_kv, h.head_dim, c.n_layer, c.n_head_kv, c.head_dim);
  }
  if (h.dtype != static_cast<uint32_t>(kv_ggml_type(options_.kv_cache_type))) {
    const auto* traits = kernels::type_traits(static_cast<kernels::GgmlType>(h.dtype));
    return failed_precondition_error("engine: KV values are {}, this engine's KV cache is {}",
                                     traits ? traits->name : "an unknown type",
                                     kv_cache_type_name(options_.kv_cache_type));
  }
  if (h.block_size != static_cast<uint32_t>(B)) {
    return failed_precondition_error("engine: KV block size {} differs from this engine's {}", h.block_size, B);
  }
  const size_t row = static_cast<size_t>(c.kv_dim()) * impl_->elem_bytes;
  const uint64_t expected = sizeof(h) + 2ull * c.n_layer * h.num_tokens * row;
  if (bytes.size() != expected) {
    return invalid_argument_error("engine: KV blob has {} bytes, its header says {}", bytes.size(), expected);
  }
  const int64_t end = static_cast<int64_t>(h.first_token) + h.num_tokens;
  if (end > max_context_ || static_cast<int64_t>(blocks.size()) * B < end) {
    return invalid_argument_error("engine: imported tokens [{}, {}) do not fit {} blocks of {}", h.first_token, end,
                                  blocks.size(), B);
  }
  for (BlockId b : blocks) {
    if (b.value < 0 || b.value >= num_blocks_) return invalid_argument_error("engine: import into unknown block {}", b.value);
  }
  const uint8_t* p = bytes.data() + sizeof(h);
  for (int32_t l = 0; l < c.n_layer; ++l) {
    for (auto* cache : {&impl_->k_cache[l], &impl_->v_cache[l]}) {
      for (int64_t t = h.first_token; t < end; ++t, p += row) {
        const size_t slot = (static_cast<size_t>(blocks[static_cast<size_t>(t / B)].value) * B + t % B) * row;
        std::memcpy(cache->data() + slot, p, row);
      }
    }
  }
  return static_cast<int32_t>(h.num_tokens);
}

}  // namespace ecoserve::engine
