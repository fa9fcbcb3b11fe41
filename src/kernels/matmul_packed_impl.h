// Kernels for Q8_0 and Q4_K weights in the interleaved layout WeightLayout::kRows8
// (kernels/packed_weights.h), compiled once per ISA level like
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
// per G loads and T broadcasts).
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

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/matmul_kernels.h"
#include "kernels/packed_weights.h"
#include "kernels/tile_table.h"

#if ECO_QUANT_ISA == 2
// GCC 12's avx512fintrin.h builds unmasked 512-bit intrinsics (_mm512_cvtepi32_ps,
// _mm512_inserti64x4, ...) on a self-initialised "undefined" vector, which its
// -Wmaybe-uninitialized reports wherever they are inlined (GCC bug 105593). The
// warnings are about the header, not about this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

// Register tiles (G groups of 8 rows x T tokens), measured on Zen 4 at 512
// tokens, 2048x2048, 1 thread: avx512vnni 3x4 172 GMAC/s (2x4 154, 4x3 156,
// 1x8 148; the GGUF-layout kernel 60); avx2 1x4 44 (the GGUF-layout kernel 46).
#if ECO_QUANT_ISA == 2
constexpr int kPackedGroups = 3;
constexpr int kPackedTokens = 4;
// Far-apart group streams of the 1-4 token GEMV. One token: 2 streams. On Zen 5
// (family 26, one thread, synth 1b batch-1 decode, three alternating runs) Q8_0
// 27.7-28.4 tok/s with 4 streams, 28.9-29.8 with 3, 31.6-32.2 with 2, 28.2-29.3
// with 1; Q4_K (kQ4kStreams) 51-52 with 4, 54-57 with 2. On Zen 4, 2 and 4 were
// within the noise of each other (docs/kernels.md, sixth pass). An Intel Xeon wants
// 4 for one token: QuantizedActs::gemv_streams (KernelContext::gemv_streams) sets it.
constexpr int kPackedStreams[] = {2, 4, 3, 2};
#else
// AVX2 was 1 x 4 until its sums were kept as chains (chain_add_epi32): with them, on Zen 3
// (family 25 model 1, one thread, synth 1b Q8_0, alternating runs on a noisy host), pp512
// 38-42 -> 43 tok/s and batch-32 decode 31-35 -> 38-41 at 2 x 3.
constexpr int kPackedGroups = 2;
constexpr int kPackedTokens = 3;
constexpr int kPackedStreams[] = {4, 2, 2, 1};
#endif

inline __m256i broadcast4(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// lanes += the 4-value dots of unsigned bytes q and signed bytes x. On AVX2
// vpmaddubsw's int16 pair sums must not saturate (q <= 128 with |x| <= 127:
// |w| here, Q4_K's nibbles), or they would differ from vpdpbusd's exact sums.
inline __m256i dot_acc(__m256i lanes, __m256i q, __m256i x) {
#if ECO_QUANT_ISA == 0
  return chain_add_epi32(lanes, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1)));
#elif ECO_QUANT_ISA == 1
  return _mm256_dpbusd_avx_epi32(lanes, q, x);
#else
  return _mm256_dpbusd_epi32(lanes, q, x);
#endif
}

// G groups (grp[i]: the group's bytes, nb blocks) x T tokens from t0; yg[i]:
// the group's first row in output row 0 (y of token t = yg[i] + t * y_stride).
// kAhead (the GEMV's tiles, when KernelContext::gemv_prefetch is set): one prefetch
// a.gemv_prefetch bytes past each 64 bytes of weights read (prefetch_ahead). A
// compile-time choice, its distance read from QuantizedActs: with the distance in
// TilePrefetch (24 bytes, so passed in memory) the batched tiles of the 256-bit levels
// lost 11% (Xeon, 2048 x 768, 512 tokens), 15-33% with the test made at run time too.
template <int G, int T, bool kAhead = false>
void packed_tile(const std::uint8_t* const* grp, const QuantizedActs& a, std::int64_t t0, float* const* yg,
                 std::int64_t y_stride, TilePrefetch pf) {
  const std::int64_t nb = a.nb;
  const std::int64_t pf_per = pf.per_step(nb);
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  const float* dx = a.d + t0 * nb;
  __m256 acc[G][T];
#pragma GCC unroll 8
  for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    pf.issue(b * pf_per, pf_per);
    // Block b's scales and quants in its run (packed_weights.h: a run's scales, then its
    // quants, so a group is one stream of reads).
    const Q8BlockOffsets at = q8_block_offsets(nb, b);
    if (kAhead && b % kQ8RunBlocks == 0) {  // the GEMV's line ahead of the run's scales
#pragma GCC unroll 8
      for (int r = 0; r < G; ++r) prefetch_ahead(grp[r] + at.scales, a.gemv_prefetch);
    }
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
      for (int r = 0; r < G; ++r) {
        if (kAhead && c % 2 == 0) prefetch_ahead(grp[r] + at.quants + 32 * c, a.gemv_prefetch);
        w[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp[r] + at.quants + 32 * c));
      }
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
          isum[r][t] = dot_acc(isum[r][t], wa[r], _mm256_sign_epi8(xv, ws[r]));
#else
          isum[r][t] = dot_acc(isum[r][t], w[r], xv);
#endif
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < G; ++r) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grp[r] + at.scales)));
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
                              std::int64_t, TilePrefetch);

#if ECO_QUANT_ISA == 2
// Helpers of the wide tiles: a register holds two kRows8 groups, the first in
// the low half (lanes 0-7 of 32-bit values), the second in the high half.

// Two groups' 32 bytes at a and b.
inline __m512i pair_load(const std::uint8_t* a, const std::uint8_t* b) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Two groups' 8 unsigned bytes at a and b, widened to 16 int32 lanes.
inline __m512i pair_u8_to_i32(const std::uint8_t* a, const std::uint8_t* b) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(lo, hi));
}

// Two groups' 8 fp16 at a and b as 16 floats.
inline __m512 pair_f16(const std::uint8_t* a, const std::uint8_t* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// The 16 row results of one token: the first group's 8 at a, the second's at b.
inline void pair_store(float* a, float* b, __m512 v) {
  _mm256_storeu_ps(a, _mm512_castps512_ps256(v));
  _mm256_storeu_ps(b, _mm512_extractf32x8_ps(v, 1));
}

// The same arithmetic on 512-bit registers, for CPUs whose vector units are 512
// bits wide (Zen 5, Intel server cores: the avx512vnni-zmm level, kernels/cpu_features.h):
// a register holds two groups, 16 rows (the first group's 8 in lanes 0-7), so one
// vpdpbusd does 64 multiply-adds. P pairs of groups (grp[2p], grp[2p + 1]) x T tokens.
// Every lane computes what packed_tile computes for its row, in the same order.
// kAhead: as packed_tile's (the streaming tiles of rows8_wide).
template <int P, int T, bool kAhead = false>
void packed_tile_wide(const std::uint8_t* const* grp, const QuantizedActs& a, std::int64_t t0, float* const* yg,
                      std::int64_t y_stride, TilePrefetch pf) {
  const std::int64_t nb = a.nb;
  const std::int64_t pf_per = pf.per_step(nb);
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  const float* dx = a.d + t0 * nb;
  __m512 acc[P][T];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    pf.issue(b * pf_per, pf_per);
    const Q8BlockOffsets at = q8_block_offsets(nb, b);
    if (kAhead && b % kQ8RunBlocks == 0) {  // the line ahead of each group's run of scales
#pragma GCC unroll 8
      for (int r = 0; r < 2 * P; ++r) prefetch_ahead(grp[r] + at.scales, a.gemv_prefetch);
    }
    __m512i isum[P][T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const __m512i start = _mm512_set1_epi32(a.xt[(t0 + t) * nb + b]);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) isum[p][t] = start;
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      __m512i w[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        if (kAhead && c % 2 == 0) {
          prefetch_ahead(grp[2 * p] + at.quants + 32 * c, a.gemv_prefetch);
          prefetch_ahead(grp[2 * p + 1] + at.quants + 32 * c, a.gemv_prefetch);
        }
        w[p] = pair_load(grp[2 * p] + at.quants + 32 * c, grp[2 * p + 1] + at.quants + 32 * c);
      }
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        std::int32_t xv4;
        std::memcpy(&xv4, xq + t * a.q_stride + 32 * b + 4 * c, 4);
        const __m512i xv = _mm512_set1_epi32(xv4);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) isum[p][t] = _mm512_dpbusd_epi32(isum[p][t], w[p], xv);
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __m512 dw = pair_f16(grp[2 * p] + at.scales, grp[2 * p + 1] + at.scales);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[p][t]), _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * nb + b])),
                                    acc[p][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      pair_store(yg[2 * p] + (t0 + t) * y_stride, yg[2 * p + 1] + (t0 + t) * y_stride, acc[p][t]);
    }
}

// Wide register tiles: pairs of groups x tokens. Zen 5 (family 26), synth 1b Q8_0,
// one thread, pp512 / batch-32 decode tok/s, two alternating runs: 2 x 4
// 285-292 / 264-266, 2 x 6 289-298 / 267-276, 3 x 4 294-296 / 277-283, 4 x 3
// 282-289 / 257-258 (the 256-bit 3-group x 4-token tiles: 181-186 / 173-176).
// On an Intel Xeon (family 6 model 207) 512-bit vector work issues on two ports
// only, so every instruction besides vpdpbusd costs a multiply slot: per block
// and tile the P pair inserts of each of the 8 chunks and 3 float operations per
// pair and token. 2 x 7 needs 16 inserts per 112 vpdpbusd where 3 x 4 needs 24
// per 96: synth 1b Q8_0, one thread, pp512 165-166 -> 181-182 tok/s, batch 32
// 137-141 -> 143-146; kernels_bench 2048 x 768 x 512 tokens 4310-4720 -> 3925-4145
// us (2 x 6: 3985-4060). Not measured on Zen 5 (2 x 6 was as fast as 3 x 4 there).
constexpr int kWidePairs = 2;
constexpr int kWideTokens = 7;
struct PackedWideTiles {
  static constexpr int kPairs = kWidePairs;
  static constexpr int kTokens = kWideTokens;
  // The most tokens rows8_wide streams (rows8_stream): 15 registers of sums and 15 of floats.
  static constexpr int kStreamTokens = 15;
  template <int P, int T, bool kAhead = false>
  static constexpr PackedTileFn fn() {
    return &packed_tile_wide<P, T, kAhead>;
  }
};
#endif

