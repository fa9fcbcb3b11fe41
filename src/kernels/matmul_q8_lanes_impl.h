// Q8_0 weights in kRows8 against many tokens with the tokens in the lanes (the
// avx512vnni-zmm level; included by matmul_quant_avx512vnni.cc after
// matmul_packed_impl.h, with its one-definition rules).
//
// packed_tile_wide holds rows in the lanes: a 512-bit register is two kRows8 groups,
// joined by one vinserti64x4 per chunk and pair, and on a core where every 512-bit
// instruction issues on the two ports vpdpbusd uses (Intel server cores) those
// inserts cost 16 of every ~176 vector instructions. Here a register holds 16 tokens'
// 4 activation bytes (packed per call), and each row's 4 weight bytes of a chunk are
// broadcast from memory (a load, no vector port): no insert. Per block and tile of 4
// rows x 48 tokens: 96 vpdpbusd, 3 loads of tokens and 4 broadcasts per chunk, then
// per row and register of tokens a conversion, the product dx * dw and the FMA: 96 of
// ~134 vector instructions (packed_tile_wide's 2 x 7: 112 of ~176).
// Emerald Rapids Xeon (family 6 model 207), one thread, against packed_tile_wide:
// kernels_bench 2048 x 768 x 512 tokens 3941-3962 -> 3733-3779 us; BM_Synth1bMatmuls
// (weights from DRAM) 512 tokens 2727-3240 -> 2521-2698 ms, 64 402-404 -> 343-347, 32
// 194-196 -> 183-188, but 24 164-169 -> 183-189 and 16 128-158 -> 148-179 (hence from 32);
// synth 1b Q8_0 pp512 172-178 -> 186-190 tok/s (two threads 320-342 -> 365-366), batch-32
// decode 134-139 -> 141-143 (docs/kernels.md, sixty-seventh pass).
//
// The arithmetic is packed_tile's, lane by lane: the exact isum from -128 * sum(x)
// (QuantizedActs::xt) plus the biased weights times q, then acc = fma(float(isum),
// dw * dx, acc), blocks ascending (dx * dw and dw * dx are the same float). So a
// token's row is bitwise what every other kRows8 kernel gives it.
#pragma once

#if ECO_QUANT_ISA != 2
#error "matmul_q8_lanes_impl.h is for the avx512vnni build"
#endif

// GCC bug 105593 (see matmul_packed_impl.h): its 512-bit intrinsics' "undefined" vector.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ecoserve::kernels::detail::ECO_QUANT_NS {
namespace {

// Bytes per block of 32 columns and register of 16 tokens in the packed activations:
// q as [8 chunks][16 tokens][4], then xt [16] int32 and d [16] float.
constexpr std::int64_t kQ8LaneBlockBytes = 512 + 64 + 64;
// Tokens packed at once (their activations stay in L2 while every group passes) and
// per tile (registers of 16 tokens), rows per tile.
constexpr int kQ8LaneVecs = 3;
constexpr int kQ8LaneRows = 4;
constexpr std::int64_t kQ8LaneChunkTokens = 96;
static_assert(kQ8LaneChunkTokens / 16 * kQ8LaneBlockBytes <= 4 * kQuantScratchFloatsPerBlock);

// Tokens [ts, te) of a (at most kQ8LaneChunkTokens) into pk: register v of 16 tokens,
// block b at pk + (v * nb + b) * kQ8LaneBlockBytes; the tokens past te read as zero.
void pack_q8_lanes(const QuantizedActs& a, std::int64_t ts, std::int64_t te, std::uint8_t* pk) {
  const std::int64_t nb = a.nb, nvec = (te - ts + 15) / 16;
  for (std::int64_t v = 0; v < nvec; ++v) {
    for (std::int64_t b = 0; b < nb; ++b) {
      std::uint8_t* base = pk + (v * nb + b) * kQ8LaneBlockBytes;
      std::int32_t* xt = reinterpret_cast<std::int32_t*>(base + 512);
      float* d = reinterpret_cast<float*>(base + 576);
      for (int i = 0; i < 16; ++i) {
        const std::int64_t t = ts + 16 * v + i;
        if (t < te) {
          const std::int8_t* q = a.q + t * a.q_stride + 32 * b;
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) std::memcpy(base + 64 * c + 4 * i, q + 4 * c, 4);
          xt[i] = a.xt[t * nb + b];
          d[i] = a.d[t * nb + b];
        } else {
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) std::memset(base + 64 * c + 4 * i, 0, 4);
          xt[i] = 0;
          d[i] = 0.0f;
        }
      }
    }
  }
}

