// Q4_K weights in kRows8 against many tokens with the tokens in the lanes (the
// avx512vnni-zmm level; included by matmul_quant_avx512vnni.cc after
// matmul_q8_lanes_impl.h, with its one-definition rules).
//
// q4k_tile_wide holds rows in the lanes: per chunk of 4 columns and pair of groups one
// vinserti64x4 and two nibble masks, and per 4 chunks a vpdpwssd per token for each
// half sub-block's scale. With 8 tokens that is 64 vpdpbusd of ~102 vector instructions
// per token, pair and super-block (a ceiling of 63% on a core where every 512-bit
// instruction takes one of the two ports vpdpbusd uses). Here each super-block of a pair
// of groups is unpacked to bytes in L1 (unpack_q4k_lanes: one row's 4 values of a
// sub-block per broadcast), a register holds 16 tokens' 4 activation bytes (packed per
// call and chunk of 96 tokens), and each row's 4 nibble bytes are broadcast from memory
// (a load, no vector port): per row, register of tokens and super-block 64 vpdpbusd, 16
// vpdpwssd (the scales, each half sub-block's), 4 for the mins and 6 to finish: 64 of ~90.
// Emerald Rapids Xeon (family 6 model 207), one thread, against q4k_tile_wide (1 x 8,
// GFNI): kernels_bench 2048 x 768 x 512 tokens 4275-4369 -> 3905-3930 us; BM_Synth1bMatmuls
// (weights from DRAM) 512 tokens 2804-2908 -> 2517-2524 ms, 32 tokens 175-180 -> 157-159
// (but batches of 16 and 24 slower, hence from 32); synth 1b Q4_K pp512 165-169 -> 177-181
// tok/s, batch 32 145-147 -> 156-158 (docs/kernels.md, sixty-eighth pass). Measured
// slower: each group unpacked whole once per chunk of tokens (its loads stalled), the next
// super-block's weights prefetched into L1. Faster here, not in the Q8_0 kernel: each
// token's 16 results stored as one line (store_lanes16).
//
// The arithmetic is q4k_tile_wide's with kGfni, lane by lane: the exact isum = sum_sb
// scale_sb * dot_sb (each half sub-block's dot of 16 products, |dot| <= 16 * 15 * 128
// < 2^15, taken times the scale by one vpdpwssd), the exact mins = sum_sb min_sb * bsum_sb,
// then acc = fma(float(isum), d * dx, acc) and acc = fnmadd(float(mins), dmin * dx, acc),
// super-blocks ascending. So a token's row is bitwise what every other kRows8 kernel
// gives it.
#pragma once

#if ECO_QUANT_ISA != 2
#error "matmul_q4k_lanes_impl.h is for the avx512vnni build"
#endif

// GCC bug 105593 (see matmul_packed_impl.h): its 512-bit intrinsics' "undefined" vector.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

// Bytes per super-block and register of 16 tokens in the packed activations: q as
// [64 quads][16 tokens][4] (quad k: the super-block's values 4k .. 4k + 3), then the
// bpairs [4][16] int32 and d [16] float.
constexpr std::int64_t kQ4kLaneBpairs = 64 * 16 * 4, kQ4kLaneDx = kQ4kLaneBpairs + 4 * 16 * 4;
constexpr std::int64_t kQ4kLaneVecBytes = kQ4kLaneDx + 16 * 4;
// Bytes per super-block of a group's unpacked weights: the nibbles as bytes [sub-block 8]
// [chunk 8][row 8][4] (chunk c of sub-block sb: its values 4c .. 4c + 3), the scales
// [sub-block][row] and the mins' int16 pairs [pair][row] as int32, then d [8] and dmin [8]
// as floats.
constexpr std::int64_t kQ4kLaneScales = 8 * 8 * 8 * 4, kQ4kLaneMins = kQ4kLaneScales + 8 * 8 * 4;
constexpr std::int64_t kQ4kLaneD = kQ4kLaneMins + 4 * 8 * 4, kQ4kLaneDmin = kQ4kLaneD + 8 * 4;
constexpr std::int64_t kQ4kLaneWeightBytes = kQ4kLaneDmin + 8 * 4;
// Tokens packed at once (a super-block's 26 KiB stay in L1 while a pair of groups passes;
// 192 measured no faster) and registers of 16 tokens per tile of 4 rows.
constexpr std::int64_t kQ4kLaneChunkTokens = 96;
constexpr int kQ4kLaneVecs = 3;
// Groups skipped between the pair running and the pair whose weights it prefetches into L2
// (2: two pairs ahead, 2-4% faster at 512 tokens than the next pair).
constexpr std::int64_t kQ4kAhead = 2;
static_assert(kQ4kLaneChunkTokens / 16 * kQ4kLaneVecBytes / 8 + 64 <= 4 * kQuantScratchFloatsPerBlock);
static_assert(kQ4kLaneVecBytes % 64 == 0 && kQ4kLaneWeightBytes % 64 == 0);

// Tokens [ts, te) of a's K-format q into pk for a tokens-in-lanes kernel: super-block s,
// register v of 16 tokens at pk + (s * nvec + v) * vec_bytes, whose first 4 KiB are the
// values as [64 quads][16 tokens][4] (quad k: values 4k .. 4k + 3); the tokens past te read
// as zero. extra(base, i, t, s) fills the rest of lane i (token t, or -1 past te).
template <class Extra>
void pack_k_lanes(const QuantizedActs& a, std::int64_t ts, std::int64_t te, std::int64_t vec_bytes,
                  std::uint8_t* pk, Extra&& extra) {
  const std::int64_t nsb = a.nb / 8, nvec = (te - ts + 15) / 16;
  for (std::int64_t s = 0; s < nsb; ++s) {
    for (std::int64_t v = 0; v < nvec; ++v) {
      std::uint8_t* base = pk + (s * nvec + v) * vec_bytes;
      for (int i = 0; i < 16; ++i) {
        const std::int64_t t = ts + 16 * v + i;
        if (t < te) {
          const std::int8_t* q = a.q + t * a.q_stride + 256 * s;
          for (int k = 0; k < 64; ++k) std::memcpy(base + 64 * k + 4 * i, q + 4 * k, 4);
        } else {
          for (int k = 0; k < 64; ++k) std::memset(base + 64 * k + 4 * i, 0, 4);
        }
        extra(base, i, t < te ? t : -1, s);
      }
    }
  }
}

// Tokens [ts, te) of a (at most kQ4kLaneChunkTokens) into pk (pack_k_lanes, kQ4kLaneVecBytes a
// register), with each lane's bpairs and d.
void pack_q4k_lanes(const QuantizedActs& a, std::int64_t ts, std::int64_t te, std::uint8_t* pk) {
  const std::int64_t nsb = a.nb / 8;
  pack_k_lanes(a, ts, te, kQ4kLaneVecBytes, pk, [&](std::uint8_t* base, int i, std::int64_t t, std::int64_t s) {
    auto* bp = reinterpret_cast<std::int32_t*>(base + kQ4kLaneBpairs);
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) bp[16 * p + i] = t >= 0 ? a.bpairs[(t * nsb + s) * 4 + p] : 0;
    reinterpret_cast<float*>(base + kQ4kLaneDx)[i] = t >= 0 ? a.d[t * nsb + s] : 0.0f;
  });
}

// The group super-block at sup (kQ4kGroupSuperBytes) unpacked into out (kQ4kLaneWeightBytes,
// 64-byte aligned).
void unpack_q4k_lanes(const std::uint8_t* sup, std::uint8_t* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < 8; c += 2) {
      // Chunks c, c + 1 of pair j: low nibbles of sub-block 2j, high of 2j + 1.
      const __m512i w = _mm512_loadu_si512(sup + 128 + 256 * j + 32 * c);
      _mm512_store_si512(out + (16 * j + c) * 32, _mm512_and_si512(w, m4));
      _mm512_store_si512(out + (16 * j + 8 + c) * 32, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4));
    }
  }
  alignas(32) std::uint8_t sc[64], mn[64];
  q4k_scales(sup, sc, mn);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    _mm512_store_si512(out + kQ4kLaneScales + 64 * i,
                       _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc + 16 * i))));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + kQ4kLaneMins + 32 * i),
                       _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(mn + 16 * i))));
  }
  _mm256_store_ps(reinterpret_cast<float*>(out + kQ4kLaneD),
                  _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sup))));
  _mm256_store_ps(reinterpret_cast<float*>(out + kQ4kLaneDmin),
                  _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sup + 16))));
}

inline __m512i bcast32(const std::uint8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// dot[r][v] += quads k0 .. k0 + 3 of 4 rows times the TV registers of tokens at xs (vec_bytes
// apart, quad k at 64 * k): row r's 4 bytes of quad k broadcast from w + r * row_step + k *
// quad_step.
template <int TV>
inline void lanes_dot4(__m512i (&dot)[4][TV], const std::uint8_t* xs, std::int64_t vec_bytes, int k0,
                       const std::uint8_t* w, std::int64_t row_step, std::int64_t quad_step) {
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const int k = k0 + c;
    __m512i xv[TV];
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) xv[v] = _mm512_load_si512(xs + v * vec_bytes + 64 * k);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i wv = bcast32(w + r * row_step + k * quad_step);
#pragma GCC unroll 4
      for (int v = 0; v < TV; ++v) dot[r][v] = _mm512_dpbusd_epi32(dot[r][v], wv, xv[v]);
    }
  }
}

// One super-block: rows r0 .. r0 + 3 of the unpacked group super-block at wr times the TV
// registers of tokens at xs (kQ4kLaneVecBytes apart), added into acc [4][acc_stride].
// pf: lines to prefetch into L2, spread over the tile's 16 steps (in a burst they would
// fill the line buffers and stall it while they come from memory).
template <int TV>
void q4k_lanes_tile(const std::uint8_t* wr, int r0, const std::uint8_t* xs, float* acc, std::int64_t acc_stride,
                    TilePrefetch pf) {
  const std::int64_t pf_per = pf.per_step(16);
  const std::uint8_t* wq = wr + 4 * r0;
  const std::uint8_t* sc = wr + kQ4kLaneScales + 4 * r0;
  __m512i isum[4][TV];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) isum[r][v] = _mm512_setzero_si512();
#pragma GCC unroll 1
  for (int sb = 0; sb < 8; ++sb) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      pf.issue((2 * sb + h) * pf_per, pf_per);
      __m512i dot[4][TV];
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < TV; ++v) dot[r][v] = _mm512_setzero_si512();
      lanes_dot4<TV>(dot, xs, kQ4kLaneVecBytes, 8 * sb + 4 * h, wq, 4, 32);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m512i s = bcast32(sc + 32 * sb + 4 * r);
#pragma GCC unroll 4
        for (int v = 0; v < TV; ++v) isum[r][v] = _mm512_dpwssd_epi32(isum[r][v], dot[r][v], s);
      }
    }
  }
  const auto* dw = reinterpret_cast<const float*>(wr + kQ4kLaneD) + r0;
  const auto* dmw = reinterpret_cast<const float*>(wr + kQ4kLaneDmin) + r0;
  const std::uint8_t* mp = wr + kQ4kLaneMins + 4 * r0;
#pragma GCC unroll 4
  for (int v = 0; v < TV; ++v) {
    const std::uint8_t* xv = xs + v * kQ4kLaneVecBytes;
    __m512i bp[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) bp[q] = _mm512_load_si512(xv + kQ4kLaneBpairs + 64 * q);
    const __m512 dx = _mm512_load_ps(reinterpret_cast<const float*>(xv + kQ4kLaneDx));
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      __m512i mins = _mm512_madd_epi16(bcast32(mp + 4 * r), bp[0]);
#pragma GCC unroll 3
      for (int q = 1; q < 4; ++q) mins = _mm512_dpwssd_epi32(mins, bcast32(mp + 32 * q + 4 * r), bp[q]);
      float* out = acc + r * acc_stride + 16 * v;
      _mm512_store_ps(out, q4k_finish_wide(isum[r][v], mins, _mm512_set1_ps(dw[r]), _mm512_set1_ps(dmw[r]), dx,
                                           _mm512_load_ps(out)));
    }
  }
}

// The 16 rows x 16 tokens at out (rows `stride` floats apart) into y, token t's 16 results
// (one cache line where y is aligned) at y + t * y_stride, for the first n tokens: unpacks
// leave token 4k + i's rows 4q .. 4q + 3 in 128-bit lane k of u[4q + i] (as in
// store_q8_lanes), and two rounds of 128-bit shuffles gather each token's four quarters.
inline void store_lanes16(const float* out, std::int64_t stride, std::int64_t n, float* y, std::int64_t y_stride) {
  __m512 u[16];
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const float* o = out + 4 * q * stride;
    const __m512 r0 = _mm512_load_ps(o), r1 = _mm512_load_ps(o + stride);
    const __m512 r2 = _mm512_load_ps(o + 2 * stride), r3 = _mm512_load_ps(o + 3 * stride);
    const __m512d a = _mm512_castps_pd(_mm512_unpacklo_ps(r0, r1)), b = _mm512_castps_pd(_mm512_unpackhi_ps(r0, r1));
    const __m512d c = _mm512_castps_pd(_mm512_unpacklo_ps(r2, r3)), d = _mm512_castps_pd(_mm512_unpackhi_ps(r2, r3));
    u[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  alignas(64) float tmp[16][16];
  const bool whole = n == 16;
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    // x: lanes 0, 2 of u[i] and u[4 + i]; z: of u[8 + i] and u[12 + i]; xo, zo: lanes 1, 3.
    const __m512 x = _mm512_shuffle_f32x4(u[i], u[4 + i], 0x88), xo = _mm512_shuffle_f32x4(u[i], u[4 + i], 0xDD);
    const __m512 z = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0x88);
    const __m512 zo = _mm512_shuffle_f32x4(u[8 + i], u[12 + i], 0xDD);
    const __m512 tok[4] = {_mm512_shuffle_f32x4(x, z, 0x88), _mm512_shuffle_f32x4(xo, zo, 0x88),
                           _mm512_shuffle_f32x4(x, z, 0xDD), _mm512_shuffle_f32x4(xo, zo, 0xDD)};
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      if (whole) {
        _mm512_storeu_ps(y + (4 * k + i) * y_stride, tok[k]);
      } else {
        _mm512_store_ps(tmp[4 * k + i], tok[k]);
      }
    }
  }
  if (!whole) {
    for (std::int64_t t = 0; t < n; ++t) std::memcpy(y + t * y_stride, tmp[t], 16 * sizeof(float));
  }
}

