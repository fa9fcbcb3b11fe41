#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>

#include <fmt/format.h>

#include "base/status.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/matmul_kernels.h"
#include "kernels/ops.h"
#include "kernels/packed_weights.h"

namespace ecoserve::kernels {
namespace {

// Rows are handed to threads in units of 16 so no two threads write the same
// 64-byte line of y (and kRows8 groups of 8 rows stay whole).
constexpr std::int64_t kRowUnit = 16;
// Up to this many tokens (the GEMV kernels) rows go to threads in kChunksPerThread
// chunks each, dynamically.
constexpr std::int64_t kDynamicMaxTokens = 4;
constexpr int kChunksPerThread = 4;
// Quantize activations on all threads only when there is enough of them.
constexpr std::int64_t kParallelQuantizeElems = 64 * 1024;

bool is_float_type(GgmlType t) { return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16; }
bool is_quantized_type(GgmlType t) {
  return t == GgmlType::kQ8_0 || t == GgmlType::kQ4_0 || t == GgmlType::kQ4_K || t == GgmlType::kQ6_K;
}

// Contiguous share `i` of [0, n) split in `parts`, in whole units (except the last).
inline void share(std::int64_t n, std::int64_t unit, int i, int parts, std::int64_t* begin, std::int64_t* end) {
  const std::int64_t units = (n + unit - 1) / unit;
  *begin = std::min(n, units * i / parts * unit);
  *end = std::min(n, units * (i + 1) / parts * unit);
}

// rows_fn(thread, r0, r1, t0, t1) on every thread's share of rows [0, rows) x tokens
// [0, n_tokens): rows in kRowUnit units unless there are too few rows for it, else tokens.
template <class RowsFn>
void run_shares(ThreadPool& pool, std::int64_t rows, std::int64_t n_tokens, RowsFn&& rows_fn) {
  const int nthreads = pool.num_threads();
  if (nthreads == 1) {
    rows_fn(0, 0, rows, 0, n_tokens);
    return;
  }
  const bool split_rows = rows >= 4 * kRowUnit * nthreads || n_tokens < 2 * nthreads;
  if (split_rows && n_tokens <= kDynamicMaxTokens) {
    // Memory-bound: chunks handed out as threads finish, so a thread that gets less of
    // the memory bandwidth does less of the rows instead of making the other wait.
    const std::int64_t units = (rows + kRowUnit - 1) / kRowUnit;
    const std::int64_t chunks = std::min<std::int64_t>(units, std::int64_t{kChunksPerThread} * nthreads);
    std::atomic<std::int64_t> next{0};
    pool.run([&](int i, int) {
      for (std::int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
        std::int64_t r0, r1;
        share(rows, kRowUnit, static_cast<int>(c), static_cast<int>(chunks), &r0, &r1);
        if (r0 < r1) rows_fn(i, r0, r1, 0, n_tokens);
      }
    });
    return;
  }
  pool.run([&](int i, int parts) {
    std::int64_t r0 = 0, r1 = rows, t0 = 0, t1 = n_tokens;
    if (split_rows) {
      share(rows, kRowUnit, i, parts, &r0, &r1);
    } else {
      share(n_tokens, 1, i, parts, &t0, &t1);
    }
    if (r0 < r1 && t0 < t1) rows_fn(i, r0, r1, t0, t1);
  });
}

// The checks every product's weights and shape must pass.
void check_shape(const WeightView& w, std::int64_t n_tokens) {
  const TypeTraits* traits = type_traits(w.type);
  ECO_CHECK_MSG(traits != nullptr && (is_float_type(w.type) || is_quantized_type(w.type)),
                "matmul: unsupported weight type {}", type_name(w.type));
  ECO_CHECK_MSG(w.rows >= 0 && w.cols > 0 && n_tokens >= 0, "matmul: bad shape rows={} cols={} n_tokens={}", w.rows,
                w.cols, n_tokens);
  ECO_CHECK_MSG(w.cols % traits->block_elems == 0, "matmul: cols={} is not a multiple of the {} block size {}", w.cols,
                traits->name, traits->block_elems);
  ECO_CHECK_MSG(w.row_bytes == row_bytes(*traits, w.cols), "matmul: row_bytes={} but a {} row of {} values has {}",
                w.row_bytes, traits->name, w.cols, row_bytes(*traits, w.cols));
  ECO_CHECK_MSG(w.layout == WeightLayout::kGguf ||
                    ((w.type == GgmlType::kQ8_0 || w.type == GgmlType::kQ4_K) && w.rows % 8 == 0),
                "matmul: the kRows8 layout needs q8_0 or q4_K with rows % 8 == 0, not {} with {} rows", traits->name,
                w.rows);
}

bool valid_gemv_streams(std::int32_t n) { return n == 0 || n == 2 || n == 4; }
bool valid_gemv_prefetch(std::int32_t n) { return n >= 0 && n <= 65536 && n % 64 == 0; }
bool valid_q4k_tile_pairs(std::int32_t n) { return n == 1 || n == 2; }

// The GEMV and tile settings of ctx are ones the kernels take.
void check_kernel_options(const KernelContext& ctx) {
  ECO_CHECK_MSG(valid_gemv_streams(ctx.gemv_streams), "matmul: KernelContext::gemv_streams must be 0, 2 or 4, not {}",
                ctx.gemv_streams);
  ECO_CHECK_MSG(valid_gemv_prefetch(ctx.gemv_prefetch),
                "matmul: KernelContext::gemv_prefetch must be a multiple of 64 in [0, 65536], not {}",
                ctx.gemv_prefetch);
  ECO_CHECK_MSG(valid_q4k_tile_pairs(ctx.q4k_tile_pairs),
                "matmul: KernelContext::q4k_tile_pairs must be 1 or 2, not {}", ctx.q4k_tile_pairs);
  ECO_CHECK_MSG(!ctx.q4k_gfni || cpu_has_gfni(), "matmul: KernelContext::q4k_gfni is set on a CPU without GFNI");
}

// x [n_tokens, cols] quantized into ctx.scratch (on all threads when there is enough of it).
detail::QuantizedActs quantize_input(const float* x, std::int64_t cols, std::int64_t n_tokens, bool k_format,
                                     KernelContext& ctx) {
  const std::size_t need = detail::quantized_acts_bytes(n_tokens, cols);
  if (ctx.scratch.size() < need) ctx.scratch.resize(need);
  detail::QuantizedActs acts = detail::layout_quantized_acts(ctx.scratch.data(), n_tokens, cols, k_format);
  acts.gemv_streams = ctx.gemv_streams;
  acts.gemv_prefetch = ctx.gemv_prefetch;
  acts.q4k_tile_pairs = ctx.q4k_tile_pairs;
  acts.q4k_gfni = ctx.q4k_gfni;
  acts.q8_lanes = ctx.q8_lanes;
  acts.q4k_lanes = ctx.q4k_lanes;
  acts.q6k_lanes = ctx.q6k_lanes;
  ThreadPool& pool = *ctx.pool;
  if (pool.num_threads() > 1 && n_tokens > 1 && n_tokens * cols >= kParallelQuantizeElems) {
    pool.run([&](int i, int parts) {
      std::int64_t t0, t1;
      share(n_tokens, 1, i, parts, &t0, &t1);
      if (t0 < t1) detail::quantize_acts(x, cols, t0, t1, acts);
    });
  } else {
    detail::quantize_acts(x, cols, 0, n_tokens, acts);
  }
  return acts;
}

// Each thread's share of ctx.tile_scratch (grown here) for the int8 kernels on rows of
// `cols` values: whole pages, with a page left between one thread's share and the
// next's, so that the prefetchers of a core reading on past the end of its share do
// not take lines another core is writing. With the shares back to back (15.5 KB apart
// for 768 columns), the second thread's AMX Q4_K tiles (which write a copy of each pair
// of groups there and read it back) ran 38% slower than the first's (Intel Xeon with
// AMX, 2048 x 768, 32 tokens, two threads: 327 against 239 kcycles per call); with
// pages but no gap, as slow; with the gap 136 -> 101-106 us per product.
class TileScratch {
 public:
  static constexpr std::size_t kPageFloats = 4096 / sizeof(float);
  // floats_per_block: per block of 32 columns (the bf16 tiles' slab copies need more).
  TileScratch(std::int64_t cols, KernelContext& ctx,
              std::int64_t floats_per_block = detail::kQuantScratchFloatsPerBlock)
      : per_thread_((static_cast<std::size_t>(floats_per_block * (cols / 32)) + 128 + kPageFloats - 1) /
                        kPageFloats * kPageFloats +
                    kPageFloats) {
    const std::size_t need = per_thread_ * static_cast<std::size_t>(ctx.pool->num_threads()) + kPageFloats;
    if (ctx.tile_scratch.size() < need) ctx.tile_scratch.resize(need);
    base_ = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(ctx.tile_scratch.data()) + 4095) / 4096 * 4096);
  }
  float* of(int thread) const { return base_ + per_thread_ * static_cast<std::size_t>(thread); }

