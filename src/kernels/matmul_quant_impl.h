// Quantized-weight matmul kernels (Q8_0, Q4_0, Q4_K, Q6_K), written once and
// compiled once per ISA level. Included only by kernels/matmul_quant_<isa>.cc,
// which define ECO_QUANT_ISA (0 = AVX2, 1 = AVX-VNNI, 2 = AVX-512 VNNI) and
// ECO_QUANT_NS (the namespace of that build) and are compiled with that
// level's -m flags.
//
// One-definition safety: everything here has internal linkage (an unnamed
// namespace) and calls no inline function with external linkage (no std::
// algorithms or containers, no base/ helpers): a weak symbol compiled with
// AVX-512 flags could otherwise be picked by the linker for the AVX2 build
// and crash an AVX2-only CPU. scripts/check_isa_objects.sh (a ctest) checks
// the objects have no weak symbols.
//
// Arithmetic (identical in every build, every tile shape, every thread count,
// so results are bitwise equal across ISA levels and batch sizes):
//  - activations are int8 blocks of 32 with a float scale dx (QuantizedActs);
//  - each weight block of 32 becomes signed int8 (Q8_0, Q4_0 as q - 8); its integer dot with the
//    activation block is kept as 8 int32 lanes (lane i: values 4i..4i+3).
//    These lanes are exact, so vpmaddubsw+vpmaddwd (AVX2) and vpdpbusd (VNNI)
//    give the same ints;
//  - per block, ascending: acc = fma(float(lanes), dw * dx, acc) (8 lanes);
//  - y = hsum8(acc) with a fixed reduction tree;
//  - K-quants: see "K-quants" below.
#pragma once

#ifndef ECO_QUANT_ISA
#error "define ECO_QUANT_ISA before including matmul_quant_impl.h"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/ggml_type.h"
#include "kernels/matmul_kernels.h"
#include "kernels/tile_table.h"
#include "kernels/vec_math.h"

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

#if ECO_QUANT_ISA == 2
// 32 vector registers: a bigger register tile.
constexpr int kRows = 4;
constexpr int kTokens = 4;
#else
// 3x3 measured best on AVX2 among 4x2, 3x3, 2x3, 2x4 (16 registers).
constexpr int kRows = 3;
constexpr int kTokens = 3;
#endif
static_assert(kRows + kRows * kTokens <= kQuantScratchFloatsPerBlock);
// krows_impl: 4 unpacked rows of <= 2.2 bytes per value, + 64 alignment, fit in 4 * kQuantScratchFloatsPerBlock
// bytes per 32 values plus the 128 floats matmul adds.
static_assert(4 * 32 * 22 / 10 <= 4 * kQuantScratchFloatsPerBlock);


// Tokens whose quantized activations stay hot (L2) while weight rows stream past.
constexpr std::int64_t kActChunkBytes = 128 * 1024;
// Software prefetch distance of the tiles (without it, short Q8_0 rows stream
// at a third of the bandwidth; 2-8 KiB measured alike).
constexpr std::int64_t kPrefetchBytes = 4096;
// Weight-row streams gemv reads at once for 1, 2, 3, 4 tokens (4 streams of a
// single-token Q8_0 matmul read at ~23 GB/s vs ~15 GB/s for one).
constexpr int kGemvStreams[] = {4, 4, 3, 2};

inline std::int64_t imin(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
inline std::int64_t imax(std::int64_t a, std::int64_t b) { return a > b ? a : b; }
inline float h2f(std::uint16_t h) { return _cvtsh_ss(h); }

// Rows [r0, r1) as kStreams far-apart streams of equal length, then the rest
// one at a time: fn(streams, first_row, stream_rows, count), where streams is
// std::integral_constant<int, kStreams> or <int, 1>.
template <int kStreams, class Fn>
void split_streams(std::int64_t r0, std::int64_t r1, Fn&& fn) {
  const std::int64_t m = (r1 - r0) / kStreams;
  if (m > 0) fn(std::integral_constant<int, kStreams>{}, r0, m, m);
  const std::int64_t rest = r0 + kStreams * m;
  if (rest < r1) fn(std::integral_constant<int, 1>{}, rest, std::int64_t{0}, r1 - rest);
}

// ---- The ISA-specific part: int8 dot products as 8 exact int32 lanes ----

// Lane i = sum_{k<4} au[4i+k] * sx[4i+k] (au unsigned, sx signed bytes).
inline __m256i idot(__m256i au, __m256i sx) {
#if ECO_QUANT_ISA == 0
  return _mm256_madd_epi16(_mm256_maddubs_epi16(au, sx), _mm256_set1_epi16(1));
#elif ECO_QUANT_ISA == 1
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), au, sx);
#else
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), au, sx);
#endif
}

// ---- Weight formats: int8 block unpackers and per-block float scales ----
//
// U::row_scales(row, nb, dw): dw[b] = float scale of block b of the row.
// U::unpack(row, b) -> the 32 weight values of block b as signed bytes.
// U::block_scale(row, b) = dw[b], read inline by gemv.

struct FmtQ8_0 {
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ8_0);
  static void row_scales(const std::uint8_t* row, std::int64_t nb, float* dw) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row);
    for (std::int64_t b = 0; b < nb; ++b) dw[b] = h2f(blk[b].d);
  }
  static __m256i unpack(const std::uint8_t* row, std::int64_t b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>((reinterpret_cast<const BlockQ8_0*>(row) + b)->qs));
  }
  static float block_scale(const std::uint8_t* row, std::int64_t b) {
    return h2f((reinterpret_cast<const BlockQ8_0*>(row) + b)->d);
  }
};

// Q4_0: value = (q - 8) * d with q in 0..15, unpacked to signed q - 8 (as
// ggml's q4_0 x q8_0 dot: the same ints and scales, so greedy output follows
// llama.cpp's; an unsigned q with an 8 * d min term rounds differently).
struct FmtQ4_0 {
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ4_0);
  static void row_scales(const std::uint8_t* row, std::int64_t nb, float* dw) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row);
    for (std::int64_t b = 0; b < nb; ++b) dw[b] = h2f(blk[b].d);
  }
  static __m256i unpack(const std::uint8_t* row, std::int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m128i mask = _mm_set1_epi8(0x0F);
    return _mm256_sub_epi8(_mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), mask), _mm_and_si128(v, mask)),
                           _mm256_set1_epi8(8));
  }
  static float block_scale(const std::uint8_t* row, std::int64_t b) {
    return h2f((reinterpret_cast<const BlockQ4_0*>(row) + b)->d);
  }
};

// ---- K-quants (Q4_K, Q6_K) against K-format activations ----
//
// A tile of rows is first unpacked (UnpackedK) into unsigned bytes q, int16
// multipliers per 16 values, an offset term per super-block, and float
// scales; then, per super-block s of 256 values, output (r, t) gets
//   isum = sum_j lanes(maddubs(q_j, x_j) * mult_j)    8 exact int32 lanes, j < 8 blocks of 32
//   olanes = madd(bsums_s, mo_s)                        8 exact int32 lanes
//   acc = fma(float(isum), d_s * dx_s, acc); acc = fnmadd(float(olanes), off_s * dx_s, acc)
// and y = hsum8(acc). vpmaddwd + vpaddd (AVX2) and vpdpwssd (VNNI) give the
// same ints. Q4_K (value d*sc*q - dmin*mn, q in 0..15): mult = sc of the
// 32-block, mo = its mn, off = dmin. Q6_K (value d*sc16*(q - 32), q in
// 0..63): mult = sc16, the -32 inside the integer sums, and one integer per
// super-block, the sum of isum's lanes: acc = fma(float(sum), d_s * dx_s, acc),
// y = acc (q6k_step), so that a tokens-in-lanes kernel gives the same bits.

#if ECO_QUANT_ISA == 2
constexpr int kRowsK = 4;
constexpr int kTokensK = 4;
#else
constexpr int kRowsK = 2;
constexpr int kTokensK = 4;
#endif

// One row, unpacked: q[cols], mult[nb][16], mo[nsb][16], d[nsb], off[nsb], corr[nsb][16].
struct UnpackedK {
  std::uint8_t* q;
  std::int16_t* mult;
  std::int16_t* mo;  // Q4_K's mins (Q6_K's unpacks store none)
  float* d;
  float* off;
  std::int32_t* corr;  // Q6_K on x + 128 only: [nsb][16] (FmtQ6_KXu, Q6kZmmTiles::unpack_row)
};

// Bytes of one unpacked row of cols values (64-byte multiple).
inline std::int64_t unpacked_k_corr_offset(std::int64_t cols) {
  return (2 * cols + cols / 8 + cols / 32 + 63) / 64 * 64;
}
inline std::int64_t unpacked_k_bytes(std::int64_t cols) { return unpacked_k_corr_offset(cols) + cols / 4 + 64; }

inline UnpackedK unpacked_k_at(std::uint8_t* base, std::int64_t cols) {
  UnpackedK u;
  u.q = base;
  u.mult = reinterpret_cast<std::int16_t*>(base + cols);
  u.mo = reinterpret_cast<std::int16_t*>(base + 2 * cols);
  u.d = reinterpret_cast<float*>(base + 2 * cols + cols / 8);
  u.off = u.d + cols / 256;
  u.corr = reinterpret_cast<std::int32_t*>(base + unpacked_k_corr_offset(cols));
  return u;
}

// Super-block s of a row decoded in registers (the gemv path): the
// multipliers of block j come from mult(j); the rest as in UnpackedK.
struct KSuper {
  __m256i sc;  // Q4_K: the 8 scales as int16 in both 128-bit halves; Q6_K: the 16 sub-block scales as int16
  __m256i mo;
  float d, off;
};

inline __m256i shuffle_pair_mask(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(hi * 0x0202 + 0x0100)),
                          _mm_set1_epi16(static_cast<short>(lo * 0x0202 + 0x0100)));
}

struct FmtQ4_K {
  static constexpr bool kUnsignedX = false;  // see FmtQ6_KXu
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ4_K) / 8;
  static constexpr bool kSub32 = false;
  static KSuper super(const std::uint8_t* row, std::int64_t s) {
    const auto& blk = reinterpret_cast<const BlockQ4_K*>(row)[s];
    std::uint32_t u[3];
    __builtin_memcpy(u, blk.scales, 12);
    // 6-bit scales and mins of the 8 blocks (ggml's get_scale_min_k4, four at a time).
    const std::uint32_t sc_lo = u[0] & 0x3f3f3f3fu;
    const std::uint32_t sc_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    const std::uint32_t mn_lo = u[1] & 0x3f3f3f3fu;
    const std::uint32_t mn_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const __m128i sc8 = _mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo));
    const __m128i mn8 = _mm_set_epi32(0, 0, static_cast<int>(mn_hi), static_cast<int>(mn_lo));
    KSuper k;
    k.sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
    k.mo = _mm256_castsi128_si256(_mm_cvtepu8_epi16(mn8));  // the 8 mins as int16
    k.d = h2f(blk.d);
    k.off = h2f(blk.dmin);
    return k;
  }
  static __m256i mult(const KSuper& k, int j) { return _mm256_shuffle_epi8(k.sc, shuffle_pair_mask(j, j)); }
  static __m256i q(const std::uint8_t* row, std::int64_t s, int j) {
    const auto& blk = reinterpret_cast<const BlockQ4_K*>(row)[s];
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * (j / 2)));
    return _mm256_and_si256((j & 1) ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
  }
  static void unpack_row(const std::uint8_t* row, std::int64_t nsb, const UnpackedK& u) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row);
    const __m256i mask = _mm256_set1_epi8(0x0F);
    for (std::int64_t s = 0; s < nsb; ++s) {
      const std::uint8_t* sq = blk[s].scales;
      alignas(32) std::int16_t mn16[16];
      for (int j = 0; j < 8; ++j) {
        int sc, mn;
        if (j < 4) {
          sc = sq[j] & 63;
          mn = sq[j + 4] & 63;
        } else {
          sc = (sq[j + 4] & 0xF) | ((sq[j - 4] >> 6) << 4);
          mn = (sq[j + 4] >> 4) | ((sq[j] >> 6) << 4);
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.mult + 16 * (8 * s + j)),
                           _mm256_set1_epi16(static_cast<short>(sc)));
        mn16[j] = static_cast<std::int16_t>(mn);
        mn16[8 + j] = 0;
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(u.mo + 16 * s),
                         _mm256_load_si256(reinterpret_cast<const __m256i*>(mn16)));
      for (int jp = 0; jp < 4; ++jp) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[s].qs + 32 * jp));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 256 * s + 64 * jp), _mm256_and_si256(v, mask));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 256 * s + 64 * jp + 32),
                           _mm256_and_si256(_mm256_srli_epi16(v, 4), mask));
      }
      u.d[s] = h2f(blk[s].d);
      u.off[s] = h2f(blk[s].dmin);
    }
  }
};

struct FmtQ6_K {
  static constexpr bool kUnsignedX = false;
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ6_K) / 8;
  static constexpr bool kSub32 = true;
  static KSuper super(const std::uint8_t* row, std::int64_t s) {
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[s];
    KSuper k;
    k.sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    k.mo = _mm256_setzero_si256();  // the -32 is inside the integer sums
    k.d = k.off = h2f(blk.d);
    return k;
  }
  // Lanes 0-7: scale 2j, lanes 8-15: scale 2j + 1.
  static __m256i mult(const KSuper& k, int j) {
    const __m256i pair = _mm256_permutevar8x32_epi32(k.sc, _mm256_set1_epi32(j));
    return _mm256_shuffle_epi8(pair, shuffle_pair_mask(0, 1));
  }
  static __m256i q(const std::uint8_t* row, std::int64_t s, int j) {
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[s];
    const int h = j / 4, jj = j % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32 * (jj % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, 4 * (jj / 2)), _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * jj), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
};

// lanes + v as one link of a chain of sums. AVX2's accumulations (vpmaddwd, then vpaddd)
// are separate additions, which GCC reassociates into a tree of partial sums that live on
// the stack: packed_tile<1, 4>'s 32 vpmaddwd results per block were stored and re-read
// (Zen 3, synth 1b Q8_0 matrices, 512 tokens: 12.2-13.4 s, 10.7-11.3 with the chain).
// The empty asm makes each sum opaque, so the additions run in program order.
inline __m256i chain_add_epi32(__m256i lanes, __m256i v) {
  __m256i s = _mm256_add_epi32(lanes, v);
  __asm__("" : "+x"(s));
  return s;
}
// The same for int16 lanes (q4k_sub_blocks16's sums of vpmaddubsw pairs).
inline __m256i chain_add_epi16(__m256i lanes, __m256i v) {
  __m256i s = _mm256_add_epi16(lanes, v);
  __asm__("" : "+x"(s));
  return s;
}

// lanes += the int16 pair dots of a and b (exact int32).
inline __m256i madd16_acc(__m256i lanes, __m256i a, __m256i b) {
#if ECO_QUANT_ISA == 0
  return chain_add_epi32(lanes, _mm256_madd_epi16(a, b));
#elif ECO_QUANT_ISA == 1
  return _mm256_dpwssd_avx_epi32(lanes, a, b);
#else
  return _mm256_dpwssd_epi32(lanes, a, b);
#endif
}

// Q6_K for ktile on x + 128 (QuantizedActs::qu): its rows unpacked as q - 32 (signed) with
// per super-block corr = -128 * sum scale * (q - 32) in ktile's 8 lanes (the first 8 of the
// row's 16 per super-block); one vpmaddubsw per 32 values and token instead of two and a
// vpsubw, the same integers after corr, so the same bits. The 1-4 token GEMV is FmtQ6_K's.
// unpack_row decodes with the GEMV's q() and mult(), subtracts 32 and sums corr in one pass, as
// Q6kZmmTiles::unpack_row does on 512 bits: per 32 values the pair sums of q - 32 (vpmaddubsw by
// 1) times mult's (scale, scale) int16 pairs, i.e. scale * (sum of 4 q - 32) per lane.
struct FmtQ6_KXu : FmtQ6_K {
  static constexpr bool kUnsignedX = true;
  static void unpack_row(const std::uint8_t* row, std::int64_t nsb, const UnpackedK& u) {
    const __m256i k32 = _mm256_set1_epi8(32), ones = _mm256_set1_epi8(1);
    for (std::int64_t s = 0; s < nsb; ++s) {
      const KSuper k = super(row, s);
      __m256i c8 = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i qs = _mm256_sub_epi8(q(row, s, j), k32);
        const __m256i m = mult(k, j);
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.q + 256 * s + 32 * j), qs);
        _mm256_store_si256(reinterpret_cast<__m256i*>(u.mult + 16 * (8 * s + j)), m);
        c8 = madd16_acc(c8, _mm256_maddubs_epi16(ones, qs), m);
      }
      const __m256i corr = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(c8, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u.corr + 16 * s), corr);
      u.d[s] = u.off[s] = k.d;
    }
  }
};

// isum + the 8 int32 lanes of maddubs(q, x) times the int16 multipliers m
// (kSub32, Q6_K: of maddubs(q, x) - maddubs(32, x), i.e. of (q - 32) x).
template <bool kSub32>
inline __m256i kdot_acc(__m256i isum, __m256i q, __m256i x, __m256i m) {
  __m256i p = _mm256_maddubs_epi16(q, x);
  if constexpr (kSub32) p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8(32), x));
  return madd16_acc(isum, p, m);
}

// Q6_K for ktile as FmtQ6_KXu unpacks it: the pair sums of (x + 128)(q - 32) (|.| <= 2 * 255 *
// 32, no saturation) times the multipliers: the lanes of kdot_acc<true> plus 128 * scale * (sum
// of 4 (q - 32)), which the row's corr takes away.
inline __m256i kdot_acc_xu(__m256i isum, __m256i qs, __m256i xu, __m256i m) {
  return madd16_acc(isum, _mm256_maddubs_epi16(xu, qs), m);
}

// One super-block's float step of one output (Q4_K; Q6_K's is q6k_step), as ggml's q4_K
// x q8_K dot does it (so greedy output follows llama.cpp's): acc += float(isum) * (d *
// dx); Q4_K's mins go to a separate 4-lane accumulator, accm += float(mins .
// sums of 32) * -(dmin * dx); the output is hsum8(acc) + hsum8(accm).
template <class F>
inline void kstep(__m256& acc, __m128& accm, __m256i isum, const std::int16_t* bsums16, __m256i mo, float d,
                  float off, float dxs) {
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d * dxs), _mm256_cvtepi32_ps(isum), acc);
  if constexpr (!F::kSub32) {
    const __m256i b16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums16));
    const __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(b16), _mm256_extracti128_si256(b16, 1));
    const __m128i prod = _mm_madd_epi16(_mm256_castsi256_si128(mo), s8);
    accm = _mm_fmadd_ps(_mm_set1_ps(-(dxs * off)), _mm_cvtepi32_ps(prod), accm);
  }
}

inline float kfinish(__m256 acc, __m128 accm) {
  accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
  accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
  return hsum8(acc) + _mm_cvtss_f32(accm);
}

// Lane i: the sum of the 8 int32 lanes of v[i] (exact).
inline __m128i hsum4_epi32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// Q6_K's float step (kSub32), one output at a time as every Q6_K kernel does it: per
// super-block one integer, the sum of isum's 8 lanes (exact), then acc = fma(float(isum),
// d * dx, acc), super-blocks ascending from acc = 0; the output is acc. Here for N outputs at
// once, 4 to a register: isum[i] and dd[i] (d * dx) of output i into lane i % 4 of acc[i / 4].
template <int N>
inline void q6k_step(__m128* acc, const __m256i* isum, const float* dd) {
  auto sum_at = [&](int i) { return i < N ? isum[i] : _mm256_setzero_si256(); };
  auto dd_at = [&](int i) { return i < N ? dd[i] : 0.0f; };
#pragma GCC unroll 8
  for (int g = 0; g < (N + 3) / 4; ++g) {
    const __m128i tot = hsum4_epi32(sum_at(4 * g), sum_at(4 * g + 1), sum_at(4 * g + 2), sum_at(4 * g + 3));
    const __m128 d4 = _mm_setr_ps(dd_at(4 * g), dd_at(4 * g + 1), dd_at(4 * g + 2), dd_at(4 * g + 3));
    acc[g] = _mm_fmadd_ps(_mm_cvtepi32_ps(tot), d4, acc[g]);
  }
}

// Output i of q6k_step's accumulators.
inline float q6k_out(const __m128* acc, int i) {
  alignas(16) float v[4];
  _mm_store_ps(v, acc[i / 4]);
  return v[i % 4];
}

