// rows_step and chunk_key_block, compiled once per ISA level (see attention_rows.h). Included by
// attention_rows_<isa>.cc after defining ECO_ATTN_NS (the namespace) and ECO_ATTN_WIDE
// (1 where 32 vector registers are available); ECO_ATTN_FP16_MATH (attention_rows_avx512fp16.cc)
// builds only the 512-bit decode kernel, with fp16 caches' value pass in half precision
// (attention_rows_fp16_impl.h); ECO_ATTN_BF16_SCORES (attention_rows_avx512bf16dec.cc) only
// its kernel for fp16 caches and groups of 8, scoring on vdpbf16ps (scores_lanes, in the
// score passes' fragment attention_rows_scores_impl.h).
// Everything here has internal linkage
// and calls no inline function with external linkage, so no copy compiled with
// AVX-512 flags can be merged into code every CPU runs
// (scripts/check_isa_objects.sh checks the objects).
#pragma once

#ifndef ECO_ATTN_NS
#error "define ECO_ATTN_NS before including attention_rows_impl.h"
#endif
#ifndef ECO_ATTN_FP16_MATH
#define ECO_ATTN_FP16_MATH 0
#endif
#if ECO_ATTN_FP16_MATH && !ECO_ATTN_WIDE
#error "ECO_ATTN_FP16_MATH needs ECO_ATTN_WIDE"
#endif
#ifndef ECO_ATTN_BF16_SCORES
#define ECO_ATTN_BF16_SCORES 0
#endif
#if ECO_ATTN_BF16_SCORES && (!ECO_ATTN_WIDE || ECO_ATTN_FP16_MATH)
#error "ECO_ATTN_BF16_SCORES needs ECO_ATTN_WIDE, without ECO_ATTN_FP16_MATH"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/attention_rows.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"

#if ECO_ATTN_WIDE
// GCC 12's unmasked 512-bit intrinsics (_mm512_cvtph_ps, _mm512_extractf32x8_ps, ...)
// trip its -Wmaybe-uninitialized on the header's own "undefined" vector (GCC bug
// 105593; see matmul_packed_impl.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

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

// dst[0..G) = the sum of each of a[0..G), by the additions hsum8x8 makes (pairwise hadd
// levels, then the two 128-bit halves), so any G gives the same bits.
template <int G>
inline void store_head_sums(const __m256* a, float* dst) {
  if constexpr (G >= 8) {
    _mm256_storeu_ps(dst, hsum8x8(a));
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
    const __m128 r = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
    if constexpr (G == 4) {
      _mm_storeu_ps(dst, r);
    } else if constexpr (G == 2) {
      _mm_storel_pi(reinterpret_cast<__m64*>(dst), r);
    } else {
      _mm_store_ss(dst, r);
    }
  }
}

#include "kernels/attention_rows_scores_impl.h"

// For each head c0 + i whose bit i is set in `grew`: its new max mts[i] replaces m, and
// l and o are rescaled by 2^(old m - new m).
template <int kHd>
inline void rescale_grown(int grew, const float* mts, int32_t c0, OnlineState st) {
  while (grew) {
    const int i = __builtin_ctz(grew);
    grew &= grew - 1;
    const int32_t h = c0 + i;
    const float alpha = std::exp2(st.m[h] - mts[i]);  // 0 while m = -inf
    st.l[h] *= alpha;
    scale_inplace(st.o + static_cast<int64_t>(h) * kHd, alpha, kHd);
    st.m[h] = mts[i];
  }
}

// Online softmax of a tile's scores pbuf[j * Hp + h] (j < n, h < H), 8 heads per vector:
// m = max(m, tile max) (rescaling o and l of the heads whose max grew), then p = 2^(s -
// m) replaces each score (scores in log2 units: attention.cc's score_scale), l += p.
template <int kHd>
inline void tile_softmax(int32_t H, int32_t Hp, int32_t n, float* pbuf, OnlineState st) {
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
      rescale_grown<kHd>(grew, mts, c0, st);
    }
    const __m256 m = _mm256_maskload_ps(st.m + c0, live);
    __m256 l = _mm256_maskload_ps(st.l + c0, live);
    for (int32_t j = 0; j < n; ++j) {
      float* sc = pbuf + j * Hp + c0;
      const __m256 e = softmax_exp2_8(_mm256_sub_ps(_mm256_loadu_ps(sc), m));
      _mm256_storeu_ps(sc, e);
      l = _mm256_add_ps(l, e);
    }
    _mm256_maskstore_ps(st.l + c0, live, l);
  }
}

#if ECO_ATTN_WIDE
// tile_softmax with 16 heads per vector (the same arithmetic per head: the same bits).
// The lanes from H to Hp (Hp a multiple of 8) hold 0 and are processed as tile_softmax
// processes them; lanes past Hp are not touched.
template <int kHd>
inline void tile_softmax16(int32_t H, int32_t Hp, int32_t n, float* pbuf, OnlineState st) {
  for (int32_t c0 = 0; c0 < H; c0 += 16) {
    const __mmask16 live = static_cast<__mmask16>(H - c0 < 16 ? (1u << (H - c0)) - 1 : 0xffffu);
    const __mmask16 row = static_cast<__mmask16>(Hp - c0 < 16 ? (1u << (Hp - c0)) - 1 : 0xffffu);
    __m512 mt = _mm512_maskz_loadu_ps(row, pbuf + c0);
    for (int32_t j = 1; j < n; ++j) mt = _mm512_max_ps(mt, _mm512_maskz_loadu_ps(row, pbuf + j * Hp + c0));
    int grew = _mm512_mask_cmp_ps_mask(live, mt, _mm512_maskz_loadu_ps(live, st.m + c0), _CMP_GT_OQ);
    if (grew) {
      alignas(64) float mts[16];
      _mm512_store_ps(mts, mt);
      rescale_grown<kHd>(grew, mts, c0, st);
    }
    const __m512 m = _mm512_maskz_loadu_ps(live, st.m + c0);
    __m512 l = _mm512_maskz_loadu_ps(live, st.l + c0);
    for (int32_t j = 0; j < n; ++j) {
      float* sc = pbuf + j * Hp + c0;
      const __m512 e = softmax_exp2_16(_mm512_sub_ps(_mm512_maskz_loadu_ps(row, sc), m));
      _mm512_mask_storeu_ps(sc, row, e);
      l = _mm512_add_ps(l, e);
    }
    _mm512_mask_storeu_ps(st.l + c0, live, l);
  }
}
#endif

