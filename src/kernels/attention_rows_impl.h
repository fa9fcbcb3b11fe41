// rows_step, compiled once per ISA level (see attention_rows.h). Included by
// attention_rows_<isa>.cc after defining ECO_ATTN_NS (the namespace) and ECO_ATTN_WIDE
// (1 where 32 vector registers are available). Everything here has internal linkage
// and calls no inline function with external linkage, so no copy compiled with
// AVX-512 flags can be merged into code every CPU runs
// (scripts/check_isa_objects.sh checks the objects).
#pragma once

#ifndef ECO_ATTN_NS
#error "define ECO_ATTN_NS before including attention_rows_impl.h"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention_rows.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"

namespace ecoserve::kernels::detail::ECO_ATTN_NS {
namespace {

constexpr bool kWide = ECO_ATTN_WIDE != 0;

// Lane `lane` (0..3, a constant after unrolling) of each 128-bit half of v, in every lane.
// Broadcasts from registers: on Zen 4 a vbroadcastss per FMA pair starved the FMA pipes.
inline __m256 lane_broadcast(__m256 v, int lane) {
  switch (lane) {
    case 0: return _mm256_shuffle_ps(v, v, 0x00);
    case 1: return _mm256_shuffle_ps(v, v, 0x55);
    case 2: return _mm256_shuffle_ps(v, v, 0xaa);
    default: return _mm256_shuffle_ps(v, v, 0xff);
  }
}

// Sum of each of a[0..8), as one vector.
inline __m256 hsum8x8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// dst[0..G) = scale * (the sum of each of a[0..G)), by the additions hsum8x8 makes
// (pairwise hadd levels, then the two 128-bit halves), so any G gives the same bits.
template <int G>
inline void store_head_sums(const __m256* a, __m256 scale, float* dst) {
  if constexpr (G >= 8) {
    _mm256_storeu_ps(dst, _mm256_mul_ps(hsum8x8(a), scale));
  } else {
    __m256 u;
    if constexpr (G == 4) {
      u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    } else if constexpr (G == 2) {
      const __m256 t = _mm256_hadd_ps(a[0], a[1]);
      u = _mm256_hadd_ps(t, t);
    } else {
      const __m256 t = _mm256_hadd_ps(a[0], a[0]);
      u = _mm256_hadd_ps(t, t);
    }
    const __m128 r = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)),
                                _mm256_castps256_ps128(scale));
    if constexpr (G == 4) {
      _mm_storeu_ps(dst, r);
    } else if constexpr (G == 2) {
      _mm_storel_pi(reinterpret_cast<__m64*>(dst), r);
    } else {
      _mm_store_ss(dst, r);
    }
  }
}