// R unpacked rows (row i at urows[i]) times T tokens from t0; y as in tile().
template <class F, int R, int T>
void ktile(const UnpackedK* urows, const QuantizedActs& a, std::int64_t t0, float* y, std::int64_t y_stride) {
  const std::int64_t nsb = a.nb / 8;
  __m256 acc[R][T];
  __m128 accm[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm256_setzero_ps();
      accm[r][t] = _mm_setzero_ps();
    }
  // Q6_K: output (r, t) in q6k_step's lane r * T + t.
  __m128 acc6[(R * T + 3) / 4];
#pragma GCC unroll 8
  for (int g = 0; g < (R * T + 3) / 4; ++g) acc6[g] = _mm_setzero_ps();
  // FmtQ6_KXu: the tokens' x + 128 (QuantizedActs::qu) against q - 32.
  const std::int8_t* xq =
      F::kUnsignedX ? reinterpret_cast<const std::int8_t*>(a.qu) + t0 * a.q_stride : a.q + t0 * a.q_stride;
  const float* dx = a.d + t0 * nsb;
  const std::int16_t* bs = a.bsums + t0 * 2 * a.nb;
  for (std::int64_t s = 0; s < nsb; ++s) {
    __m256i isum[R][T];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m256i xv[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        xv[t] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + t * a.q_stride + 256 * s + 32 * j));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(urows[r].q + 256 * s + 32 * j));
        const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(urows[r].mult + 16 * (8 * s + j)));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          if constexpr (F::kUnsignedX) {
            isum[r][t] = kdot_acc_xu(isum[r][t], q, xv[t], m);
          } else {
            isum[r][t] = kdot_acc<F::kSub32>(isum[r][t], q, xv[t], m);
          }
        }
      }
    }
    if constexpr (F::kSub32) {
      __m256i tot[R * T];
      float dd[R * T];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i corr = F::kUnsignedX
                                 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(urows[r].corr + 16 * s))
                                 : _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          tot[r * T + t] = _mm256_add_epi32(isum[r][t], corr);
          dd[r * T + t] = urows[r].d[s] * dx[t * nsb + s];
        }
      }
      q6k_step<R * T>(acc6, tot, dd);
    } else {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i mo = _mm256_load_si256(reinterpret_cast<const __m256i*>(urows[r].mo + 16 * s));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          kstep<F>(acc[r][t], accm[r][t], isum[r][t], bs + t * 2 * a.nb + 16 * s, mo, urows[r].d[s],
                   urows[r].off[s], dx[t * nsb + s]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      y[t * y_stride + r] = F::kSub32 ? q6k_out(acc6, r * T + t) : kfinish(acc[r][t], accm[r][t]);
    }
}

using KTileFn = void (*)(const UnpackedK*, const QuantizedActs&, std::int64_t, float*, std::int64_t);

template <class F>
struct KTiles {
  template <int R, int T>
  static constexpr KTileFn fn() {
    return &ktile<F, R, T>;
  }
  static void unpack_row(const std::uint8_t* row, std::int64_t nsb, const UnpackedK& u) { F::unpack_row(row, nsb, u); }
  static constexpr bool kPairs = false;  // the tiles read a's tokens as they are
  static constexpr int kTokens = kTokensK;  // tokens per tile
  // Tokens per pass of krows_impl over its rows: each pass unpacks every row again, but reads
  // only this block's activations per group of kRowsK rows, from L2 (64 tokens of a 5632-column
  // row's q and qu: 704 KiB) instead of the whole prompt's from L3. Emerald Rapids Xeon,
  // kernels_bench synth 1b Q6_K matrices, 512 tokens, one thread: a 512-bit tile reading start lanes
  // beside q, 8.2-10.1 s unblocked, 6.0-6.7 in blocks of 64 (32: 7.4-7.7, 128: 6.6-6.7).
  static constexpr std::int64_t kTokenBlock = 64;
};

// 1-4 tokens: kStreams far-apart streams of rows (as gemv()), decoded in
// registers without the unpack buffer; the same arithmetic as ktile().
template <class F, int kStreams, int T>
void kgemv(const std::uint8_t* w, std::size_t row_bytes, std::int64_t stream_rows, std::int64_t count,
           const QuantizedActs& a, std::int64_t t0, float* y, std::int64_t y_stride) {
  const std::int64_t nsb = a.nb / 8;
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  const float* dx = a.d + t0 * nsb;
  const std::int16_t* bs = a.bsums + t0 * 2 * a.nb;
  const std::int64_t super_bytes = static_cast<std::int64_t>(row_bytes) / nsb;
  GemvPrefetch<kStreams> pf(a.gemv_prefetch);
  for (std::int64_t i = 0; i < count; ++i) {
    pf.reset();
    const std::uint8_t* rows[kStreams];
    __m256 acc[kStreams][T];
    __m128 accm[kStreams][T];
#pragma GCC unroll 8
    for (int r = 0; r < kStreams; ++r) {
      rows[r] = w + (r * stream_rows + i) * row_bytes;
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_setzero_ps();
        accm[r][t] = _mm_setzero_ps();
      }
    }
    // Q6_K: output (r, t) in q6k_step's lane r * T + t.
    __m128 acc6[(kStreams * T + 3) / 4];
#pragma GCC unroll 8
    for (int g = 0; g < (kStreams * T + 3) / 4; ++g) acc6[g] = _mm_setzero_ps();
    for (std::int64_t s = 0; s < nsb; ++s) {
      pf.upto(rows, (s + 1) * super_bytes);
      __m256i tot[kStreams * T];
      float dd[kStreams * T];
#pragma GCC unroll 8
      for (int r = 0; r < kStreams; ++r) {
        const KSuper k = F::super(rows[r], s);
        // Two integer chains (even and odd blocks; integer sums are exact, so
        // this is the same isum as ktile's).
        __m256i isum[T], isum2[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[t] = isum2[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m256i q = F::q(rows[r], s, j);
          const __m256i m = F::mult(k, j);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i xv =
                _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + t * a.q_stride + 256 * s + 32 * j));
            if (j % 2 == 0) {
              isum[t] = kdot_acc<F::kSub32>(isum[t], q, xv, m);
            } else {
              isum2[t] = kdot_acc<F::kSub32>(isum2[t], q, xv, m);
            }
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], isum2[t]);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          if constexpr (F::kSub32) {
            tot[r * T + t] = isum[t];
            dd[r * T + t] = k.d * dx[t * nsb + s];
          } else {
            kstep<F>(acc[r][t], accm[r][t], isum[t], bs + t * 2 * a.nb + 16 * s, k.mo, k.d, k.off, dx[t * nsb + s]);
          }
        }
      }
      if constexpr (F::kSub32) q6k_step<kStreams * T>(acc6, tot, dd);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kStreams; ++r)
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        y[t * y_stride + r * stream_rows + i] = F::kSub32 ? q6k_out(acc6, r * T + t) : kfinish(acc[r][t], accm[r][t]);
      }
  }
}

