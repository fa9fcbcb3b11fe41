// Float-weight (F32, F16, BF16) matmul kernels, compiled once per ISA level like
// attention_rows_impl.h: matmul_float_avx2.cc (AVX2 + FMA + F16C, 16 vector registers,
// 4 x 3 register tiles) and matmul_float_avx512.cc (the same intrinsics under
// -mavx512vl: 32 registers, 4 x 6 tiles). Every output element gets the same
// arithmetic in both (one 8-lane accumulator, columns ascending, zero-padded tail,
// then the same horizontal sum), so the two agree bitwise. Internal linkage and no
// call to an inline function with external linkage (scripts/check_isa_objects.sh).
#pragma once

#ifndef ECO_FLOAT_NS
#error "define ECO_FLOAT_NS and ECO_FLOAT_WIDE before including matmul_float_impl.h"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/matmul_kernels.h"
#include "kernels/tile_table.h"
#include "kernels/vec_math.h"

#if ECO_FLOAT_WIDE
// GCC 12's unmasked 512-bit intrinsics (_mm512_insertf64x4, _mm512_broadcast_f64x4, ...) trip
// its -Wmaybe-uninitialized on the header's own "undefined" vector (GCC bug 105593; see
// matmul_packed_impl.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace ecoserve::kernels::detail::ECO_FLOAT_NS {
namespace {

inline std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t imax(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// Register tile: kRows weight rows x kTokens tokens, one 8-lane accumulator each, and
// the tile's kTokens activation vectors and one weight vector: 16 registers (4 x 3)
// or, with AVX-512VL's 32, 31 (4 x 6: 10 loads per 24 multiply-adds, not 7 per 12).
constexpr int kRows = 4;
constexpr int kTokens = ECO_FLOAT_WIDE ? 6 : 3;
// Tokens whose activations are kept hot (L2) while the weight rows stream past. AVX2: 320 KiB.
// Zen 3 (512 KiB L2), synth 1b F16 matrices, 512 tokens, one thread, alternating runs: 160 KiB
// (20 tokens of a 2048-column row, 7 of a 5632-column one, so 3 + 3 + 1 token tiles) 17.7-23.1 s,
// median 21.4; 320 KiB 15.6-21.8, median 17.8 (the down projection's rows 20-40% faster); 448
// KiB 18.0-21.1. The 512-bit build keeps the 160 KiB measured with it.
constexpr std::int64_t kActChunkBytes = (ECO_FLOAT_WIDE ? 160 : 320) * 1024;
// Weight-row streams gemv reads at once for 1, 2, 3, 4 tokens (4 streams of a
// single-token F32 matmul read at ~24 GB/s vs ~16 GB/s for one; with more
// tokens fewer streams keep the accumulators in registers).
constexpr int kGemvStreams[] = {4, 4, 3, 2};
// Software prefetch in gemv only where KernelContext::gemv_prefetch asks for it
// (GemvPrefetch): on Zen 4 the hardware prefetcher kept up with the float rows (3 KiB+)
// and a sweep 4 KiB ahead measured 10% slower; an Intel Xeon needs it. The tiles
// (5+ tokens) do prefetch: each row group's weights are read once per token chunk,
// and without it the chunk's first tile waited on DRAM.

template <GgmlType kType>
inline __m256 load8(const std::uint8_t* row, std::int64_t c) {
  if constexpr (kType == GgmlType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (kType == GgmlType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  } else {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
}

// The last n < 8 values from column c, zero padded.
template <GgmlType kType>
inline __m256 load_tail(const std::uint8_t* row, std::int64_t c, int n) {
  alignas(32) std::uint8_t buf[32] = {};
  const std::size_t elem = kType == GgmlType::kF32 ? 4 : 2;
  std::memcpy(buf, row + elem * c, elem * n);
  return load8<kType>(buf, 0);
}

inline __m256 load_x_tail(const float* x, int n) {
  alignas(32) float buf[8] = {};
  std::memcpy(buf, x, 4 * n);
  return _mm256_load_ps(buf);
}

template <GgmlType kType, int R, int T>
void tile(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x, float* y,
          std::int64_t y_stride, TilePrefetch pf) {
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const std::int64_t full = cols & ~std::int64_t{7};
  // The T activation vectors, then one weight vector at a time: R * T + T + 1
  // registers (loading the R weight vectors first spilled an accumulator of the 4 x 3
  // tile, a store-to-load chain that halved a 32-token batch's speed).
  // pf's lines (the next rows) are prefetched a few per step of 8 columns.
  const std::int64_t pf_per = pf.per_step(full / 8);
  for (std::int64_t c = 0; c < full; c += 8) {
    pf.issue(c / 8 * pf_per, pf_per);
    __m256 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(x + t * cols + c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = load8<kType>(w + r * row_bytes, c);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (full < cols) {
    const int n = static_cast<int>(cols - full);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = load_tail<kType>(w + r * row_bytes, full, n);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, load_x_tail(x + t * cols + full, n), acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[t * y_stride + r] = hsum8(acc[r][t]);
}

// kTokens tokens against kStreams streams of consecutive weight rows: stream
// s is rows s * stream_rows + i, i < count (w points at row 0, y at its output
// for the first token; x at the first token). Each output element gets exactly
// the arithmetic of tile() (one 8-lane FMA accumulator, columns ascending,
// zero-padded tail, then hsum), so results match the tiles bitwise. Several
// far-apart streams keep more DRAM requests in flight than one sequential
// sweep (the hardware prefetchers track each stream): 4 streams read a
// single-token matmul ~1.4x faster than one.
template <GgmlType kType, int kStreams, int kTokens>
void gemv(const std::uint8_t* w, std::size_t row_bytes, std::int64_t stream_rows, std::int64_t count, std::int64_t cols,
          const float* x, float* y, std::int64_t y_stride, std::int32_t prefetch) {
  constexpr std::int64_t kElem = kType == GgmlType::kF32 ? 4 : 2;
  const std::int64_t full = cols & ~std::int64_t{7};
  GemvPrefetch<kStreams> pf(prefetch);
  for (std::int64_t i = 0; i < count; ++i) {
    pf.reset();
    const std::uint8_t* rows[kStreams];
    __m256 acc[kStreams][kTokens];
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s) {
      rows[s] = w + (s * stream_rows + i) * row_bytes;
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) acc[s][t] = _mm256_setzero_ps();
    }
    for (std::int64_t c = 0; c < full; c += 8) {
      __m256 xv[kTokens];
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) xv[t] = _mm256_loadu_ps(x + t * cols + c);
      pf.upto(rows, kElem * (c + 8));
#pragma GCC unroll 8
      for (int s = 0; s < kStreams; ++s) {
        const __m256 wv = load8<kType>(rows[s], c);
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t) acc[s][t] = _mm256_fmadd_ps(wv, xv[t], acc[s][t]);
      }
    }
    if (full < cols) {
      const int n = static_cast<int>(cols - full);
      for (int s = 0; s < kStreams; ++s) {
        const __m256 wv = load_tail<kType>(rows[s], full, n);
        for (int t = 0; t < kTokens; ++t)
          acc[s][t] = _mm256_fmadd_ps(wv, load_x_tail(x + t * cols + full, n), acc[s][t]);
      }
    }
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s)
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) y[t * y_stride + s * stream_rows + i] = hsum8(acc[s][t]);
  }
}

// Tokens [t0, t0 + kTokens) times rows [r0, r1) with gemv: kStreams streams of
// equal length, then the remaining rows one at a time.
template <GgmlType kType, int kStreams, int kTokens>
void gemv_rows(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x, std::int64_t r0,
               std::int64_t r1, std::int64_t t0, float* y, std::int64_t y_stride, std::int32_t prefetch) {
  const std::int64_t m = (r1 - r0) / kStreams;
  float* yt = y + t0 * y_stride;
  const float* xt = x + t0 * cols;
  if (m > 0) {
    gemv<kType, kStreams, kTokens>(w + r0 * row_bytes, row_bytes, m, m, cols, xt, yt + r0, y_stride, prefetch);
  }
  const std::int64_t rest = r0 + kStreams * m;
  if (rest < r1) {
    gemv<kType, 1, kTokens>(w + rest * row_bytes, row_bytes, 0, r1 - rest, cols, xt, yt + rest, y_stride, prefetch);
  }
}

using TileFn = void (*)(const std::uint8_t*, std::size_t, std::int64_t, const float*, float*, std::int64_t, TilePrefetch);

template <GgmlType kType>
struct FloatTiles {
  template <int R, int T>
  static constexpr TileFn fn() {
    return &tile<kType, R, T>;
  }
};

#if ECO_FLOAT_WIDE
// The tiles on 512-bit registers (the avx512vnni-zmm level: CPUs whose 512-bit FMAs run at
// twice the multiply-adds of 256-bit ones): a register holds two rows' 8-lane accumulators,
// row 2p in lanes 0-7 and row 2p + 1 in lanes 8-15, against the token's 8 columns in both
// halves (broadcast8). Every lane runs tile()'s chain for its row (FMAs from zero, columns
// ascending, the zero-padded tail), then each half goes through hsum8: bitwise tile()'s
// results, with half the FMA instructions. An odd last row reads
// its row into both halves and stores the low one. R <= kZmmRows rows x T tokens.
// kZmmRows x kZmmTokens = 4 x 8: 16 accumulators, 8 token registers and 2 weight registers.
constexpr int kZmmRows = 4;
constexpr int kZmmTokens = 8;

inline __m512 join8(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}
inline __m256 high8(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }
// The 8 floats at p in both halves of a register (vbroadcastf64x4 from memory: a load).
inline __m512 broadcast8(const float* p) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(p))));
}

// Columns c..c+7 of rows a and b as the low and high halves of one register.
template <GgmlType kType>
inline __m512 load8_pair(const std::uint8_t* a, const std::uint8_t* b, std::int64_t c) {
  if constexpr (kType == GgmlType::kF32) {
    return join8(_mm256_loadu_ps(reinterpret_cast<const float*>(a) + c),
                 _mm256_loadu_ps(reinterpret_cast<const float*>(b) + c));
  } else {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * c));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * c));
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    if constexpr (kType == GgmlType::kF16) {
      return _mm512_cvtph_ps(h);
    } else {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
  }
}

template <GgmlType kType, int R, int T>
void tile_zmm(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x, float* y,
              std::int64_t y_stride, TilePrefetch pf) {
  constexpr int P = (R + 1) / 2;
  const std::uint8_t* rows[2 * P];
#pragma GCC unroll 8
  for (int r = 0; r < 2 * P; ++r) rows[r] = w + (r < R ? r : R - 1) * row_bytes;
  __m512 acc[P][T];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  const std::int64_t full = cols & ~std::int64_t{7};
  const std::int64_t pf_per = pf.per_step(full / 8);
  for (std::int64_t c = 0; c < full; c += 8) {
    pf.issue(c / 8 * pf_per, pf_per);
    __m512 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = broadcast8(x + t * cols + c);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512 wv = load8_pair<kType>(rows[2 * p], rows[2 * p + 1], c);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[p][t] = _mm512_fmadd_ps(wv, xv[t], acc[p][t]);
    }
  }
  if (full < cols) {
    const int n = static_cast<int>(cols - full);
    for (int p = 0; p < P; ++p) {
      const __m512 wv = join8(load_tail<kType>(rows[2 * p], full, n), load_tail<kType>(rows[2 * p + 1], full, n));
      for (int t = 0; t < T; ++t) {
        const __m256 xt = load_x_tail(x + t * cols + full, n);
        acc[p][t] = _mm512_fmadd_ps(wv, join8(xt, xt), acc[p][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      y[t * y_stride + 2 * p] = hsum8(_mm512_castps512_ps256(acc[p][t]));
      if (2 * p + 1 < R) y[t * y_stride + 2 * p + 1] = hsum8(high8(acc[p][t]));
    }
}

template <GgmlType kType>
struct FloatZmmTiles {
  template <int R, int T>
  static constexpr TileFn fn() {
    return &tile_zmm<kType, R, T>;
  }
};
#endif  // ECO_FLOAT_WIDE

// Rows [r0, r1) x tokens [t0, t1) on the register tiles of Tiles (kRows rows x kTokens tokens at most).
template <class Tiles, int kRows, int kTokens>
void tiles_rows(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x, std::int64_t r0,
                std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride) {
  static constexpr auto kTable = make_tile_table<TileFn, kRows, kTokens, Tiles>();
  const std::int64_t chunk = imax(kTokens, kActChunkBytes / (cols * 4) / kTokens * kTokens);
  for (std::int64_t tc = t0; tc < t1; tc += chunk) {
    const std::int64_t te = imin(t1, tc + chunk);
    const std::int64_t tiles = (te - tc + kTokens - 1) / kTokens;
    for (std::int64_t r = r0; r < r1; r += kRows) {
      const int nr = static_cast<int>(imin(kRows, r1 - r));
      // The next rows are prefetched into L2, a share of their lines by each token tile:
      // without it each row group's first tile waited on DRAM (a batch of 32 tokens ran
      // at half the speed of a prompt, whose later chunks find the rows in L3).
      PrefetchShares next(reinterpret_cast<const char*>(w + (r + nr) * row_bytes),
                          imin(kRows, r1 - r - nr) * static_cast<std::int64_t>(row_bytes) / 64, tiles);
      for (std::int64_t t = tc; t < te; t += kTokens) {
        const int nt = static_cast<int>(imin(kTokens, te - t));
        kTable.fns[nr - 1][nt - 1](w + r * row_bytes, row_bytes, cols, x + t * cols, y + t * y_stride + r, y_stride,
                                   next.next());
      }
    }
  }
}

// Up to 4 tokens (decode): bound by weight bandwidth, streamed by gemv; else the tiles
// (kZmm: tile_zmm's pairs of rows on 512-bit registers, ECO_FLOAT_WIDE builds only).
template <GgmlType kType, bool kZmm = false>
void rows_impl(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x, std::int64_t r0,
               std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride,
               std::int32_t gemv_prefetch) {
  if (dispatch_gemv_tokens(t1 - t0, [&](auto n) {
        constexpr int T = decltype(n)::value;
        gemv_rows<kType, kGemvStreams[T - 1], T>(w, row_bytes, cols, x, r0, r1, t0, y, y_stride, gemv_prefetch);
      })) {
    return;
  }
#if ECO_FLOAT_WIDE
  if constexpr (kZmm) {
    tiles_rows<FloatZmmTiles<kType>, kZmmRows, kZmmTokens>(w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride);
    return;
  }
#endif
  tiles_rows<FloatTiles<kType>, kRows, kTokens>(w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride);
}

// fn(std::integral_constant<GgmlType, type>{}) for a float type; nothing for the others
// (the caller, matmul_float.cc, checks the type).
template <class Fn>
void with_float_type(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::kF32: return fn(std::integral_constant<GgmlType, GgmlType::kF32>{});
    case GgmlType::kF16: return fn(std::integral_constant<GgmlType, GgmlType::kF16>{});
    case GgmlType::kBF16: return fn(std::integral_constant<GgmlType, GgmlType::kBF16>{});
    default: return;
  }
}

#if ECO_FLOAT_WIDE
// ---- Tokens in lanes: float weights on 512-bit registers (matmul_float_lanes) ----
//
// y[t][r] = sum_k x[t][k] * W[r][k] with the tokens in the lanes of a register: the
// activations are packed column by column, kLaneTokens tokens per chunk, column k at
// position p = (k % 8) * q + k / 8 (q = cols8 / 8, cols8 = cols rounded up to 8, the
// padding zero: each residue's columns consecutive), xt[p * 32 + t]; each weight
// W[r][k] is broadcast and multiplied into the registers of 16 tokens. The arithmetic
// is the tiles' and the GEMV's, lane by lane: the sum of the columns k = j (mod 8) is
// one FMA chain from 0 in k order (their 8-lane accumulator's lane j, zero-padded tail
// included), and the 8 chains are added in hsum's tree, ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). So
// a token's row is bitwise the same here, in the 256-bit tiles and GEMV of every level,
// alone or in any batch, on any thread: only where the multiply-adds run changes.
//
// Register tile: NR <= kLaneRows rows x TV registers of 16 tokens (12 x 2 = 24
// accumulators; per k 2 loads of packed activations, 12 broadcasts, 24 FMAs:
// FMA-bound), run once per residue j over its q columns; the 8 partial sums of each
// output go through `part` (exact float32 stores). A block of rows is first written to
// wbuf as float32 in the same column order (widened from F16 and BF16: exact), then run
// against every token chunk: each weight is converted once per call, and the block
// stays in L2 while the chunks stream past.

// How far ahead of the column it multiplies lanes_tile prefetches the packed activations
// into L1 (a chunk of 32 tokens is 128 bytes a column, 98 KB-720 KB at the synth models'
// widths: read from L2 or L3 once per block of rows). Emerald Rapids Xeon (family 6 model
// 207), one thread, fastest of 3, four alternated rounds: kernels_bench 2048 x 768 F16 x 512
// tokens 14.1-14.7 -> 12.6-13.0 ms (512 and 2048 bytes alike); synth 1b F16 pp512 44.8-53.3 ->
// 47.0-58.2 tok/s (docs/kernels.md, sixty-seventh pass).
constexpr std::uintptr_t kLanesXPrefetchBytes = 1024;

// pf: pf_lines <= cols8 lines to prefetch into L2 (the next block's weight rows), spread
// evenly over the column steps.
template <int TV, int NR>
void lanes_tile(const float* xt, const float* wr, std::int64_t cols8, float* out, const char* pf,
                std::int64_t pf_lines) {
  const std::int64_t q = cols8 / 8;  // columns per residue
  alignas(64) float part[8][NR][TV * 16];
  // One line every pf_every column steps, so that the lines come in over the whole tile.
  const std::int64_t pf_every = pf_lines > 0 && cols8 > pf_lines ? cols8 / pf_lines : 1;
  std::int64_t pf_at = 0, pf_next = 0;
  for (int j = 0; j < 8; ++j) {
    __m512 acc[NR][TV];
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < TV; ++v) acc[r][v] = _mm512_setzero_ps();
    for (std::int64_t k = j * q; k < (j + 1) * q; ++k) {
      if (k == pf_next && pf_at < pf_lines) {
        _mm_prefetch(pf + 64 * pf_at++, _MM_HINT_T1);
        pf_next += pf_every;
      }
      {  // formed as an integer: it may lie past the chunk (a prefetch never faults)
        const auto at = reinterpret_cast<std::uintptr_t>(xt + k * kLaneTokens) + kLanesXPrefetchBytes;
#pragma GCC unroll 2
        for (int v = 0; v < TV; ++v) _mm_prefetch(reinterpret_cast<const char*>(at + 64 * v), _MM_HINT_T0);
      }
      __m512 xv[TV];
#pragma GCC unroll 2
      for (int v = 0; v < TV; ++v) xv[v] = _mm512_load_ps(xt + k * kLaneTokens + 16 * v);
#pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) {
        const __m512 b = _mm512_set1_ps(wr[r * cols8 + k]);
#pragma GCC unroll 2
        for (int v = 0; v < TV; ++v) acc[r][v] = _mm512_fmadd_ps(xv[v], b, acc[r][v]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < TV; ++v) _mm512_store_ps(part[j][r] + 16 * v, acc[r][v]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < TV; ++v) {
      auto p = [&](int j) { return _mm512_load_ps(part[j][r] + 16 * v); };
      const __m512 even = _mm512_add_ps(_mm512_add_ps(p(0), p(4)), _mm512_add_ps(p(2), p(6)));
      const __m512 odd = _mm512_add_ps(_mm512_add_ps(p(1), p(5)), _mm512_add_ps(p(3), p(7)));
      _mm512_storeu_ps(out + r * kLaneTokens + 16 * v, _mm512_add_ps(even, odd));
    }
}

using LanesTileFn = void (*)(const float*, const float*, std::int64_t, float*, const char*, std::int64_t);

// fns[nr - 1]: the tile of nr rows (a plain array: no std:: inline function to emit in
// this ISA's object).
template <int N>
struct LanesTable {
  LanesTileFn fns[N];
};
template <int TV, int... Rs>
constexpr LanesTable<sizeof...(Rs)> lanes_table(std::integer_sequence<int, Rs...>) {
  return {{&lanes_tile<TV, Rs + 1>...}};
}

// 16 values of a row from column c as floats (exact).
template <GgmlType kType>
inline __m512 load16(const std::uint8_t* row, std::int64_t c) {
  if constexpr (kType == GgmlType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (kType == GgmlType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  } else {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
}

// One step of a transpose on kN registers of 16 floats (widen_row's 16 x 8, lanes_rows'
// 16 x 16): registers r and r | kBit swap that bit of the register number with a bit of the
// lane number (vpermt2ps against index vectors lo and hi).
template <int kBit, int kN>
inline void transpose_step(__m512 (&z)[kN], __m512i lo, __m512i hi) {
#pragma GCC unroll 16
  for (int r = 0; r < kN; ++r) {
    if ((r & kBit) != 0) continue;
    const __m512 a = z[r], b = z[r | kBit];
    z[r] = _mm512_permutex2var_ps(a, lo, b);
    z[r | kBit] = _mm512_permutex2var_ps(a, hi, b);
  }
}

// A row as float32 in the lanes' column order: column k (< cols8, zero from cols on) at
// (k % 8) * q + k / 8, q = cols8 / 8, so that each residue's columns are consecutive.
template <GgmlType kType>
void widen_row(const std::uint8_t* row, std::int64_t cols, std::int64_t cols8, float* dst) {
  const std::int64_t q = cols8 / 8;
  std::int64_t a0 = 0;
  // Whole runs of 128 columns: 8 registers of 16 (columns 8a .. 8a + 7 of a = a0 + 2i and
  // a0 + 2i + 1 in register i) become 8 of 16 (register j: column 8a + j of a = a0 .. a0 +
  // 15) in three vpermt2ps steps, half the shuffles of the 8 x 8 form below, and no branch.
  for (; a0 + 16 <= q && 8 * (a0 + 16) <= cols; a0 += 16) {
    __m512 z[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) z[i] = load16<kType>(row, 8 * (a0 + 2 * i));
    transpose_step<1>(z, _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                      _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
    transpose_step<2>(z, _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                      _mm512_setr_epi32(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
    transpose_step<4>(z, _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 16, 24, 17, 25, 18, 26, 19, 27),
                      _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 20, 28, 21, 29, 22, 30, 23, 31));
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm512_storeu_ps(dst + j * q + a0, z[j]);
  }
  for (; a0 < q; a0 += 8) {  // columns 8 * a0 .. 8 * a0 + 63
    __m256 r[8], t[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const std::int64_t c = 8 * (a0 + i);
      r[i] = c + 8 <= cols ? load8<kType>(row, c)
             : c < cols    ? load_tail<kType>(row, c, static_cast<int>(cols - c))
                           : _mm256_setzero_ps();
    }
    transpose8(r, t);
    const std::int64_t n = imin(8, q - a0);
    if (n == 8) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + j * q + a0, t[j]);
    } else {
      alignas(32) float tmp[8];
      for (int j = 0; j < 8; ++j) {
        _mm256_store_ps(tmp, t[j]);
        std::memcpy(dst + j * q + a0, tmp, sizeof(float) * static_cast<std::size_t>(n));
      }
    }
  }
}

template <GgmlType kType>
void lanes_rows(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* xt,
                std::int64_t n_tokens, std::int64_t r0, std::int64_t r1, float* y, std::int64_t y_stride,
                float* wbuf) {
  static constexpr auto kOne = lanes_table<1>(std::make_integer_sequence<int, kLaneRows>{});
  static constexpr auto kTwo = lanes_table<2>(std::make_integer_sequence<int, kLaneRows>{});
  alignas(64) float out[kLaneRows * kLaneTokens];
  const std::int64_t cols8 = lanes_cols(cols);
  const std::int64_t chunks = (n_tokens + kLaneTokens - 1) / kLaneTokens;
  for (std::int64_t rb = r0; rb < r1; rb += kLaneRows) {
    const int nr = static_cast<int>(imin(kLaneRows, r1 - rb));
    for (int i = 0; i < nr; ++i) widen_row<kType>(w + (rb + i) * row_bytes, cols, cols8, wbuf + i * cols8);
    // The next block's rows are prefetched during the first chunk (a block widened
    // straight from DRAM waited on it: a batch of 32 tokens has one chunk per block).
    const std::int64_t next_bytes = imin(kLaneRows, r1 - rb - nr) * static_cast<std::int64_t>(row_bytes);
    const char* pf = reinterpret_cast<const char*>(w + (rb + nr) * row_bytes);
    const std::int64_t pf_lines = imin(cols8, next_bytes / 64);
    for (std::int64_t ch = 0; ch < chunks; ++ch) {
      const std::int64_t t0 = ch * kLaneTokens;
      const int nt = static_cast<int>(imin(kLaneTokens, n_tokens - t0));
      const LanesTileFn fn = nt > 16 ? kTwo.fns[nr - 1] : kOne.fns[nr - 1];
      fn(xt + ch * cols8 * kLaneTokens, wbuf, cols8, out, pf, ch == 0 ? pf_lines : 0);
      // out [row][token] to y [token][row], 16 tokens at a time: a 16 x 16 transpose (rows
      // nr.. zero) and a masked store of each token's nr results.
      const auto rows = static_cast<__mmask16>((1u << nr) - 1);
      for (int t16 = 0; t16 < nt; t16 += 16) {
        __m512 z[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) z[i] = i < nr ? _mm512_load_ps(out + i * kLaneTokens + t16) : _mm512_setzero_ps();
        transpose_step<1>(z, _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                          _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
        transpose_step<2>(z, _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                          _mm512_setr_epi32(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
        transpose_step<4>(z, _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                          _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
        transpose_step<8>(z, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                          _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
        const int n = nt - t16 < 16 ? nt - t16 : 16;
        for (int t = 0; t < n; ++t) _mm512_mask_storeu_ps(y + (t0 + t16 + t) * y_stride + rb, rows, z[t]);
      }
    }
  }
}
#endif  // ECO_FLOAT_WIDE

}  // namespace

void matmul_float_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x,
                       std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride, std::int32_t gemv_prefetch) {
  with_float_type(type, [&](auto t) {
    rows_impl<decltype(t)::value>(w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride, gemv_prefetch);
  });
}

#if ECO_FLOAT_WIDE
void matmul_float_rows_zmm(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                           const float* x, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                           std::int64_t y_stride, std::int32_t gemv_prefetch) {
  with_float_type(type, [&](auto t) {
    rows_impl<decltype(t)::value, true>(w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride, gemv_prefetch);
  });
}

void pack_token_lanes(const float* x, std::int64_t cols, std::int64_t n_tokens, std::int64_t b0, std::int64_t b1,
                      float* xt) {
  const std::int64_t cols8 = lanes_cols(cols), q = cols8 / 8;
  const std::int64_t chunks = (n_tokens + kLaneTokens - 1) / kLaneTokens;
  // Column block b (columns 8b .. 8b + 7) of 8 tokens: 8 rows of x, transposed; token
  // and column padding read as zero.
  for (std::int64_t b = b0; b < b1; ++b) {
    const std::int64_t c = 8 * b;
    const int live = static_cast<int>(imin(8, cols - c));
    for (std::int64_t t0 = 0; t0 < chunks * kLaneTokens; t0 += 8) {
      __m256 r[8], t[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const std::int64_t tok = t0 + i;
        r[i] = _mm256_setzero_ps();
        if (tok < n_tokens) {
          const float* src = x + tok * cols + c;
          r[i] = live == 8 ? _mm256_loadu_ps(src) : load_x_tail(src, live);
        }
      }
      transpose8(r, t);
      float* dst = xt + (t0 / kLaneTokens) * cols8 * kLaneTokens + b * kLaneTokens + t0 % kLaneTokens;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) _mm256_store_ps(dst + j * q * kLaneTokens, t[j]);
    }
  }
}

void matmul_float_lanes(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                        const float* xt, std::int64_t n_tokens, std::int64_t r0, std::int64_t r1, float* y,
                        std::int64_t y_stride, float* wbuf) {
  with_float_type(type, [&](auto t) {
    lanes_rows<decltype(t)::value>(w, row_bytes, cols, xt, n_tokens, r0, r1, y, y_stride, wbuf);
  });
}
#endif

}  // namespace ecoserve::kernels::detail::ECO_FLOAT_NS

#if ECO_FLOAT_WIDE
#pragma GCC diagnostic pop
#endif
