// The avx512amx level's kernels: Q8_0 and Q4_K in kRows8 on AMX int8 tiles. Included
// by kernels/matmul_quant_avx512vnni.cc (built with -mamx-tile -mamx-int8) after
// matmul_packed_impl.h, whose tiles, helpers and one-definition rules (internal linkage,
// no external inline calls) it shares; the only code with AMX instructions.
#pragma once

#if ECO_QUANT_ISA != 2
#error "matmul_amx_impl.h is built into the avx512vnni kernels only"
#endif

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/amx_tiles.h"
#include "kernels/matmul_packed_impl.h"

// GCC 12's AVX-512 headers (GCC bug 105593): see matmul_packed_impl.h.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

// ---- Q8_0 in kRows8 on AMX tiles (the avx512amx level) ----
//
// TDPBSSD multiplies a tile A of M rows x K signed bytes by a tile B of K / 4 rows of
// N x 4 signed bytes into M x N int32 sums. A is 16 tokens' 32 activation bytes of one
// block (K = 32, rows at the activations' stride). B is a pair of groups' block: for
// each of its 8 chunks, the 16 rows' 4 values (N = 16), which kRows8 keeps in two
// places (one per group) and biased; so a pair's blocks are first copied, unbiased,
// into a B-tile layout in the caller's scratch (amx_repack_pair), once per pair and
// chunk of tokens, and every 16-token tile of the chunk reads them from there. The
// scales are per block of 32 columns, so K stays 32 and each block's 16 x 16 sums leave
// the tiles through memory (AMX has no move into vector registers): a row of sums is
// one token's 16 rows, the register of packed_tile_wide, and the float step is its
// fma(float(isum), dw * dx, acc), blocks ascending. The sums are the same exact
// integers, so the results are bitwise those of every other level.
//
// A block's float step runs two blocks behind its multiplies (two sets of A, B and C
// tiles, four buffers of sums), so that the tile unit need not wait for it. Intel Xeon
// (family 6 model 167, AMX), kernels_bench 2048 x 768 Q8_0, one thread: 512 tokens
// 2.73-3.02 ms against 3.11-3.47 ms for the avx512vnni-zmm tiles, 32 tokens 163-184 us
// against 197-220. The kRows8 blocks used as they lie (N = 8 rows, the biased operand
// with tdpbsud and xt added back, no copy) took 4.28 ms: twice the tile stores per sum.
// The tile work and the float steps still hardly overlap (a stand-alone copy of the
// loop: 1.25 ms of tile loads, multiplies and stores, 0.9-1.4 ms of float steps,
// 2.0-2.3 ms together); a TILEZERO alone costs 10 ns, but C tiles loaded from zeros
// instead were no faster in the loop.
constexpr int kAmxTokens = static_cast<int>(kAmxMinTokens);
// Tile numbers: two sets of A, B, C for the pipelined 16-token tile, and A, C of the
// last tile's fewer tokens (with B of the first set). Macros: GCC's _tile_* intrinsics
// paste their tile numbers into assembly text, so they take only literal numbers.
// (Their tile loads name no memory operand either: what they read, the activations and
// the pair's copy, is written before the tile functions are called, through a table of
// pointers, which the compiler cannot move stores across; tile stores clobber memory.)
#define ECO_AMX_A0 0
#define ECO_AMX_B0 1
#define ECO_AMX_C0 2
#define ECO_AMX_C1 3
#define ECO_AMX_A1 4
#define ECO_AMX_B1 5
#define ECO_AMX_AREM 6
#define ECO_AMX_CREM 7
// Bytes of one block of a pair in the B-tile layout, and of its 16 scales as floats.
constexpr std::int64_t kAmxBlockBytes = 512;
constexpr std::int64_t kAmxScaleBytes = 64;
// The scratch floats per block of 32 columns the AMX kernel needs (quants and scales).
static_assert((kAmxBlockBytes + kAmxScaleBytes) / 4 <= kQuantScratchFloatsPerBlock);

// Activation bytes per chunk of tokens: each pair's copy serves the chunk's tiles, so
// the chunk is as large as half of the 2 MB L2 of the AMX CPUs. kActChunkBytes (128 KiB)
// gave an FFN down matrix of 5632 columns one 16-token tile per copy: synth 1b Q8_0, one
// thread, pp512 220-222 tok/s with it, 266-274 with 1 MiB (avx512vnni-zmm: 205-207).
constexpr std::int64_t kAmxActChunkBytes = 1 << 20;

// Loads this thread's tile configuration: the 16-token tiles, and `rem` (1-15) tokens'
// A and C tiles (0: none).
inline void amx_configure(int rem) {
  AmxTileConfig cfg;
  auto set = [&](int tile, int rows, int colsb) { cfg.set(tile, rows, colsb); };
  for (int tile : {ECO_AMX_A0, ECO_AMX_A1}) set(tile, kAmxTokens, 32);
  for (int tile : {ECO_AMX_B0, ECO_AMX_B1}) set(tile, 8, 64);
  for (int tile : {ECO_AMX_C0, ECO_AMX_C1}) set(tile, kAmxTokens, 64);
  if (rem > 0) {
    set(ECO_AMX_AREM, rem, 32);
    set(ECO_AMX_CREM, rem, 64);
  }
  cfg.load();
}

// A pair of groups' nb blocks copied into the B-tile layout at `out` (64-byte aligned):
// quants [nb][8 chunks][16 rows][4] signed bytes (group 0's 8 rows, then group 1's), then
// scales [nb][16] floats.
void amx_repack_pair(const std::uint8_t* g0, const std::uint8_t* g1, std::int64_t nb, std::uint8_t* out) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  auto* scales = reinterpret_cast<float*>(out + kAmxBlockBytes * nb);
  for (std::int64_t b = 0; b < nb; ++b) {
    const Q8BlockOffsets at = q8_block_offsets(nb, b);
    _mm512_store_ps(scales + 16 * b, pair_f16(g0 + at.scales, g1 + at.scales));
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m512i q = pair_load(g0 + at.quants + 32 * c, g1 + at.quants + 32 * c);
      _mm512_store_si512(out + kAmxBlockBytes * b + 64 * c, _mm512_xor_si512(q, bias));
    }
  }
}

// The float step of block b for T tokens from their stored sums s (scales: the pair's).
template <int T>
inline void amx_finish(const std::int32_t (*s)[16], const float* scales, const float* dx, std::int64_t nb,
                       std::int64_t b, __m512* acc) {
  const __m512 dw = _mm512_load_ps(scales + 16 * b);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(s[t]));
    acc[t] = _mm512_fmadd_ps(isum, _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * nb + b])), acc[t]);
  }
}

// One pair (copied into `pair` by amx_repack_pair) x T tokens from t0; y0, y1: the
// groups' first rows. T == 16: the pipelined tile; T < 16: tiles ECO_AMX_AREM and
// ECO_AMX_CREM, configured for T rows.
template <int T>
void amx_pair_tile(const std::uint8_t* pair, const QuantizedActs& a, std::int64_t t0, float* y0, float* y1,
                   std::int64_t y_stride, TilePrefetch pf) {
  // In locals: the tile intrinsics' assembly clobbers memory, so that values read through
  // a reference would be read again after each of them.
  const std::int64_t nb = a.nb, q_stride = a.q_stride;
  const std::int64_t pf_per = pf.per_step(nb);
  const std::int8_t* xq = a.q + t0 * q_stride;
  const float* dx = a.d + t0 * nb;
  const std::uint8_t* bq = pair;
  const auto* scales = reinterpret_cast<const float*>(pair + kAmxBlockBytes * nb);
  alignas(64) std::int32_t sums[4][kAmxTokens][16];
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // Block b alone with tiles A (T rows) and C into sums[0], then its float step (a macro:
  // the tile numbers must be literals).
#define ECO_AMX_ONE_BLOCK(A, C, b)                          \
  do {                                                      \
    pf.issue((b) * pf_per, pf_per);                         \
    _tile_loadd(A, xq + 32 * (b), q_stride);                \
    _tile_loadd(ECO_AMX_B0, bq + kAmxBlockBytes * (b), 64); \
    _tile_zero(C);                                          \
    _tile_dpbssd(C, A, ECO_AMX_B0);                         \
    _tile_stored(C, &sums[0][0][0], 64);                    \
    amx_finish<T>(sums[0], scales, dx, nb, (b), acc);       \
  } while (false)
  if constexpr (T == kAmxTokens) {
    // Blocks b, b + 1 into sums 2p, 2p + 1 (p = b / 2 % 2), while blocks b - 2, b - 1 are finished.
    std::int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      pf.issue(b * pf_per, 2 * pf_per);
      const int p = static_cast<int>(b / 2 % 2);
      _tile_loadd(ECO_AMX_A0, xq + 32 * b, q_stride);
      _tile_loadd(ECO_AMX_B0, bq + kAmxBlockBytes * b, 64);
      _tile_zero(ECO_AMX_C0);
      _tile_dpbssd(ECO_AMX_C0, ECO_AMX_A0, ECO_AMX_B0);
      _tile_stored(ECO_AMX_C0, &sums[2 * p][0][0], 64);
      _tile_loadd(ECO_AMX_A1, xq + 32 * (b + 1), q_stride);
      _tile_loadd(ECO_AMX_B1, bq + kAmxBlockBytes * (b + 1), 64);
      _tile_zero(ECO_AMX_C1);
      _tile_dpbssd(ECO_AMX_C1, ECO_AMX_A1, ECO_AMX_B1);
      _tile_stored(ECO_AMX_C1, &sums[2 * p + 1][0][0], 64);
      if (b >= 2) {
        amx_finish<T>(sums[2 - 2 * p], scales, dx, nb, b - 2, acc);
        amx_finish<T>(sums[3 - 2 * p], scales, dx, nb, b - 1, acc);
      }
    }
    if (b >= 2) {
      const int p = static_cast<int>((b - 2) / 2 % 2);
      amx_finish<T>(sums[2 * p], scales, dx, nb, b - 2, acc);
      amx_finish<T>(sums[2 * p + 1], scales, dx, nb, b - 1, acc);
    }
    if (b < nb) ECO_AMX_ONE_BLOCK(ECO_AMX_A0, ECO_AMX_C0, b);  // an odd last block
  } else {
    for (std::int64_t b = 0; b < nb; ++b) ECO_AMX_ONE_BLOCK(ECO_AMX_AREM, ECO_AMX_CREM, b);
  }
#undef ECO_AMX_ONE_BLOCK
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) pair_store(y0 + (t0 + t) * y_stride, y1 + (t0 + t) * y_stride, acc[t]);
}

// ---- Q4_K in kRows8 on AMX tiles ----
//
// Per sub-block of 32 values, TDPBSUD of A (16 tokens' 32 signed activation bytes) and
// B (the pair's 16 rows' 32 nibbles as unsigned bytes, [8 chunks][16 rows][4]) gives
// dot_sb per token and row. q4k_tile_wide's float step takes float(isum), isum = the
// sum over the super-block's 8 sub-blocks of scale_sb * dot_sb; here it is formed in
// floats, exactly: |dot_sb| <= 32 * 15 * 128 < 2^16 and scale_sb <= 63, so each product
// and each sum of four of them is an integer below 2^24, exact in a float, and the sum
// of the two halves rounds the exact isum to nearest, as the conversion of isum does.
// (Two float operations per sub-block where vpmulld's integer product is two on one
// port: 3.29-3.31 -> 3.09-3.11 ms on the shape below.) The mins and the rest are
// q4k_tile_wide's: the same bits. The pair's nibbles, scales (as floats) and mins are
// copied into that form (amx_q4k_repack_pair) once per pair and chunk of tokens.
// Intel Xeon (family 6 model 167), kernels_bench 2048 x 768 Q4_K, one thread: 512
// tokens 3.09-3.11 ms against 4.02-4.18 for the avx512vnni-zmm tiles (1 pair x 7
// tokens), 32 tokens 191-197 us against 250-253.

// Bytes of one super-block of a pair in the copied form: quants [8 sub-blocks][512],
// scales [8][16] floats, d and dmin [16] floats, mins [4][32] int16 (q4k_mins_pair).
constexpr std::int64_t kAmxQ4kQuants = 8 * 512, kAmxQ4kScales = kAmxQ4kQuants, kAmxQ4kD = kAmxQ4kScales + 512,
                       kAmxQ4kDmin = kAmxQ4kD + 64, kAmxQ4kMins = kAmxQ4kDmin + 64,
                       kAmxQ4kSuperBytes = kAmxQ4kMins + 256;
static_assert(kAmxQ4kSuperBytes / 8 <= 4 * kQuantScratchFloatsPerBlock);

void amx_q4k_repack_pair(const std::uint8_t* g0, const std::uint8_t* g1, std::int64_t nsb, std::uint8_t* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (std::int64_t s = 0; s < nsb; ++s) {
    const std::uint8_t* s0 = g0 + s * kQ4kGroupSuperBytes;
    const std::uint8_t* s1 = g1 + s * kQ4kGroupSuperBytes;
    std::uint8_t* o = out + s * kAmxQ4kSuperBytes;
    alignas(32) std::uint8_t sc[2][64], mn[2][64];
    q4k_scales(s0, sc[0], mn[0]);
    q4k_scales(s1, sc[1], mn[1]);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const std::int64_t off = 128 + 256 * j + 32 * c;
        const __m512i w = pair_load(s0 + off, s1 + off);
        _mm512_store_si512(o + 512 * (2 * j) + 64 * c, _mm512_and_si512(w, m4));
        _mm512_store_si512(o + 512 * (2 * j + 1) + 64 * c, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4));
      }
    }
#pragma GCC unroll 8
    for (int sb = 0; sb < 8; ++sb) {
      _mm512_store_ps(o + kAmxQ4kScales + 64 * sb, _mm512_cvtepi32_ps(pair_u8_to_i32(sc[0] + 8 * sb, sc[1] + 8 * sb)));
    }
    _mm512_store_ps(o + kAmxQ4kD, pair_f16(s0, s1));
    _mm512_store_ps(o + kAmxQ4kDmin, pair_f16(s0 + 16, s1 + 16));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) _mm512_store_si512(o + kAmxQ4kMins + 64 * q, q4k_mins_pair(mn[0], mn[1], q));
  }
}

// The float step of super-block s for T tokens from its 8 sub-blocks' stored sums.
template <int T>
inline void amx_q4k_finish(const std::int32_t (*sums)[kAmxTokens][16], const std::uint8_t* o,
                           const QuantizedActs& a, std::int64_t t0, std::int64_t s, __m512* acc) {
  const std::int64_t nsb = a.nb / 8;
  __m512 scale[8];
  __m512i mpair[4];
#pragma GCC unroll 8
  for (int sb = 0; sb < 8; ++sb) scale[sb] = _mm512_load_ps(o + kAmxQ4kScales + 64 * sb);
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) mpair[q] = _mm512_load_si512(o + kAmxQ4kMins + 64 * q);
  const __m512 d = _mm512_load_ps(o + kAmxQ4kD), dmin = _mm512_load_ps(o + kAmxQ4kDmin);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    __m512 half[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      half[h] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[4 * h][t])), scale[4 * h]);
#pragma GCC unroll 4
      for (int sb = 4 * h + 1; sb < 4 * h + 4; ++sb) {
        half[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[sb][t])), scale[sb], half[h]);
      }
    }
    const __m512 fsum = _mm512_add_ps(half[0], half[1]);
    __m512i bp[4];
    q4k_token_pairs(a.bpairs + ((t0 + t) * nsb + s) * 4, bp);
    const __m512 dx = _mm512_set1_ps(a.d[(t0 + t) * nsb + s]);
    acc[t] = _mm512_fmadd_ps(fsum, _mm512_mul_ps(d, dx), acc[t]);
    acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(q4k_mins_wide(mpair, bp)), _mm512_mul_ps(dmin, dx), acc[t]);
  }
}

// One pair (copied into `pair` by amx_q4k_repack_pair) x T tokens from t0: as
// amx_pair_tile, a super-block's float step one super-block behind its multiplies.
template <int T>
void amx_q4k_tile(const std::uint8_t* pair, const QuantizedActs& a, std::int64_t t0, float* y0, float* y1,
                  std::int64_t y_stride, TilePrefetch pf) {
  const std::int64_t nsb = a.nb / 8, q_stride = a.q_stride;  // locals: see amx_pair_tile
  const std::int64_t pf_per = pf.per_step(nsb);
  const std::int8_t* xq = a.q + t0 * q_stride;
  alignas(64) std::int32_t sums[2][8][kAmxTokens][16];
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t s = 0; s < nsb; ++s) {
    pf.issue(s * pf_per, pf_per);
    const std::uint8_t* o = pair + s * kAmxQ4kSuperBytes;
    std::int32_t(*out)[kAmxTokens][16] = sums[s % 2];
    if constexpr (T == kAmxTokens) {
#pragma GCC unroll 4
      for (int sb = 0; sb < 8; sb += 2) {
        _tile_loadd(ECO_AMX_A0, xq + 256 * s + 32 * sb, q_stride);
        _tile_loadd(ECO_AMX_B0, o + 512 * sb, 64);
        _tile_zero(ECO_AMX_C0);
        _tile_dpbsud(ECO_AMX_C0, ECO_AMX_A0, ECO_AMX_B0);
        _tile_stored(ECO_AMX_C0, &out[sb][0][0], 64);
        _tile_loadd(ECO_AMX_A1, xq + 256 * s + 32 * (sb + 1), q_stride);
        _tile_loadd(ECO_AMX_B1, o + 512 * (sb + 1), 64);
        _tile_zero(ECO_AMX_C1);
        _tile_dpbsud(ECO_AMX_C1, ECO_AMX_A1, ECO_AMX_B1);
        _tile_stored(ECO_AMX_C1, &out[sb + 1][0][0], 64);
      }
    } else {
#pragma GCC unroll 8
      for (int sb = 0; sb < 8; ++sb) {
        _tile_loadd(ECO_AMX_AREM, xq + 256 * s + 32 * sb, q_stride);
        _tile_loadd(ECO_AMX_B0, o + 512 * sb, 64);
        _tile_zero(ECO_AMX_CREM);
        _tile_dpbsud(ECO_AMX_CREM, ECO_AMX_AREM, ECO_AMX_B0);
        _tile_stored(ECO_AMX_CREM, &out[sb][0][0], 64);
      }
    }
    if (s > 0) amx_q4k_finish<T>(sums[(s - 1) % 2], o - kAmxQ4kSuperBytes, a, t0, s - 1, acc);
  }
  if (nsb > 0) amx_q4k_finish<T>(sums[(nsb - 1) % 2], pair + (nsb - 1) * kAmxQ4kSuperBytes, a, t0, nsb - 1, acc);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) pair_store(y0 + (t0 + t) * y_stride, y1 + (t0 + t) * y_stride, acc[t]);
}

using AmxTileFn = void (*)(const std::uint8_t*, const QuantizedActs&, std::int64_t, float*, float*, std::int64_t,
                           TilePrefetch);

// The AMX kernels of one weight type for rows8_amx: repack(g0, g1, a, out) copies a pair
// of groups into `out`; tile<T>() is the tile of T tokens; Narrow, the vector tiles of an
// odd last group.
struct AmxQ8Kernels {
  using Narrow = PackedTiles;
  static void repack(const std::uint8_t* g0, const std::uint8_t* g1, const QuantizedActs& a, std::uint8_t* out) {
    amx_repack_pair(g0, g1, a.nb, out);
  }
  template <int T>
  static constexpr AmxTileFn tile() {
    return &amx_pair_tile<T>;
  }
};
struct AmxQ4kKernels {
  using Narrow = Q4kTiles;
  static void repack(const std::uint8_t* g0, const std::uint8_t* g1, const QuantizedActs& a, std::uint8_t* out) {
    amx_q4k_repack_pair(g0, g1, a.nb / 8, out);
  }
  template <int T>
  static constexpr AmxTileFn tile() {
    return &amx_q4k_tile<T>;
  }
};

template <class K, int... Ts>
constexpr std::array<AmxTileFn, sizeof...(Ts)> amx_tile_table(std::integer_sequence<int, Ts...>) {
  return {K::template tile<Ts + 1>()...};
}

// Weight rows [r0, r1) x tokens [t0, t1) (16 or more) on AMX tiles with the kernels of K
// (AmxQ8Kernels, AmxQ4kKernels): per chunk of tokens and pair of groups, the pair is
// copied into B-tile form in `scratch` (kQuantScratchFloatsPerBlock floats per block of
// 32 columns, + 64 bytes of alignment), then its 16-token tiles run, and the tokens left
// (fewer than 16) one tile of that many. An odd last group takes the vector tiles.
template <class K>
void rows8_amx(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
               std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float* scratch) {
  const std::int64_t gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  const std::int64_t g0 = r0 / 8, g1 = r1 / 8;
  static constexpr auto kTiles = amx_tile_table<K>(std::make_integer_sequence<int, kAmxTokens>{});
  using Narrow = typename K::Narrow;
  static constexpr auto kNarrow = make_tile_table<PackedTileFn, 1, Narrow::kTokens, Narrow>();
  auto* pair = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) / 64 * 64);
  amx_configure(static_cast<int>((t1 - t0) % kAmxTokens));
  const std::int64_t chunk = imax(kAmxTokens, kAmxActChunkBytes / a.q_stride / kAmxTokens * kAmxTokens);
  for (std::int64_t tc = t0; tc < t1; tc += chunk) {
    const std::int64_t te = imin(t1, tc + chunk);
    for (std::int64_t g = g0; g < g1; g += 2) {
      const std::uint8_t* grp = w + g * gbytes;
      float* yg = y + 8 * g;
      if (g + 1 < g1) {
        K::repack(grp, grp + gbytes, a, pair);
        // The next pair's lines into L2, a share by each token tile (as in rows8).
        PrefetchShares next(reinterpret_cast<const char*>(grp + 2 * gbytes), imin(2, g1 - g - 2) * gbytes / 64,
                            (te - tc + kAmxTokens - 1) / kAmxTokens);
        for (std::int64_t t = tc; t < te; t += kAmxTokens) {
          kTiles[imin(kAmxTokens, te - t) - 1](pair, a, t, yg, yg + 8, y_stride, next.next());
        }
      } else {
        const std::uint8_t* last[1] = {grp};
        float* ylast[1] = {yg};
        for (std::int64_t t = tc; t < te; t += Narrow::kTokens) {
          kNarrow.fns[0][imin(Narrow::kTokens, te - t) - 1](last, a, t, ylast, y_stride, TilePrefetch{});
        }
      }
    }
  }
  _tile_release();
}
#undef ECO_AMX_A0
#undef ECO_AMX_B0
#undef ECO_AMX_C0
#undef ECO_AMX_C1
#undef ECO_AMX_A1
#undef ECO_AMX_B1
#undef ECO_AMX_AREM
#undef ECO_AMX_CREM

// The avx512amx level's Q8_0 kRows8 kernel: AMX tiles from 16 tokens on (rows8_amx), below
// that as rows_q8_0_rows8_zmm.
void rows_q8_0_rows8_amx(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                         std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride,
                         float* scratch) {
  if (t1 - t0 <= 4) {
    rows8<PackedTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
  } else if (t1 - t0 < kAmxTokens) {
    rows8_wide<PackedWideTiles, PackedTiles>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride);
  } else {
    rows8_amx<AmxQ8Kernels>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride, scratch);
  }
}

// The avx512amx level's Q4_K kRows8 kernel: AMX tiles from kAmxQ4kMinTokens tokens on,
// below that rows_q4_k_rows8_zmm.
void rows_q4_k_rows8_amx(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                         std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride,
                         float* scratch) {
  if (t1 - t0 < kAmxQ4kMinTokens) {
    rows_q4_k_rows8_zmm(w, row_bytes, a, r0, r1, t0, t1, y, y_stride, scratch);
  } else {
    rows8_amx<AmxQ4kKernels>(w, row_bytes, a, r0, r1, t0, t1, y, y_stride, scratch);
  }
}

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS

#pragma GCC diagnostic pop
