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

#include "kernels/matmul_kernels.h"
#include "kernels/tile_table.h"

namespace ecoserve::kernels::detail::ECO_FLOAT_NS {
namespace {

inline std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t imax(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// Register tile: kRows weight rows x kTokens tokens, one 8-lane accumulator each, and
// the tile's kTokens activation vectors and one weight vector: 16 registers (4 x 3)
// or, with AVX-512VL's 32, 31 (4 x 6: 10 loads per 24 multiply-adds, not 7 per 12).
constexpr int kRows = 4;
constexpr int kTokens = ECO_FLOAT_WIDE ? 6 : 3;
// Tokens whose activations are kept hot (L2) while the weight rows stream past.
constexpr std::int64_t kActChunkBytes = 160 * 1024;
// Weight-row streams gemv reads at once for 1, 2, 3, 4 tokens (4 streams of a
// single-token F32 matmul read at ~24 GB/s vs ~16 GB/s for one; with more
// tokens fewer streams keep the accumulators in registers).
constexpr int kGemvStreams[] = {4, 4, 3, 2};
// No software prefetch in gemv: float rows are long enough (3 KiB+) for the
// hardware prefetcher, and a sweep 4 KiB ahead measured 10% slower. The tiles
// (5+ tokens) do prefetch: each row group's weights are read once per token chunk,
// and without it the chunk's first tile waited on DRAM.

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

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
    for (int r = 0; r < R; ++r) y[t * y_stride + r] = hsum(acc[r][t]);
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
          const float* x, float* y, std::int64_t y_stride) {
  const std::int64_t full = cols & ~std::int64_t{7};
  for (std::int64_t i = 0; i < count; ++i) {
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
      for (int t = 0; t < kTokens; ++t) y[t * y_stride + s * stream_rows + i] = hsum(acc[s][t]);
  }
}

// Tokens [t0, t0 + kTokens) times rows [r0, r1) with gemv: kStreams streams of
// equal length, then the remaining rows one at a time.
template <GgmlType kType, int kStreams, int kTokens>
void gemv_rows(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x, std::int64_t r0,
               std::int64_t r1, std::int64_t t0, float* y, std::int64_t y_stride) {
  const std::int64_t m = (r1 - r0) / kStreams;
  float* yt = y + t0 * y_stride;
  const float* xt = x + t0 * cols;
  if (m > 0) gemv<kType, kStreams, kTokens>(w + r0 * row_bytes, row_bytes, m, m, cols, xt, yt + r0, y_stride);
  const std::int64_t rest = r0 + kStreams * m;
  if (rest < r1) gemv<kType, 1, kTokens>(w + rest * row_bytes, row_bytes, 0, r1 - rest, cols, xt, yt + rest, y_stride);
}

using TileFn = void (*)(const std::uint8_t*, std::size_t, std::int64_t, const float*, float*, std::int64_t, TilePrefetch);

template <GgmlType kType>
struct FloatTiles {
  template <int R, int T>
  static constexpr TileFn fn() {
    return &tile<kType, R, T>;
  }
};

template <GgmlType kType>
void rows_impl(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x, std::int64_t r0,
               std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride) {
  // Up to 4 tokens (decode): bound by weight bandwidth, streamed by gemv.
  if (dispatch_gemv_tokens(t1 - t0, [&](auto n) {
        constexpr int T = decltype(n)::value;
        gemv_rows<kType, kGemvStreams[T - 1], T>(w, row_bytes, cols, x, r0, r1, t0, y, y_stride);
      })) {
    return;
  }
  static constexpr auto kTable = make_tile_table<TileFn, kRows, kTokens, FloatTiles<kType>>();
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

}  // namespace

void matmul_float_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x,
                       std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride) {
  switch (type) {
    case GgmlType::kF32:
      return rows_impl<GgmlType::kF32>(w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride);
    case GgmlType::kF16:
      return rows_impl<GgmlType::kF16>(w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride);
    case GgmlType::kBF16:
      return rows_impl<GgmlType::kBF16>(w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride);
    default:
      return;  // the caller (matmul_float.cc) checks the type
  }
}

}  // namespace ecoserve::kernels::detail::ECO_FLOAT_NS