template <class F, int kStreams, int T>
void kgemv_rows(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
                std::int64_t t0, float* y, std::int64_t y_stride) {
  float* yt = y + t0 * y_stride;
  split_streams<kStreams>(r0, r1, [&](auto streams, std::int64_t first, std::int64_t stream_rows, std::int64_t count) {
    kgemv<F, decltype(streams)::value, T>(w + first * row_bytes, row_bytes, stream_rows, count, a, t0, yt + first,
                                           y_stride);
  });
}

// Tokens [tb, te) of a as ktile_q6k_zmm (matmul_q6k_zmm_impl.h) reads them, into pk (64-byte aligned):
// tokens tb + 2p and tb + 2p + 1 as pair p, whose 32 qu bytes of block b lie side by side at
// pk + p * 2 * cols + 64 * b, and whose dx of super-block s at pairs_d + 16 * (p * nsb + s) as
// 8 copies each (a missing second token reads as zeros). The returned acts are a's with qu, d
// and q_stride (cols) such that the tile of tokens tb + t0 (t0 even) finds its pairs at t0.
QuantizedActs pack_k_pairs(const QuantizedActs& a, std::int64_t tb, std::int64_t te, std::uint8_t* pk) {
  const std::int64_t cols = a.nb * 32, nsb = a.nb / 8, np = (te - tb + 1) / 2;
  auto* pairs_d = reinterpret_cast<float*>(pk + np * 2 * cols);
  for (std::int64_t p = 0; p < np; ++p) {
    for (int h = 0; h < 2; ++h) {
      const std::int64_t t = tb + 2 * p + h;
      std::uint8_t* dst = pk + p * 2 * cols + 32 * h;
      if (t < te) {
        const std::uint8_t* src = a.qu + t * a.q_stride;
        for (std::int64_t b = 0; b < a.nb; ++b) std::memcpy(dst + 64 * b, src + 32 * b, 32);
      } else {
        for (std::int64_t b = 0; b < a.nb; ++b) std::memset(dst + 64 * b, 0, 32);
      }
      for (std::int64_t s = 0; s < nsb; ++s) {
        const float dx = t < te ? a.d[t * nsb + s] : 0.0f;
        for (int i = 0; i < 8; ++i) pairs_d[16 * (p * nsb + s) + 8 * h + i] = dx;
      }
    }
  }
  QuantizedActs ap = a;
  ap.qu = pk;
  ap.q_stride = cols;
  ap.d = pairs_d;
  return ap;
}

// Weight rows [r0, r1) times tokens [t0, t1), in blocks of Tiles::kTokenBlock tokens: kRowsK rows at a time are
// unpacked into scratch (kRowsK * unpacked_k_bytes(cols) <= the scratch of
// kQuantScratchFloatsPerBlock floats per 32 columns), then every token tile
// runs over them. The next rows' bytes are prefetched while unpacking.
// Tiles: KTiles<F>, or (the avx512vnni-zmm level's Q6_K) Q6kZmmTiles (matmul_q6k_zmm_impl.h).
template <class F, class Tiles = KTiles<F>>
void krows_impl(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float* scratch) {
  if (dispatch_gemv_tokens(t1 - t0, [&](auto n) {
        constexpr int T = decltype(n)::value;
        kgemv_rows<F, kGemvStreams[T - 1], T>(w, row_bytes, a, r0, r1, t0, y, y_stride);
      })) {
    return;
  }
  static constexpr auto kTable = make_tile_table<KTileFn, kRowsK, Tiles::kTokens, Tiles>();
  const std::int64_t cols = a.nb * 32, nsb = a.nb / 8;
  const std::int64_t ub = unpacked_k_bytes(cols);
  auto* base = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) / 64 * 64);
  UnpackedK urows[kRowsK];
  for (int i = 0; i < kRowsK; ++i) urows[i] = unpacked_k_at(base + i * ub, cols);
  std::uint8_t* pairs = base + kRowsK * ub;
  const std::int64_t pf_rows = imax(1, kPrefetchBytes / static_cast<std::int64_t>(row_bytes));
  for (std::int64_t tb = t0; tb < t1; tb += Tiles::kTokenBlock) {
    const std::int64_t te = imin(tb + Tiles::kTokenBlock, t1);
    // The tiles' tokens: a's, or the block's pairs (from token 0 of the block).
    const QuantizedActs ap = Tiles::kPairs ? pack_k_pairs(a, tb, te, pairs) : a;
    const std::int64_t ta = Tiles::kPairs ? tb : 0;
    for (std::int64_t r = r0; r < r1; r += kRowsK) {
      const int nr = static_cast<int>(imin(kRowsK, r1 - r));
      for (int i = 0; i < nr; ++i) {
        const std::uint8_t* row = w + (r + i) * row_bytes;
        if (r + i + pf_rows < r1) {
          const std::uint8_t* p = row + pf_rows * row_bytes;
          for (std::size_t off = 0; off < row_bytes; off += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
          }
        }
        Tiles::unpack_row(row, nsb, urows[i]);
      }
      for (std::int64_t t = tb; t < te; t += Tiles::kTokens) {
        const int nt = static_cast<int>(imin(Tiles::kTokens, te - t));
        kTable.fns[nr - 1][nt - 1](urows, ap, t - ta, y + t * y_stride + r, y_stride);
      }
    }
  }
}