 private:
  std::size_t per_thread_;
  float* base_;
};

// Activation bytes the bf16 tiles keep in L2 while a run of columns passes: the runs are
// as long as fit (whole super-blocks of 256 columns) with the tokens of a chunk of at most
// kAmxBf16ChunkTokens; every chunk copies the weights again. Intel Xeon (family 6 model
// 167), kernels_bench BM_Synth1bMatmuls Q8_0 at 512 tokens, one thread: 512 KiB 1700 ms,
// 1 MiB 1360, 2 MiB 1606, 8 MiB 1552 (chunks of 512); chunks of 128, 256, 512 tokens
// 1413, 1183-1214, 1319-1375 ms (two threads: 256 581-626, 512 645-646 ms).
constexpr std::int64_t kAmxBf16ActBytes = 1 << 20;
constexpr std::int64_t kAmxBf16ChunkTokens = 256;

// One product of the bf16 path: weights and output.
struct Bf16Target {
  const WeightView* w;
  float* y;
  const std::uint16_t* made = nullptr;  // its tiles made at load (KernelContext::bf16_weights)
};

const std::uint16_t* made_tiles(const KernelContext& ctx, const WeightView& w) {
  return ctx.bf16_weights != nullptr ? ctx.bf16_weights->find(w) : nullptr;
}

