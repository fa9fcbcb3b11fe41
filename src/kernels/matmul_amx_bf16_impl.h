// The avx512amx level's bf16 prompt kernel (KernelContext::amx_bf16): Q8_0 and Q4_K weights
// in kRows8, and F32, F16, BF16 and Q6_K weights in GGUF rows, times batches of
// kAmxBf16MinTokens or more tokens on AMX-BF16 tiles. Included by
// kernels/matmul_quant_avx512vnni.cc (built with -mamx-tile -mamx-bf16 -mavx512bf16)
// after matmul_amx_impl.h; like it, internal linkage only.
//
// Why bf16 when the weights are int8: the int8 tiles (matmul_amx_impl.h) must take their
// sums out of the tile unit once per block of 32 columns, where the weights' scale changes,
// and that float step, not the multiplies, sets their speed (15-19% of the tile unit's
// peak). Here each block's scales are multiplied into its weights first (Q8_0: w = q * d;
// Q4_K: w = q * (d * scale) - dmin * min; rounded once to float, then to bf16), so a
// 16 x 16 tile of sums stays in the tile unit for a whole run of columns (TDPBF16PS:
// 16 x 16 x 32 multiply-adds into float, at the rate of the int8 tiles' 16 x 16 x 32
// TDPBSSD) and leaves it once per run. A bf16 has 8 significant bits: each weight and
// activation carries a relative error of at most 2^-9, against the int8 levels'
// activations rounded to 1/254 of their block's largest value; the results are not the
// int8 levels' bits. Float weights (F32, F16) lose the bits past bf16's 8 (BF16 weights
// none), Q6_K's are d * scale * (q - 32) rounded once, then to bf16: 16 rows' weights are
// converted a row at a time and transposed into the B tile's layout (Bf16Plain). F16
// prompts: 4-6x the float FMA kernels' speed.
//
// The same layouts and roundings also feed AVX512-BF16 vectors instead of tiles
// (bf16_vectors_tile; KernelContext::bf16_vectors at the avx512vnni-zmm level, for the
// GGUF-row types): a B tile's line is one vdpbf16ps operand. Zen 5 F16 prompts: 1.8-2.3x the
// float FMA kernels' speed (docs/kernels.md, thirty-ninth pass).
//
// Layouts (all 64-byte aligned):
// - activations: tiles of 16 tokens, [token tile][block of 32 columns][16 tokens][32 bf16]
//   (one A tile = 1 KiB, contiguous), rows past the last token zero;
// - weights, per call and thread: a slab of up to 32 rows (two pairs of 8-row groups) for
//   a run of blocks, [pair][block][16 pairs of columns][16 rows][2 bf16] (one B tile),
//   made while the tile unit works on the slab before (SlabRepack), two slabs ahead read
//   into L2 (SlabPrefetch; not for float rows read by few tokens: kFewTileCalls).
// The output y is the accumulator: its tiles are zeroed at the first run of columns,
// loaded and stored at the others (floats, exactly), so every element sums its blocks in
// ascending order through one chain of tile multiplies whatever the tokens' and rows'
// split and the run length: the bits depend on neither the batch, the token's place in
// it, nor the thread count.
//
// Intel Xeon (family 6 model 167), kernels_bench BM_Synth1bMatmuls at 512 tokens (the
// synth 1b's linear layers), ms, int8 tiles -> bf16, 1 / 2 threads: Q8_0 1966-2103 ->
// 1018-1031 / 964-977 -> 504-513; Q4_K 2122-2278 -> 1141-1142 / 1029-1137 -> 526-539.
// The copy made up front per slab instead of behind the previous slab's tiles: Q8_0
// 1068-1200 ms; without the prefetch 1224-1235. A stand-alone loop of the tiles with
// both operands in L2 reached 0.85-0.96 T multiply-adds per second (the peak: 1.76-1.88
// T), the kernel's tiles without any copy about 0.6 T, with the copies 0.5 T.
#pragma once

#if ECO_QUANT_ISA != 2
#error "matmul_amx_bf16_impl.h is built into the avx512vnni kernels only"
#endif

#include <immintrin.h>

#include <cstdint>
#include <utility>

#include "kernels/matmul_amx_impl.h"
#include "kernels/vec_math.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

// Tile numbers (literals: see matmul_amx_impl.h). C_mn: token tile m times row pair n.
#define ECO_BF_A0 0
#define ECO_BF_A1 1
#define ECO_BF_B0 2
#define ECO_BF_B1 3
#define ECO_BF_C00 4
#define ECO_BF_C01 5
#define ECO_BF_C10 6
#define ECO_BF_C11 7

constexpr std::int64_t kBf16TileElems = 16 * 32;  // one A or B tile: 16 rows of 32 bf16

