// Q6_K weights in GGUF rows on the avx512vnni-zmm level (included by
// matmul_quant_avx512vnni.cc after matmul_q4k_lanes_impl.h, with matmul_quant_impl.h's
// one-definition rules): the tiles of 5-15 tokens on pairs of tokens (ktile_q6k_zmm, driven by
// krows_impl), and from 16 tokens the tokens in the lanes (rows_q6k_lanes).
//
// Tokens in the lanes: ktile_q6k_zmm holds 8 lanes of a row's super-block per token, and each
// of its vpdpbusd (4 values per lane) needs a vpdpwssd for the scales of the values in it: 2
// instructions per 64 multiply-adds. Here, as in the Q8_0 and Q4_K lanes kernels, a
// register holds 16 tokens' 4 activation bytes (packed per call and chunk of 96 tokens:
// per super-block q as [quad][token][4], -32 times each sub-block's activation sum as
// [sub-block][token] int32, and dx) and each row's 4 bytes of 6-bit values are broadcast
// from memory (unpacked per 4 rows and super-block into a buffer in L1:
// unpack_q6k_lanes). A sub-block's 16 values are 4 vpdpbusd from the -32 term, whose
// exact sum (|.| <= 16 * 32 * 128) is taken times the scale by vpmulld and added: per row,
// register of tokens and sub-block 4 vpdpbusd of 7 instructions (vpmulld is two).
// Emerald Rapids Xeon (family 6 model 207), one thread, against the pairs tiles:
// BM_Synth1bMatmuls (weights from DRAM) 512 tokens 4291-4358 -> 3127-3196 ms, 32 325-326 ->
// 213-216, 16 202-203 -> 146-159; synth 1b Q6_K pp512 117-118 -> 152-156 tok/s (two threads
// 230-231 -> 288-293), batch 32 90 -> 133-134 (docs/kernels.md, sixty-ninth pass).
//
// The arithmetic is q6k_step's, lane by lane: isum = sum_sb scale_sb * (sum of (q - 32) x
// over the sub-block), exact, then acc = fma(float(isum), d * dx, acc), super-blocks
// ascending. So a token's row is bitwise what every other Q6_K kernel gives it.
#pragma once

#if ECO_QUANT_ISA != 2
#error "matmul_q6k_zmm_impl.h is for the avx512vnni build"
#endif

// GCC bug 105593 (see matmul_packed_impl.h): its 512-bit intrinsics' "undefined" vector.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

// A Q6_K super-block's 256 6-bit values as unsigned bytes, values 64c .. 64c + 63 in q[c]: 64
// bytes of ql and a doubled qh give blocks 4h, 4h + 1 (low nibbles) and 4h + 2, 4h + 3 (high
// nibbles) with per-half vpsrlvw shifts of qh.
inline void q6k_decode(const BlockQ6_K& blk, __m512i* q) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
  // qh's shift for blocks jj = 0 | 1 (low nibbles) and 2 | 3 (high), per 256-bit half.
  const __m512i sh_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i sh_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
    const __m256i qh256 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
    const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(qh256), qh256, 1);
    const __m512i hi_lo = _mm512_and_si512(_mm512_srlv_epi16(qh, sh_lo), m2);
    const __m512i hi_hi = _mm512_and_si512(_mm512_srlv_epi16(qh, sh_hi), m2);
    q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(hi_lo, 4));
    q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_slli_epi16(hi_hi, 4));
  }
}

// ktile for Q6_K on 512-bit registers (the avx512vnni-zmm level, 5-15 tokens): the same exact
// integers and q6k_step's float step, so the same bits. The rows come unpacked by
// Q6kZmmTiles::unpack_row (q - 32 signed, scales as (scale, 0) int16 pairs, corr), the tokens as
// x + 128 unsigned (QuantizedActs::qu) in pairs (pack_k_pairs: per block of 32 values token 2p's
// bytes in the low 256 bits, 2p + 1's in the high). Per block, row and pair, one vpdpbusd from
// zero against the row's 32 values in both halves gives lane l (of each half) the sum of (x +
// 128)(q - 32) over values 4l..4l + 3 of the block, |.| <= 4 * 255 * 32 < 2^15, so its low int16
// is the whole value and one vpdpwssd against (scale of the lane's 16 values, 0) multiplies it
// in: each half is ktile's 8 lanes of one token, started from the row's corr (-128 * sum scale
// (q - 32), which takes the 128s out: exact). Per super-block q6k_step's float step, for 4 rows
// and two tokens at once (each half's 8 lanes summed by two rounds of unpacks and a 128-bit
// shuffle, times [d_r * dx_2p | d_r * dx_2p+1]: 14 instructions per 4 rows and pair). 2
// instructions per 64 multiply-adds of a row and token where ktile spends 8 (vpmaddubsw twice,
// vpsubw, vpdpwssd per 32). Emerald Rapids Xeon, one thread, kernels_bench Q6_K 2048 x 768, 16
// tokens 471-475 -> 405-409 us, 24 tokens 682-683 -> 578-582 (sixty-fourth pass: lanes from -32
// * (sum of 4 x), made per tile and token); with krows_impl's token blocks (sixty-fifth pass):
// synth 1b's matrices at 512 tokens 7.6-9.4 -> 6.6-8.1 s (alternated), profile engine pp512
// 60-76 -> 89-92 tok/s, batch 32 52-60 -> 74-75. Then each register held 64 values of one token,
// and per super-block the halves were folded (two shuffles and an add per pair of tokens); with
// the pairs and 6 tokens a tile (sixty-ninth pass) 5.19-5.37 -> 4.38-4.43 s at 512 tokens. From
// 16 tokens rows_q6k_lanes (below) takes the batch.
template <int R, int T>
void ktile_q6k_zmm(const UnpackedK* urows, const QuantizedActs& a, std::int64_t t0, float* y, std::int64_t y_stride) {
  static_assert(R <= 4);
  const std::int64_t nsb = a.nb / 8;
  // Tokens 2p and 2p + 1 share isum[r][p]: token 2p in the low 8 lanes, 2p + 1 in the high.
  // acc[p]: lane r of the first 128 bits output (r, 2p), of the third (r, 2p + 1).
  constexpr int P = (T + 1) / 2;
  __m512 acc[P];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) acc[p] = _mm512_setzero_ps();
  // The token block's pairs (pack_k_pairs): pair p's block b at xp + p * 2 * q_stride + 64 * b.
  const std::uint8_t* xp = a.qu + t0 * a.q_stride;
  const float* dxp = a.d + t0 / 2 * 16 * nsb;
  for (std::int64_t s = 0; s < nsb; ++s) {
    __m512i isum[4][P];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i corr = r < R ? _mm512_loadu_si512(urows[r].corr + 16 * s) : _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) isum[r][p] = corr;
    }
#pragma GCC unroll 8
    for (int b = 0; b < 8; ++b) {
      __m512i xv[P];
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) xv[p] = _mm512_load_si512(xp + p * 2 * a.q_stride + 64 * (8 * s + b));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // The row's 32 values (q - 32) and their 8 lanes' (scale, 0) in both halves.
        const __m512i q = _mm512_broadcast_i64x4(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(urows[r].q + 256 * s + 32 * b)));
        const __m512i m = _mm512_broadcast_i64x4(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(urows[r].mult + 16 * (8 * s + b))));
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          isum[r][p] = _mm512_dpwssd_epi32(isum[r][p], _mm512_dpbusd_epi32(_mm512_setzero_si512(), xv[p], q), m);
        }
      }
    }
    // q6k_step's float step for the 4 rows and two tokens of a pair at once: each half's 8 lanes
    // summed (exact) into [rows 0-3 of token 2p | the same | rows 0-3 of 2p + 1 | the same], times
    // [d_r * dx_2p | d_r * dx_2p+1].
    auto d_at = [&](int r) { return r < R ? urows[r].d[s] : 0.0f; };
    const __m512 dr = _mm512_broadcast_f32x4(_mm_setr_ps(d_at(0), d_at(1), d_at(2), d_at(3)));
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(isum[0][p], isum[1][p]),
                                           _mm512_unpackhi_epi32(isum[0][p], isum[1][p]));
      const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(isum[2][p], isum[3][p]),
                                           _mm512_unpackhi_epi32(isum[2][p], isum[3][p]));
      const __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
      const __m512i tot = _mm512_add_epi32(c, _mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(2, 3, 0, 1)));
      const __m512 dd = _mm512_mul_ps(dr, _mm512_load_ps(dxp + 16 * (p * nsb + s)));
      acc[p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), dd, acc[p]);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    alignas(64) float out[16];
    _mm512_store_ps(out, acc[p]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      y[2 * p * y_stride + r] = out[r];
      if (2 * p + 1 < T) y[(2 * p + 1) * y_stride + r] = out[8 + r];
    }
  }
}

struct Q6kZmmTiles {
  template <int R, int T>
  static constexpr KTileFn fn() {
    return &ktile_q6k_zmm<R, T>;
  }
  static constexpr bool kPairs = true;  // the tiles read a token block in pairs (pack_k_pairs)
  // Tokens per tile: 3 pairs (synth 1b's matrices, 512 tokens, one thread: 4.38-4.43 s against
  // 4.73-4.84 with 2 pairs and 4.47-4.48 with 4, whose registers spill).
  static constexpr int kTokens = 6;
  // Tokens per pass of krows_impl: 96 (each row is unpacked once per pass; synth 1b's matrices at 512
  // tokens 4.27-4.43 s against 4.44-4.59 in blocks of 64, alternated), whose pairs stay in L2 (540 KB
  // at 5632 columns). The scratch of kQuantScratchFloatsPerBlock floats per 32 columns (cols >= 256)
  // holds them (36 bytes per 32 columns a token), the alignment and kRowsK unpacked rows
  // (unpacked_k_bytes: 77 bytes per 32 columns and 127 more).
  static constexpr std::int64_t kTokenBlock = 96;
  static_assert(kTokenBlock % kTokens == 0);
  // The row as the tile reads it: q - 32 (signed), mult as int32 lanes (scale, 0), and per
  // super-block corr: -128 * (sum over the lane's values of scale * (q - 32)) in ktile's 8
  // lanes, in both halves (the tile's x + 128 products, less this, are its x products). Decoded
  // on 512-bit registers in one pass (q6k_decode); the
  // scales sign-extended once and spread per 64 values by vpermd (FmtQ6_KXu::unpack_row's q and
  // corr, with mult's high int16 cleared; no mo). Against the 256-bit decode and a second pass
  // over its bytes (FmtQ6_KXu's form then): synth 1b Q6_K, one thread, profile engine batch 8
  // 42-43 -> 47-49 tok/s, batch 32 74 -> 78-79, pp512 93 -> 96-98 (sixty-fifth pass).
  static void unpack_row(const std::uint8_t* row, std::int64_t nsb, const UnpackedK& u) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row);
    const __m512i k32 = _mm512_set1_epi8(32);
    for (std::int64_t s = 0; s < nsb; ++s) {
      // Lane i: scale i as (int16, 0).
      const __m512i sc = _mm512_and_si512(
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[s].scales))),
          _mm512_set1_epi32(0xFFFF));
      __m512i c16 = _mm512_setzero_si512();
      __m512i q6[4];
      q6k_decode(blk[s], q6);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512i q[2] = {_mm512_sub_epi8(q6[2 * h], k32), _mm512_sub_epi8(q6[2 * h + 1], k32)};
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k) {
          const int c = 2 * h + k;  // 64 values: blocks 2c, 2c + 1 (sub-blocks 4c .. 4c + 3)
          _mm512_storeu_si512(u.q + 256 * s + 64 * c, q[k]);
          const __m512i m = _mm512_permutexvar_epi32(
              _mm512_set_epi32(4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 2, 4 * c + 2, 4 * c + 2, 4 * c + 2,
                               4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c, 4 * c, 4 * c, 4 * c),
              sc);
          _mm512_storeu_si512(u.mult + 16 * (8 * s + 2 * c), m);
          const __m512i sum4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), q[k]);
          c16 = _mm512_dpwssd_epi32(c16, sum4, m);
        }
      }
      const __m512i f = _mm512_add_epi32(c16, _mm512_shuffle_i64x2(c16, c16, 0x4E));  // [lo + hi | hi + lo]
      _mm512_storeu_si512(u.corr + 16 * s, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(f, 7)));
      u.d[s] = u.off[s] = h2f(blk[s].d);
    }
  }
};
static_assert((64 + kRowsK * 127) / 8 + kRowsK * 77 + 36 * Q6kZmmTiles::kTokenBlock <=
              4 * kQuantScratchFloatsPerBlock);

// ktile_q6k_zmm's rows for 5 or more tokens (up to kQ6kLanesMinTokens where the tokens-in-lanes
// kernel takes the rest); 1-4 tokens on kgemv.
void rows_q6_k_zmm(const std::uint8_t* w, std::size_t rb, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
                   std::int64_t t0, std::int64_t t1, float* y, std::int64_t ys, float* scratch) {
  krows_impl<FmtQ6_K, Q6kZmmTiles>(w, rb, a, r0, r1, t0, t1, y, ys, scratch);
}

// Bytes per super-block and register of 16 tokens in the packed activations: q as
// [64 quads][16 tokens][4] (quad k: the super-block's values 4k .. 4k + 3), then the
// -32 * sub-block sums [16][16] int32 and dx [16] float.
constexpr std::int64_t kQ6kLaneNbs = 64 * 16 * 4, kQ6kLaneDx = kQ6kLaneNbs + 16 * 16 * 4;
constexpr std::int64_t kQ6kLaneVecBytes = kQ6kLaneDx + 16 * 4;
// Bytes of 4 rows' unpacked super-block: the values as bytes [row][256], the scales as
// int32 [row][16], then d [4] as floats.
constexpr std::int64_t kQ6kLaneScales = 4 * 256, kQ6kLaneD = kQ6kLaneScales + 4 * 16 * 4;
constexpr std::int64_t kQ6kLaneWeightBytes = kQ6kLaneD + 64;
// Tokens packed at once and registers of 16 tokens per tile of 4 rows.
constexpr std::int64_t kQ6kLaneChunkTokens = 96;
constexpr int kQ6kLaneVecs = 3;
// Groups of 4 rows between the one running and the one whose rows it prefetches into L2.
constexpr std::int64_t kQ6kAhead = 1;
static_assert(kQ6kLaneChunkTokens / 16 * kQ6kLaneVecBytes / 8 + 64 <= 4 * kQuantScratchFloatsPerBlock);
static_assert(kQ6kLaneVecBytes % 64 == 0 && kQ6kLaneWeightBytes % 64 == 0);

// Tokens [ts, te) of a (at most kQ6kLaneChunkTokens) into pk (pack_k_lanes, kQ6kLaneVecBytes a
// register), with each lane's -32 * sub-block sums and dx.
void pack_q6k_lanes(const QuantizedActs& a, std::int64_t ts, std::int64_t te, std::uint8_t* pk) {
  const std::int64_t nsb = a.nb / 8;
  pack_k_lanes(a, ts, te, kQ6kLaneVecBytes, pk, [&](std::uint8_t* base, int i, std::int64_t t, std::int64_t s) {
    auto* nbs = reinterpret_cast<std::int32_t*>(base + kQ6kLaneNbs);
    const std::int16_t* bs = t >= 0 ? a.bsums + t * 2 * a.nb + 16 * s : nullptr;
    for (int sb = 0; sb < 16; ++sb) nbs[16 * sb + i] = t >= 0 ? -32 * bs[sb] : 0;
    reinterpret_cast<float*>(base + kQ6kLaneDx)[i] = t >= 0 ? a.d[t * nsb + s] : 0.0f;
  });
}

// Super-block s of the nr (<= 4) rows at w (row_bytes apart) into out (kQ6kLaneWeightBytes,
// 64-byte aligned); rows nr .. 3 as zeros.
void unpack_q6k_lanes(const std::uint8_t* w, std::size_t row_bytes, int nr, std::int64_t s, std::uint8_t* out) {
  auto* d = reinterpret_cast<float*>(out + kQ6kLaneD);
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    if (r < nr) {
      const auto& blk = reinterpret_cast<const BlockQ6_K*>(w + r * row_bytes)[s];
      __m512i q[4];
      q6k_decode(blk, q);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) _mm512_store_si512(out + 256 * r + 64 * c, q[c]);
      _mm512_store_si512(out + kQ6kLaneScales + 64 * r,
                         _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales))));
      d[r] = h2f(blk.d);
    } else {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) _mm512_store_si512(out + 256 * r + 64 * c, _mm512_setzero_si512());
      _mm512_store_si512(out + kQ6kLaneScales + 64 * r, _mm512_setzero_si512());
      d[r] = 0.0f;
    }
  }
}

// One super-block: the 4 unpacked rows at wr times the TV registers of tokens at xs
// (kQ6kLaneVecBytes apart), added into acc [4][acc_stride]. pf: lines to prefetch into L2,
// spread over the tile's 16 sub-blocks.
template <int TV>
void q6k_lanes_tile(const std::uint8_t* wr, const std::uint8_t* xs, float* acc, std::int64_t acc_stride,
                    TilePrefetch pf) {
  const std::int64_t pf_per = pf.per_step(16);
  const auto* sc = reinterpret_cast<const std::int32_t*>(wr + kQ6kLaneScales);
  __m512i isum[4][TV];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) isum[r][v] = _mm512_setzero_si512();
#pragma GCC unroll 1
  for (int sb = 0; sb < 16; ++sb) {
    pf.issue(sb * pf_per, pf_per);
    __m512i dot[4][TV];
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) {
      const __m512i nbs = _mm512_load_si512(xs + v * kQ6kLaneVecBytes + kQ6kLaneNbs + 64 * sb);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) dot[r][v] = nbs;
    }
    lanes_dot4<TV>(dot, xs, kQ6kLaneVecBytes, 4 * sb, wr, 256, 4);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i s = _mm512_set1_epi32(sc[16 * r + sb]);
#pragma GCC unroll 4
      for (int v = 0; v < TV; ++v) isum[r][v] = _mm512_add_epi32(isum[r][v], _mm512_mullo_epi32(dot[r][v], s));
    }
  }
  const auto* dw = reinterpret_cast<const float*>(wr + kQ6kLaneD);
#pragma GCC unroll 4
  for (int v = 0; v < TV; ++v) {
    const __m512 dx = _mm512_load_ps(reinterpret_cast<const float*>(xs + v * kQ6kLaneVecBytes + kQ6kLaneDx));
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      float* out = acc + r * acc_stride + 16 * v;
      const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx);
      _mm512_store_ps(out, _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][v]), dd, _mm512_load_ps(out)));
    }
  }
}

using Q6kLanesTileFn = void (*)(const std::uint8_t*, const std::uint8_t*, float*, std::int64_t, TilePrefetch);