// The targets (each bf16_products_apply, the same cols) times x [n_tokens][cols] on the bf16
// tiles or, at the avx512vnni-zmm level, AVX512-BF16 vectors: x packed once per chunk of
// tokens (token tiles split over the threads), then each thread's share of the targets'
// rows laid end to end, in slabs of 32. up: null, or x is silu(x) * up (matmul_gated), made
// in the packing.
void amx_bf16_matmul(std::span<const Bf16Target> targets, const float* x, std::int64_t n_tokens,
                     KernelContext& ctx, const float* up = nullptr) {
  const std::int64_t cols = targets[0].w->cols, nb = cols / 32;
  std::int64_t total_rows = 0;
  for (const Bf16Target& t : targets) total_rows += t.w->rows;
  const std::int64_t chunk = std::min(n_tokens, kAmxBf16ChunkTokens);
  const std::int64_t chunk_tiles = (chunk + 15) / 16;
  // Whole super-blocks of Q4_K and Q6_K (8 blocks; whole runs of Q8_0's, 4), so that a
  // run's weights are one range of bytes per group (per row for GGUF rows).
  const std::int64_t run_blocks =
      std::min(nb, std::max<std::int64_t>(8, kAmxBf16ActBytes / (chunk_tiles * 16 * 64) / 8 * 8));
  const std::size_t need = detail::amx_bf16_acts_bytes(chunk, cols) + 64;
  if (ctx.scratch.size() < need) ctx.scratch.resize(need);
  auto* acts = reinterpret_cast<std::uint16_t*>((reinterpret_cast<std::uintptr_t>(ctx.scratch.data()) + 63) / 64 * 64);
  // 4 * run_blocks B tiles of 1 KiB per thread (two slabs of two pairs): 1024 floats per
  // block of the run.
  const TileScratch scratch(run_blocks * 32, ctx, 1024);
  const bool vectors = ctx.isa != Isa::kAvx512Amx;
  ThreadPool& pool = *ctx.pool;
  for (std::int64_t tc = 0; tc < n_tokens; tc += chunk) {
    const std::int64_t nt = std::min(chunk, n_tokens - tc);
    const float* xc = x + tc * cols;
    pool.run([&](int i, int parts) {
      std::int64_t b0, b1;
      share((nt + 15) / 16, 1, i, parts, &b0, &b1);
      if (b0 < b1) detail::amx_bf16_pack_acts(xc, up != nullptr ? up + tc * cols : nullptr, cols, nt, b0, b1, acts);
    });
    pool.run([&](int i, int parts) {
      std::int64_t r0, r1;
      share(total_rows, 32, i, parts, &r0, &r1);
      auto* wbuf = reinterpret_cast<std::uint16_t*>(scratch.of(i));
      std::int64_t base = 0;
      for (const Bf16Target& t : targets) {
        const std::int64_t lo = std::max(r0, base), hi = std::min(r1, base + t.w->rows);
        if (lo < hi) {
          detail::amx_bf16_rows(t.w->type, static_cast<const std::uint8_t*>(t.w->data), t.w->row_bytes, cols, acts,
                                nt, lo - base, hi - base, run_blocks, t.y + tc * t.w->rows, t.w->rows, wbuf,
                                vectors, t.made);
        }
        base += t.w->rows;
      }
    });
  }
}

}  // namespace