using Q4kLanesTileFn = void (*)(const std::uint8_t*, int, const std::uint8_t*, float*, std::int64_t, TilePrefetch);

// Weight rows [r0, r1) (multiples of 8) of a kRows8 Q4_K matrix times tokens [t0, t1):
// per chunk of kQ4kLaneChunkTokens tokens, the activations packed into scratch
// (kQuantScratchFloatsPerBlock floats per block), then per pair of groups (one at the end
// of an odd count) super-block by super-block: both groups' super-blocks unpacked into a
// buffer that stays in L1 and every tile of 4 rows x 48 tokens run against them (the
// super-block's activations, 26 KiB for 96 tokens, read from L1 by all four row tiles),
// the sums kept in acc; then each token's 16 results stored as one line.
void rows8_q4k_lanes(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                     std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride,
                     float* scratch) {
  static constexpr Q4kLanesTileFn kTiles[kQ4kLaneVecs] = {&q4k_lanes_tile<1>, &q4k_lanes_tile<2>,
                                                          &q4k_lanes_tile<3>};
  const std::int64_t nsb = a.nb / 8, gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  auto* pk = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) / 64 * 64);
  constexpr std::int64_t kAccStride = kQ4kLaneChunkTokens;
  alignas(64) float acc[16 * kAccStride];
  alignas(64) std::uint8_t wr[2 * kQ4kLaneWeightBytes];
  for (std::int64_t ts = t0; ts < t1; ts += kQ4kLaneChunkTokens) {
    const std::int64_t te = imin(t1, ts + kQ4kLaneChunkTokens), nvec = (te - ts + 15) / 16;
    pack_q4k_lanes(a, ts, te, pk);
    const std::int64_t g1 = r1 / 8;
    for (std::int64_t g = r0 / 8; g < g1;) {
      const std::int64_t ng = imin(2, g1 - g), ahead = imin(2, imax(0, g1 - g - ng - kQ4kAhead));
      const std::uint8_t* grp = w + g * gbytes;
      // The weights two pairs on come into L2 while these groups run, a share per tile
      // (spread over its steps: in a burst they fill the line buffers and stall it). Near
      // the end there are none: the pointer is not formed past the matrix.
      const std::int64_t tiles = nsb * ng * 2 * ((nvec + kQ4kLaneVecs - 1) / kQ4kLaneVecs);
      const std::uint8_t* far = ahead > 0 ? grp + (ng + kQ4kAhead) * gbytes : grp;
      PrefetchShares next(reinterpret_cast<const char*>(far), ahead * gbytes / 64, tiles);
      std::memset(acc, 0, sizeof(float) * 8 * ng * kAccStride);
      for (std::int64_t s = 0; s < nsb; ++s) {
        for (std::int64_t gi = 0; gi < ng; ++gi) {
          unpack_q4k_lanes(grp + gi * gbytes + s * kQ4kGroupSuperBytes, wr + gi * kQ4kLaneWeightBytes);
        }
        for (std::int64_t v0 = 0; v0 < nvec; v0 += kQ4kLaneVecs) {
          const int nv = static_cast<int>(imin(kQ4kLaneVecs, nvec - v0));
          for (std::int64_t gi = 0; gi < ng; ++gi) {
            const std::uint8_t* ws = wr + gi * kQ4kLaneWeightBytes;
            for (int rq = 0; rq < 8; rq += 4) {
              kTiles[nv - 1](ws, rq, pk + (s * nvec + v0) * kQ4kLaneVecBytes,
                             acc + (8 * gi + rq) * kAccStride + 16 * v0, kAccStride, next.next());
            }
          }
        }
      }
      for (std::int64_t v = 0; v < nvec; ++v) {
        const std::int64_t n = imin(16, te - ts - 16 * v);
        float* yv = y + (ts + 16 * v) * y_stride + 8 * g;
        if (ng == 2) {
          store_lanes16(acc + 16 * v, kAccStride, n, yv, y_stride);
        } else {
          store_q8_lanes(acc + 16 * v, kAccStride, n, yv, y_stride);
          store_q8_lanes(acc + 4 * kAccStride + 16 * v, kAccStride, n, yv + 4, y_stride);
        }
      }
      g += ng;
    }
  }
}

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS

#pragma GCC diagnostic pop