// The position-major kernel: the H = G * (kv1 - kv0) query heads (G in {1, 2, 4, 8},
// any H: a last partial vector of heads is masked; head_dim = 8 * NV) over the n <=
// kRowTile positions whose head-0 row offsets are off[0..n), folded into st;
// off[n..n_ahead) are the positions after them (prefetched). K and V rows are read
// position by position, each front to back (this machine's prefetchers lose interleaved
// streams): 8 heads are scored at a time, the softmax state is updated per tile with the
// heads in vector lanes (a head's o and l are rescaled only when its max grows), and
// every V vector is widened once for the G heads that share it. `pbuf` holds
// kRowTile * Hp floats (Hp = H rounded up to 8).
template <int NV, bool kF16, int G>
void rows_step(const float* q, int32_t kv0, int32_t kv1, const int64_t* off, int32_t n, int32_t n_ahead,
               const PagedKvView& kv, float scale, OnlineState st, float* pbuf) {
  constexpr int kHd = 8 * NV;
  constexpr int kElem = kF16 ? 2 : 4;
  const int32_t H = G * (kv1 - kv0);
  const int32_t Hp = (H + 7) & ~7;  // pbuf's row stride: heads in whole vectors
  const __m256 vscale = _mm256_set1_ps(scale);
  // Scores of every head for every position of the tile: pbuf[j * Hp + h], P positions
  // at a time so that each q vector loaded serves P positions (P * G = 8 independent
  // FMA chains; loads per FMA (G + P) / (G * P)). With 32 registers, fp16 with G = 4
  // takes P = 4 (16 chains, 4 loads per 8 FMAs); f32 measured slower so.
  constexpr int P = G >= 8 ? 1 : (kWide && kF16 && G == 4) ? 4 : 8 / G;
  // Each KV head's G sums are reduced and stored as soon as they are complete (holding
  // 8 heads' sums in registers for one 8-lane reduction spilled with 16 registers).
  auto scores = [&]<int Pn>(int32_t j0) {
    for (int32_t c0 = 0; c0 < H; c0 += 8) {
#pragma GCC unroll 8
      for (int c = 0; c < 8 / G; ++c) {
        if (c0 / G + c >= kv1 - kv0) {  // past the last head (H % 8 != 0): zero scores
#pragma GCC unroll 8
          for (int a = 0; a < Pn; ++a) for (int h = 0; h < G; ++h) pbuf[(j0 + a) * Hp + c0 + c * G + h] = 0.0f;
          continue;
        }
        const int64_t head = static_cast<int64_t>(kv0 + c0 / G + c) * kHd;
#pragma GCC unroll 8
        for (int a = 0; a < Pn; ++a) {
          if (j0 + a + kPrefetchAhead < n_ahead) {
            const char* pk = static_cast<const char*>(kv.k) + (off[j0 + a + kPrefetchAhead] + head) * kElem;
            for (int b = 0; b < kHd * kElem; b += 64) _mm_prefetch(pk + b, _MM_HINT_T1);
          }
        }
        const float* qc = q + static_cast<int64_t>(c0 + c * G) * kHd;
        __m256 acc[Pn][G];
#pragma GCC unroll 8
        for (int a = 0; a < Pn; ++a)
#pragma GCC unroll 8
          for (int h = 0; h < G; ++h) acc[a][h] = _mm256_setzero_ps();
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
          __m256 kk[Pn];
#pragma GCC unroll 8
          for (int a = 0; a < Pn; ++a) kk[a] = load8<kF16>(kv.k, off[j0 + a] + head + 8 * v);
#pragma GCC unroll 8
          for (int h = 0; h < G; ++h) {
            __m256 qv = _mm256_loadu_ps(qc + h * kHd + 8 * v);
            if constexpr (Pn > 1) asm("" : "+x"(qv));  // one load for Pn FMAs, not a memory operand in each
#pragma GCC unroll 8
            for (int a = 0; a < Pn; ++a) acc[a][h] = _mm256_fmadd_ps(qv, kk[a], acc[a][h]);
          }
        }
#pragma GCC unroll 8
        for (int a = 0; a < Pn; ++a) store_head_sums<G>(acc[a], vscale, pbuf + (j0 + a) * Hp + c0 + c * G);
      }
    }
  };
  int32_t j = 0;
  for (; j + P <= n; j += P) scores.template operator()<P>(j);
  for (; j < n; ++j) scores.template operator()<1>(j);
  // Online softmax, 8 heads per vector: m = max(m, tile max) (rescaling o and l of the
  // heads whose max grew), then p = exp(s - m), l += p.
  for (int32_t c0 = 0; c0 < H; c0 += 8) {
    // Lanes of heads c0..c0+7 that exist (all but in a last, partial vector).
    const int lanes = H - c0 < 8 ? H - c0 : 8;
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 mt = _mm256_loadu_ps(pbuf + c0);
    for (int32_t j = 1; j < n; ++j) mt = _mm256_max_ps(mt, _mm256_loadu_ps(pbuf + j * Hp + c0));
    // Lanes past the last head never grow: their scores are 0 and their m loads as 0.
    int grew = _mm256_movemask_ps(_mm256_cmp_ps(mt, _mm256_maskload_ps(st.m + c0, live), _CMP_GT_OQ));
    if (grew) {
      alignas(32) float mts[8];
      _mm256_store_ps(mts, mt);
      while (grew) {
        const int i = __builtin_ctz(grew);
        grew &= grew - 1;
        const int32_t h = c0 + i;
        const float alpha = std::exp(st.m[h] - mts[i]);  // 0 while m = -inf
        st.l[h] *= alpha;
        scale_inplace(st.o + static_cast<int64_t>(h) * kHd, alpha, kHd);
        st.m[h] = mts[i];
      }
    }
    const __m256 m = _mm256_maskload_ps(st.m + c0, live);
    __m256 l = _mm256_maskload_ps(st.l + c0, live);
    for (int32_t j = 0; j < n; ++j) {
      float* sc = pbuf + j * Hp + c0;
      const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc), m));
      _mm256_storeu_ps(sc, e);
      l = _mm256_add_ps(l, e);
    }
    _mm256_maskstore_ps(st.l + c0, live, l);
  }
  // o[h] += sum_j p[j][h] V_j[kv head of h]: for each KV head and each CH vectors
  // of head_dim, the G heads' sums over the tile's positions stay in registers and
  // o is read and written once per tile (not once per position). CH = 4 with 32
  // registers for G = 4: one head-weight shuffle per 4 FMAs, not per 2.
  constexpr int CH = G >= 8 ? 1 : (G == 4 && !kWide) ? 2 : 4;
  static_assert(NV % CH == 0);
  const char* vrow[kRowTile];  // each position's V row of KV head kv0
  const char* vahead[kRowTile];  // its row kPrefetchAhead positions on (prefetched), or null
  for (int32_t j = 0; j < n; ++j) {
    vrow[j] = static_cast<const char*>(kv.v) + (off[j] + static_cast<int64_t>(kv0) * kHd) * kElem;
    vahead[j] = j + kPrefetchAhead >= n_ahead ? nullptr
                                              : static_cast<const char*>(kv.v) +
                                                    (off[j + kPrefetchAhead] + static_cast<int64_t>(kv0) * kHd) * kElem;
  }
  for (int32_t kvh = kv0; kvh < kv1; ++kvh) {
    const int32_t hb = (kvh - kv0) * G;
    float* o = st.o + static_cast<int64_t>(hb) * kHd;
    const int64_t head_bytes = static_cast<int64_t>(kvh - kv0) * kHd * kElem;
    for (int v0 = 0; v0 < NV; v0 += CH) {
      const int64_t at = head_bytes + 8 * v0 * kElem;
      __m256 acc[G][CH];
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) acc[h][c] = _mm256_setzero_ps();
      // Each line read here is prefetched for the position kPrefetchAhead on (one
      // prefetch per line read, spread over the pass: a burst of a whole tile's
      // lines overflowed the miss queue and most were dropped).
      // The CH vectors span kChunkBytes: one line (every other chunk when 32 bytes) or several.
      constexpr int kChunkBytes = 8 * CH * kElem;
      const bool pf_line = (8 * v0 * kElem) % 64 == 0;
#pragma GCC unroll 8
      for (int32_t j = 0; j < n; ++j) {
        if (pf_line && vahead[j]) {
#pragma GCC unroll 4
          for (int b = 0; b < kChunkBytes; b += 64) _mm_prefetch(vahead[j] + at + b, _MM_HINT_T1);
        }
        __m256 vv[CH];
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) vv[c] = load8<kF16>(vrow[j] + at, 8 * c);
        const float* pj = pbuf + j * Hp + hb;
        __m256 p4[(G + 3) / 4];
        if constexpr (G >= 4) {
#pragma GCC unroll 2
          for (int b = 0; b < G / 4; ++b) p4[b] = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(pj + 4 * b));
        }
#pragma GCC unroll 8
        for (int h = 0; h < G; ++h) {
          const __m256 pb = G >= 4 ? lane_broadcast(p4[h / 4], h % 4) : _mm256_broadcast_ss(pj + h);
#pragma GCC unroll 4
          for (int c = 0; c < CH; ++c) acc[h][c] = _mm256_fmadd_ps(pb, vv[c], acc[h][c]);
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) {
          float* oh = o + h * kHd + 8 * (v0 + c);
          _mm256_storeu_ps(oh, _mm256_add_ps(_mm256_loadu_ps(oh), acc[h][c]));
        }
    }
  }
}

template <int NV, bool kF16>
RowsFn pick_rows_fn_g(int32_t g) {
  switch (g) {
    case 1: return rows_step<NV, kF16, 1>;
    case 2: return rows_step<NV, kF16, 2>;
    case 4: return rows_step<NV, kF16, 4>;
    case 8: return rows_step<NV, kF16, 8>;
    default: return nullptr;
  }
}

}  // namespace

RowsFn pick_rows_fn(int32_t hd, int32_t g, bool f16) {
  switch (hd) {
    case 64: return f16 ? pick_rows_fn_g<8, true>(g) : pick_rows_fn_g<8, false>(g);
    case 128: return f16 ? pick_rows_fn_g<16, true>(g) : pick_rows_fn_g<16, false>(g);
    default: return nullptr;
  }
}

}  // namespace ecoserve::kernels::detail::ECO_ATTN_NS