// Rows r0 .. r0 + NR - 1 of the group at grp times the TV registers of tokens at pk
// (the first; the next ones nb * kQ8LaneBlockBytes apart) into out [NR][TV * 16].
// pf: lines of the next group to prefetch into L2, spread over the blocks.
template <int NR, int TV>
void q8_lanes_tile(const std::uint8_t* grp, int r0, const std::uint8_t* pk, std::int64_t nb, float* out,
                   TilePrefetch pf) {
  const std::int64_t pf_per = pf.per_step(nb);
  __m512 acc[NR][TV];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) acc[r][v] = _mm512_setzero_ps();
  const std::int64_t vstride = nb * kQ8LaneBlockBytes;
  for (std::int64_t b = 0; b < nb; ++b) {
    pf.issue(b * pf_per, pf_per);
    const Q8BlockOffsets at = q8_block_offsets(nb, b);
    alignas(32) float dw[8];
    _mm256_store_ps(dw, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grp + at.scales))));
    const std::uint8_t* wq = grp + at.quants + 4 * r0;
    const std::uint8_t* xb = pk + b * kQ8LaneBlockBytes;
    __m512i isum[NR][TV];
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) {
      const __m512i start = _mm512_load_si512(xb + v * vstride + 512);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) isum[r][v] = start;
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      __m512i xv[TV];
#pragma GCC unroll 4
      for (int v = 0; v < TV; ++v) xv[v] = _mm512_load_si512(xb + v * vstride + 64 * c);
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        std::int32_t w4;
        std::memcpy(&w4, wq + 32 * c + 4 * r, 4);
        const __m512i wv = _mm512_set1_epi32(w4);
#pragma GCC unroll 4
        for (int v = 0; v < TV; ++v) isum[r][v] = _mm512_dpbusd_epi32(isum[r][v], wv, xv[v]);
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) {
      const __m512 dx = _mm512_load_ps(reinterpret_cast<const float*>(xb + v * vstride + 576));
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][v]), _mm512_mul_ps(dx, _mm512_set1_ps(dw[r0 + r])),
                                    acc[r][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < TV; ++v) _mm512_store_ps(out + r * (TV * 16) + 16 * v, acc[r][v]);
}

// The 4 rows x 16 tokens at out (rows `stride` floats apart) into y, token t's 4 results at
// y + t * y_stride, for the first n tokens: two rounds of unpacks leave token 4k + i's 4 rows
// in 128-bit lane k of register i.
inline void store_q8_lanes(const float* out, std::int64_t stride, std::int64_t n, float* y, std::int64_t y_stride) {
  static_assert(kQ8LaneRows == 4);
  const __m512 r0 = _mm512_load_ps(out), r1 = _mm512_load_ps(out + stride);
  const __m512 r2 = _mm512_load_ps(out + 2 * stride), r3 = _mm512_load_ps(out + 3 * stride);
  const __m512 a = _mm512_unpacklo_ps(r0, r1), b = _mm512_unpackhi_ps(r0, r1);
  const __m512 c = _mm512_unpacklo_ps(r2, r3), d = _mm512_unpackhi_ps(r2, r3);
  const __m512d z[4] = {_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(c)),
                        _mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(c)),
                        _mm512_unpacklo_pd(_mm512_castps_pd(b), _mm512_castps_pd(d)),
                        _mm512_unpackhi_pd(_mm512_castps_pd(b), _mm512_castps_pd(d))};
  if (n == 16) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512 zi = _mm512_castpd_ps(z[i]);
      _mm_storeu_ps(y + i * y_stride, _mm512_castps512_ps128(zi));
      _mm_storeu_ps(y + (4 + i) * y_stride, _mm512_extractf32x4_ps(zi, 1));
      _mm_storeu_ps(y + (8 + i) * y_stride, _mm512_extractf32x4_ps(zi, 2));
      _mm_storeu_ps(y + (12 + i) * y_stride, _mm512_extractf32x4_ps(zi, 3));
    }
    return;
  }
  alignas(64) float tmp[4][16];
  for (int i = 0; i < 4; ++i) _mm512_store_ps(tmp[i], _mm512_castpd_ps(z[i]));
  for (std::int64_t t = 0; t < n; ++t) std::memcpy(y + t * y_stride, &tmp[t % 4][4 * (t / 4)], 4 * sizeof(float));
}

using Q8LanesTileFn = void (*)(const std::uint8_t*, int, const std::uint8_t*, std::int64_t, float*, TilePrefetch);

// Weight rows [r0, r1) (multiples of 8) of a kRows8 Q8_0 matrix times tokens [t0, t1):
// per chunk of kQ8LaneChunkTokens tokens, the activations packed into scratch
// (kQuantScratchFloatsPerBlock floats per block), then every group's rows against them.
void rows8_q8_lanes(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                    std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride,
                    float* scratch) {
  static constexpr Q8LanesTileFn kTiles[kQ8LaneVecs] = {
      &q8_lanes_tile<kQ8LaneRows, 1>, &q8_lanes_tile<kQ8LaneRows, 2>, &q8_lanes_tile<kQ8LaneRows, 3>};
  const std::int64_t nb = a.nb, gbytes = 8 * static_cast<std::int64_t>(row_bytes);
  auto* pk = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) / 64 * 64);
  alignas(64) float out[kQ8LaneRows * kQ8LaneVecs * 16];
  for (std::int64_t ts = t0; ts < t1; ts += kQ8LaneChunkTokens) {
    const std::int64_t te = imin(t1, ts + kQ8LaneChunkTokens), nvec = (te - ts + 15) / 16;
    pack_q8_lanes(a, ts, te, pk);
    const std::int64_t g1 = r1 / 8, tiles = 8 / kQ8LaneRows * ((nvec + kQ8LaneVecs - 1) / kQ8LaneVecs);
    for (std::int64_t g = r0 / 8; g < g1; ++g) {
      const std::uint8_t* grp = w + g * gbytes;
      // The next group's weights come into L2 while this one's tiles run, a share each.
      PrefetchShares next(reinterpret_cast<const char*>(grp + gbytes), g + 1 < g1 ? gbytes / 64 : 0, tiles);
      for (int rq = 0; rq < 8; rq += kQ8LaneRows) {
        for (std::int64_t v0 = 0; v0 < nvec; v0 += kQ8LaneVecs) {
          const int nv = static_cast<int>(imin(kQ8LaneVecs, nvec - v0));
          kTiles[nv - 1](grp, rq, pk + v0 * nb * kQ8LaneBlockBytes, nb, out, next.next());
          const std::int64_t tb = ts + 16 * v0, tn = imin(te - tb, 16 * nv);
          for (int v = 0; v < nv; ++v) store_q8_lanes(out + 16 * v, nv * 16, imin(16, tn - 16 * v),
                                                       y + (tb + 16 * v) * y_stride + 8 * g + rq, y_stride);
        }
      }
    }
  }
}

// kLanes (a tokens-in-lanes kernel: rows8_q8_lanes, rows8_q4k_lanes, rows_q6k_lanes) from
// kMinTokens tokens on where the QuantizedActs switch kOn (if any) asks for it, else kRows
// (rows in the lanes).
constexpr std::int64_t kLanesMinTokens = 32;
template <std::int64_t kMinTokens, bool QuantizedActs::*kOn, QuantRowsFn kLanes, QuantRowsFn kRows>
void lanes_from(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0,
                std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride, float* scratch) {
  bool on = t1 - t0 >= kMinTokens;
  if constexpr (kOn != nullptr) on = on && a.*kOn;
  if (on) {
    kLanes(w, row_bytes, a, r0, r1, t0, t1, y, y_stride, scratch);
  } else {
    kRows(w, row_bytes, a, r0, r1, t0, t1, y, y_stride, scratch);
  }
}

}  // namespace
}  // namespace ecoserve::kernels::detail::ECO_QUANT_NS

#pragma GCC diagnostic pop