// A slab read by at most this many tile calls (64 tokens) is read at the speed of its weights'
// stream from DRAM, not of the tile unit, and prefetched for that: made tiles (Bf16WeightTiles)
// have the slab's own tiles prefetched into L1 kMadeOwnPrefetchTiles ahead of its first call,
// not the slab two ahead's into L2 (which longer batches keep), and the copies of float rows
// skip that L2 prefetch too (Bf16Plain::kPrefetchFewCalls). Intel Xeon (family 6 model 167),
// kernels_bench BM_Synth1bMatmuls made:1, one thread, ms, two ahead into L2 -> own 4 ahead into
// L1: Q8_0 16 tokens 183-189 -> 137-143, 32 tokens 202-221 -> 149-162; F16 16 186-188 ->
// 139-142; Q6_K 32 200-204 -> 154-160; without any prefetch 146-151 (Q8_0, 16 tokens); own 2,
// 4 or 8 ahead alike, 16 slower, into L2 (_MM_HINT_T1) 157-159. 512 tokens (8 calls, the two
// ahead kept): Q8_0 1199-1213; own 4 ahead 1262-1322.
constexpr std::int64_t kFewTileCalls = 2;
constexpr std::int64_t kMadeOwnPrefetchTiles = 4;

// Loads the tile configuration for token tiles of m0 and m1 rows (1-16: the first and
// second token tile of a call, each its own rows) and row pairs of n0 and n1 rows (8 or 16;
// the last group of a matrix may be alone).
inline void amx_bf16_configure(int m0, int m1, int n0, int n1) {
  AmxTileConfig cfg;
  cfg.set(ECO_BF_A0, m0, 64);
  cfg.set(ECO_BF_A1, m1, 64);
  cfg.set(ECO_BF_B0, 16, 4 * n0);
  cfg.set(ECO_BF_B1, 16, 4 * n1);
  cfg.set(ECO_BF_C00, m0, 4 * n0);
  cfg.set(ECO_BF_C01, m0, 4 * n1);
  cfg.set(ECO_BF_C10, m1, 4 * n0);
  cfg.set(ECO_BF_C11, m1, 4 * n1);
  cfg.load();
}

// silu(g) * u for 16 floats: kernels::silu_mul's operations and bits.
inline __m512 silu_mul16(__m512 g, __m512 u) {
  const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

// Token tiles [tile0, tile1) of x [n_tokens][cols] as bf16 A tiles at `a` (the layout
// above): each token's row read in order (16 rows read a block at a time from 16 places
// were 2.5x slower), written 1 KiB apart. up: null, or x is silu(x) * up (up [n_tokens][cols];
// kernels::silu_mul's values, never stored as floats: a gated FFN's down projection).
void bf16_pack_acts(const float* x, const float* up, std::int64_t cols, std::int64_t n_tokens, std::int64_t tile0,
                    std::int64_t tile1, std::uint16_t* a) {
  const std::int64_t nb = cols / 32;
  for (std::int64_t tile = tile0; tile < tile1; ++tile) {
    for (int r = 0; r < 16; ++r) {
      const std::int64_t t = 16 * tile + r;
      std::uint16_t* out = a + tile * nb * kBf16TileElems + 32 * r;
      if (t >= n_tokens) {
        for (std::int64_t b = 0; b < nb; ++b) _mm512_store_si512(out + b * kBf16TileElems, _mm512_setzero_si512());
        continue;
      }
      const float* src = x + t * cols;
      const float* u = up != nullptr ? up + t * cols : nullptr;
      for (std::int64_t b = 0; b < nb; ++b) {
        __m512 lo = _mm512_loadu_ps(src + 32 * b), hi = _mm512_loadu_ps(src + 32 * b + 16);
        if (u != nullptr) {
          lo = silu_mul16(lo, _mm512_loadu_ps(u + 32 * b));
          hi = silu_mul16(hi, _mm512_loadu_ps(u + 32 * b + 16));
        }
        _mm512_store_si512(out + b * kBf16TileElems, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
      }
    }
  }
}

// Block b of a pair of kRows8 Q8_0 groups as one bf16 B tile at `o`: w = (q - 128 + 128)
// * d, the unbiased quant times its row's block scale in one fused multiply-add of the
// biased byte (exact before its one float rounding), then rounded to bf16. g1 ==
// nullptr: one group (rows 8-15 then repeat rows 0-7; the tiles read only 8 rows' columns).
inline void bf16_repack_q8_block(const std::uint8_t* g0, const std::uint8_t* g1, std::int64_t nb, std::int64_t b,
                                 std::uint16_t* o) {
  if (g1 == nullptr) g1 = g0;
  // Lane l of quarter q's floats is row 4q + l / 4, column 4c + l % 4 of chunk c.
  const __m512i lane4 = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const Q8BlockOffsets at = q8_block_offsets(nb, b);
  const __m512 d = pair_f16(g0 + at.scales, g1 + at.scales);
  __m512 s[4], ms[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    s[q] = _mm512_permutexvar_ps(_mm512_add_epi32(lane4, _mm512_set1_epi32(4 * q)), d);
    ms[q] = _mm512_mul_ps(s[q], _mm512_set1_ps(-128.0f));
  }
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const std::uint8_t* src[4] = {g0 + at.quants + 32 * c, g0 + at.quants + 32 * c + 16, g1 + at.quants + 32 * c,
                                  g1 + at.quants + 32 * c + 16};
    __m512 f[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[q])));
      f[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u), s[q], ms[q]);
    }
    // Dword 2n + h of p0 (rows 0-7) and p1 (rows 8-15): row n's columns 4c + 2h, 4c + 2h + 1.
    const __m512i p0 = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[1], f[0]));
    const __m512i p1 = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[3], f[2]));
    _mm512_store_si512(o + 32 * (2 * c), _mm512_permutex2var_epi32(p0, even, p1));
    _mm512_store_si512(o + 32 * (2 * c + 1), _mm512_permutex2var_epi32(p0, odd, p1));
  }
}