std::int32_t gemv_streams_for(const CpuFeatures& cpu) { return cpu.vendor == "GenuineIntel" ? 4 : 0; }

StatusOr<bool> amx_bf16_from_env() { return switch_from_env("ECOSERVE_AMX_BF16", true); }

bool default_amx_bf16() {
  static const bool kOn = [] {
    StatusOr<bool> on = amx_bf16_from_env();
    return !on.ok() || *on;
  }();
  return kOn;
}

bool amx_bf16_supported(const CpuFeatures& cpu) {
  return isa_supported(Isa::kAvx512Amx, cpu) && cpu.amx_bf16 && cpu.avx512_bf16;
}

std::string amx_bf16_summary(bool on, const CpuFeatures& cpu) {
  if (!amx_bf16_supported(cpu)) return "not on this CPU (AMX-BF16 and AVX-512 BF16 with the avx512amx level)";
  if (!on) {
    return fmt::format("off (ECOSERVE_AMX_BF16=0: every batch gives the int8 and float levels' bits, those of "
                       "batch 1; unset or 1: batches of {}+ tokens (F16 and BF16 {}+, F32 {}+, Q6_K {}+) on bf16 "
                       "tiles, prompts 1.6-1.7x faster in Q8_0 and Q4_K, 4-6x in F16 and Q6_K, their attention "
                       "2-3x)",
                       kAmxBf16MinTokens, amx_bf16_min_tokens(GgmlType::kF16), amx_bf16_min_tokens(GgmlType::kF32),
                       amx_bf16_min_tokens(GgmlType::kQ6_K));
  }
  return fmt::format("on (ECOSERVE_AMX_BF16 unset or 1; 0 for the int8 and float levels' bits): Q8_0 and Q4_K (rows "
                     "of 8) weights times batches of {}+ tokens, Q6_K of {}+, F32 of {}+, F16 and BF16 of {}+, and "
                     "the attention of prompt chunks of {}+ tokens (head sizes a multiple of 32), on bf16 tiles at "
                     "the avx512amx level; weights, activations, queries, keys, values and softmax weights rounded "
                     "to bf16",
                     kAmxBf16MinTokens, amx_bf16_min_tokens(GgmlType::kQ6_K), amx_bf16_min_tokens(GgmlType::kF32),
                     amx_bf16_min_tokens(GgmlType::kF16), kAmxBf16MinTokens);
}

bool amx_bf16_takes(const WeightView& w) {
  if (w.rows % 8 != 0 || w.cols % 32 != 0) return false;
  switch (w.type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_K: return w.layout == WeightLayout::kRows8;
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ6_K: return w.layout == WeightLayout::kGguf;
    default: return false;
  }
}

bool amx_bf16_applies(const KernelContext& ctx, const WeightView& w, std::int64_t n_tokens) {
  static const bool kSupported = amx_bf16_supported(detect_cpu_features());
  return ctx.amx_bf16 && kSupported && ctx.isa == Isa::kAvx512Amx && amx_bf16_takes(w) &&
         n_tokens >= amx_bf16_min_tokens(w.type, made_tiles(ctx, w) != nullptr);
}

StatusOr<bool> matmul_bf16_from_env() {
  return switch_from_env("ECOSERVE_MATMUL_BF16", detect_cpu_features().fast_bf16_dot);
}

bool default_matmul_bf16() {
  static const bool kOn = [] {
    StatusOr<bool> on = matmul_bf16_from_env();
    return on.ok() ? *on : detect_cpu_features().fast_bf16_dot;
  }();
  return kOn;
}

bool bf16_vectors_supported(const CpuFeatures& cpu) {
  return isa_supported(Isa::kAvx512VnniZmm, cpu) && cpu.avx512_bf16;
}

bool bf16_vectors_takes(const WeightView& w) {
  if (w.rows % 8 != 0 || w.cols % 32 != 0 || w.layout != WeightLayout::kGguf) return false;
  return w.type == GgmlType::kF32 || w.type == GgmlType::kF16 || w.type == GgmlType::kBF16 ||
         w.type == GgmlType::kQ6_K;
}

bool bf16_vectors_applies(const KernelContext& ctx, const WeightView& w, std::int64_t n_tokens) {
  static const bool kSupported = bf16_vectors_supported(detect_cpu_features());
  return ctx.bf16_vectors && kSupported && ctx.isa == Isa::kAvx512VnniZmm && bf16_vectors_takes(w) &&
         n_tokens >= bf16_vectors_min_tokens(w.type, made_tiles(ctx, w) != nullptr);
}

std::string bf16_vectors_summary(bool on, const CpuFeatures& cpu) {
  if (!bf16_vectors_supported(cpu)) return "not on this CPU (AVX-512 BF16 with the avx512vnni-zmm level)";
  if (!on) {
    return fmt::format("off ({}: every batch gives the float and int8 levels' bits; 1: F16 and BF16 weights times "
                       "batches of {}+ tokens, F32 and Q6_K of {}+, on vdpbf16ps)",
                       std::getenv("ECOSERVE_MATMUL_BF16") != nullptr || cpu.fast_bf16_dot
                           ? std::string("ECOSERVE_MATMUL_BF16=0")
                           : bf16_dot_slow_reason("ECOSERVE_MATMUL_BF16"),
                       bf16_vectors_min_tokens(GgmlType::kF16), bf16_vectors_min_tokens(GgmlType::kF32));
  }
  return fmt::format("on ({}; 0 for the float and int8 levels' bits): F16 and BF16 "
                     "weights times batches of {}+ tokens, F32 and Q6_K of {}+ (with their tiles made at load, bf16 "
                     "weights: F32 {}+, F16 and BF16 {}+, Q6_K {}+) on AVX512-BF16 vectors (vdpbf16ps) at the "
                     "avx512vnni-zmm level; weights and activations rounded to bf16",
                     cpu.fast_bf16_dot ? "ECOSERVE_MATMUL_BF16 unset or 1" : "ECOSERVE_MATMUL_BF16=1",
                     bf16_vectors_min_tokens(GgmlType::kF16), bf16_vectors_min_tokens(GgmlType::kF32),
                     bf16_vectors_min_tokens(GgmlType::kF32, true), bf16_vectors_min_tokens(GgmlType::kF16, true),
                     bf16_vectors_min_tokens(GgmlType::kQ6_K, true));
}

static_assert(bf16_vectors_min_tokens(GgmlType::kQ6_K) == bf16_vectors_min_tokens(GgmlType::kF32) &&
                  bf16_vectors_min_tokens(GgmlType::kBF16) == bf16_vectors_min_tokens(GgmlType::kF16) &&
                  bf16_vectors_min_tokens(GgmlType::kBF16, true) == bf16_vectors_min_tokens(GgmlType::kF16, true),
              "bf16_vectors_summary names Q6_K's threshold with F32's and BF16's with F16's");

bool bf16_products_apply(const KernelContext& ctx, const WeightView& w, std::int64_t n_tokens) {
  return amx_bf16_applies(ctx, w, n_tokens) || bf16_vectors_applies(ctx, w, n_tokens);
}

StatusOr<std::int32_t> gemv_streams_from_env() {
  return int_from_env("ECOSERVE_GEMV_STREAMS", gemv_streams_for(detect_cpu_features()), valid_gemv_streams,
                      "0 (the level's count), 2 or 4");
}

std::int32_t default_gemv_streams() {
  static const std::int32_t kStreams = [] {
    StatusOr<std::int32_t> n = gemv_streams_from_env();
    return n.ok() ? *n : gemv_streams_for(detect_cpu_features());
  }();
  return kStreams;
}

std::string gemv_streams_summary(std::int32_t streams) {
  return streams == 0 ? std::string("the level's weight streams") : fmt::format("{} weight streams", streams);
}

std::int32_t gemv_prefetch_for(const CpuFeatures& cpu) { return cpu.vendor == "GenuineIntel" ? 1024 : 0; }

StatusOr<std::int32_t> gemv_prefetch_from_env() {
  return int_from_env("ECOSERVE_GEMV_PREFETCH", gemv_prefetch_for(detect_cpu_features()), valid_gemv_prefetch,
                      "a multiple of 64 bytes in [0, 65536]");
}

std::int32_t default_gemv_prefetch() {
  static const std::int32_t kBytes = [] {
    StatusOr<std::int32_t> n = gemv_prefetch_from_env();
    return n.ok() ? *n : gemv_prefetch_for(detect_cpu_features());
  }();
  return kBytes;
}

std::string gemv_prefetch_summary(std::int32_t bytes) {
  return bytes == 0 ? std::string("none") : fmt::format("{} bytes ahead", bytes);
}

std::int32_t q4k_tile_pairs_for(const CpuFeatures& cpu) { return cpu.vendor == "GenuineIntel" ? 1 : 2; }