// With VNNI, signed weights (Q8_0) are biased to unsigned (w + 128 = w ^ 0x80)
// once per weight block, and each token block's lanes start from
// -128 * (sum of its 4 activations) (QuantizedActs::xc): one vpdpbusd per
// token instead of vpsignb + vpdpbusd. The lanes are the same exact ints.
constexpr bool kBiasedWeights = ECO_QUANT_ISA != 0;

// The operand weight blocks enter block_dot as: q ^ 0x80 (biased) or |q|.
inline __m256i weight_operand(__m256i q) {
  if constexpr (kBiasedWeights) {
    return _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    return _mm256_sign_epi8(q, q);
  }
}

// The exact int32 lanes of one weight block (q from unpack, aq from
// weight_operand) with one activation block x (xc: its 8 correction lanes).
inline __m256i block_dot(__m256i q, __m256i aq, __m256i x, const std::int32_t* xc) {
  if constexpr (kBiasedWeights) {
    const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(xc));
#if ECO_QUANT_ISA == 1
    return _mm256_dpbusd_avx_epi32(c, aq, x);
#elif ECO_QUANT_ISA == 2
    return _mm256_dpbusd_epi32(c, aq, x);
#else
    return c;  // not reached: kBiasedWeights is false on AVX2
#endif
  } else {
    return idot(aq, _mm256_sign_epi8(x, q));
  }
}

// ---- Tiles (several tokens) ----

// Register tile: R weight rows x T tokens starting at token t0. dw: [R][nb]
// (row_scales of the R rows). kPre: the combined scales dw * dx are computed
// into `scales` ([R][T][nb]) first, 8 at a time; otherwise each in the loop.
// Both compute the same float product, so results do not depend on kPre.
template <class U, bool kPre, int R, int T>
void tile(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t t0, const float* dw,
          float* scales, float* y, std::int64_t y_stride, std::int64_t pf_ahead) {
  const std::int64_t nb = a.nb;
  const std::int64_t nb8 = nb & ~std::int64_t{7};
#pragma GCC unroll 8
  for (int r = 0; r < (kPre ? R : 0); ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float* dxt = a.d + (t0 + t) * nb;
      float* st = scales + (r * T + t) * nb;
      std::int64_t b = 0;
      for (; b < nb8; b += 8) {
        _mm256_storeu_ps(st + b, _mm256_mul_ps(_mm256_loadu_ps(dw + r * nb + b), _mm256_loadu_ps(dxt + b)));
      }
      for (; b < nb; ++b) st[b] = dw[r * nb + b] * dxt[b];
    }
  }
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  for (std::int64_t b = 0; b < nb; ++b) {
    if (pf_ahead > 0) {
      const std::uint8_t* p = w + pf_ahead + b * R * U::kBlockBytes;
#pragma GCC unroll 8
      for (std::size_t off = 0; off < R * U::kBlockBytes + 63; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i q = U::unpack(w + r * row_bytes, b);
      const __m256i aq = weight_operand(q);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + t * a.q_stride + 32 * b));
        const __m256i iv = block_dot(q, aq, xv, a.xc + ((t0 + t) * nb + b) * 8);
        __m256 scale;
        if constexpr (kPre) {
          scale = _mm256_broadcast_ss(scales + (r * T + t) * nb + b);
        } else {
          scale = _mm256_set1_ps(dw[r * nb + b] * a.d[(t0 + t) * nb + b]);
        }
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), scale, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      y[t * y_stride + r] = hsum8(acc[r][t]);
    }
}

// ---- GEMV (1 to 4 tokens) ----