struct PackedTiles {
  static constexpr int kGroups = kPackedGroups;
  static constexpr int kTokens = kPackedTokens;
  static constexpr int kStreams[4] = {kPackedStreams[0], kPackedStreams[1], kPackedStreams[2], kPackedStreams[3]};
  template <int G, int T, bool kAhead = false>
  static constexpr PackedTileFn fn() {
    return &packed_tile<G, T, kAhead>;
  }
};

// ---- Q4_K in kRows8 (packed_weights.h) against K-format activations ----
//
// Per super-block s of 256 columns, a group's 1152 bytes: d[8], dmin[8] (fp16),
// 64 bytes [sub-block][row] = scale | (min >> 4) << 6, 32 bytes of the mins'
// low nibbles (entry i = sub-block * 8 + row: low nibble of byte i, or high
// nibble of byte i - 32), then the quants [pair j][chunk c][row][4]: the low
// nibbles are values 4c..4c+3 of sub-block 2j, the high nibbles of 2j + 1.
// Per row lane: isum = sum_sb scale_sb * dot_sb (exact), mins = sum_sb min_sb
// * (sum of the sub-block's 32 q) (exact), then acc = fma(float(isum), d * dx,
// acc); acc = fnmadd(float(mins), dmin * dx, acc); y = acc.

// Register tiles: with 32 registers 2 groups x 4 tokens (each activation broadcast
// serves 2 vpdpbusd; at 1 x 4 the loads, 10 per 8 vpdpbusd, bound the loop):
// synth 1b Q4_K on Zen 4, 1 thread, pp512 121 -> 134 tokens/s, batch-32 decode
// 114 -> 127-131 (3 x 3: 132 / 122; 4 x 2: 132 / 125).
#if ECO_QUANT_ISA == 2
constexpr int kQ4kGroups = 2;
constexpr int kQ4kTokens = 4;
constexpr int kQ4kStreams[] = {2, 2, 1, 1};  // one token: 2 streams (kPackedStreams)
#elif ECO_QUANT_ISA == 1
constexpr int kQ4kGroups = 1;  // two registers of sub-block sums per output (lo_acc, hi_acc)
constexpr int kQ4kTokens = 2;
constexpr int kQ4kStreams[] = {2, 1, 1, 1};
#else
// 16 registers: 2 x 3 (1 x 2 before the chains of chain_add_epi32 and the scales inside
// vpmaddwd). Zen 3, one thread, 2048 x 768 x 512 tokens in L2, fastest of 5 per round: with
// the chains, 1 x 2 14.1 / 16.5 ms, 1 x 4 12.8 / 16.2, 2 x 2 13.0 / 14.4; with the scales in
// vpmaddwd, 2 x 2 12.6 / 13.7, 2 x 3 12.1 / 12.9 (66 G multiply-adds/s), 1 x 4 13.6 / 16.9,
// 2 x 4 14.2 / 16.7. With the int16 sums of q4k_sub_blocks16 (one multiply per 32 products),
// synth 1b Q4_K matrices, one thread, alternating runs: 512 tokens 10.8-12.2 -> 7.2-9.0 s,
// 32 tokens 700-710 -> 418-595 ms; 2 x 3 still as fast as any (2 x 4 7.7-8.0 s, 3 x 3 7.7-8.2,
// 1 x 6 7.5-9.2).
constexpr int kQ4kGroups = 2;
constexpr int kQ4kTokens = 3;
constexpr int kQ4kStreams[] = {2, 1, 1, 1};
#endif
constexpr std::int64_t kQ4kGroupSuperBytes = 1152;

// The high nibbles as vpdpbusd's unsigned operand. With VNNI (exact int32 sums)
// they stay in place, 16 times their value (one AND instead of a shift and an
// AND): the low nibbles' sub-block scales are then taken 16 times too, and the
// super-block's isum, a multiple of 16, is shifted back (exact: |isum| * 16 <=
// 8 sub-blocks * 63 * 32 * 15 * 127 * 16 < 2^31). vpmaddubsw's int16 pair sums
// would saturate at 240 * 127 * 2, so AVX2 (q4k_sub_blocks16) shifts the nibbles down.
#if ECO_QUANT_ISA != 0
constexpr int kQ4kHiShift = 4;
inline __m256i q4k_hi(__m256i w) { return _mm256_and_si256(w, _mm256_set1_epi8(static_cast<char>(0xF0))); }
#endif

// The 8 scales and mins of the 8 rows of one super-block: sc[sb * 8 + row], and mn[m] in
// the layout's order of mins (packed_weights.h): m = (sb / 2) * 16 + row * 2 + sb % 2,
// so 16 bytes from mn + 16 p are sub-block pair p's [row][2].
inline void q4k_scales(const std::uint8_t* sup, std::uint8_t* sc, std::uint8_t* mn) {
  const __m256i m6 = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30), m4 = _mm256_set1_epi8(0x0F);
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sup + 32));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sup + 64));
  const __m256i n = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sup + 96));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc), _mm256_and_si256(a, m6));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc + 32), _mm256_and_si256(b, m6));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(mn),
                      _mm256_or_si256(_mm256_and_si256(n, m4), _mm256_and_si256(_mm256_srli_epi16(a, 2), m30)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(mn + 32),
                      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n, 4), m4),
                                      _mm256_and_si256(_mm256_srli_epi16(b, 2), m30)));
}