// Weight rows [r0, r1) of a GGUF Q6_K matrix times tokens [t0, t1): per chunk of
// kQ6kLaneChunkTokens tokens, the activations packed into scratch (kQuantScratchFloatsPerBlock
// floats per block), then per group of 4 rows, super-block by super-block: the rows'
// super-block unpacked into a buffer that stays in L1 and every tile of 4 rows x 48 tokens
// run against it, the sums kept in acc; then each token's 4 results stored.
void rows_q6k_lanes(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                    std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride,
                    float* scratch) {
  static constexpr Q6kLanesTileFn kTiles[kQ6kLaneVecs] = {&q6k_lanes_tile<1>, &q6k_lanes_tile<2>,
                                                          &q6k_lanes_tile<3>};
  const std::int64_t nsb = a.nb / 8, gbytes = 4 * static_cast<std::int64_t>(row_bytes);
  auto* pk = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) / 64 * 64);
  constexpr std::int64_t kAccStride = kQ6kLaneChunkTokens;
  alignas(64) float acc[4 * kAccStride];
  alignas(64) std::uint8_t wr[kQ6kLaneWeightBytes];
  for (std::int64_t ts = t0; ts < t1; ts += kQ6kLaneChunkTokens) {
    const std::int64_t te = imin(t1, ts + kQ6kLaneChunkTokens), nvec = (te - ts + 15) / 16;
    pack_q6k_lanes(a, ts, te, pk);
    for (std::int64_t r = r0; r < r1; r += 4) {
      const int nr = static_cast<int>(imin(4, r1 - r));
      const std::uint8_t* grp = w + r * static_cast<std::int64_t>(row_bytes);
      // The rows kQ6kAhead groups on come into L2 while these run, a share per tile (spread
      // over its steps); near the end there are none: the pointer is not formed past the rows.
      const std::int64_t ahead_rows = imax(0, imin(4, r1 - r - 4 * (kQ6kAhead + 1)));
      const std::int64_t tiles = nsb * ((nvec + kQ6kLaneVecs - 1) / kQ6kLaneVecs);
      const std::uint8_t* far = ahead_rows > 0 ? grp + (kQ6kAhead + 1) * gbytes : grp;
      PrefetchShares next(reinterpret_cast<const char*>(far), ahead_rows * static_cast<std::int64_t>(row_bytes) / 64,
                          tiles);
      std::memset(acc, 0, sizeof(acc));
      for (std::int64_t s = 0; s < nsb; ++s) {
        unpack_q6k_lanes(grp, row_bytes, nr, s, wr);
        for (std::int64_t v0 = 0; v0 < nvec; v0 += kQ6kLaneVecs) {
          const int nv = static_cast<int>(imin(kQ6kLaneVecs, nvec - v0));
          kTiles[nv - 1](wr, pk + (s * nvec + v0) * kQ6kLaneVecBytes, acc + 16 * v0, kAccStride, next.next());
        }
      }
      for (std::int64_t v = 0; v < nvec; ++v) {
        const std::int64_t n = imin(16, te - ts - 16 * v);
        float* yv = y + (ts + 16 * v) * y_stride + r;
        if (nr == 4) {
          store_q8_lanes(acc + 16 * v, kAccStride, n, yv, y_stride);
        } else {
          for (std::int64_t t = 0; t < n; ++t)
            for (int i = 0; i < nr; ++i) yv[t * y_stride + i] = acc[i * kAccStride + 16 * v + t];
        }
      }
    }
  }
}

// Tokens from which the avx512vnni-zmm and avx512amx levels' Q6_K takes rows_q6k_lanes (the
// latter's where the bf16 tiles do not take the batch), else rows_q6_k_zmm: with a register of
// 16 tokens' lanes mostly empty, fewer run faster on the pairs tiles where the weights are in
// L2 (Emerald Rapids Xeon, one thread, kernels_bench Q6_K 2048 x 768, us, pairs -> lanes: 8
// tokens 160 -> 217, 12 194 -> 221-224, 16 242-243 -> 222-223); from DRAM the lanes are even
// at 8 and faster from 12 (BM_Synth1bMatmuls, ms: 8 145-161 -> 144-154, 12 170-202 -> 146-160,
// 16 202-203 -> 146-159, 24 262-265 -> 214).
constexpr std::int64_t kQ6kLanesMinTokens = 16;

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS

#pragma GCC diagnostic pop