// The decode kernel (rows_step) on registers of W floats: Lanes8 (256-bit) and, in the
// wide build, Lanes16 (512-bit).
struct Lanes8 {
  using Reg = __m256;
  static constexpr int W = 8;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  // For attend_chunk's fused kernel (chunk_block): its register rows, the softmax's steps.
  static constexpr int kChunkCols = kWide ? 4 : 2;  // vectors per tile row (12 or 24 accumulators)
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg exp2(Reg x) { return softmax_exp2_8(x); }
  // p[i] for lanes i < live, fill in the others.
  static Reg masked_load(const float* p, int32_t live, Reg fill) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 on = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(live), iota));
    return _mm256_blendv_ps(fill, _mm256_loadu_ps(p), on);
  }
  static float reduce_max(Reg v) {  // on registers: no store and scalar chain per row
    const __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 b = _mm_max_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
  }
  // acc + e, in 8 lanes (column j of a row summed into lane j % 8).
  static __m256 add_into8(__m256 acc, Reg e) { return _mm256_add_ps(acc, e); }
  template <bool kF16>
  static Reg load(const void* base, int64_t off) { return load8<kF16>(base, off); }
  // The score pass: rows_step's own chains (one head's 8 dimensions per register, the
  // heads' sums reduced by store_head_sums), not scores16.
  static constexpr bool kScores16 = false;
  // Positions per q load (P * G = 8 independent FMA chains; loads per FMA (G + P) / (G *
  // P)). With 32 registers, fp16 with G = 4 takes P = 4 (16 chains, 4 loads per 8 FMAs);
  // f32 measured slower so. G = 8 with 32 registers takes P = 2 (16 chains, 10 loads per
  // 16 FMAs instead of 9 per 8), and its V pass CH = 2 (one head-weight shuffle per 2
  // FMAs, not per FMA): the synth 1b shape (32/4, d 64) on Zen 4, one thread, 4096
  // positions, 10-15% faster from L2 and DRAM (docs/kernels.md, twenty-first pass).
  template <bool kF16, int G>
  static constexpr int kPositions = G >= 8 ? (kWide ? 2 : 1) : (kWide && kF16 && G == 4) ? 4 : 8 / G;
  // Registers of head_dim per V pass step: CH = 4 with 32 registers for G = 4: one
  // head-weight shuffle per 4 FMAs, not per 2.
  template <int G>
  static constexpr int kValueRegs = G >= 8 ? (kWide ? 2 : 1) : (G == 4 && !kWide) ? 2 : 4;
  // Prefetch each line for the position kPrefetchAhead on as the same line of this
  // position is read (see RowPrefetch for the other order).
  static constexpr bool kRowOrderPrefetch = false;
  // Positions per tile (one score pass, softmax update and value pass).
  static constexpr int kTile = 8;
  // The weights p[h] (h < G) of one position, each in every lane: from one 128-bit
  // broadcast per 4 heads and in-register shuffles where G >= 4.
  template <int G>
  struct Weights {
    const float* p;
    Reg p4[(G + 3) / 4];
    explicit Weights(const float* pj) : p(pj) {
      if constexpr (G >= 4) {
#pragma GCC unroll 2
        for (int b = 0; b < G / 4; ++b) p4[b] = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(pj + 4 * b));
      }
    }
    Reg operator()(int h) const { return G >= 4 ? lane_broadcast(p4[h / 4], h % 4) : _mm256_broadcast_ss(p + h); }
  };
};

#if ECO_ATTN_WIDE
// Lanes16 runs fp16 caches, f32 ones of GQA groups of 8, and the others' f32 ones where
// AttentionDims::f32_wide (Intel).
// kRows: RowPrefetch's row order (kRowOrderPrefetch), else each line as the same line of
// the position kPrefetchAhead before it is read (Lanes8's order): AttentionDims::row_prefetch.
template <bool kRows>
struct Lanes16T {
  using Reg = __m512;
  static constexpr int W = 16;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  // As Lanes8's: lane by lane the same arithmetic (softmax_exp2_16 is softmax_exp2_8 per
  // lane, max is exact in any order, and add_into8 adds a register's two halves in column
  // order), so the fused prefill kernel gives the same bits on either.
  static constexpr int kChunkCols = 4;
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg exp2(Reg x) { return softmax_exp2_16(x); }
  static Reg masked_load(const float* p, int32_t live, Reg fill) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_mask_loadu_ps(fill, _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(live), iota), p);
  }
  static float reduce_max(Reg v) { return _mm512_reduce_max_ps(v); }
  static __m256 add_into8(__m256 acc, Reg e) {
    return _mm256_add_ps(_mm256_add_ps(acc, _mm512_castps512_ps256(e)), _mm512_extractf32x8_ps(e, 1));
  }
  // 16 values at element `off` of a V cache, as float32.
  template <bool kF16>
  static Reg load(const void* base, int64_t off) {
    if constexpr (kF16) {
      const uint16_t* h = static_cast<const uint16_t*>(base) + off;
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
    } else {
      return _mm512_loadu_ps(static_cast<const float*>(base) + off);
    }
  }
  template <int G>
  struct Weights {
    const float* p;
    explicit Weights(const float* pj) : p(pj) {}
    Reg operator()(int h) const { return _mm512_set1_ps(p[h]); }
  };
  // The score pass: scores_lanes for G = 8 (8 positions per q register loaded),
  // scores16 for G in {2, 4} (P * G = 16 accumulators, one transpose_sum16).
  static constexpr bool kScores16 = true;
  template <bool kF16, int G>
  static constexpr int kPositions = zmm_query_lanes(G) != 0 ? 8 : 16 / G;
  template <int G>
  static constexpr int kValueRegs = G >= 8 ? 2 : 4;
  static constexpr bool kRowOrderPrefetch = kRows;
  // Tiles of 16 positions: one softmax update and one read-modify-write of o per 16, not
  // per 8. Intel Xeon with AMX (family 6 model 167), attention_bench, 4k positions, three
  // rounds, us: K and V in L2, one thread, Llama shape f32 722-892 -> 686-723, fp16
  // 634-668 -> 622-641; from DRAM, two threads, Llama fp16 926-941 -> 893-902, synth 1b
  // f32 528-533 -> 480-499, fp16 331-350 -> 304-312; one thread within the noise. Lanes8
  // with 16 measured 2-5% slower there (docs/kernels.md, thirty-third pass).
  static constexpr int kTile = 16;
};
using Lanes16 = Lanes16T<true>;  // attend_chunk's (it prefetches nothing)
#endif

// Prefetches into L2 the K or V rows (the bytes of heads [kv0, kv1)) of the positions
// kPrefetchAhead on from a tile's, line by line in row order: row j's lines, then row j
// + 1's, `lines` per call of issue, spread over the tile's pass so that the pass issues
// one line per line it reads (L::kRowOrderPrefetch). The reads themselves interleave
// 2-8 rows; on Zen 5 a loop that only loads in the Lanes16 kernel's order read 28 GB/s
// on one thread with its prefetches in row order, 22 GB/s with each line prefetched for
// the position kPrefetchAhead on as the same line of this one is read.
struct RowPrefetch {
  const char* base;      // the K or V cache
  const int64_t* off;    // the tile's positions' row offsets (elements), kPrefetchAhead on valid to `rows`
  int64_t first;         // elements from a row's start to head kv0
  int32_t elem, span;    // bytes per element; bytes of heads [kv0, kv1) in a row
  int32_t rows;          // the tile positions whose row kPrefetchAhead on exists
  int32_t row = 0, at = 0;
  const char* cur = nullptr;

  RowPrefetch(const void* b, const int64_t* o, int32_t n, int32_t n_ahead, int32_t kv0, int32_t kv1, int32_t hd,
              int32_t el)
      : base(static_cast<const char*>(b)),
        off(o),
        first(static_cast<int64_t>(kv0) * hd),
        elem(el),
        span((kv1 - kv0) * hd * el),
        rows(n < n_ahead - kPrefetchAhead ? n : n_ahead - kPrefetchAhead) {
    if (rows > 0) cur = base + (off[kPrefetchAhead] + first) * elem;
  }
  void issue(int lines) {
    if (row >= rows) return;
    if (at + 64 * lines < span) {  // within the row (the usual case)
#pragma GCC unroll 16
      for (int i = 0; i < lines; ++i) _mm_prefetch(cur + at + 64 * i, _MM_HINT_T1);
      at += 64 * lines;
      return;
    }
    for (int i = 0; i < lines && row < rows; ++i) {
      _mm_prefetch(cur + at, _MM_HINT_T1);
      at += 64;
      if (at >= span) {
        at = 0;
        if (++row < rows) cur = base + (off[row + kPrefetchAhead] + first) * elem;
      }
    }
  }
};

// The score pass of a tile: for the n <= L::kTile positions at off[0..n) in groups of
// P (then one at a time), and for each KV head in [kv0, kv1), core.template
// operator()<Pn>(j0, h, head, tick) stores the scores of positions j0..j0 + Pn of query
// heads h..h + G (head = the KV head's first element in a row) into pbuf[j * Hp + h ...],
// calling tick(step, steps) before each of its `steps` steps; the K rows of the positions
// kPrefetchAhead on are prefetched as many lines as it reads, before it or (f32 rows in
// row order) through its ticks. Scores of the lanes past the last head (H = G * (kv1 -
// kv0) not a multiple of 8) are set to 0.
template <int kHd, int kElem, int G, int P, bool kRowOrder, class Core>
inline void score_tiles(int32_t kv0, int32_t kv1, const int64_t* off, int32_t n, int32_t n_ahead,
                        const PagedKvView& kv, int32_t Hp, float* pbuf, Core&& core) {
  const int32_t H = G * (kv1 - kv0);
  RowPrefetch pf(kv.k, off, kRowOrder ? n : 0, n_ahead, kv0, kv1, kHd, kElem);  // idle unless kRowOrder
  auto group = [&]<int Pn>(int32_t j0) {
    for (int32_t c0 = 0; c0 < H; c0 += 8) {
#pragma GCC unroll 8
      for (int c = 0; c < 8 / G; ++c) {
        if (c0 / G + c >= kv1 - kv0) {
#pragma GCC unroll 8
          for (int a = 0; a < Pn; ++a) for (int h = 0; h < G; ++h) pbuf[(j0 + a) * Hp + c0 + c * G + h] = 0.0f;
          continue;
        }
        const int64_t head = static_cast<int64_t>(kv0 + c0 / G + c) * kHd;
        // f32 rows in row order: the core's lines spread over its steps (tick(step, steps)
        // before each). Issued in one burst before its arithmetic, they held it up until they
        // were under way, so reads and arithmetic added up instead of overlapping
        // (docs/kernels.md, fifty-second pass); fp16 rows measured no better spread, or worse
        // (scores16), and keep the burst.
        constexpr int kLines = Pn * kHd * kElem / 64;  // the lines the core reads
        constexpr bool kSpread = kRowOrder && kElem == 4;
        auto tick = [&](int step, int steps) {
          if constexpr (kSpread) pf.issue(kLines * (step + 1) / steps - kLines * step / steps);
        };
        if constexpr (kRowOrder && !kSpread) {
          pf.issue(kLines);
        } else if constexpr (!kRowOrder) {
#pragma GCC unroll 8
          for (int a = 0; a < Pn; ++a) {
            if (j0 + a + kPrefetchAhead < n_ahead) {
              const char* pk = static_cast<const char*>(kv.k) + (off[j0 + a + kPrefetchAhead] + head) * kElem;
              for (int b = 0; b < kHd * kElem; b += 64) _mm_prefetch(pk + b, _MM_HINT_T1);
            }
          }
        }
        core.template operator()<Pn>(j0, c0 + c * G, head, tick);
      }
    }
  };
  int32_t j = 0;
  for (; j + P <= n; j += P) group.template operator()<P>(j);
  for (; j < n; ++j) group.template operator()<1>(j);
}

// The value passes' row pointers: vrow[j] = position j's V row of KV head kv0 (j < n) and,
// unless kRowOrder (RowPrefetch does the prefetch), vahead[j] = the row kPrefetchAhead
// positions on, or null past n_ahead. kHd elements of `elem` bytes per head.
template <bool kRowOrder>
inline void value_rows(const PagedKvView& kv, const int64_t* off, int32_t n, int32_t n_ahead, int32_t kv0, int kHd,
                       int elem, const char** vrow, const char** vahead) {
  const char* base = static_cast<const char*>(kv.v);
  const int64_t first = static_cast<int64_t>(kv0) * kHd;
  for (int32_t j = 0; j < n; ++j) {
    vrow[j] = base + (off[j] + first) * elem;
    if constexpr (!kRowOrder) {
      vahead[j] = j + kPrefetchAhead >= n_ahead ? nullptr : base + (off[j + kPrefetchAhead] + first) * elem;
    }
  }
}

// The value pass of a tile: o[h] += sum_j p[j][h] V_j[kv head of h] (p = pbuf[j * Hp +
// h]). For each KV head and each CH registers of head_dim (L::W floats each), the G
// heads' sums over the tile's positions stay in registers (each column one chain of
// FMAs from 0 in position order, whatever L) and o is read and written once per tile.
// Every V register is widened once for the G heads that share it.
template <class L, int NV, bool kF16, int G, int CH>
inline void values_pass(int32_t kv0, int32_t kv1, const int64_t* off, int32_t n, int32_t n_ahead,
                        const PagedKvView& kv, int32_t Hp, const float* pbuf, float* o_all) {
  using Reg = typename L::Reg;
  constexpr int kHd = 8 * NV;
  constexpr int kElem = kF16 ? 2 : 4;
  constexpr int W = L::W;
  constexpr bool kRowOrder = L::kRowOrderPrefetch;
  static_assert(kHd % (W * CH) == 0);
  const char* vrow[L::kTile];    // each position's V row of KV head kv0
  const char* vahead[L::kTile];  // its row kPrefetchAhead positions on, or null (!kRowOrder)
  value_rows<kRowOrder>(kv, off, n, n_ahead, kv0, kHd, kElem, vrow, vahead);
  RowPrefetch pf(kv.v, off, kRowOrder ? n : 0, n_ahead, kv0, kv1, kHd, kElem);  // idle unless kRowOrder
  for (int32_t kvh = kv0; kvh < kv1; ++kvh) {
    const int32_t hb = (kvh - kv0) * G;
    float* o = o_all + static_cast<int64_t>(hb) * kHd;
    const int64_t head_bytes = static_cast<int64_t>(kvh - kv0) * kHd * kElem;
    for (int v0 = 0; v0 < kHd / W; v0 += CH) {
      const int64_t at = head_bytes + W * v0 * kElem;
      Reg acc[G][CH];
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) acc[h][c] = L::zero();
      // One line prefetched per line read, spread over the pass (a burst of a whole
      // tile's lines overflowed the miss queue and most were dropped). The CH registers
      // span kChunkBytes: one line (every other chunk when 32 bytes) or several.
      constexpr int kChunkBytes = W * CH * kElem;
      const bool pf_line = (W * v0 * kElem) % 64 == 0;
#pragma GCC unroll 8
      for (int32_t j = 0; j < n; ++j) {
        if constexpr (kRowOrder) {
          if (pf_line) pf.issue(kChunkBytes < 64 ? 1 : kChunkBytes / 64);
        } else if (pf_line && vahead[j]) {
#pragma GCC unroll 4
          for (int b = 0; b < kChunkBytes; b += 64) _mm_prefetch(vahead[j] + at + b, _MM_HINT_T1);
        }
        Reg vv[CH];
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) vv[c] = L::template load<kF16>(vrow[j] + at, W * c);
        const typename L::template Weights<G> pw(pbuf + j * Hp + hb);
#pragma GCC unroll 8
        for (int h = 0; h < G; ++h) {
          const Reg pb = pw(h);
#pragma GCC unroll 4
          for (int c = 0; c < CH; ++c) acc[h][c] = L::fmadd(pb, vv[c], acc[h][c]);
        }
      }
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < CH; ++c) {
          float* oh = o + h * kHd + W * (v0 + c);
          L::storeu(oh, L::add(L::loadu(oh), acc[h][c]));
        }
    }
  }
}

#if ECO_ATTN_FP16_MATH
#include "kernels/attention_rows_fp16_impl.h"
#endif

// The score pass of a tile for MHA (G = 1) on fp16 rows: position by position, each row
// front to back, 8 heads at a time with the heads in lanes (acc[h] the head's chain of
// FMAs over its dimensions, reduced by hsum8x8 into one store: per head the chain and
// additions the positions-in-lanes path makes, so the same bits), and each head's lines
// of the position kPrefetchAhead on prefetched as its lines here are read. Scores of the
// lanes from H to Hp are 0. The AMX Xeon (fifty-fifth pass, docs/kernels.md), synth
// 110m's 12 heads of 64, 4k-32k positions from DRAM and a batch's tokens at 128-2048:
// 7-10% faster than 8 positions per q load with 16 lines prefetched per head and 8
// positions; f32 rows measured the same either way and keep that path.
template <int NV>
inline void scores_mha_f16(const float* q, int32_t kv0, int32_t H, int32_t Hp, const int64_t* off, int32_t n,
                           int32_t n_ahead, const PagedKvView& kv, float* pbuf) {
  constexpr int kHd = 8 * NV;
  constexpr int kHeadLines = kHd * 2 / 64;
  const char* kb = static_cast<const char*>(kv.k);
  const int64_t first = static_cast<int64_t>(kv0) * kHd;
  for (int32_t j = 0; j < n; ++j) {
    const int64_t row = off[j] + first;
    const char* ahead = j + kPrefetchAhead < n_ahead ? kb + (off[j + kPrefetchAhead] + first) * 2 : nullptr;
    for (int32_t c0 = 0; c0 < Hp; c0 += 8) {
      __m256 acc[8];
#pragma GCC unroll 8
      for (int h = 0; h < 8; ++h) {
        acc[h] = _mm256_setzero_ps();
        if (c0 + h >= H) continue;
        const int64_t head = static_cast<int64_t>(c0 + h) * kHd;
        if (ahead != nullptr) {
#pragma GCC unroll 4
          for (int b = 0; b < kHeadLines; ++b) _mm_prefetch(ahead + head * 2 + 64 * b, _MM_HINT_T1);
        }
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
          acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + head + 8 * v), load8<true>(kv.k, row + head + 8 * v), acc[h]);
        }
      }
      _mm256_storeu_ps(pbuf + j * Hp + c0, hsum8x8(acc));
    }
  }
}

// The position-major kernel: the H = G * (kv1 - kv0) query heads (G in {1, 2, 4, 8},
// any H: a last partial vector of heads is masked; head_dim = 8 * NV) over the n <=
// L::kTile positions whose head-0 row offsets are off[0..n), folded into st;
// off[n..n_ahead) are the positions after them (prefetched). K and V rows are read
// position by position, each front to back (this machine's prefetchers lose interleaved
// streams): 8 heads are scored at a time, the softmax state is updated per tile with the
// heads in vector lanes (a head's o and l are rescaled only when its max grows), and
// every V vector is widened once for the G heads that share it. `pbuf` holds
// L::kTile * Hp floats (Hp = H rounded up to 8).
//
// L = Lanes8 (256-bit registers) or Lanes16 (512-bit, G in {2, 4, 8}: half the FMAs;
// the avx512vnni-zmm level runs it for fp16 caches, and for f32 ones where
// AttentionDims::f32_wide). With Lanes8 every score is the same chain of FMAs and the
// same reduction (store_head_sums; scores_mha_f16 for MHA on fp16 rows) in both builds;
// Lanes16 scores with scores16 (16 dimensions per register) or, for G = 8, scores_lanes
// (heads in lanes): within float rounding of those. Every output column is the same
// chain whatever L. Zen 5, attention_bench (the Lanes16 of the pair layout this file had
// before scores16; see docs/kernels.md for scores16's figures), fp16 cache, Lanes8 ->
// Lanes16 with its row-order prefetch, one thread: GQA 32/8, d 128,
// 4k-32k context from DRAM 20.5-22.7 -> 25.2-25.7 GB/s, K and V in L2 24-25.5 -> 30-32;
// batched decode at 512-2048 positions (mode 4) 20.5-22.8 -> 22.6-24.8, and for the
// synth 1b's 32/4, d 64 8.9-10 -> 11.9-13.8. With an f32 cache Lanes16 ran 45% faster
// from L2 but 5-15% slower from DRAM (either prefetch order), so f32 stays on Lanes8
// there for groups of 2 and 4 (the Llama shape still 8-14% slower in the thirtieth pass);
// groups of 8, scored with scores_lanes since, run f32 on Lanes16 on every CPU (Zen 5,
// synth 1b, 4k positions from DRAM 463-479 -> 322-339 us). Intel Xeon (family 6 model
// 207; two 512-bit FMA ports, where 256-bit FMAs get half the peak), f32 cache, Lanes8
// -> Lanes16 (scores16), one thread: synth 1b's 32/4,
// d 64, 4k / 32k positions from DRAM 844 -> 786 / 6644 -> 6125 us, from the L3 613-626 ->
// 458-483 / 5202-5467 -> 3388-4023 us, K and V in L2 582-605 -> 362-384 us; GQA 32/8,
// d 128 alike (2538 / 2592 us at 4k from DRAM). AttentionDims::f32_wide picks it by
// CPU vendor.
template <class L, int NV, bool kF16, int G>
void rows_tile(const float* q, [[maybe_unused]] const uint16_t* qh, int32_t kv0, int32_t kv1, const int64_t* off,
               int32_t n, int32_t n_ahead, const PagedKvView& kv, OnlineState st, float* pbuf) {
  constexpr int kHd = 8 * NV;
  constexpr int kElem = kF16 ? 2 : 4;
  const int32_t H = G * (kv1 - kv0);
  const int32_t Hp = (H + 7) & ~7;  // pbuf's row stride: heads in whole vectors
  // Scores of every head for every position of the tile: pbuf[j * Hp + h], P positions
  // at a time so that each q register loaded serves P positions. Each KV head's G sums
  // are reduced and stored as soon as they are complete (holding 8 heads' sums in
  // registers for one 8-lane reduction spilled with 16 registers).
  constexpr int P = L::template kPositions<kF16, G>;
  if constexpr (L::kScores16) {
#if ECO_ATTN_WIDE
    auto core = [&]<int Pn>(int32_t j0, int32_t h0, int64_t head, auto& tick) {
      const float* qc = q + static_cast<int64_t>(h0) * kHd;
      if constexpr (zmm_query_lanes(G) != 0) {
        scores_lanes<NV, G, Pn, kF16>(qc, kv.k, off + j0, head, pbuf + j0 * Hp + h0, Hp, tick,
                                      qh ? qh + h0 * kHd : nullptr);
      } else {
        scores16<NV, G, Pn, kF16>(qc, kv.k, off + j0, head, pbuf + j0 * Hp + h0, Hp, tick,
                                  qh ? qh + h0 * kHd : nullptr);
      }
    };
    score_tiles<kHd, kElem, G, P, L::kRowOrderPrefetch>(kv0, kv1, off, n, n_ahead, kv, Hp, pbuf, core);
#endif
  } else if constexpr (G == 1 && kF16) {
    scores_mha_f16<NV>(q, kv0, H, Hp, off, n, n_ahead, kv, pbuf);
  } else {
    auto core = [&]<int Pn>(int32_t j0, int32_t h0, int64_t head, auto& tick) {
      const float* qc = q + static_cast<int64_t>(h0) * kHd;
      __m256 acc[Pn][G];
#pragma GCC unroll 8
      for (int a = 0; a < Pn; ++a)
#pragma GCC unroll 8
        for (int h = 0; h < G; ++h) acc[a][h] = _mm256_setzero_ps();
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        tick(v, NV);
        __m256 kk[Pn];
#pragma GCC unroll 8
        for (int a = 0; a < Pn; ++a) kk[a] = load8<kF16>(kv.k, off[j0 + a] + head + 8 * v);
#pragma GCC unroll 8
        for (int h = 0; h < G; ++h) {
          __m256 qv = _mm256_loadu_ps(qc + static_cast<int64_t>(h) * kHd + 8 * v);
          if constexpr (Pn > 1) asm("" : "+v"(qv));  // one load for Pn FMAs, not a memory operand in each
#pragma GCC unroll 8
          for (int a = 0; a < Pn; ++a) acc[a][h] = _mm256_fmadd_ps(qv, kk[a], acc[a][h]);
        }
      }
      if constexpr (G == 1 && Pn == 8) {
        // One 8-lane reduction for the 8 positions (hsum8x8: per position the additions
        // store_head_sums<1> makes, the same bits), 6 vhaddps instead of 16.
        const __m256 sums[8] = {acc[0][0], acc[1][0], acc[2][0], acc[3][0],
                                acc[4][0], acc[5][0], acc[6][0], acc[7][0]};
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, hsum8x8(sums));
#pragma GCC unroll 8
        for (int a = 0; a < 8; ++a) pbuf[(j0 + a) * Hp + h0] = lanes[a];
      } else {
#pragma GCC unroll 8
        for (int a = 0; a < Pn; ++a) store_head_sums<G>(acc[a], pbuf + (j0 + a) * Hp + h0);
      }
    };
    score_tiles<kHd, kElem, G, P, L::kRowOrderPrefetch>(kv0, kv1, off, n, n_ahead, kv, Hp, pbuf, core);
  }
  if constexpr (L::kScores16) {
#if ECO_ATTN_WIDE
    tile_softmax16<kHd>(H, Hp, n, pbuf, st);
#endif
  } else {
    tile_softmax<kHd>(H, Hp, n, pbuf, st);
  }
#if ECO_ATTN_FP16_MATH
  if constexpr (kF16 && L::W == 16) {
    values_pass_ph<L, NV, G>(kv0, kv1, off, n, n_ahead, kv, Hp, pbuf, st.o);
    return;
  }
#endif
  values_pass<L, NV, kF16, G, L::template kValueRegs<G>>(kv0, kv1, off, n, n_ahead, kv, Hp, pbuf, st.o);
}

// rows_step: the n <= kRowTile positions as tiles of L::kTile (rows_tile each).
template <class L, int NV, bool kF16, int G>
void rows_step(const float* q, const uint16_t* qh, int32_t kv0, int32_t kv1, const int64_t* off, int32_t n,
               int32_t n_ahead, const PagedKvView& kv, OnlineState st, float* pbuf) {
  static_assert(kRowTile % L::kTile == 0);
  for (int32_t j = 0; j < n; j += L::kTile) {
    rows_tile<L, NV, kF16, G>(q, qh, kv0, kv1, off + j, n - j < L::kTile ? n - j : L::kTile, n_ahead - j, kv, st,
                              pbuf);
  }
}

// ---- attend_chunk's fused kernel (see ChunkBuffers, ChunkBlockFn) ----
// Written once for registers of L::W floats: Lanes8 (every level) and Lanes16 (the
// avx512vnni-zmm level's chunk_key_block_zmm). Every accumulator lane is one chain of
// FMAs in k order and the softmax's steps are the same per lane, so both give the same
// bits; only how many rows and columns run side by side differs.

// Register tiles: up to kChunkRows rows x L::kChunkCols vectors (6 x 2 with 16
// registers: 12 accumulators; 6 x 4 with 32: 24).
constexpr int kChunkRows = 6;

// c[i][v] (+)= sum_k a[i * lda + k] * b[k * ldb + W v ..] for i < R, v < CV, k < n.
// Each accumulator is one chain of FMAs in k order, whatever R and CV.
template <class L, int R, int CV>
inline void panel(const float* a, int64_t lda, const float* b, int64_t ldb, int32_t n, typename L::Reg (&c)[R][CV]) {
#pragma GCC unroll 2
  for (int32_t k = 0; k < n; ++k) {
    typename L::Reg bv[CV];
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) bv[v] = L::loadu(b + k * ldb + L::W * v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const typename L::Reg ai = L::set1(a[i * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < CV; ++v) c[i][v] = L::fmadd(ai, bv[v], c[i][v]);
    }
  }
}

// How many of key block [kb, kb + ncols)'s positions row `row` sees (<= 0: none).
inline int32_t cols_seen(int32_t first_pos, int32_t row, int32_t group, int32_t kb, int32_t ncols) {
  const int32_t seen = first_pos + row / group - kb + 1;
  return seen < ncols ? seen : ncols;
}

// Rows [r0, r0 + R), columns [c0, c0 + W CV) of the key block's scores into s.
template <class L, int R, int CV>
inline void scores_tile(const ChunkBuffers& b, int32_t hd, int32_t r0, int32_t kb, int32_t c0) {
  typename L::Reg c[R][CV];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) c[i][v] = L::zero();
  panel<L, R, CV>(b.q + static_cast<int64_t>(r0) * hd, hd, b.kt + static_cast<int64_t>(kb) * hd + c0, kKeyBlock, hd,
                  c);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) L::storeu(b.s + static_cast<int64_t>(r0 + i) * kKeyBlock + c0 + L::W * v, c[i][v]);
}

// Rows [r0, r0 + R), output columns [c0, c0 + W CV): o += p . V[kb, kb + n).
template <class L, int R, int CV>
inline void values_tile(const ChunkBuffers& b, int32_t hd, int32_t r0, int32_t kb, int32_t n, int32_t c0) {
  typename L::Reg c[R][CV];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) c[i][v] = L::loadu(b.o + static_cast<int64_t>(r0 + i) * hd + c0 + L::W * v);
  panel<L, R, CV>(b.s + static_cast<int64_t>(r0) * kKeyBlock, kKeyBlock, b.v + static_cast<int64_t>(kb) * hd + c0,
                  hd, n, c);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) L::storeu(b.o + static_cast<int64_t>(r0 + i) * hd + c0 + L::W * v, c[i][v]);
}

// Rows [r0, r0 + R): the scores of the key block's columns the last of them sees, in
// tiles of W kChunkCols columns while more than 2 W remain, then 2 W while more than
// W, then W (kt is padded to whole key blocks; the columns past what a row sees are
// left as they are: the softmax masks them). rows_values: after the softmax, their
// values, in the same widths over head_dim (a multiple of 16).
template <class L, int R>
inline void rows_scores(const ChunkBuffers& b, int32_t hd, int32_t r0, int32_t kb, int32_t ncols, int32_t first_pos,
                        int32_t group) {
  constexpr int W = L::W, C = L::kChunkCols;
  const int32_t n = cols_seen(first_pos, r0 + R - 1, group, kb, ncols);  // columns the last of the rows sees
  int32_t c0 = 0;
  for (; c0 + 2 * W < n && c0 + W * C <= kKeyBlock; c0 += W * C) scores_tile<L, R, C>(b, hd, r0, kb, c0);
  for (; c0 + W < n && c0 + 2 * W <= kKeyBlock; c0 += 2 * W) scores_tile<L, R, 2>(b, hd, r0, kb, c0);
  for (; c0 < n; c0 += W) scores_tile<L, R, 1>(b, hd, r0, kb, c0);
}

template <class L, int R>
inline void rows_values(const ChunkBuffers& b, int32_t hd, int32_t r0, int32_t kb, int32_t ncols, int32_t first_pos,
                        int32_t group) {
  constexpr int W = L::W, C = L::kChunkCols;
  const int32_t n = cols_seen(first_pos, r0 + R - 1, group, kb, ncols);  // columns the last of the rows sees
  if (n <= 0) return;
  int32_t c0 = 0;
  for (; c0 + W * C <= hd; c0 += W * C) values_tile<L, R, C>(b, hd, r0, kb, n, c0);
  for (; c0 + 2 * W <= hd; c0 += 2 * W) values_tile<L, R, 2>(b, hd, r0, kb, n, c0);
  for (; c0 < hd; c0 += W) values_tile<L, R, 1>(b, hd, r0, kb, n, c0);
}

// Calls fn.template operator()<R>(r0) for rows [0, m) in groups of kChunkRows, then the rest.
template <class Fn>
inline void by_row_groups(int32_t m, Fn&& fn) {
  int32_t r0 = 0;
  for (; r0 + kChunkRows <= m; r0 += kChunkRows) fn.template operator()<kChunkRows>(r0);
  switch (m - r0) {
    case 5: fn.template operator()<5>(r0); break;
    case 4: fn.template operator()<4>(r0); break;
    case 3: fn.template operator()<3>(r0); break;
    case 2: fn.template operator()<2>(r0); break;
    case 1: fn.template operator()<1>(r0); break;
    default: break;
  }
}

// One row's online softmax update over the block: scores past what it sees (seen) are
// masked (no masking pass when it sees all ncols8 and they fill whole registers), p =
// 2^(s - m_new) replaces them in s (0 where masked, and for the whole [0, ncols8) when
// it sees none; with W = 16 up to the next multiple of 16, within the row), l and o are
// rescaled when the max grows. The weights are summed into 8 lanes (column j into lane j
// % 8, in column order), then those as a tree (sum of lanes i and i + 4, then pairs).
template <class L>
inline void row_softmax(const ChunkBuffers& b, int32_t hd, int32_t row, int32_t seen, int32_t ncols8) {
  using Reg = typename L::Reg;
  constexpr int W = L::W;
  float* sr = b.s + static_cast<int64_t>(row) * kKeyBlock;
  if (seen <= 0) {
    for (int32_t j = 0; j < ncols8; j += 8) _mm256_storeu_ps(sr + j, _mm256_setzero_ps());
    return;
  }
  const Reg ninf = L::set1(-__builtin_inff());
  Reg vmx = ninf;
  if (seen == ncols8 && ncols8 % W == 0) {  // every column seen: nothing to mask
    for (int32_t j = 0; j < ncols8; j += W) vmx = L::max(vmx, L::loadu(sr + j));
  } else {
    for (int32_t j = 0; j < ncols8; j += W) {
      const Reg x = L::masked_load(sr + j, seen - j, ninf);
      L::storeu(sr + j, x);
      vmx = L::max(vmx, x);
    }
  }
  const float mx = L::reduce_max(vmx);
  const float m_old = b.m[row];
  const float m_new = mx > m_old ? mx : m_old;
  const Reg vm = L::set1(m_new);
  __m256 vsum = _mm256_setzero_ps();
  for (int32_t j = 0; j < ncols8; j += W) {
    const Reg e = L::exp2(L::sub(L::loadu(sr + j), vm));  // 0 where masked (-inf)
    L::storeu(sr + j, e);
    vsum = L::add_into8(vsum, e);
  }
  const float sum = hsum8(vsum);  // a chain of 3 additions per row, not 8
  if (m_new > m_old) {
    const float alpha = std::exp2(m_old - m_new);  // 0 while the max was -inf
    b.l[row] *= alpha;
    scale_inplace(b.o + static_cast<int64_t>(row) * hd, alpha, hd);
    b.m[row] = m_new;
  }
  b.l[row] += sum;
}

template <class L>
void chunk_block(const ChunkBuffers& b, int32_t hd, int32_t m, int32_t kb, int32_t ncols, int32_t first_pos,
                 int32_t group) {
  by_row_groups(m, [&]<int R>(int32_t r0) { rows_scores<L, R>(b, hd, r0, kb, ncols, first_pos, group); });
  const int32_t ncols8 = (ncols + 7) & ~7;
  for (int32_t row = 0; row < m; ++row) {
    row_softmax<L>(b, hd, row, cols_seen(first_pos, row, group, kb, ncols), ncols8);
  }
  by_row_groups(m, [&]<int R>(int32_t r0) { rows_values<L, R>(b, hd, r0, kb, ncols, first_pos, group); });
}

#if ECO_ATTN_WIDE
template <int NV, bool kF16, bool kRows>
RowsFn pick_rows_fn_zmm_g(int32_t g) {
  switch (g) {
    case 2: return rows_step<Lanes16T<kRows>, NV, kF16, 2>;
    case 4: return rows_step<Lanes16T<kRows>, NV, kF16, 4>;
    case 8: return rows_step<Lanes16T<kRows>, NV, kF16, 8>;
    default: return nullptr;
  }
}

template <bool kRows>
RowsFn pick_rows_fn_zmm_order(int32_t hd, int32_t g, bool f16) {
#if ECO_ATTN_BF16_SCORES
  // Only the kernel whose score pass differs here: fp16 caches, groups of 8.
  if (!f16 || g != 8) return nullptr;
  switch (hd) {
    case 64: return rows_step<Lanes16T<kRows>, 8, true, 8>;
    case 128: return rows_step<Lanes16T<kRows>, 16, true, 8>;
    default: return nullptr;
  }
#endif
  switch (hd) {
    case 64: return f16 ? pick_rows_fn_zmm_g<8, true, kRows>(g) : pick_rows_fn_zmm_g<8, false, kRows>(g);
    case 128: return f16 ? pick_rows_fn_zmm_g<16, true, kRows>(g) : pick_rows_fn_zmm_g<16, false, kRows>(g);
    default: return nullptr;
  }
}
#endif  // ECO_ATTN_WIDE

template <int NV, bool kF16>
RowsFn pick_rows_fn_g(int32_t g) {
  switch (g) {
    case 1: return rows_step<Lanes8, NV, kF16, 1>;
    case 2: return rows_step<Lanes8, NV, kF16, 2>;
    case 4: return rows_step<Lanes8, NV, kF16, 4>;
    case 8: return rows_step<Lanes8, NV, kF16, 8>;
    default: return nullptr;
  }
}

}  // namespace

#if !ECO_ATTN_FP16_MATH && !ECO_ATTN_BF16_SCORES
void chunk_key_block(const ChunkBuffers& b, int32_t hd, int32_t m, int32_t kb, int32_t ncols, int32_t first_pos,
                     int32_t group) {
  chunk_block<Lanes8>(b, hd, m, kb, ncols, first_pos, group);
}

#if ECO_ATTN_WIDE
void chunk_key_block_zmm(const ChunkBuffers& b, int32_t hd, int32_t m, int32_t kb, int32_t ncols, int32_t first_pos,
                         int32_t group) {
  chunk_block<Lanes16>(b, hd, m, kb, ncols, first_pos, group);
}
#endif

RowsFn pick_rows_fn(int32_t hd, int32_t g, bool f16) {
  switch (hd) {
    case 64: return f16 ? pick_rows_fn_g<8, true>(g) : pick_rows_fn_g<8, false>(g);
    case 128: return f16 ? pick_rows_fn_g<16, true>(g) : pick_rows_fn_g<16, false>(g);
    default: return nullptr;
  }
}
#endif  // !ECO_ATTN_FP16_MATH && !ECO_ATTN_BF16_SCORES

#if ECO_ATTN_WIDE
RowsFn pick_rows_fn_zmm(int32_t hd, int32_t g, bool f16, bool row_prefetch) {
  return row_prefetch ? pick_rows_fn_zmm_order<true>(hd, g, f16) : pick_rows_fn_zmm_order<false>(hd, g, f16);
}
#endif

}  // namespace ecoserve::kernels::detail::ECO_ATTN_NS

#if ECO_ATTN_WIDE
#pragma GCC diagnostic pop
#endif