#if ECO_QUANT_ISA == 0
// AVX2's sub-blocks 2j (low nibbles) and 2j + 1 (high) of a super-block, one after the other,
// for q4k_tile (sup, sc: its super-blocks and q4k_scales' scales; col: the super-block's
// first column plus 64 j). Per output the 8 chunks' vpmaddubsw pair sums are added as int16,
// exact (|sum| <= 8 * 2 * 15 * 128 = 30720 < 2^15), then one vpmaddwd by the row's scale
// (int16 pairs) adds them to isum: one multiply per 32 products instead of vpmaddubsw's and
// vpmaddwd's two (the same exact integers). kAhead: q4k_tile's.
template <int G, int T, bool kAhead>
inline void q4k_sub_blocks16(const std::uint8_t* const* sup, const std::uint8_t (*sc)[64], const QuantizedActs& a,
                             std::int64_t t0, std::int64_t col, int j, __m256i (&isum)[G][T]) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256i s16[G][T];
#pragma GCC unroll 8
    for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s16[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 8
      for (int r = 0; r < G; ++r) {
        if (kAhead && h == 0 && c % 2 == 0) prefetch_ahead(sup[r] + 128 + 256 * j + 32 * c, a.gemv_prefetch);
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sup[r] + 128 + 256 * j + 32 * c));
        const __m256i q = _mm256_and_si256(h == 0 ? w : _mm256_srli_epi16(w, 4), _mm256_set1_epi8(0x0F));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const std::int8_t* x = a.q + (t0 + t) * a.q_stride + col + 32 * h + 4 * c;
          s16[r][t] = chain_add_epi16(s16[r][t], _mm256_maddubs_epi16(q, broadcast4(x)));
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < G; ++r) {
      const __m256i s32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[r] + 16 * j + 8 * h)));
      const __m256i scale = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[r][t] = madd16_acc(isum[r][t], s16[r][t], scale);
    }
  }
}
#endif

// kAhead: as packed_tile's.
template <int G, int T, bool kAhead = false>
void q4k_tile(const std::uint8_t* const* grp, const QuantizedActs& a, std::int64_t t0, float* const* yg,
              std::int64_t y_stride, TilePrefetch pf) {
  const std::int64_t nsb = a.nb / 8;
  const std::int64_t pf_per = pf.per_step(nsb);
  __m256 acc[G][T];
#pragma GCC unroll 8
  for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  for (std::int64_t s = 0; s < nsb; ++s) {
    pf.issue(s * pf_per, pf_per);
    alignas(32) std::uint8_t sc[G][64], mn[G][64];
    const std::uint8_t* sup[G];
#pragma GCC unroll 8
    for (int r = 0; r < G; ++r) {
      sup[r] = grp[r] + s * kQ4kGroupSuperBytes;
      if (kAhead) {  // the GEMV's lines ahead of the 128 bytes of scales
        prefetch_ahead(sup[r], a.gemv_prefetch);
        prefetch_ahead(sup[r] + 64, a.gemv_prefetch);
      }
      q4k_scales(sup[r], sc[r], mn[r]);
    }
    // Mins: int16 pairs (min of sub-blocks 2p, 2p + 1) per row, against the
    // token's pair of 32-value sums. From the weights and the sums alone, so computed
    // before the dot products, whose stream of vpdpbusd hides their latency (after
    // them, 16% of the tile's time on Zen 4 against 10% of its multiplies).
    __m256 fmins[G][T];
    {
      __m256i mpair[G][4];
#pragma GCC unroll 8
      for (int r = 0; r < G; ++r)
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          mpair[r][p] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mn[r] + 16 * p)));
        }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i bs16 =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + (t0 + t) * 2 * a.nb + 16 * s));
        const __m256i b32 = _mm256_madd_epi16(bs16, _mm256_set1_epi16(1));
        // int32 elements 0, 1, 4, 5: the int16 pairs (sums of sub-blocks 0,1), (2,3), (4,5), (6,7).
        const __m256i b16 = _mm256_packs_epi32(b32, b32);
#pragma GCC unroll 8
        for (int r = 0; r < G; ++r) {
          __m256i mins = _mm256_madd_epi16(mpair[r][0], _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(0)));
          mins = madd16_acc(mins, mpair[r][1], _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(1)));
          mins = madd16_acc(mins, mpair[r][2], _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(4)));
          mins = madd16_acc(mins, mpair[r][3], _mm256_permutevar8x32_epi32(b16, _mm256_set1_epi32(5)));
          fmins[r][t] = _mm256_cvtepi32_ps(mins);
        }
      }
    }
    __m256i isum[G][T];
#pragma GCC unroll 8
    for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int j = 0; j < 4; ++j) {
#if ECO_QUANT_ISA == 0
      q4k_sub_blocks16<G, T, kAhead>(sup, sc, a, t0, 256 * s + 64 * j, j, isum);
#else
      {
        // VNNI: per sub-block sums (lo_acc, hi_acc) from vpdpbusd, then times the scales into isum.
        __m256i lo_acc[G][T], hi_acc[G][T];
#pragma GCC unroll 8
        for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) lo_acc[r][t] = hi_acc[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 8
          for (int r = 0; r < G; ++r) {
            if (kAhead && c % 2 == 0) prefetch_ahead(sup[r] + 128 + 256 * j + 32 * c, a.gemv_prefetch);
            const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sup[r] + 128 + 256 * j + 32 * c));
            const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi8(0x0F));
            const __m256i hi = q4k_hi(w);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
              const std::int8_t* x = a.q + (t0 + t) * a.q_stride + 256 * s + 64 * j + 4 * c;
              lo_acc[r][t] = dot_acc(lo_acc[r][t], lo, broadcast4(x));
              hi_acc[r][t] = dot_acc(hi_acc[r][t], hi, broadcast4(x + 32));
            }
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < G; ++r) {
          const __m256i m_lo = _mm256_slli_epi32(
              _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[r] + 16 * j))), kQ4kHiShift);
          const __m256i m_hi =
              _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[r] + 16 * j + 8)));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_add_epi32(_mm256_mullo_epi32(lo_acc[r][t], m_lo),
                                                                        _mm256_mullo_epi32(hi_acc[r][t], m_hi)));
          }
        }
      }
#endif
    }
#if ECO_QUANT_ISA != 0
#pragma GCC unroll 8
    for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_srai_epi32(isum[r][t], kQ4kHiShift);
#endif
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_set1_ps(a.d[(t0 + t) * nsb + s]);
#pragma GCC unroll 8
      for (int r = 0; r < G; ++r) {
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sup[r])));
        const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sup[r] + 16)));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][t]), _mm256_mul_ps(d, dx), acc[r][t]);
        acc[r][t] = _mm256_fnmadd_ps(fmins[r][t], _mm256_mul_ps(dmin, dx), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < G; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(yg[r] + (t0 + t) * y_stride, acc[r][t]);
}

#if ECO_QUANT_ISA == 2
// Helpers of the 512-bit Q4_K kernels (q4k_tile_wide, the AMX tile), 16 rows per register.

// Quarter q of the mins of two groups' super-block (mn0, mn1: q4k_scales' mins): per row
// the int16 pair (min of sub-blocks 2q, 2q + 1), the first group's 8 rows in lanes 0-7.
inline __m512i q4k_mins_pair(const std::uint8_t* mn0, const std::uint8_t* mn1, int q) {
  const __m128i m0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mn0 + 16 * q));
  const __m128i m1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mn1 + 16 * q));
  return _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(m0), m1, 1));
}

// A token's 4 int16 pairs of 32-value sums of one super-block (QuantizedActs::bpairs),
// bp[q] = (sub-block 2q's, 2q + 1's), each on all 16 lanes: broadcasts from memory.
inline void q4k_token_pairs(const std::int32_t* bpairs, __m512i* bp) {
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) bp[q] = _mm512_set1_epi32(bpairs[q]);
}

// Per row: the super-block's sum of min * (sum of the sub-block's 32 q), exact.
inline __m512i q4k_mins_wide(const __m512i* mpair, const __m512i* bp) {
  __m512i mins = _mm512_madd_epi16(mpair[0], bp[0]);
  mins = _mm512_dpwssd_epi32(mins, mpair[1], bp[1]);
  mins = _mm512_dpwssd_epi32(mins, mpair[2], bp[2]);
  return _mm512_dpwssd_epi32(mins, mpair[3], bp[3]);
}

// A super-block's float step: acc + float(isum) * (d * dx) - float(mins) * (dmin * dx).
inline __m512 q4k_finish_wide(__m512i isum, __m512i mins, __m512 d, __m512 dmin, __m512 dx, __m512 acc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dx), acc);
  return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dmin, dx), acc);
}

// The high nibbles of w as values 0-15 in one instruction (GFNI): each byte times the
// bit matrix whose rows 0-3 pick bits 4-7, i.e. the byte shifted right by 4.
inline __m512i q4k_hi_gfni(__m512i w) {
  return _mm512_gf2p8affine_epi64_epi8(w, _mm512_set1_epi64(0x1020408000000000LL), 0);
}