// kTokens tokens (t0..) against kStreams streams of consecutive weight rows:
// stream s is rows s * stream_rows + i, i < count (w points at row 0, y at its
// output for token t0). The same arithmetic per output as tile(). Several
// far-apart streams keep more DRAM requests in flight than one sequential
// sweep. Block scales are read as the blocks are (a pass over the rows'
// scales first would read each row alone, at one stream's bandwidth).
template <class U, int kStreams, int kTokens>
void gemv(const std::uint8_t* w, std::size_t row_bytes, std::int64_t stream_rows, std::int64_t count,
          const QuantizedActs& a, std::int64_t t0, float* y, std::int64_t y_stride) {
  const std::int64_t nb = a.nb;
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  const float* dx = a.d + t0 * nb;
  const std::int64_t block_bytes = static_cast<std::int64_t>(row_bytes) / nb;
  GemvPrefetch<kStreams> pf(a.gemv_prefetch);
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
    for (std::int64_t b = 0; b < nb; ++b) {
      __m256i xv[kTokens];
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        xv[t] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + t * a.q_stride + 32 * b));
      }
      pf.upto(rows, (b + 1) * block_bytes);
#pragma GCC unroll 8
      for (int s = 0; s < kStreams; ++s) {
        const __m256i q = U::unpack(rows[s], b);
        const __m256i aq = weight_operand(q);
        const float dws = U::block_scale(rows[s], b);
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t) {
          const __m256i iv = block_dot(q, aq, xv[t], a.xc + ((t0 + t) * nb + b) * 8);
          acc[s][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), _mm256_set1_ps(dws * dx[t * nb + b]), acc[s][t]);
        }
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
template <class U, int kStreams, int kTokens>
void gemv_rows(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, float* y, std::int64_t y_stride) {
  float* yt = y + t0 * y_stride;
  split_streams<kStreams>(r0, r1, [&](auto streams, std::int64_t first, std::int64_t stream_rows, std::int64_t count) {
    gemv<U, decltype(streams)::value, kTokens>(w + first * row_bytes, row_bytes, stream_rows, count, a, t0,
                                               yt + first, y_stride);
  });
}

using TileFn = void (*)(const std::uint8_t*, std::size_t, const QuantizedActs&, std::int64_t, const float*, float*,
                        float*, std::int64_t, std::int64_t);

template <class U, bool kPre>
struct QuantTiles {
  template <int R, int T>
  static constexpr TileFn fn() {
    return &tile<U, kPre, R, T>;
  }
};

// Weight rows [r0, r1) times tokens [t0, t1); scratch: kQuantScratchFloatsPerBlock * nb floats.
template <class U>
void rows_impl(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float* scratch) {
  // Up to 4 tokens (decode): bound by weight bandwidth, streamed by gemv.
  if (dispatch_gemv_tokens(t1 - t0, [&](auto n) {
        constexpr int T = decltype(n)::value;
        gemv_rows<U, kGemvStreams[T - 1], T>(w, row_bytes, a, r0, r1, t0, y, y_stride);
      })) {
    return;
  }
  static constexpr auto kPreTable = make_tile_table<TileFn, kRows, kTokens, QuantTiles<U, true>>();
  static constexpr auto kInlineTable = make_tile_table<TileFn, kRows, kTokens, QuantTiles<U, false>>();
  const std::int64_t nb = a.nb;
  const std::int64_t chunk = imax(kTokens, kActChunkBytes / a.q_stride / kTokens * kTokens);
  const std::int64_t pf_ahead = kPrefetchBytes;
  // The first tiles are not covered by the tiles' own prefetches.
  const std::int64_t head = imin(pf_ahead, (r1 - r0) * static_cast<std::int64_t>(row_bytes));
  for (std::int64_t off = 0; off < head; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(w + r0 * row_bytes + off), _MM_HINT_T0);
  float* dw = scratch;
  float* scales = dw + kRows * nb;
  for (std::int64_t tc = t0; tc < t1; tc += chunk) {
    const std::int64_t te = imin(t1, tc + chunk);
    const bool pre = te - tc >= kTokens;
    const auto& table = pre ? kPreTable.fns : kInlineTable.fns;
    for (std::int64_t r = r0; r < r1; r += kRows) {
      const int nr = static_cast<int>(imin(kRows, r1 - r));
      for (int i = 0; i < nr; ++i) U::row_scales(w + (r + i) * row_bytes, nb, dw + i * nb);
      for (std::int64_t t = tc; t < te; t += kTokens) {
        const int nt = static_cast<int>(imin(kTokens, te - t));
        table[nr - 1][nt - 1](w + r * row_bytes, row_bytes, a, t, dw, scales, y + t * y_stride + r, y_stride,
                              t == tc ? pf_ahead : 0);
      }
    }
  }
}

void rows_q8_0(const std::uint8_t* w, std::size_t rb, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, std::int64_t t1, float* y, std::int64_t ys, float* scratch) {
  rows_impl<FmtQ8_0>(w, rb, a, r0, r1, t0, t1, y, ys, scratch);
}
void rows_q4_0(const std::uint8_t* w, std::size_t rb, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, std::int64_t t1, float* y, std::int64_t ys, float* scratch) {
  rows_impl<FmtQ4_0>(w, rb, a, r0, r1, t0, t1, y, ys, scratch);
}
void rows_q4_k(const std::uint8_t* w, std::size_t rb, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, std::int64_t t1, float* y, std::int64_t ys, float* scratch) {
  krows_impl<FmtQ4_K>(w, rb, a, r0, r1, t0, t1, y, ys, scratch);
}
void rows_q6_k(const std::uint8_t* w, std::size_t rb, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, std::int64_t t1, float* y, std::int64_t ys, float* scratch) {
  krows_impl<FmtQ6_KXu>(w, rb, a, r0, r1, t0, t1, y, ys, scratch);
}

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS
