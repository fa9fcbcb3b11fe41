// The decode kernel's value pass in half precision (AVX512-FP16), for fp16 caches: a fragment
// of attention_rows_impl.h, included inside its namespace where ECO_ATTN_FP16_MATH is set
// (attention_rows_avx512fp16.cc only), after values_pass. Internal linkage, no inline
// function with external linkage (scripts/check_isa_objects.sh).
//
// values_pass widens every V register to float (vcvtph2ps: two operations on the ports
// the FMAs use) and runs G * head_dim / 16 float FMAs per position and KV head. Here a
// position's V row is multiplied as it lies in the cache, 32 halves per register, into
// half-precision accumulators: head_dim / 32 FMAs per head, no conversion; the
// accumulators are widened and added to o once per tile. The tile's weights p (in [0, 1])
// are rounded to fp16 as p / 16, each duplicated into a dword so that one broadcast from
// memory (a load, no shuffle) puts it in every lane. Intel Xeon (family 6 model 167),
// attention_bench, one thread, 4096 positions with K and V in L2: Llama 32/8 d 128 775-830 ->
// 607-618 us, synth 1b 32/4 d 64 312-356 -> 287-301; from DRAM within the noise, where the
// reads bound the kernel (docs/kernels.md, thirty-seventh pass). The two chains added in
// fp16 before they are widened (two conversions per 32 columns, not four, and no float
// add; the weights made 16 at a time with one vpermw): synth 1b in L2 290-297 -> 262-266
// us, Llama from DRAM 1373-1381 -> 1319-1332 (fifty-fourth pass).
//
// Rounding: the weights and each fused multiply-add are rounded to fp16 (11 significant
// bits); a column sums its tile's positions in two chains (even and odd positions, at most
// 8 terms each), whose sum is rounded to fp16 once more, then widened and times 16 (exact).
// So a tile's sum differs from the exact sum of p_j v_j by at most about 10 * 2^-11 sum_j
// p_j |v_j| (plus, where p_j / 16 or a product falls below fp16's normal range, 2^-21 (1 +
// |v_j|) per term); attention_test's bound. With p / 16 a chain's sum is at most max |v| / 2
// (p <= 1) and the two chains' at most max |v|: it cannot overflow whatever an fp16 cache
// holds (at p / 8 it could: HalfPrecisionValuePassDoesNotOverflow).
#pragma once

#ifndef ECO_ATTN_FP16_MATH
#error "attention_rows_fp16_impl.h is a fragment of attention_rows_impl.h"
#endif

// The weights of a tile's n positions, pbuf[j * Hp + h] (floats, h < Hp), as fp16(p / 16)
// in both halves of a dword, in place.
inline void weights_to_half_pairs(int32_t n, int32_t Hp, float* pbuf) {
  const int64_t total = static_cast<int64_t>(n) * Hp;  // Hp is a multiple of 8
  // Half i of the 16 rounded weights into both halves of dword i.
  const __m512i dup = _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8,
                                       7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  for (int64_t i = 0; i < total; i += 16) {
    const __mmask16 m = total - i >= 16 ? 0xffff : 0x00ff;  // the last 8 where total is not a multiple of 16
    const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, pbuf + i), _mm512_set1_ps(0.0625f));
    const __m256i h = _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_mask_storeu_epi32(pbuf + i, m, _mm512_permutexvar_epi16(dup, _mm512_castsi256_si512(h)));
  }
}

// Registers of head_dim (32 halves each) per pass of values_pass_ph: two chains x G heads x
// CH accumulators, at most 16 of the 32 registers.
template <int G, int kRegs>
constexpr int kHalfValueRegs = (G >= 8 ? 1 : G == 4 ? 2 : 4) < kRegs ? (G >= 8 ? 1 : G == 4 ? 2 : 4) : kRegs;

// values_pass for an fp16 cache on AVX512-FP16: o[h] += sum_j p[j][h] V_j[kv head of h]
// for the tile's n positions (pbuf as values_pass reads it; overwritten). The same
// prefetches as values_pass.
template <class L, int NV, int G>
inline void values_pass_ph(int32_t kv0, int32_t kv1, const int64_t* off, int32_t n, int32_t n_ahead,
                           const PagedKvView& kv, int32_t Hp, float* pbuf, float* o_all) {
  constexpr int kHd = 8 * NV;
  constexpr int kRegs = kHd / 32;
  constexpr int CH = kHalfValueRegs<G, kRegs>;
  constexpr bool kRowOrder = L::kRowOrderPrefetch;
  static_assert(kHd % 32 == 0 && kRegs % CH == 0);
  weights_to_half_pairs(n, Hp, pbuf);
  const auto* pw = reinterpret_cast<const int32_t*>(pbuf);
  const char* vrow[L::kTile];    // each position's V row of KV head kv0
  const char* vahead[L::kTile];  // its row kPrefetchAhead positions on, or null (!kRowOrder)
  value_rows<kRowOrder>(kv, off, n, n_ahead, kv0, kHd, 2, vrow, vahead);
  RowPrefetch pf(kv.v, off, kRowOrder ? n : 0, n_ahead, kv0, kv1, kHd, 2);  // idle unless kRowOrder
  for (int32_t kvh = kv0; kvh < kv1; ++kvh) {
    const int32_t hb = (kvh - kv0) * G;
    float* o = o_all + static_cast<int64_t>(hb) * kHd;
    const int64_t head_bytes = static_cast<int64_t>(kvh - kv0) * kHd * 2;
    for (int v0 = 0; v0 < kRegs; v0 += CH) {
      const int64_t at = head_bytes + 64 * v0;
      __m512h acc[2][G][CH];
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s)
#pragma GCC unroll 8
        for (int h = 0; h < G; ++h)
#pragma GCC unroll 4
          for (int c = 0; c < CH; ++c) acc[s][h][c] = _mm512_setzero_ph();
      // Position j into chain s: CH lines of V (one line per register), prefetched one
      // line per line read.
      auto position = [&](int32_t j, auto chain) {
        constexpr int s = decltype(chain)::value;
        if constexpr (kRowOrder) {
          pf.issue(CH);
        } else if (vahead[j]) {
#pragma GCC unroll 4
          for (int c = 0; c < CH; ++c) _mm_prefetch(vahead[j] + at + 64 * c, _MM_HINT_T1);
        }
        __m512h vv[CH];
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) vv[c] = _mm512_castsi512_ph(_mm512_loadu_si512(vrow[j] + at + 64 * c));
#pragma GCC unroll 8
        for (int h = 0; h < G; ++h) {
          const __m512h pb = _mm512_castsi512_ph(_mm512_set1_epi32(pw[j * Hp + hb + h]));
#pragma GCC unroll 4
          for (int c = 0; c < CH; ++c) acc[s][h][c] = _mm512_fmadd_ph(pb, vv[c], acc[s][h][c]);
        }
      };
      int32_t j = 0;
#pragma GCC unroll 4
      for (; j + 1 < n; j += 2) {
        position(j, std::integral_constant<int, 0>{});
        position(j + 1, std::integral_constant<int, 1>{});
      }
      if (j < n) position(j, std::integral_constant<int, 0>{});
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) {
          const __m512i a = _mm512_castph_si512(_mm512_add_ph(acc[0][h][c], acc[1][h][c]));
          float* oh = o + h * kHd + 32 * (v0 + c);
          const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(a));
          const __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(a, 1));
          _mm512_storeu_ps(oh, _mm512_fmadd_ps(lo, _mm512_set1_ps(16.0f), _mm512_loadu_ps(oh)));
          _mm512_storeu_ps(oh + 16, _mm512_fmadd_ps(hi, _mm512_set1_ps(16.0f), _mm512_loadu_ps(oh + 16)));
        }
    }
  }
}