// Block b (sub-block b % 8 of super-block b / 8) of a pair of kRows8 Q4_K groups as one
// bf16 B tile at `o`: w = q * (d * scale) - dmin * min, the two products rounded to float,
// then one fused multiply-subtract, then bf16. g1 == nullptr: one group (as above).
inline void bf16_repack_q4k_block(const std::uint8_t* g0, const std::uint8_t* g1, std::int64_t b,
                                  std::uint16_t* o) {
  if (g1 == nullptr) g1 = g0;
  const std::int64_t sb = b % 8;
  const std::uint8_t* s0 = g0 + b / 8 * kQ4kGroupSuperBytes;
  const std::uint8_t* s1 = g1 + b / 8 * kQ4kGroupSuperBytes;
  alignas(32) std::uint8_t sc[2][64], mn[2][64];
  q4k_scales(s0, sc[0], mn[0]);
  q4k_scales(s1, sc[1], mn[1]);
  alignas(16) std::uint8_t mins[16];
  for (int r = 0; r < 8; ++r) {
    mins[r] = mn[0][sb / 2 * 16 + 2 * r + sb % 2];
    mins[8 + r] = mn[1][sb / 2 * 16 + 2 * r + sb % 2];
  }
  const __m512 scale =
      _mm512_mul_ps(pair_f16(s0, s1), _mm512_cvtepi32_ps(pair_u8_to_i32(sc[0] + 8 * sb, sc[1] + 8 * sb)));
  const __m512 offset = _mm512_mul_ps(pair_f16(s0 + 16, s1 + 16),
                                      _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(
                                          reinterpret_cast<const __m128i*>(mins)))));
  const __m512i lane4 = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __m512 sq[4], oq[4];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m512i idx = _mm512_add_epi32(lane4, _mm512_set1_epi32(4 * q));
    sq[q] = _mm512_permutexvar_ps(idx, scale);
    oq[q] = _mm512_permutexvar_ps(idx, offset);
  }
  const std::int64_t off = 128 + 256 * (sb / 2);
  const bool high = sb % 2 != 0;
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const std::uint8_t* src[4] = {s0 + off + 32 * c, s0 + off + 32 * c + 16, s1 + off + 32 * c,
                                  s1 + off + 32 * c + 16};
    __m512 f[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[q])));
      const __m512i nib = high ? _mm512_srli_epi32(bytes, 4) : _mm512_and_si512(bytes, _mm512_set1_epi32(0x0F));
      f[q] = _mm512_fmsub_ps(_mm512_cvtepi32_ps(nib), sq[q], oq[q]);
    }
    const __m512i p0 = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[1], f[0]));
    const __m512i p1 = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[3], f[2]));
    _mm512_store_si512(o + 32 * (2 * c), _mm512_permutex2var_epi32(p0, even, p1));
    _mm512_store_si512(o + 32 * (2 * c + 1), _mm512_permutex2var_epi32(p0, odd, p1));
  }
}

// Weight rows in the GGUF layout, one type each: a row's bytes for nb blocks of 32
// columns, where block b starts in it, and block b as 32 bf16 (one rounding from the
// type's value; bf16 weights as they are).
struct F32Row {
  static constexpr bool kPrefetchFewCalls = false;  // see Bf16Plain
  static std::int64_t bytes(std::int64_t nb) { return nb * 128; }
  static std::int64_t offset(std::int64_t b) { return b * 128; }
  static __m512i pairs(const std::uint8_t* row, std::int64_t b) {
    const auto* f = reinterpret_cast<const float*>(row) + 32 * b;
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(f + 16), _mm512_loadu_ps(f)));
  }
};
struct F16Row {
  static constexpr bool kPrefetchFewCalls = false;
  static std::int64_t bytes(std::int64_t nb) { return nb * 64; }
  static std::int64_t offset(std::int64_t b) { return b * 64; }
  static __m512i pairs(const std::uint8_t* row, std::int64_t b) {
    const auto* h = reinterpret_cast<const __m256i*>(row + 64 * b);
    const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256(h)), hi = _mm512_cvtph_ps(_mm256_loadu_si256(h + 1));
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
  }
};
struct Bf16Row {
  static constexpr bool kPrefetchFewCalls = false;
  static std::int64_t bytes(std::int64_t nb) { return nb * 64; }
  static std::int64_t offset(std::int64_t b) { return b * 64; }
  static __m512i pairs(const std::uint8_t* row, std::int64_t b) { return _mm512_loadu_si512(row + 64 * b); }
};
// Q6_K: block b is sub-blocks 2j, 2j + 1 (j = b % 8) of super-block b / 8, value
// d * scale * (q - 32) with q's low 4 bits from ql (32 bytes at 64 h + 32 (j % 2), the high
// nibbles for j % 4 >= 2; h = j / 4) and its high 2 from qh (32 bytes at 32 h, shifted
// by 2 (j % 4)); d * scale is exact in float, times q - 32 rounded once.
struct Q6kRow {
  static constexpr bool kPrefetchFewCalls = true;
  static std::int64_t bytes(std::int64_t nb) { return nb / 8 * static_cast<std::int64_t>(sizeof(BlockQ6_K)); }
  static std::int64_t offset(std::int64_t b) { return b / 8 * static_cast<std::int64_t>(sizeof(BlockQ6_K)); }
  static __m512i pairs(const std::uint8_t* row, std::int64_t b) {
    const auto& blk = reinterpret_cast<const BlockQ6_K*>(row)[b / 8];
    const int j = static_cast<int>(b % 8), h = j / 4, jj = j % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32 * (jj % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
    const __m256i low = _mm256_and_si256(jj >= 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(0x0F));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * jj)), _mm256_set1_epi8(0x03));
    const __m256i q = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    const __m512i m32 = _mm512_set1_epi32(32);
    const __m512i q0 = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)), m32);
    const __m512i q1 = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)), m32);
    const float d = _cvtsh_ss(blk.d);
    const __m512 f0 = _mm512_mul_ps(_mm512_cvtepi32_ps(q0), _mm512_set1_ps(d * blk.scales[8 * h + 2 * jj]));
    const __m512 f1 = _mm512_mul_ps(_mm512_cvtepi32_ps(q1), _mm512_set1_ps(d * blk.scales[8 * h + 2 * jj + 1]));
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f1, f0));
  }
};

// The weight types of the bf16 tiles: a block's B tile, and the bytes of a group that
// blocks [b0, b1) lie in (for the prefetch).
struct Bf16Q8 {
  static void block(const std::uint8_t* g0, const std::uint8_t* g1, std::int64_t nb, std::int64_t b,
                    std::uint16_t* o) {
    bf16_repack_q8_block(g0, g1, nb, b, o);
  }
  static std::int64_t offset(std::int64_t nb, std::int64_t b, std::int64_t gbytes) {
    return b < nb ? q8_block_offsets(nb, b).scales : gbytes;
  }
  static constexpr int kRanges = 1;  // one range of bytes per group
  static constexpr bool kPrefetchFewCalls = true;  // see Bf16Plain
};
struct Bf16Q4k {
  static void block(const std::uint8_t* g0, const std::uint8_t* g1, std::int64_t, std::int64_t b, std::uint16_t* o) {
    bf16_repack_q4k_block(g0, g1, b, o);
  }
  static std::int64_t offset(std::int64_t nb, std::int64_t b, std::int64_t gbytes) {
    return b < nb ? b / 8 * kQ4kGroupSuperBytes : gbytes;
  }
  static constexpr int kRanges = 1;
  static constexpr bool kPrefetchFewCalls = true;
};
// Rows in the GGUF layout (Row: F32Row, F16Row, Bf16Row, Q6kRow), a "group" being 8
// consecutive rows: 16 rows' block b converted a row at a time, then transposed; the
// prefetch's ranges are the 8 rows' (offsets within a row).
template <class Row>
struct Bf16Plain {
  static void block(const std::uint8_t* g0, const std::uint8_t* g1, std::int64_t nb, std::int64_t b,
                    std::uint16_t* o) {
    if (g1 == nullptr) g1 = g0;
    const std::int64_t rb = Row::bytes(nb);
    __m512i r[16];
#pragma GCC unroll 8
    for (int n = 0; n < 8; ++n) {
      r[n] = Row::pairs(g0 + n * rb, b);
      r[8 + n] = Row::pairs(g1 + n * rb, b);
    }
    bf16_store_transposed(r, o);
  }
  static std::int64_t offset(std::int64_t nb, std::int64_t b, std::int64_t) {
    return b < nb ? Row::offset(b) : Row::bytes(nb);
  }
  static constexpr int kRanges = 8;  // one per row
  // Whether a slab read by at most kFewTileCalls tile calls (64 tokens) has the weights of
  // the slab two ahead prefetched into L2 for its copy (longer batches, and the vectors,
  // always do). Not for float rows: Intel Xeon (family 6 model 167), kernels_bench BM_Synth1bMatmuls
  // made:0, one thread, ms, with -> without: F16 8 tokens 239-253 -> 171-182, 16 258-272 ->
  // 179-181, 32 300-309 -> 205-207, 64 410-449 -> 256-258; F32 16 471-478 -> 305-306 (BF16
  // rows read as F16's; not measured). Q6_K (a heavier copy) keeps it: 16 274-275 -> 316-335,
  // 32 299-307 -> 338-341 without; Q8_0 and Q4_K keep it, within the noise either way.
  static constexpr bool kPrefetchFewCalls = Row::kPrefetchFewCalls;
};

// A slab's B tiles (one or two pairs of groups, blocks [b0, b1)) made a tile at a time,
// spread over the k steps of the previous slab's tiles (step()), so that the vector units
// copy while the tile unit multiplies; finish() makes the rest.
template <class K>
class SlabRepack {
 public:
  SlabRepack() = default;
  // g: the groups (g[1], g[3] may be null: a lone last group), pairs 1 or 2; pair p's tile
  // of block b at out + p * pair_stride + (b - b0) tiles; steps: the k steps to spread over.
  SlabRepack(const std::uint8_t* const* g, int pairs, std::int64_t nb, std::int64_t b0, std::int64_t b1,
             std::uint16_t* out, std::int64_t pair_stride, std::int64_t steps)
      : nb_(nb), b0_(b0), blocks_(b1 - b0), units_(pairs * (b1 - b0)), steps_(steps > 0 ? steps : 1),
        out_(out), pair_stride_(pair_stride) {
    for (int i = 0; i < 4; ++i) g_[i] = g[i];
  }
  void step() {
    credit_ += units_;
    while (credit_ >= steps_ && next_ < units_) {
      make(next_++);
      credit_ -= steps_;
    }
  }
  void finish() {
    while (next_ < units_) make(next_++);
  }

 private:
  void make(std::int64_t u) {
    const std::int64_t p = u / blocks_, b = u - p * blocks_;
    K::block(g_[2 * p], g_[2 * p + 1], nb_, b0_ + b, out_ + p * pair_stride_ + b * kBf16TileElems);
  }
  const std::uint8_t* g_[4] = {};
  std::int64_t nb_ = 0, b0_ = 0, blocks_ = 1, units_ = 0, steps_ = 1, credit_ = 0, next_ = 0;
  std::uint16_t* out_ = nullptr;
  std::int64_t pair_stride_ = 0;
};

// A slab's weights for a run of blocks (up to four groups' byte ranges, 17 KB each for 64
// Q8_0 blocks; rows in the GGUF layout: a range per row) into L2, spread over the k steps
// of the tiles two slabs before: its copy then reads them from L2, not as short runs from
// DRAM, which the hardware prefetchers hardly ramp up on (one burst per tile call was no
// faster than none).
class SlabPrefetch {
 public:
  SlabPrefetch() = default;
  // Groups of gbytes from g, `ranges` ranges gbytes / ranges apart in each, bytes [begin,
  // begin + bytes) of each range; steps: the k steps over which the lines are spread (the
  // first `steps` of the slab's); l1: into L1 (_MM_HINT_T0), else L2.
  SlabPrefetch(const std::uint8_t* g, std::int64_t gbytes, int groups, int ranges, std::int64_t begin,
               std::int64_t bytes, std::int64_t steps, bool l1 = false)
      : base_(reinterpret_cast<const char*>(g + begin)), gbytes_(gbytes), range_stride_(gbytes / ranges),
        groups_(groups), ranges_(ranges), lines_((bytes + 63) / 64), per_step_((lines_ + steps - 1) / steps),
        l1_(l1) {}
  void step() {
    const std::int64_t end = imin(lines_, at_ + per_step_);
    for (; at_ < end; ++at_) {
      for (int i = 0; i < groups_; ++i) {
        const char* group = base_ + i * gbytes_ + 64 * at_;
        for (int r = 0; r < ranges_; ++r) {
          if (l1_) {
            _mm_prefetch(group + r * range_stride_, _MM_HINT_T0);
          } else {
            _mm_prefetch(group + r * range_stride_, _MM_HINT_T1);
          }
        }
      }
    }
  }

 private:
  const char* base_ = nullptr;
  std::int64_t gbytes_ = 0, range_stride_ = 0;
  int groups_ = 0, ranges_ = 1;
  std::int64_t lines_ = 0, per_step_ = 0, at_ = 0;
  bool l1_ = false;
};

// MT (1, 2) token tiles from a0 (a1 = a0 + a_tile_stride) times NP (1, 2) B tiles from b
// (the second at b + b_pair_stride), for kb blocks, into y's tiles at y (rows 16 apart
// for the second pair, y_stride floats between tokens); first: zero them, else add.
// Each k step also runs bg.step() (the next slab's copy and the one after's prefetch).
//
// y_next: the output of the call after this one (its first token's row at its columns),
// y_next_rows of its token rows (0: none): each row's lines (NP of them) are prefetched for
// writing, one row per k step, so that that call's tile stores (and loads of y) find them in
// L1 instead of each line waiting for its read for ownership at the end of the call, where
// the tile unit idles. A prompt's output (11.5 MB for synth 1b's gate and up at 512 tokens)
// is past L2. Intel Xeon (family 6 model 167), perf of BM_Synth1bMatmuls F16 512 tokens: the
// tile stores 14% -> 9% of the kernel's samples (its time within this host's 5% noise);
// engine pp512 synth 1b, one thread, tok/s, five alternating rounds: Q8_0 279-343 -> 340-382,
// Q4_K 290-351 -> 298-359, F16 276-354 -> 346-358; two threads within the noise (617-675 ->
// 625-661). Batches (few calls a slab) take none: at 32 tokens their output stays in L2, and
// the prefetches measured 3% slower.
template <int MT, int NP, class Bg>
void bf16_tiles(const std::uint16_t* a0, std::int64_t a_tile_stride, const std::uint16_t* b,
                std::int64_t b_pair_stride, std::int64_t kb, float* y, std::int64_t y_stride, bool first, Bg& bg,
                const float* y_next = nullptr, std::int64_t y_next_rows = 0) {
  auto prefetch_next = [&](std::int64_t row) {
    const char* line = reinterpret_cast<const char*>(y_next + row * y_stride);
    prefetch_for_write(line);
    if constexpr (NP == 2) prefetch_for_write(line + 64);
  };
  const std::uint16_t* a1 = a0 + a_tile_stride;
  const std::uint16_t* b1 = b + b_pair_stride;
  const std::int64_t ys = y_stride * 4;
  float* y1 = y + 16 * y_stride;
  if (first) {
    _tile_zero(ECO_BF_C00);
    if constexpr (NP == 2) _tile_zero(ECO_BF_C01);
    if constexpr (MT == 2) _tile_zero(ECO_BF_C10);
    if constexpr (MT == 2 && NP == 2) _tile_zero(ECO_BF_C11);
  } else {
    _tile_loadd(ECO_BF_C00, y, ys);
    if constexpr (NP == 2) _tile_loadd(ECO_BF_C01, y + 16, ys);
    if constexpr (MT == 2) _tile_loadd(ECO_BF_C10, y1, ys);
    if constexpr (MT == 2 && NP == 2) _tile_loadd(ECO_BF_C11, y1 + 16, ys);
  }
  for (std::int64_t k = 0; k < kb; ++k) {
    _tile_loadd(ECO_BF_A0, a0 + kBf16TileElems * k, 64);
    _tile_loadd(ECO_BF_B0, b + kBf16TileElems * k, 64);
    _tile_dpbf16ps(ECO_BF_C00, ECO_BF_A0, ECO_BF_B0);
    if constexpr (NP == 2) {
      _tile_loadd(ECO_BF_B1, b1 + kBf16TileElems * k, 64);
      _tile_dpbf16ps(ECO_BF_C01, ECO_BF_A0, ECO_BF_B1);
    }
    if constexpr (MT == 2) {
      _tile_loadd(ECO_BF_A1, a1 + kBf16TileElems * k, 64);
      _tile_dpbf16ps(ECO_BF_C10, ECO_BF_A1, ECO_BF_B0);
      if constexpr (NP == 2) _tile_dpbf16ps(ECO_BF_C11, ECO_BF_A1, ECO_BF_B1);
    }
    bg.step();
    if (k < y_next_rows) prefetch_next(k);
  }
  for (std::int64_t k = kb; k < y_next_rows; ++k) prefetch_next(k);
  _tile_stored(ECO_BF_C00, y, ys);
  if constexpr (NP == 2) _tile_stored(ECO_BF_C01, y + 16, ys);
  if constexpr (MT == 2) _tile_stored(ECO_BF_C10, y1, ys);
  if constexpr (MT == 2 && NP == 2) _tile_stored(ECO_BF_C11, y1 + 16, ys);
}

// The vector form of bf16_tiles (KernelContext::bf16_vectors, the avx512vnni-zmm level with
// AVX512-BF16): the 8 token rows of an A tile from `a` (row 0 or 8 of a 16-token tile; valid:
// how many of them are tokens, 1-8; the rest are the packing's zero rows) times NP (1, 2) B tiles from b (the
// second at b + b_pair_stride, rows n0 and n1 of 16 or 8 stored), for kb blocks. A B tile's
// line p is the 16 rows' pair of columns 2p, 2p + 1, so one vdpbf16ps of it with a token's
// pair broadcast adds 32 products into the 16 rows' floats; 8 tokens x 2 pairs of groups
// are 16 accumulators, the B line loaded once per 8 (NP = 2: 16) vdpbf16ps. Each output
// element's sum is one chain, blocks and pairs of columns ascending, from y (or zero when
// first): its bits depend on neither the batch, the token's place nor the thread count.
template <int NP, class Bg>
void bf16_vectors_tile(const std::uint16_t* a, int valid, const std::uint16_t* b, std::int64_t b_pair_stride,
                       int n0, int n1, std::int64_t kb, float* y, std::int64_t y_stride, bool first, Bg& bg) {
  constexpr int kT = 8;
  const __mmask16 m0 = n0 == 16 ? 0xFFFF : 0x00FF, m1 = n1 == 16 ? 0xFFFF : 0x00FF;
  __m512 acc[NP][kT];
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t) {
    const bool load = !first && t < valid;
    acc[0][t] = load ? _mm512_maskz_loadu_ps(m0, y + t * y_stride) : _mm512_setzero_ps();
    if constexpr (NP == 2) acc[1][t] = load ? _mm512_maskz_loadu_ps(m1, y + t * y_stride + 16) : _mm512_setzero_ps();
  }
  for (std::int64_t k = 0; k < kb; ++k) {
    const std::uint16_t* ak = a + kBf16TileElems * k;
    const std::uint16_t* bk = b + kBf16TileElems * k;
#pragma GCC unroll 2
    for (int p = 0; p < 16; ++p) {
      const __m512bh w0 = reinterpret_cast<__m512bh>(_mm512_load_si512(bk + 32 * p));
      __m512bh w1;
      if constexpr (NP == 2) w1 = reinterpret_cast<__m512bh>(_mm512_load_si512(bk + b_pair_stride + 32 * p));
#pragma GCC unroll 8
      for (int t = 0; t < kT; ++t) {
        std::int32_t pair;
        __builtin_memcpy(&pair, ak + 32 * t + 2 * p, 4);
        const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
        acc[0][t] = _mm512_dpbf16_ps(acc[0][t], w0, x);
        if constexpr (NP == 2) acc[1][t] = _mm512_dpbf16_ps(acc[1][t], w1, x);
      }
    }
    bg.step();
  }
#pragma GCC unroll 8
  for (int t = 0; t < kT; ++t) {
    if (t >= valid) break;
    _mm512_mask_storeu_ps(y + t * y_stride, m0, acc[0][t]);
    if constexpr (NP == 2) _mm512_mask_storeu_ps(y + t * y_stride + 16, m1, acc[1][t]);
  }
}