// q4k_tile on 512-bit registers (packed_tile_wide's scheme): P pairs of groups
// (grp[2p] in lanes 0-7, grp[2p + 1] in 8-15) x T tokens; every lane does what
// q4k_tile does for its row, so the bits are the same.
//
// kGfni (CPUs with GFNI): the high nibbles as values 0-15 (q4k_hi_gfni, one instruction
// as q4k_hi's AND), and the scales applied to each half sub-block's sums of 16 products
// (|sum| <= 16 * 15 * 127 < 2^15, so the int32 lane is its int16 low half) by one vpdpwssd
// with the scale in the lane's low int16 and 0 in the high one: 4 vpdpwssd per token and
// pair of sub-blocks instead of 2 vpmulld (2 uops each on Intel cores) and 2 adds. The
// same exact isum: sum_sb scale_sb * dot_sb either way.
template <int P, int T, bool kGfni = false>
void q4k_tile_wide(const std::uint8_t* const* grp, const QuantizedActs& a, std::int64_t t0, float* const* yg,
                   std::int64_t y_stride, TilePrefetch pf) {
  const std::int64_t nsb = a.nb / 8;
  const std::int64_t pf_per = pf.per_step(nsb);
  __m512 acc[P][T];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  for (std::int64_t s = 0; s < nsb; ++s) {
    pf.issue(s * pf_per, pf_per);
    alignas(32) std::uint8_t sc[2 * P][64], mn[2 * P][64];
    const std::uint8_t* sup[2 * P];
#pragma GCC unroll 8
    for (int r = 0; r < 2 * P; ++r) {
      sup[r] = grp[r] + s * kQ4kGroupSuperBytes;
      q4k_scales(sup[r], sc[r], mn[r]);
    }
    __m512i isum[P][T];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[p][t] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int j = 0; j < 4; ++j) {
      // The scales of sub-blocks 2j (low nibbles) and 2j + 1 (high), per row lane.
      __m512i m_lo[P], m_hi[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        m_lo[p] = pair_u8_to_i32(sc[2 * p] + 16 * j, sc[2 * p + 1] + 16 * j);
        if constexpr (!kGfni) m_lo[p] = _mm512_slli_epi32(m_lo[p], kQ4kHiShift);
        m_hi[p] = pair_u8_to_i32(sc[2 * p] + 16 * j + 8, sc[2 * p + 1] + 16 * j + 8);
      }
      __m512i lo_acc[P][T], hi_acc[P][T];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) lo_acc[p][t] = hi_acc[p][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const std::int64_t off = 128 + 256 * j + 32 * c;
          const __m512i w = pair_load(sup[2 * p] + off, sup[2 * p + 1] + off);
          const __m512i lo = _mm512_and_si512(w, _mm512_set1_epi8(0x0F));
          const __m512i hi =
              kGfni ? q4k_hi_gfni(w) : _mm512_and_si512(w, _mm512_set1_epi8(static_cast<char>(0xF0)));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const std::int8_t* x = a.q + (t0 + t) * a.q_stride + 256 * s + 64 * j + 4 * c;
            std::int32_t xlo, xhi;
            std::memcpy(&xlo, x, 4);
            std::memcpy(&xhi, x + 32, 4);
            lo_acc[p][t] = _mm512_dpbusd_epi32(lo_acc[p][t], lo, _mm512_set1_epi32(xlo));
            hi_acc[p][t] = _mm512_dpbusd_epi32(hi_acc[p][t], hi, _mm512_set1_epi32(xhi));
          }
        }
        if constexpr (kGfni) {
          if (c % 4 == 3) {
#pragma GCC unroll 8
            for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
              for (int t = 0; t < T; ++t) {
                isum[p][t] = _mm512_dpwssd_epi32(isum[p][t], lo_acc[p][t], m_lo[p]);
                isum[p][t] = _mm512_dpwssd_epi32(isum[p][t], hi_acc[p][t], m_hi[p]);
                lo_acc[p][t] = hi_acc[p][t] = _mm512_setzero_si512();
              }
          }
        }
      }
      if constexpr (!kGfni) {
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            isum[p][t] = _mm512_add_epi32(isum[p][t], _mm512_add_epi32(_mm512_mullo_epi32(lo_acc[p][t], m_lo[p]),
                                                                        _mm512_mullo_epi32(hi_acc[p][t], m_hi[p])));
          }
      }
    }
    if constexpr (!kGfni) {
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[p][t] = _mm512_srai_epi32(isum[p][t], kQ4kHiShift);
    }
    // Mins: per row the int16 pairs (min of sub-blocks 2q, 2q + 1), 16 rows per register.
    __m512i mpair[P][4];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p)
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        mpair[p][q] = q4k_mins_pair(mn[2 * p], mn[2 * p + 1], q);
      }
    __m512 d[P], dmin[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      d[p] = pair_f16(sup[2 * p], sup[2 * p + 1]);
      dmin[p] = pair_f16(sup[2 * p] + 16, sup[2 * p + 1] + 16);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      __m512i bp[4];
      q4k_token_pairs(a.bpairs + ((t0 + t) * nsb + s) * 4, bp);
      const __m512 dx = _mm512_set1_ps(a.d[(t0 + t) * nsb + s]);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        acc[p][t] = q4k_finish_wide(isum[p][t], q4k_mins_wide(mpair[p], bp), d[p], dmin[p], dx, acc[p][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      pair_store(yg[2 * p] + (t0 + t) * y_stride, yg[2 * p + 1] + (t0 + t) * y_stride, acc[p][t]);
    }
}

// Zen 5, synth 1b Q4_K, one thread, pp512 / batch-32 tok/s, two alternating runs:
// 1 x 4 258-260 / 237-240, 1 x 6 268-273 / 252-253, 2 x 3 268-272 / 257-259,
// 2 x 4 260-265 / 252-253 (the 256-bit 2-group x 4-token tiles: 169-171 / 157-159).
// On the Intel Xeon (see kWidePairs) the pair insert and the two nibble masks of
// each chunk take multiply slots, 3 per 2T vpdpbusd, so one pair with more tokens
// wins: synth 1b Q4_K, one thread, pp512 134-136 -> 150 tok/s, batch 32 111-122 ->
// 131-133 with 1 x 7; kernels_bench 2048 x 768 x 512 5481-5919 -> 4937-5388 us
// (1 x 6: 5210-5527). On Zen 5 2 x 3 stays ahead of 1 x 7 (thirtieth pass: 2198-2204
// against 2313-2353 us), so both are built and QuantizedActs::q4k_tile_pairs
// (KernelContext::q4k_tile_pairs, by CPU vendor) picks one.
#endif

struct Q4kTiles {
  static constexpr int kGroups = kQ4kGroups;
  static constexpr int kTokens = kQ4kTokens;
  static constexpr int kStreams[4] = {kQ4kStreams[0], kQ4kStreams[1], kQ4kStreams[2], kQ4kStreams[3]};
  template <int G, int T, bool kAhead = false>
  static constexpr PackedTileFn fn() {
    return &q4k_tile<G, T, kAhead>;
  }
};

// Weight rows [r0, r1) (multiples of 8) of a kRows8 matrix w times tokens
// [t0, t1) with the tiles of K (PackedTiles for Q8_0, Q4kTiles): register
// tiles of up to K::kGroups groups x K::kTokens tokens; row_bytes: the GGUF
// row's bytes (a group is 8 of them).
template <class K>
void rows8(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
            std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride) {
  const std::int64_t gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  const std::int64_t g0 = r0 / 8, g1 = r1 / 8;
  // Up to 4 tokens (decode): streams of far-apart groups, for memory bandwidth.
  if (dispatch_gemv_tokens(t1 - t0, [&](auto n) {
        constexpr int T = decltype(n)::value;
        auto run = [&](auto streams, std::int64_t first, std::int64_t stream_groups, std::int64_t count) {
          constexpr int S = decltype(streams)::value;
          // At most K::kTokens tokens per tile (the registers' limit), then one at a time.
          constexpr int kT = T < K::kTokens ? T : K::kTokens;
          for (std::int64_t i = 0; i < count; ++i) {
            const std::uint8_t* grp[S];
            float* yg[S];
#pragma GCC unroll 8
            for (int k = 0; k < S; ++k) {
              const std::int64_t g = first + k * stream_groups + i;
              grp[k] = w + g * gbytes;
              yg[k] = y + 8 * g;
            }
            // Each weight stream's lines gemv_prefetch bytes ahead, if any (prefetch_ahead).
            auto tiles = [&](auto ahead) {
              constexpr bool kAhead = decltype(ahead)::value;
              std::int64_t t = t0;
              for (; t + kT <= t1; t += kT) K::template fn<S, kT, kAhead>()(grp, a, t, yg, y_stride, TilePrefetch{});
              for (; t < t1; ++t) K::template fn<S, 1, kAhead>()(grp, a, t, yg, y_stride, TilePrefetch{});
            };
            if (a.gemv_prefetch > 0) {
              tiles(std::true_type{});
            } else {
              tiles(std::false_type{});
            }
          }
        };
        // One token: the count the CPU asks for (QuantizedActs::gemv_streams), if any.
        if constexpr (T == 1) {
          if (a.gemv_streams == 2) return split_streams<2>(g0, g1, run);
          if (a.gemv_streams == 4) return split_streams<4>(g0, g1, run);
        }
        split_streams<K::kStreams[T - 1]>(g0, g1, run);
      })) {
    return;
  }
  static constexpr auto kTable = make_tile_table<PackedTileFn, K::kGroups, K::kTokens, K>();
  // Tokens whose activations stay in L2 while the groups pass.
  const std::int64_t chunk = imax(K::kTokens, kActChunkBytes / a.q_stride / K::kTokens * K::kTokens);
  for (std::int64_t tc = t0; tc < t1; tc += chunk) {
    const std::int64_t te = imin(t1, tc + chunk);
    for (std::int64_t g = g0; g < g1; g += K::kGroups) {
      const int ng = static_cast<int>(imin(K::kGroups, g1 - g));
      const std::uint8_t* grp[K::kGroups];
      float* yg[K::kGroups];
      for (int i = 0; i < ng; ++i) {
        grp[i] = w + (g + i) * gbytes;
        yg[i] = y + 8 * (g + i);
      }
      // The next groups' weights are prefetched into L2, a share of their lines by each
      // token tile, spread over its blocks.
      PrefetchShares next(reinterpret_cast<const char*>(w + (g + ng) * gbytes),
                          imin(K::kGroups, g1 - g - ng) * gbytes / 64, (te - tc + K::kTokens - 1) / K::kTokens);
      for (std::int64_t t = tc; t < te; t += K::kTokens) {
        const int nt = static_cast<int>(imin(K::kTokens, te - t));
        kTable.fns[ng - 1][nt - 1](grp, a, t, yg, y_stride, next.next());
      }
    }
  }
}

#if ECO_QUANT_ISA == 2
// W's tiles with their GEMV prefetch (kAhead), for make_tile_table.
template <class W>
struct AheadTiles {
  template <int P, int T>
  static constexpr PackedTileFn fn() {
    return W::template fn<P, T, true>();
  }
};

// One kRows8 group (an odd last one of rows8_wide's pairs) times tokens [t0, t1) in Narrow's
// 1-group tiles; grp, yg: the group's weights and first output row.
template <class Narrow>
void rows8_one_group(const std::uint8_t* grp, const QuantizedActs& a, std::int64_t t0, std::int64_t t1, float* yg,
                     std::int64_t y_stride) {
  static constexpr auto kNarrow = make_tile_table<PackedTileFn, 1, Narrow::kTokens, Narrow>();
  const std::uint8_t* g[1] = {grp};
  float* y[1] = {yg};
  for (std::int64_t t = t0; t < t1; t += Narrow::kTokens) {
    kNarrow.fns[0][imin(Narrow::kTokens, t1 - t) - 1](g, a, t, y, y_stride, TilePrefetch{});
  }
}

// The streaming form of rows8_wide for a few tokens (at most W::kStreamTokens): each pair of
// groups read once, by one tile of all the tokens that prefetches its weights a.gemv_prefetch
// bytes ahead as the GEMV does. In rows8_wide's blocked form the next pairs come into L2 by
// prefetches spread over the tiles of the pair before, and at 8-12 tokens a step took the time
// of its reads plus that of its arithmetic (docs/kernels.md, sixty-second pass). From 16 tokens
// on (two tiles of a pair) the blocked form was faster.
template <class W, class Narrow>
void rows8_stream(const std::uint8_t* w, std::int64_t gbytes, const QuantizedActs& a, std::int64_t g0,
                  std::int64_t g1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride) {
  static constexpr auto kTiles = make_tile_table<PackedTileFn, 1, W::kStreamTokens, AheadTiles<W>>();
  const PackedTileFn tile = kTiles.fns[0][t1 - t0 - 1];
  std::int64_t g = g0;
  for (; g + 1 < g1; g += 2) {
    const std::uint8_t* grp[2] = {w + g * gbytes, w + (g + 1) * gbytes};
    float* yg[2] = {y + 8 * g, y + 8 * (g + 1)};
    tile(grp, a, t0, yg, y_stride, TilePrefetch{});
  }
  if (g < g1) rows8_one_group<Narrow>(w + g * gbytes, a, t0, t1, y + 8 * g, y_stride);
}

// rows8<Narrow> for 5 or more tokens with the wide tiles of W (W::kPairs pairs
// of groups x W::kTokens tokens, W::fn<P, T>); an odd last group takes Narrow's
// 1-group tiles. Up to W::kStreamTokens tokens (0: none) where the GEMV prefetches (Intel
// CPUs, KernelContext::gemv_prefetch): rows8_stream.
template <class W, class Narrow>
void rows8_wide(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride) {
  const std::int64_t gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  const std::int64_t g0 = r0 / 8, g1 = r1 / 8;
  if constexpr (W::kStreamTokens > 0) {
    if (t1 - t0 <= W::kStreamTokens && a.gemv_prefetch > 0) {
      rows8_stream<W, Narrow>(w, gbytes, a, g0, g1, t0, t1, y, y_stride);
      return;
    }
  }
  static constexpr auto kWide = make_tile_table<PackedTileFn, W::kPairs, W::kTokens, W>();
  constexpr int kG = 2 * W::kPairs;
  const std::int64_t chunk = imax(W::kTokens, kActChunkBytes / a.q_stride / W::kTokens * W::kTokens);
  for (std::int64_t tc = t0; tc < t1; tc += chunk) {
    const std::int64_t te = imin(t1, tc + chunk);
    for (std::int64_t g = g0; g < g1; g += kG) {
      const int ng = static_cast<int>(imin(kG, g1 - g)), np = ng / 2;
      const std::uint8_t* grp[kG];
      float* yg[kG];
      for (int i = 0; i < ng; ++i) {
        grp[i] = w + (g + i) * gbytes;
        yg[i] = y + 8 * (g + i);
      }
      // As in rows8: the next groups' lines into L2, a share by each token tile.
      PrefetchShares next(reinterpret_cast<const char*>(w + (g + ng) * gbytes), imin(kG, g1 - g - ng) * gbytes / 64,
                          (te - tc + W::kTokens - 1) / W::kTokens);
      if (np > 0) {
        for (std::int64_t t = tc; t < te; t += W::kTokens) {
          kWide.fns[np - 1][imin(W::kTokens, te - t) - 1](grp, a, t, yg, y_stride, next.next());
        }
      }
      if (ng % 2 != 0) rows8_one_group<Narrow>(grp[ng - 1], a, tc, te, yg[ng - 1], y_stride);
    }
  }
}

template <int kP, int kT, bool kGfni>
struct Q4kWideTiles {
  static constexpr int kPairs = kP;
  static constexpr int kTokens = kT;
  // No streaming tiles: they did not speed up Q4_K's 5-15 tokens (sixty-second pass).
  static constexpr int kStreamTokens = 0;
  template <int P, int T>
  static constexpr PackedTileFn fn() {
    return &q4k_tile_wide<P, T, kGfni>;
  }
};
#endif

void rows_q8_0_rows8(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                     std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float*) {
  rows8<PackedTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
}

void rows_q4_k_rows8(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                     std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float*) {
  rows8<Q4kTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
}

#if ECO_QUANT_ISA == 2
// The avx512vnni-zmm level's kRows8 kernels: the wide tiles for 5 or more
// tokens, the GEMV of rows8 for 1-4 (it streams memory; width does not help).
void rows_q8_0_rows8_zmm(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                         std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float*) {
  if (t1 - t0 <= 4) {
    rows8<PackedTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
  } else {
    rows8_wide<PackedWideTiles, PackedTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
  }
}

void rows_q4_k_rows8_zmm(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                         std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float*) {
  if (t1 - t0 <= 4) {
    rows8<Q4kTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
  } else if (a.q4k_gfni) {
    // One pair: 8 tokens (the float sums, touched once per super-block, spill to the stack;
    // 10 or more spill the int sums too and run at half the rate). Emerald Rapids Xeon, synth
    // 1b Q4_K, one thread, tok/s 7 -> 8 tokens: batch 16 130-134 -> 138-140, batch 32
    // 143-144 -> 145-148; kernels_bench 32 tokens 180-182 -> 174-176 ms.
    if (a.q4k_tile_pairs == 2) {
      rows8_wide<Q4kWideTiles<2, 3, true>, Q4kTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
    } else {
      rows8_wide<Q4kWideTiles<1, 8, true>, Q4kTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
    }
  } else if (a.q4k_tile_pairs == 2) {
    rows8_wide<Q4kWideTiles<2, 3, false>, Q4kTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
  } else {
    rows8_wide<Q4kWideTiles<1, 7, false>, Q4kTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
  }
}

#endif

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS

#if ECO_QUANT_ISA == 2
#pragma GCC diagnostic pop
#endif