StatusOr<std::int32_t> q4k_tile_pairs_from_env() {
  return int_from_env("ECOSERVE_Q4K_TILE_PAIRS", q4k_tile_pairs_for(detect_cpu_features()), valid_q4k_tile_pairs,
                      "1 or 2");
}

std::int32_t default_q4k_tile_pairs() {
  static const std::int32_t kPairs = [] {
    StatusOr<std::int32_t> n = q4k_tile_pairs_from_env();
    return n.ok() ? *n : q4k_tile_pairs_for(detect_cpu_features());
  }();
  return kPairs;
}

bool q8_lanes_for(const CpuFeatures& cpu) { return cpu.vendor == "GenuineIntel"; }

StatusOr<bool> q8_lanes_from_env() { return switch_from_env("ECOSERVE_Q8_LANES", q8_lanes_for(detect_cpu_features())); }

bool default_q8_lanes() {
  static const bool kOn = [] {
    StatusOr<bool> on = q8_lanes_from_env();
    return on.ok() ? *on : q8_lanes_for(detect_cpu_features());
  }();
  return kOn;
}

std::string q8_tile_summary(bool lanes) {
  return lanes ? std::string("2 pairs of 8-row groups x 7 tokens, tokens in lanes from 32 tokens")
               : "2 pairs of 8-row groups x 7 tokens";
}

bool q4k_lanes_for(const CpuFeatures& cpu) { return cpu.vendor == "GenuineIntel"; }

StatusOr<bool> q4k_lanes_from_env() {
  return switch_from_env("ECOSERVE_Q4K_LANES", q4k_lanes_for(detect_cpu_features()));
}

bool default_q4k_lanes() {
  static const bool kOn = [] {
    StatusOr<bool> on = q4k_lanes_from_env();
    return on.ok() ? *on : q4k_lanes_for(detect_cpu_features());
  }();
  return kOn;
}

bool q6k_lanes_for(const CpuFeatures& cpu) { return cpu.vendor == "GenuineIntel"; }

StatusOr<bool> q6k_lanes_from_env() {
  return switch_from_env("ECOSERVE_Q6K_LANES", q6k_lanes_for(detect_cpu_features()));
}

bool default_q6k_lanes() {
  static const bool kOn = [] {
    StatusOr<bool> on = q6k_lanes_from_env();
    return on.ok() ? *on : q6k_lanes_for(detect_cpu_features());
  }();
  return kOn;
}

std::string q6k_tile_summary(bool lanes) {
  return lanes ? std::string("4 rows x 6 tokens in pairs, tokens in lanes from 16 tokens")
               : "4 rows x 6 tokens in pairs";
}

std::string int8_tiles_summary(Isa isa, GgmlType type) {
  detail::Int8Tiles t{};
  switch (isa) {
    case Isa::kAvx2: t = detail::int8_tiles_avx2(); break;
    case Isa::kAvxVnni: t = detail::int8_tiles_avxvnni(); break;
    case Isa::kAvx512Vnni: t = detail::int8_tiles_avx512vnni(); break;
    default: return {};
  }
  auto groups = [](int g, int tokens) {
    return fmt::format("{} group{} of 8 rows x {} tokens", g, g == 1 ? "" : "s", tokens);
  };
  switch (type) {
    case GgmlType::kQ8_0: return groups(t.q8_groups, t.q8_tokens);
    case GgmlType::kQ4_K: return groups(t.q4k_groups, t.q4k_tokens);
    case GgmlType::kQ6_K: return fmt::format("{} rows x {} tokens", t.k_rows, t.k_tokens);
    default: return {};
  }
}

bool cpu_has_gfni() {
  static const bool kGfni = detect_cpu_features().gfni;
  return kGfni;
}

std::string q4k_tile_pairs_summary(std::int32_t pairs) {
  return pairs == 1 ? std::string("1 pair of 8-row groups x 7 tokens") : "2 pairs of 8-row groups x 3 tokens";
}

std::string q4k_tile_summary(std::int32_t pairs, bool gfni, bool lanes) {
  std::string tiles = !gfni ? q4k_tile_pairs_summary(pairs)
                            : (pairs == 1 ? std::string("1 pair of 8-row groups x 8 tokens")
                                          : q4k_tile_pairs_summary(pairs)) +
                                  ", GFNI nibbles and vpdpwssd scales";
  return lanes ? tiles + ", tokens in lanes from 32 tokens" : tiles;
}

namespace detail {
void amx_bf16_bad_type(const char* fn, GgmlType type) {
  ECO_CHECK_MSG(false, "{}: the bf16 tiles do not take {} weights", fn, type_name(type));
  std::abort();
}

std::size_t amx_bf16_acts_bytes(std::int64_t n_tokens, std::int64_t cols) {
  return static_cast<std::size_t>((n_tokens + 15) / 16 * 16 * cols * 2);
}
}  // namespace detail

void matmul(const WeightView& w, const float* x, std::int64_t n_tokens, float* y, KernelContext& ctx) {
  check_shape(w, n_tokens);
  check_kernel_options(ctx);
  if (w.rows == 0 || n_tokens == 0) return;
  ECO_CHECK_MSG(w.data != nullptr && x != nullptr && y != nullptr, "matmul: null data pointer");
  ECO_CHECK_MSG(ctx.pool != nullptr, "matmul: KernelContext without a thread pool");

  const auto* wdata = static_cast<const std::uint8_t*>(w.data);
  ThreadPool& pool = *ctx.pool;
  const int nthreads = pool.num_threads();
  auto run = [&](auto&& rows_fn) { run_shares(pool, w.rows, n_tokens, rows_fn); };

  if (bf16_products_apply(ctx, w, n_tokens)) {
    const Bf16Target target{&w, y, made_tiles(ctx, w)};
    amx_bf16_matmul({&target, 1}, x, n_tokens, ctx);
    return;
  }
  const FloatMatmulKernel float_kernel =
      is_float_type(w.type) ? float_matmul_kernel(ctx.isa, n_tokens) : FloatMatmulKernel::kTiles;
  if (float_kernel == FloatMatmulKernel::kLanes) {
    // Tokens in lanes on 512-bit registers: x packed once (columns split over the
    // threads), then each thread's rows against every chunk.
    const std::int64_t chunks = (n_tokens + detail::kLaneTokens - 1) / detail::kLaneTokens;
    const std::int64_t cols8 = detail::lanes_cols(w.cols);
    const auto xt_floats = static_cast<std::size_t>(chunks * cols8 * detail::kLaneTokens);
    const auto wbuf_floats = static_cast<std::size_t>(detail::kLaneRows * cols8 + 16) / 16 * 16;
    const std::size_t need = (xt_floats + wbuf_floats * nthreads + 16) * sizeof(float);
    if (ctx.scratch.size() < need) ctx.scratch.resize(need);
    auto* xt = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(ctx.scratch.data()) + 63) / 64 * 64);
    float* wbufs = xt + xt_floats;
    pool.run([&](int i, int parts) {
      std::int64_t b0, b1;
      share(cols8 / 8, 1, i, parts, &b0, &b1);
      if (b0 < b1) detail::isa_avx512::pack_token_lanes(x, w.cols, n_tokens, b0, b1, xt);
    });
    pool.run([&](int i, int parts) {
      std::int64_t r0, r1;
      share(w.rows, kRowUnit, i, parts, &r0, &r1);
      if (r0 < r1) {
        detail::isa_avx512::matmul_float_lanes(w.type, wdata, w.row_bytes, w.cols, xt, n_tokens, r0, r1, y, w.rows,
                                               wbufs + wbuf_floats * i);
      }
    });
    return;
  }

  if (is_float_type(w.type)) {
    run([&](int, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1) {
      detail::matmul_float_rows(ctx.isa, w.type, wdata, w.row_bytes, w.cols, x, r0, r1, t0, t1, y, w.rows,
                                ctx.gemv_prefetch);
    });
    return;
  }

  const detail::QuantizedActs acts = quantize_input(x, w.cols, n_tokens, detail::takes_k_format(w.type), ctx);
  const TileScratch scratch(w.cols, ctx);
  const detail::QuantRowsFn kernel = detail::quant_rows_kernel(ctx.isa, w.type, w.layout);
  run([&](int i, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1) {
    kernel(wdata, w.row_bytes, acts, r0, r1, t0, t1, y, w.rows, scratch.of(i));
  });
}

void matmul_gated(const WeightView& w, float* gate, const float* up, std::int64_t n_tokens, float* y,
                  KernelContext& ctx) {
  check_shape(w, n_tokens);
  check_kernel_options(ctx);
  if (n_tokens == 0) return;
  ECO_CHECK_MSG(gate != nullptr && up != nullptr, "matmul_gated: null input");
  ECO_CHECK_MSG(ctx.pool != nullptr, "matmul_gated: KernelContext without a thread pool");
  if (w.rows > 0 && bf16_products_apply(ctx, w, n_tokens)) {
    ECO_CHECK_MSG(w.data != nullptr && y != nullptr, "matmul_gated: null data pointer");
    const Bf16Target target{&w, y, made_tiles(ctx, w)};
    amx_bf16_matmul({&target, 1}, gate, n_tokens, ctx, up);
    return;
  }
  // Per token on the threads, in runs of 8 (a decode step's few tokens are not split).
  ctx.pool->parallel_for(n_tokens, 8, [&](std::int64_t b, std::int64_t e) {
    silu_mul(gate + b * w.cols, up + b * w.cols, (e - b) * w.cols, gate + b * w.cols);
  });
  matmul(w, gate, n_tokens, y, ctx);
}

void matmul_many(std::span<const MatmulTarget> targets, const float* x, std::int64_t n_tokens, KernelContext& ctx) {
  constexpr std::size_t kMaxFused = 8;
  for (const MatmulTarget& t : targets) {
    ECO_CHECK_MSG(t.w != nullptr, "matmul_many: a target without weights");
    check_shape(*t.w, n_tokens);
  }
  if (targets.size() > 1 && targets.size() <= kMaxFused && n_tokens > 0) {
    // The targets the bf16 tiles or vectors take (with the first one's cols) run on them together,
    // with one packing of x; the others as they would alone or fused among themselves.
    std::array<Bf16Target, kMaxFused> bf16_targets{};
    std::array<MatmulTarget, kMaxFused> other_targets{};
    std::size_t n_bf16 = 0, n_other = 0;
    for (const MatmulTarget& t : targets) {
      if (bf16_products_apply(ctx, *t.w, n_tokens) && t.w->cols == targets[0].w->cols) {
        ECO_CHECK_MSG(t.w->data != nullptr && t.y != nullptr && x != nullptr, "matmul_many: null data pointer");
        bf16_targets[n_bf16++] = {t.w, t.y, made_tiles(ctx, *t.w)};
      } else {
        other_targets[n_other++] = t;
      }
    }
    if (n_bf16 > 0) {
      check_kernel_options(ctx);
      ECO_CHECK_MSG(ctx.pool != nullptr, "matmul_many: KernelContext without a thread pool");
      amx_bf16_matmul({bf16_targets.data(), n_bf16}, x, n_tokens, ctx);
      if (n_other > 0) matmul_many({other_targets.data(), n_other}, x, n_tokens, ctx);
      return;
    }
  }
  bool fused = targets.size() > 1 && targets.size() <= kMaxFused && n_tokens > 0;
  for (const MatmulTarget& t : targets) {
    const WeightView& w0 = *targets[0].w;
    fused = fused && is_quantized_type(t.w->type) && t.w->cols == w0.cols && t.w->rows % kRowUnit == 0 &&
            detail::takes_k_format(t.w->type) == detail::takes_k_format(w0.type);
  }
  if (!fused) {
    for (const MatmulTarget& t : targets) matmul(*t.w, x, n_tokens, t.y, ctx);
    return;
  }
  check_kernel_options(ctx);
  ECO_CHECK_MSG(x != nullptr, "matmul_many: null input");
  ECO_CHECK_MSG(ctx.pool != nullptr, "matmul_many: KernelContext without a thread pool");
  const std::int64_t cols = targets[0].w->cols;
  std::array<detail::QuantRowsFn, kMaxFused> kernels{};
  std::int64_t total_rows = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const WeightView& w = *targets[i].w;
    ECO_CHECK_MSG(w.data != nullptr && targets[i].y != nullptr, "matmul_many: null data pointer");
    kernels[i] = detail::quant_rows_kernel(ctx.isa, w.type, w.layout);
    total_rows += w.rows;
  }
  const detail::QuantizedActs acts = quantize_input(x, cols, n_tokens, detail::takes_k_format(targets[0].w->type), ctx);
  const TileScratch scratch(cols, ctx);
  // Rows [r0, r1) of the targets' rows laid end to end, tokens [t0, t1), on `thread`.
  auto rows_fn = [&](int thread, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1) {
    std::int64_t base = 0;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const WeightView& w = *targets[i].w;
      const std::int64_t lo = std::max(r0, base), hi = std::min(r1, base + w.rows);
      if (lo < hi) {
        kernels[i](static_cast<const std::uint8_t*>(w.data), w.row_bytes, acts, lo - base, hi - base, t0, t1,
                   targets[i].y, w.rows, scratch.of(thread));
      }
      base += w.rows;
    }
  };
  run_shares(*ctx.pool, total_rows, n_tokens, rows_fn);
}

}  // namespace ecoserve::kernels