// Pairs [p0, p1) of 8-row groups (pair p: rows 16p to 16p + 15) of a matrix of K's type with
// `groups` groups, every block's B tile, at out + (p * nb + b) B tiles: the tiles
// bf16_rows copies per call, made once (Bf16WeightTiles). The last pair of an odd count
// repeats its group, as bf16_rows's copy does.
template <class K>
void bf16_make_tiles(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, std::int64_t groups,
                     std::int64_t p0, std::int64_t p1, std::uint16_t* out) {
  const std::int64_t nb = cols / 32, gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  for (std::int64_t p = p0; p < p1; ++p) {
    const std::uint8_t* g0 = w + 2 * p * gbytes;
    const std::uint8_t* g1 = 2 * p + 1 < groups ? g0 + gbytes : nullptr;
    for (std::int64_t b = 0; b < nb; ++b) K::block(g0, g1, nb, b, out + (p * nb + b) * kBf16TileElems);
  }
}

// Weight rows [r0, r1) (r0 % 16 == 0, r1 % 8 == 0) of a matrix of K's type (Bf16Q8, Bf16Q4k:
// kRows8; Bf16Plain<Row>: GGUF rows) times tokens [0, n_tokens) of the packed activations `a`, into y; runs of
// kb_run blocks; wbuf: 4 * kb_run B tiles (64-byte aligned): the current slab's and the next's.
// made: null, or the matrix's B tiles made once (bf16_make_tiles's layout), which the
// products then read in place of the copies (the same bits), the next slab's prefetched
// into L2 while this one's tiles run (few tokens on the tiles: the slab's own into L1,
// kFewTileCalls). Not two ahead as for the copies: behind slab s's tiles runs the copy of
// slab s + 32, so the sources prefetched there are slab s + 64's; made tiles are read only by
// their own slab's calls. Intel Xeon (family 6 model 167), two ahead -> next, three rounds:
// kernels_bench BM_Synth1bMatmuls made:1 at 512 tokens, one thread, ms, Q8_0 1134-1515 ->
// 1077-1218, F16 1159-1208 -> 998-1155; profile engine pp512 tok/s, one / two threads: synth 1b
// Q8_0 362-368 -> 381-394 / 713-723 -> 755-760; 64 tokens (own prefetch) unchanged. A call's two token tiles
// have their own rows, so the tokens past the last 16 ride in the last pair's second tile
// (one call, one configuration per slab for a batch of 17-32). kTiles: the products on AMX
// tiles (bf16_tiles), else on AVX512-BF16 vectors (bf16_vectors_tile).
template <class K, bool kTiles>
void bf16_rows(const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const std::uint16_t* a,
               std::int64_t n_tokens, std::int64_t r0, std::int64_t r1, std::int64_t kb_run, float* y,
               std::int64_t y_stride, std::uint16_t* wbuf, const std::uint16_t* made) {
  const std::int64_t nb = cols / 32, gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  const std::int64_t rem = n_tokens % 16;  // tokens in the last token tile past a whole 16
  const std::int64_t a_tile = nb * kBf16TileElems;  // elements between token tiles
  const std::int64_t pair_stride = made != nullptr ? nb * kBf16TileElems : kb_run * kBf16TileElems;
  // Tile calls per slab: pairs of token tiles (the last tile's rows the tokens left), a lone
  // last one (vectors: calls of 8 tokens).
  const std::int64_t token_tiles = (n_tokens + 15) / 16;
  const std::int64_t calls = kTiles ? (token_tiles + 1) / 2 : (n_tokens + 7) / 8;
  int cfg_m0 = 0, cfg_m1 = 0, cfg_n0 = 0, cfg_n1 = 0;
  auto configure = [&](int m0, int m1, int n0, int n1) {
    if (m0 != cfg_m0 || m1 != cfg_m1 || n0 != cfg_n0 || n1 != cfg_n1) amx_bf16_configure(m0, m1, n0, n1);
    cfg_m0 = m0, cfg_m1 = m1, cfg_n0 = n0, cfg_n1 = n1;
  };
  // The slab from row s: its groups (null past r1 or for a lone last group's pair) and pairs.
  auto slab_groups = [&](std::int64_t s, const std::uint8_t** g) {
    const std::int64_t groups = imin(4, (r1 - s) / 8);
    for (int i = 0; i < 4; ++i) g[i] = i < groups ? w + (s / 8 + i) * gbytes : nullptr;
    return static_cast<int>((groups + 1) / 2);
  };
  struct Background {
    SlabRepack<K> copy;
    SlabPrefetch prefetch;
    void step() {
      copy.step();
      prefetch.step();
    }
  };
  for (std::int64_t kc = 0; kc < nb; kc += kb_run) {
    const std::int64_t kb = imin(kb_run, nb - kc);
    std::uint16_t* cur = wbuf;
    std::uint16_t* next = wbuf + 2 * kb_run * kBf16TileElems;  // (unused with made tiles)
    const std::uint8_t* g[4];
    if (made == nullptr) SlabRepack<K>(g, slab_groups(r0, g), nb, kc, kc + kb, cur, pair_stride, 1).finish();
    const std::int64_t begin = K::offset(nb, kc, gbytes), end = K::offset(nb, kc + kb, gbytes);
    for (std::int64_t s = r0; s < r1; s += 32) {
      const std::int64_t srows = imin(32, r1 - s);
      const int n0 = srows >= 16 ? 16 : 8, n1 = srows >= 32 ? 16 : 8;
      Background bg;
      if (made != nullptr && kTiles && calls <= kFewTileCalls) {
        // The tiles in place, few tokens: the slab's own tiles kMadeOwnPrefetchTiles ahead into
        // L1 while its first call reads them (each pair's run of kb tiles one stream).
        const std::int64_t ahead = imin(kMadeOwnPrefetchTiles, kb);
        if (kb > ahead) {
          const auto* own = reinterpret_cast<const std::uint8_t*>(made + (s / 16 * nb + ahead) * kBf16TileElems);
          bg.prefetch = SlabPrefetch(own, nb * 2 * kBf16TileElems, srows > 16 ? 2 : 1, 1, kc * 2 * kBf16TileElems,
                                     (kb - ahead) * 2 * kBf16TileElems, kb - ahead, /*l1=*/true);
        }
      } else if (made != nullptr) {
        // The tiles in place; the next slab's (one range of kb tiles per pair) into L2.
        if (s + 32 < r1) {
          const auto* ahead = reinterpret_cast<const std::uint8_t*>(made + ((s + 32) / 16 * nb) * kBf16TileElems);
          const int pairs = static_cast<int>(imin(2, (r1 - s - 32 + 15) / 16));
          bg.prefetch = SlabPrefetch(ahead, nb * 2 * kBf16TileElems, pairs, 1, kc * 2 * kBf16TileElems,
                                     kb * 2 * kBf16TileElems, calls * kb);
        }
      } else if (s + 32 < r1) {
        const std::uint8_t* gn[4];
        const int pairs = slab_groups(s + 32, gn);
        bg.copy = SlabRepack<K>(gn, pairs, nb, kc, kc + kb, next, pair_stride, calls * kb);
      }
      if (made == nullptr && s + 64 < r1 && (K::kPrefetchFewCalls || !kTiles || calls > kFewTileCalls)) {
        bg.prefetch = SlabPrefetch(w + (s + 64) / 8 * gbytes, gbytes, static_cast<int>(imin(4, (r1 - s - 64) / 8)),
                                   K::kRanges, begin, end - begin, calls * kb);
      }
      const std::uint16_t* a0 = a + kc * kBf16TileElems;
      const std::uint16_t* tiles = made != nullptr ? made + (s / 16 * nb + kc) * kBf16TileElems : cur;
      const bool first = kc == 0;
      if constexpr (!kTiles) {
        for (std::int64_t t = 0; t < n_tokens; t += 8) {
          const std::uint16_t* at = a0 + t / 16 * a_tile + 32 * (t % 16);
          const int valid = static_cast<int>(imin(8, n_tokens - t));
          float* yt = y + t * y_stride + s;
          if (srows > 16) {
            bf16_vectors_tile<2>(at, valid, tiles, pair_stride, n0, n1, kb, yt, y_stride, first, bg);
          } else {
            bf16_vectors_tile<1>(at, valid, tiles, 0, n0, n1, kb, yt, y_stride, first, bg);
          }
        }
      } else {
        auto run = [&](auto mt, std::int64_t t) {
          constexpr int kMt = decltype(mt)::value;
          float* yt = y + t * y_stride + s;
          // The next call's output: the next pair of token tiles, else the next slab's first.
          // Not for few calls a slab (a batch's output stays in L2; the prefetches only
          // compete with the weights' stream from DRAM).
          const float* yn = nullptr;
          std::int64_t yn_rows = 0;
          if (calls > kFewTileCalls && t + 32 < n_tokens) {
            yn = yt + 32 * y_stride, yn_rows = imin(32, n_tokens - t - 32);
          } else if (calls > kFewTileCalls && s + 32 < r1) {
            yn = y + s + 32, yn_rows = imin(32, n_tokens);
          }
          if (srows > 16) {
            bf16_tiles<kMt, 2>(a0 + t / 16 * a_tile, a_tile, tiles, pair_stride, kb, yt, y_stride, first, bg, yn,
                               yn_rows);
          } else {
            bf16_tiles<kMt, 1>(a0 + t / 16 * a_tile, a_tile, tiles, 0, kb, yt, y_stride, first, bg, yn, yn_rows);
          }
        };
        // Pairs of token tiles of 16 rows; then a pair whose second tile has the tokens left,
        // or a lone last tile, each in its configuration.
        const int last = rem > 0 ? static_cast<int>(rem) : 16;
        const std::int64_t pairs = token_tiles / 2, whole = token_tiles % 2 == 0 && rem > 0 ? pairs - 1 : pairs;
        if (whole > 0) {
          configure(16, 16, n0, n1);
          for (std::int64_t p = 0; p < whole; ++p) run(std::integral_constant<int, 2>{}, 32 * p);
        }
        if (token_tiles % 2 == 1) {
          configure(last, last, n0, n1);
          run(std::integral_constant<int, 1>{}, 32 * whole);
        } else if (whole < pairs) {
          configure(16, last, n0, n1);
          run(std::integral_constant<int, 2>{}, 32 * whole);
        }
      }
      bg.copy.finish();
      std::swap(cur, next);
    }
  }
  if constexpr (kTiles) _tile_release();
}

#undef ECO_BF_A0
#undef ECO_BF_A1
#undef ECO_BF_B0
#undef ECO_BF_B1
#undef ECO_BF_C00
#undef ECO_BF_C01
#undef ECO_BF_C10
#undef ECO_BF_C11

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS

#pragma GCC diagnostic pop
