// The 512-bit decode kernel's score passes (scores16 for GQA groups of 2 and 4, scores_lanes
// for groups of 8, in float or, where ECO_ATTN_BF16_SCORES is set, on vdpbf16ps) and their
// reductions: a fragment of attention_rows_impl.h, included inside its namespace after
// store_head_sums. Internal linkage, no inline function with external linkage
// (scripts/check_isa_objects.sh).
#pragma once

#if ECO_ATTN_WIDE
// The sums of a[0..16) in one vector: lane 4k + m holds the sum of a[4m + k]. Four
// levels, each adding pairs of vectors' halves (256-, 128-, 64-, then 32-bit pieces):
// 30 shuffles and 15 additions for 16 sums.
inline __m512 transpose_sum16(const __m512* a) {
  __m512 r[8], s[4], t[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], 0xdd));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    const __m512d x = _mm512_castps_pd(s[2 * i]), y = _mm512_castps_pd(s[2 * i + 1]);
    t[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  return _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], 0x88), _mm512_shuffle_ps(t[0], t[1], 0xdd));
}

#if ECO_ATTN_FP16_MATH
// The half-precision score pass's reduction (scores_lanes_half) for GQA groups of G = 8 or 4:
// position a's G scores are the sums of the R = 32 / G lanes R h .. R h + R - 1 of acc0[a] +
// acc1[a] (the two chains added in fp16, then widened), stored at prow[a * Hp + h]. False if
// any score is not finite (a product or a sum beyond fp16's range).
template <int G, int Pn>
inline bool store_group_sums(const __m512h* acc0, const __m512h* acc1, float* prow, int32_t Hp) {
  static_assert(G == 8 || G == 4);
  // After the pair sums, positions x and y: G = 8, block h of t holds [x's head h, x's head 4 +
  // h, y's head h, y's head 4 + h], gathered into x's 8 heads, then y's; G = 4, after a last
  // level across 128-bit blocks, x's heads 0-3 are lanes 0, 8, 1, 9 and y's 2, 10, 3, 11.
  const __m512i idx = G == 8 ? _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)
                             : _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
  __mmask16 bad = 0;
#pragma GCC unroll 4
  for (int a = 0; a < Pn; a += 2) {
    __m512 s[2];
#pragma GCC unroll 2
    for (int b = 0; b < 2; ++b) {
      if (a + b >= Pn) {
        s[b] = _mm512_setzero_ps();
        continue;
      }
      const __m512i x = _mm512_castph_si512(_mm512_add_ph(acc0[a + b], acc1[a + b]));
      const __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(x));        // the first G / 2 heads
      const __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(x, 1));  // the others
      // block k: [lo's lanes 4k + 0 + 1, 4k + 2 + 3, hi's lanes 4k + 0 + 1, 4k + 2 + 3]
      s[b] = _mm512_add_ps(_mm512_shuffle_ps(lo, hi, 0x88), _mm512_shuffle_ps(lo, hi, 0xdd));
    }
    // block k: [x's lo block k, x's hi block k, y's lo block k, y's hi block k], each summed
    __m512 t = _mm512_add_ps(_mm512_shuffle_ps(s[0], s[1], 0x88), _mm512_shuffle_ps(s[0], s[1], 0xdd));
    // G = 4: blocks 0 and 1 (2 and 3) hold the two halves of heads 0 and 2 (1 and 3)
    if constexpr (G == 4) t = _mm512_add_ps(t, _mm512_shuffle_f32x4(t, t, 0xb1));
    const __m512 u = _mm512_permutexvar_ps(idx, t);
    bad |= _mm512_fpclass_ps_mask(u, 0x99) & (G == 8 ? 0xffff : 0xff);  // NaN or infinity
    float* px = prow + static_cast<int64_t>(a) * Hp;
    if constexpr (G == 8) {
      _mm256_storeu_ps(px, _mm512_castps512_ps256(u));
      if (a + 1 < Pn) _mm256_storeu_ps(px + Hp, _mm512_extractf32x8_ps(u, 1));
    } else {
      _mm_storeu_ps(px, _mm512_castps512_ps128(u));
      if (a + 1 < Pn) _mm_storeu_ps(px + Hp, _mm512_extractf32x4_ps(u, 1));
    }
  }
  return bad == 0;
}
#endif

#if ECO_ATTN_FP16_MATH
// The score pass of GQA groups of G = 8 or 4 for fp16 caches in half precision (AVX512-FP16),
// 32 multiply-adds per FMA where a float FMA does 16, and no widening of K: with R = 32 / G,
// 16-bit lane R h + t of query register c holds q_h[R c + t] (qh: interleave_half_query8 or 4's
// layout of the KV head's queries), and each FMA multiplies it by K values R c .. R c + R - 1
// of one position in every lane group (one vbroadcastsd or vbroadcasti32x4 from the cache).
// Even and odd c in two chains per position, added in fp16 and widened once
// (store_group_sums). Rounding: the query rounded to fp16, every product and sum in fp16 (chains
// of kHd / (2R) terms), so a score differs from q . K by at most about (kHd / (2R) + 3) 2^-11
// sum_i |q_i K_i| (attention_test's bound). False, with prow overwritten, where a score came
// out infinite or NaN (beyond fp16's range): the caller then scores the group in float.
template <int NV, int G, int Pn, class Tick>
inline bool scores_lanes_half(const uint16_t* qh, const void* k, const int64_t* off, int64_t head, float* prow,
                              int32_t Hp, Tick& tick) {
  static_assert(G == 8 || G == 4);
  constexpr int kHd = 8 * NV;
  constexpr int R = 32 / G;
  constexpr int kSteps = kHd / R;
  const char* rows[Pn];
#pragma GCC unroll 8
  for (int a = 0; a < Pn; ++a) rows[a] = reinterpret_cast<const char*>(static_cast<const uint16_t*>(k) + off[a] + head);
  __m512h acc[2][Pn];
#pragma GCC unroll 2
  for (int s = 0; s < 2; ++s)
#pragma GCC unroll 8
    for (int a = 0; a < Pn; ++a) acc[s][a] = _mm512_setzero_ph();
#pragma GCC unroll 32
  for (int c = 0; c < kSteps; ++c) {
    tick(c, kSteps);
    __m512h qv = _mm512_castsi512_ph(_mm512_loadu_si512(qh + 32 * c));
    if constexpr (Pn > 1) asm("" : "+v"(qv));  // one load for Pn FMAs
#pragma GCC unroll 8
    for (int a = 0; a < Pn; ++a) {
      __m512h kv;
      if constexpr (R == 4) {
        double word;
        std::memcpy(&word, rows[a] + 8 * c, sizeof word);
        kv = _mm512_castpd_ph(_mm512_set1_pd(word));
      } else {
        kv = _mm512_castsi512_ph(
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[a] + 16 * c))));
      }
      acc[c % 2][a] = _mm512_fmadd_ph(qv, kv, acc[c % 2][a]);
    }
  }
  return store_group_sums<G, Pn>(acc[0], acc[1], prow, Hp);
}
#endif

// The zmm kernel's score pass for Pn positions (Pn * G <= 16) and the G query heads of
// one KV head: one head's 16 dimensions per register, the K slice of 16 values (fp16
// widened, or f32) loaded once for the G heads, one chain of FMAs per (position, head), the 16 chains
// reduced together (transpose_sum16). pbuf[(j0 + a) * Hp + h0 + h] = q_h . K_a
// for the positions at off[j0 + a], head `head` (its first element in a row); q
// holds each head's hd floats in turn. Not the bits of Lanes8's chains: the results
// agree with them within float rounding (attention_test states the tolerance). tick(v,
// hd / 16) before each 16 dimensions (score_tiles' prefetch).
template <int NV, int G, int Pn, bool kF16, class Tick>
inline void scores16(const float* qc, const void* k, const int64_t* off, int64_t head, float* prow,
                     int32_t Hp, Tick&& tick, [[maybe_unused]] const uint16_t* qh = nullptr) {
  constexpr int kHd = 8 * NV;
  static_assert(Pn * G <= 16 && kHd % 16 == 0);
#if ECO_ATTN_FP16_MATH
  if constexpr (kF16 && G == 4) {
    // In half precision where the caller laid the queries out in fp16 too (else qh is null).
    if (qh != nullptr && scores_lanes_half<NV, 4, Pn>(qh, k, off, head, prow, Hp, tick)) return;
  }
#endif
  __m512 acc[Pn][G];
#pragma GCC unroll 8
  for (int a = 0; a < Pn; ++a)
#pragma GCC unroll 8
    for (int h = 0; h < G; ++h) acc[a][h] = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int v = 0; v < kHd / 16; ++v) {
    tick(v, kHd / 16);
    __m512 kk[Pn];
#pragma GCC unroll 8
    for (int a = 0; a < Pn; ++a) {
      if constexpr (kF16) {
        kk[a] = _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(k) + off[a] + head + 16 * v)));
      } else {
        kk[a] = _mm512_loadu_ps(static_cast<const float*>(k) + off[a] + head + 16 * v);
      }
    }
#pragma GCC unroll 8
    for (int h = 0; h < G; ++h) {
      __m512 qv = _mm512_loadu_ps(qc + h * kHd + 16 * v);
      if constexpr (Pn > 1) asm("" : "+v"(qv));  // one load for Pn FMAs, not a memory operand in each
#pragma GCC unroll 8
      for (int a = 0; a < Pn; ++a) acc[a][h] = _mm512_fmadd_ps(qv, kk[a], acc[a][h]);
    }
  }
  // Lane a * G + h of the sums is (a, h): it is lane 4k + m, a[4m + k].
  __m512 in[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) in[i] = _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int i = 0; i < Pn * G; ++i) in[4 * (i % 4) + i / 4] = acc[i / G][i % G];
  const __m512 s = transpose_sum16(in);
#pragma GCC unroll 8
  for (int a = 0; a < Pn; ++a) {
    float* dst = prow + static_cast<int64_t>(a) * Hp;
    if constexpr (G == 8) {
      _mm256_storeu_ps(dst, a % 2 == 0 ? _mm512_castps512_ps256(s) : _mm512_extractf32x8_ps(s, 1));
    } else if constexpr (G == 4) {
      _mm_storeu_ps(dst, a == 0 ? _mm512_castps512_ps128(s)
                         : a == 1 ? _mm512_extractf32x4_ps(s, 1)
                         : a == 2 ? _mm512_extractf32x4_ps(s, 2)
                                  : _mm512_extractf32x4_ps(s, 3));
    } else {
      static_assert(G == 2);
      const __m128 b = a / 2 == 0 ? _mm512_castps512_ps128(s)
                       : a / 2 == 1 ? _mm512_extractf32x4_ps(s, 1)
                       : a / 2 == 2 ? _mm512_extractf32x4_ps(s, 2)
                                    : _mm512_extractf32x4_ps(s, 3);
      if (a % 2 == 0) {
        _mm_storel_pi(reinterpret_cast<__m64*>(dst), b);
      } else {
        _mm_storeh_pi(reinterpret_cast<__m64*>(dst), b);
      }
    }
  }
}
#endif

#if ECO_ATTN_WIDE
// scores_lanes' reduction: position a's 8 scores are the pair sums of acc[a] (lanes 2h, 2h +
// 1 for head h), stored at prow[a * Hp + h]. Pairs of positions: block k of t = [x's heads
// 2k, 2k + 1, y's heads 2k, 2k + 1].
template <int Pn>
inline void store_lane_pair_sums(const __m512* acc, float* prow, int32_t Hp) {
  const __m512i idx = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
#pragma GCC unroll 4
  for (int a = 0; a < Pn; a += 2) {
    const __m512 x = acc[a], y = a + 1 < Pn ? acc[a + 1] : _mm512_setzero_ps();
    const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xdd));
    const __m512 u = _mm512_permutexvar_ps(idx, t);
    _mm256_storeu_ps(prow + static_cast<int64_t>(a) * Hp, _mm512_castps512_ps256(u));
    if (a + 1 < Pn) _mm256_storeu_ps(prow + static_cast<int64_t>(a + 1) * Hp, _mm512_extractf32x8_ps(u, 1));
  }
}

// scores_lanes' chains: acc[a] (a < Pn) = mac(load_q(c), the 64-bit word c of rows[a] in
// every lane pair, ...) over c < kSteps from zero, one chain per position; each query
// register is loaded once for the Pn positions, each word broadcast from memory (a load,
// not a shuffle); tick(c, kSteps) before step c.
template <int Pn, int kSteps, class LoadQ, class Mac, class Tick>
inline void broadcast_chains(__m512* acc, const void* const* rows, LoadQ load_q, Mac mac, Tick& tick) {
#pragma GCC unroll 8
  for (int a = 0; a < Pn; ++a) acc[a] = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int c = 0; c < kSteps; ++c) {
    tick(c, kSteps);
    const auto qv = load_q(c);
#pragma GCC unroll 8
    for (int a = 0; a < Pn; ++a) {
      double word;
      std::memcpy(&word, static_cast<const char*>(rows[a]) + 8 * c, sizeof word);
      acc[a] = mac(qv, _mm512_set1_pd(word), acc[a]);
    }
  }
}

// The zmm kernel's score pass for G = 8 (zmm_query_lanes): the 8 query heads of one KV
// head in lanes, two dimensions each, so a K row needs no reduction across lanes. qt is
// the KV head's queries as interleave_query lays them out (register c holds q_h[2c + r]
// in lane 2h + r); each FMA multiplies it by K values 2c and 2c + 1 of one position in
// every lane pair (vbroadcastsd from memory: a load, not a shuffle), and a position's 8
// scores are its accumulator's pair sums (3 shuffles and an add per 2 positions, where
// scores16 spends 45 operations per 2). fp16 K rows are widened into kf first, then read
// as f32. pbuf[(j0 + a) * Hp + h0 + h] = q_h . K_a for the positions at off[j0 + a] (a <
// Pn); tick as broadcast_chains'. Xeon family 6 model 207, attention_bench, 4096 positions, one thread, synth 1b's
// 32/4, d 64, K and V in L2: fp16 453-457 -> 362-364 us, f32 366-369 -> 335-347. With G =
// 4 (R = 4, vbroadcastf32x4) the Llama shape's 32/8, d 128 ran 5-15% slower: one load per
// FMA, where scores16 loads one per two, and its reduction is a quarter of G = 8's.
template <int NV, int G, int Pn, bool kF16, class Tick>
inline void scores_lanes(const float* qt, const void* k, const int64_t* off, int64_t head, float* prow,
                         int32_t Hp, Tick&& tick, [[maybe_unused]] const uint16_t* qh = nullptr) {
  constexpr int kHd = 8 * NV;
  static_assert(G == 8 && zmm_query_lanes(G) == 2 && kHd % 16 == 0);
#if ECO_ATTN_BF16_SCORES
  if constexpr (kF16) {
    // K rows rounded to bf16 (their float values' nearest, ties to even), then 4
    // dimensions of one position per vdpbf16ps: lane 2h + r multiplies q_h[4c + 2r],
    // q_h[4c + 2r + 1] (interleave_query's bf16 layout) by K values 4c + 2r, 4c + 2r + 1.
    alignas(64) uint16_t kb[Pn * kHd];
#pragma GCC unroll 8
    for (int a = 0; a < Pn; ++a) {
      const uint16_t* src = static_cast<const uint16_t*>(k) + off[a] + head;
#pragma GCC unroll 8
      for (int v = 0; v < kHd / 32; ++v) {
        const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32 * v)));
        const __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32 * v + 16)));
        _mm512_store_si512(kb + a * kHd + 32 * v, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
      }
    }
    const uint16_t* qb = reinterpret_cast<const uint16_t*>(qt);
    const void* rows[Pn];
#pragma GCC unroll 8
    for (int a = 0; a < Pn; ++a) rows[a] = kb + a * kHd;
    __m512 acc[Pn];
    // Word c of a row: K values 4c .. 4c + 3.
    broadcast_chains<Pn, kHd / 4>(
        acc, rows, [qb](int c) { return _mm512_loadu_si512(qb + 32 * c); },
        [](__m512i qv, __m512d w, __m512 s) {
          return _mm512_dpbf16_ps(s, (__m512bh)qv, (__m512bh)_mm512_castpd_si512(w));
        },
        tick);
    store_lane_pair_sums<Pn>(acc, prow, Hp);
    return;
  }
#endif
#if ECO_ATTN_FP16_MATH
  if constexpr (kF16) {
    // In half precision where the caller laid the queries out in fp16 too (else qh is null).
    if (qh != nullptr && scores_lanes_half<NV, 8, Pn>(qh, k, off, head, prow, Hp, tick)) return;
  }
#endif
  const void* kr[Pn];
  alignas(64) float kf[kF16 ? Pn * kHd : 1];
#pragma GCC unroll 8
  for (int a = 0; a < Pn; ++a) {
    if constexpr (kF16) {
      const uint16_t* src = static_cast<const uint16_t*>(k) + off[a] + head;
#pragma GCC unroll 8
      for (int v = 0; v < kHd / 16; ++v) {
        _mm512_store_ps(kf + a * kHd + 16 * v,
                        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 16 * v))));
      }
      kr[a] = kf + a * kHd;
    } else {
      kr[a] = static_cast<const float*>(k) + off[a] + head;
    }
  }
  __m512 acc[Pn];
  // Word c of a row: K values 2c and 2c + 1.
  broadcast_chains<Pn, kHd / 2>(
      acc, kr, [qt](int c) { return _mm512_loadu_ps(qt + 16 * c); },
      [](__m512 qv, __m512d w, __m512 s) { return _mm512_fmadd_ps(qv, _mm512_castpd_ps(w), s); }, tick);
  store_lane_pair_sums<Pn>(acc, prow, Hp);
}
#endif
