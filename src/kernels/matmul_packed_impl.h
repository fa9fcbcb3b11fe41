// Kernels for Q8_0 weights in the interleaved layout WeightLayout::kRows8
// (kernels/packed_q8_0.h), compiled once per ISA level like
// matmul_quant_impl.h (included after it by kernels/matmul_quant_<isa>.cc;
// the same one-definition rules: internal linkage, no external inline calls).
//
// A group holds 8 consecutive weight rows; for each block of 32 columns, 8
// fp16 scales and 8 chunks of 32 bytes, chunk c = the 4 values 4c..4c+3 of
// each of the 8 rows, biased to unsigned (q ^ 0x80). One vpdpbusd of a chunk
// with the broadcast 4 activation values of one token adds 4 products to each
// of the 8 rows' int32 lanes: the lanes are rows, so a block's dot product
// needs no horizontal sum, and the block's float work (convert, scale, FMA)
// is one instruction per 8 rows instead of per row. The kernel keeps, per
// chunk, G groups' weights in registers and T tokens' lanes (G * T vpdpbusd
// per 2 + T loads).
//
// Arithmetic, identical in every build, tile shape and thread count (so bitwise
// equal across ISA levels and batch sizes): per row and block, the exact int
// dot isum = sum q * x (VNNI: biased weights, lanes starting from
// -128 * sum(x) = QuantizedActs::xt; AVX2: weights unbiased, then
// vpsignb + vpmaddubsw + vpmaddwd), then acc = fma(float(isum), dw * dx, acc),
// blocks ascending; y = acc. Not the GGUF-layout kernels' arithmetic (8
// partial lanes per row, summed at the end), so the two layouts agree to
// rounding, not bitwise.
#pragma once

#ifndef ECO_QUANT_ISA
#error "define ECO_QUANT_ISA before including matmul_packed_impl.h"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/matmul_kernels.h"
#include "kernels/tile_table.h"

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

// Register tiles (G groups of 8 rows x T tokens), measured on Zen 4 at 512
// tokens, 2048x2048, 1 thread: avx512vnni 3x4 172 GMAC/s (2x4 154, 4x3 156,
// 1x8 148; the GGUF-layout kernel 60); avx2 1x4 44 (the GGUF-layout kernel 46).
#if ECO_QUANT_ISA == 2
constexpr int kPackedGroups = 3;
constexpr int kPackedTokens = 4;
// Far-apart group streams of the 1-4 token GEMV.
constexpr int kPackedStreams[] = {4, 4, 3, 2};
#elif ECO_QUANT_ISA == 1
constexpr int kPackedGroups = 2;
constexpr int kPackedTokens = 3;
constexpr int kPackedStreams[] = {4, 2, 2, 1};
#else
constexpr int kPackedGroups = 1;
constexpr int kPackedTokens = 4;
constexpr int kPackedStreams[] = {4, 2, 2, 1};
#endif

inline __m256i broadcast4(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// G groups (grp[i]: the group's bytes, nb blocks) x T tokens from t0; yg[i]:
// the group's first row in output row 0 (y of token t = yg[i] + t * y_stride).
template <int G, int T>
void packed_tile(const std::uint8_t* const* grp, const QuantizedActs& a, std::int64_t t0, float* const* yg,
                 std::int64_t y_stride) {
  const std::int64_t nb = a.nb;
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  const float* dx = a.d + t0 * nb;
  const std::uint8_t* gq[G];
  const std::uint8_t* gs[G];
  __m256 acc[G][T];
#pragma GCC unroll 8
  for (int r = 0; r < G; ++r) {
    gs[r] = grp[r];
    gq[r] = grp[r] + 16 * nb;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (std::int64_t b = 0; b < nb; ++b) {
    __m256i isum[G][T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#if ECO_QUANT_ISA == 0
      const __m256i start = _mm256_setzero_si256();
#else
      const __m256i start = _mm256_set1_epi32(a.xt[(t0 + t) * nb + b]);
#endif
#pragma GCC unroll 8
      for (int r = 0; r < G; ++r) isum[r][t] = start;
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      __m256i w[G];
#pragma GCC unroll 8
      for (int r = 0; r < G; ++r) w[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gq[r] + 256 * b + 32 * c));
#if ECO_QUANT_ISA == 0
      __m256i ws[G], wa[G];
#pragma GCC unroll 8
      for (int r = 0; r < G; ++r) {
        ws[r] = _mm256_xor_si256(w[r], _mm256_set1_epi8(static_cast<char>(0x80)));
        wa[r] = _mm256_abs_epi8(ws[r]);
      }
#endif
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xv = broadcast4(xq + t * a.q_stride + 32 * b + 4 * c);
#pragma GCC unroll 8
        for (int r = 0; r < G; ++r) {
#if ECO_QUANT_ISA == 0
          const __m256i p = _mm256_maddubs_epi16(wa[r], _mm256_sign_epi8(xv, ws[r]));
          isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#elif ECO_QUANT_ISA == 1
          isum[r][t] = _mm256_dpbusd_avx_epi32(isum[r][t], w[r], xv);
#else
          isum[r][t] = _mm256_dpbusd_epi32(isum[r][t], w[r], xv);
#endif
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < G; ++r) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gs[r] + 16 * b)));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][t]), _mm256_mul_ps(dw, _mm256_set1_ps(dx[t * nb + b])),
                                    acc[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(yg[r] + (t0 + t) * y_stride, acc[r][t]);
}

using PackedTileFn = void (*)(const std::uint8_t* const*, const QuantizedActs&, std::int64_t, float* const*,
                              std::int64_t);

struct PackedTiles {
  template <int G, int T>
  static constexpr PackedTileFn fn() {
    return &packed_tile<G, T>;
  }
};

// Weight rows [r0, r1) (multiples of 8) of a kRows8 matrix w times tokens
// [t0, t1); row_bytes: the GGUF row's bytes (a group is 8 of them).
void rows_q8_0_rows8(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                     std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float*) {
  const std::int64_t gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  const std::int64_t g0 = r0 / 8, g1 = r1 / 8;
  // Up to 4 tokens (decode): streams of far-apart groups, for memory bandwidth.
  if (dispatch_gemv_tokens(t1 - t0, [&](auto n) {
        constexpr int T = decltype(n)::value;
        split_streams<kPackedStreams[T - 1]>(
            g0, g1, [&](auto streams, std::int64_t first, std::int64_t stream_groups, std::int64_t count) {
              constexpr int S = decltype(streams)::value;
              for (std::int64_t i = 0; i < count; ++i) {
                const std::uint8_t* grp[S];
                float* yg[S];
#pragma GCC unroll 8
                for (int s = 0; s < S; ++s) {
                  const std::int64_t g = first + s * stream_groups + i;
                  grp[s] = w + g * gbytes;
                  yg[s] = y + 8 * g;
                }
                packed_tile<S, T>(grp, a, t0, yg, y_stride);
              }
            });
      })) {
    return;
  }
  static constexpr auto kTable = make_tile_table<PackedTileFn, kPackedGroups, kPackedTokens, PackedTiles>();
  // Tokens whose activations stay in L2 while the groups pass.
  const std::int64_t chunk = imax(kPackedTokens, kActChunkBytes / a.q_stride / kPackedTokens * kPackedTokens);
  for (std::int64_t tc = t0; tc < t1; tc += chunk) {
    const std::int64_t te = imin(t1, tc + chunk);
    for (std::int64_t g = g0; g < g1; g += kPackedGroups) {
      const int ng = static_cast<int>(imin(kPackedGroups, g1 - g));
      const std::uint8_t* grp[kPackedGroups];
      float* yg[kPackedGroups];
      for (int i = 0; i < ng; ++i) {
        grp[i] = w + (g + i) * gbytes;
        yg[i] = y + 8 * (g + i);
      }
      for (std::int64_t t = tc; t < te; t += kPackedTokens) {
        const int nt = static_cast<int>(imin(kPackedTokens, te - t));
        kTable.fns[ng - 1][nt - 1](grp, a, t, yg, y_stride);
      }
    }
  }
}

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS
