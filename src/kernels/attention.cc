#include "kernels/attention.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/fp16.h"
#include "kernels/attention_rows.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"

namespace ecoserve::kernels {

namespace {

// The kernels' score scale: d.scale times log2(e), so that every softmax weight is a
// power of two (softmax_exp2_8: no multiply in its range reduction) and the softmax
// states' max and sums are in those units (AttentionPartial).
inline float score_scale(const AttentionDims& d) { return d.scale * SoftmaxExp2Constants::kLog2e; }

// attend_chunk's query tile: about this many query rows (tokens x the GQA group's
// heads) per pair of GEMMs.
constexpr int32_t kQueryRows = 64;

// Element offset of (pos, kv_head) in the cache.
inline int64_t offset_of(const PagedKvView& kv, int32_t pos, int32_t kv_head, int32_t hd) {
  const int64_t slot = static_cast<int64_t>(kv.block_table[pos / kv.block_size].value) * kv.block_size +
                       pos % kv.block_size;
  return slot * kv.kv_dim + static_cast<int64_t>(kv_head) * hd;
}

// dst[0..n) = the n cache values at element `off` of base (fp16 widened exactly).
inline void widen_row(const void* base, bool f16, int64_t off, float* dst, int32_t n) {
  if (f16) {
    fp16_to_fp32_row(static_cast<const uint16_t*>(base) + off, dst, n);
  } else {
    std::memcpy(dst, static_cast<const float*>(base) + off, n * sizeof(float));
  }
}

// In place: row[0..n) = the base-2 softmax of row[0..n) (2^x / sum 2^x: scores in log2
// units, score_scale), row[n..len) = 0.
void softmax_prefix(float* row, int32_t n, int32_t len) {
  __m256 vmx = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int32_t j = 0;
  for (; j + 8 <= n; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(row + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmx);
  float mx = lanes[0];
  for (int i = 1; i < 8; ++i) mx = std::max(mx, lanes[i]);
  for (; j < n; ++j) mx = std::max(mx, row[j]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = softmax_exp2_8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
    _mm256_storeu_ps(row + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_store_ps(lanes, vsum);
  double sum = 0.0;
  for (int i = 0; i < 8; ++i) sum += lanes[i];
  for (; j < n; ++j) {
    row[j] = std::exp2(row[j] - mx);
    sum += row[j];
  }
  scale_inplace(row, static_cast<float>(1.0 / sum), n);
  std::fill(row + n, row + len, 0.0f);
}

}  // namespace


namespace {

// Positions per tile of the one-pass kernels: scores of a tile are computed, folded
// into the running softmax, then its V rows accumulated (K/V of a tile stay in L1).
constexpr int32_t kTile = 32;
// Query heads a tile is processed for at once (larger groups go in sub-groups).
constexpr int32_t kMaxSub = 4;

using detail::kLeadAhead;
using detail::kLeadMaxRowBytes;
using detail::kPrefetchAhead;
using detail::load8;
using detail::kRowTile;
using detail::OnlineState;
using detail::page_jumps;
using detail::RowsFn;

// Element offsets of the (pos, kv_head) rows for pos in [p0, p0 + n).
inline void tile_offsets(const PagedKvView& kv, int32_t p0, int32_t n, int32_t kv_head, int32_t hd, int64_t* off) {
  const int32_t B = kv.block_size;
  int32_t blk = p0 / B, slot = p0 % B;
  const int64_t head_off = static_cast<int64_t>(kv_head) * hd;
  int64_t row = (static_cast<int64_t>(kv.block_table[blk].value) * B + slot) * kv.kv_dim + head_off;
  for (int32_t j = 0; j < n; ++j) {
    off[j] = row;
    if (++slot == B) {
      slot = 0;
      ++blk;
      if (j + 1 < n) row = static_cast<int64_t>(kv.block_table[blk].value) * B * kv.kv_dim + head_off;
    } else {
      row += kv.kv_dim;
    }
  }
}

// Folds scores p[h * kTile + j] (j < n; lanes n..kTile are -inf) into head h's state:
// rescales l and o to the new max, replaces p by 2^(p - max) and adds them to l.
inline void fold_scores(float* p, int32_t n, int32_t hd, float& m, float& l, float* o) {
  __m256 vmx = _mm256_loadu_ps(p);
  for (int32_t j = 8; j < kTile; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(p + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmx);
  float mt = lanes[0];
  for (int i = 1; i < 8; ++i) mt = std::max(mt, lanes[i]);
  (void)n;
  if (mt > m) {
    const float alpha = std::exp2(m - mt);  // 0 on the first tile (m = -inf)
    l *= alpha;
    scale_inplace(o, alpha, hd);
    m = mt;
  }
  const __m256 vm = _mm256_set1_ps(m);
  __m256 vsum = _mm256_setzero_ps();
  for (int32_t j = 0; j < kTile; j += 8) {
    const __m256 e = softmax_exp2_8(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm));
    _mm256_storeu_ps(p + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  l += hsum8(vsum);
}

// One tile of n <= kTile positions (rows at element offsets off[j]) for G heads,
// head_dim = 8 * NV (NV = 0: 8 * nv_rt). q (times the score scale) and st.o are
// [G][hd]; p is [G][kTile].
template <int NV, bool kF16, int G>
void tile_step(const float* q, int nv_rt, const int64_t* off, int32_t n, const PagedKvView& kv, OnlineState st,
               float* p) {
  const int nv = NV ? NV : nv_rt;
  const int hd = 8 * nv;
  // Scores, P positions at a time so that P * G independent FMA chains are in flight.
  constexpr int P = G == 1 ? 4 : G == 2 ? 4 : 2;
  int32_t j = 0;
  for (; j + P <= n; j += P) {
    __m256 acc[P][G];
#pragma GCC unroll 8
    for (int a = 0; a < P; ++a)
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h) acc[a][h] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int v = 0; v < nv; ++v) {
      __m256 kk[P];
#pragma GCC unroll 8
      for (int a = 0; a < P; ++a) kk[a] = load8<kF16>(kv.k, off[j + a] + 8 * v);
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + h * hd + 8 * v);
#pragma GCC unroll 8
        for (int a = 0; a < P; ++a) acc[a][h] = _mm256_fmadd_ps(qv, kk[a], acc[a][h]);
      }
    }
#pragma GCC unroll 8
    for (int a = 0; a < P; ++a)
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h) p[h * kTile + j + a] = hsum8(acc[a][h]);
  }
  for (; j < n; ++j) {
    __m256 acc[G];
#pragma GCC unroll 8
    for (int h = 0; h < G; ++h) acc[h] = _mm256_setzero_ps();
#pragma GCC unroll 16
    for (int v = 0; v < nv; ++v) {
      const __m256 kk = load8<kF16>(kv.k, off[j] + 8 * v);
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h) acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * hd + 8 * v), kk, acc[h]);
    }
#pragma GCC unroll 8
    for (int h = 0; h < G; ++h) p[h * kTile + j] = hsum8(acc[h]);
  }
  for (int h = 0; h < G; ++h) {
    std::fill(p + h * kTile + n, p + (h + 1) * kTile, -std::numeric_limits<float>::infinity());
    fold_scores(p + h * kTile, n, hd, st.m[h], st.l[h], st.o + h * hd);
  }
  // o[h] += sum_j p[h][j] V_j, R rows at a time, row by row (V rows are read as
  // streams; o stays in L1). Every V vector is widened once and used for all G heads.
  auto pv = [&]<int R>(int32_t j0) {
#pragma GCC unroll 16
    for (int v = 0; v < nv; ++v) {
      __m256 vv[R];
#pragma GCC unroll 8
      for (int a = 0; a < R; ++a) vv[a] = load8<kF16>(kv.v, off[j0 + a] + 8 * v);
#pragma GCC unroll 8
      for (int h = 0; h < G; ++h) {
        float* oh = st.o + h * hd + 8 * v;
        __m256 acc = _mm256_loadu_ps(oh);
#pragma GCC unroll 8
        for (int a = 0; a < R; ++a) acc = _mm256_fmadd_ps(_mm256_broadcast_ss(p + h * kTile + j0 + a), vv[a], acc);
        _mm256_storeu_ps(oh, acc);
      }
    }
  };
  int32_t jv = 0;
  for (; jv + 4 <= n; jv += 4) pv.template operator()<4>(jv);
  for (; jv < n; ++jv) pv.template operator()<1>(jv);
}

// tile_step for head dims that are not a multiple of 8 (plain loops; fp16 rows widened).
void tile_step_generic(const float* q, int32_t g, int32_t hd, const int64_t* off, int32_t n, const PagedKvView& kv,
                       OnlineState st, float* p, float* buf) {
  for (int32_t j = 0; j < n; ++j) {
    const float* kr = kv.f16 ? (fp16_to_fp32_row(static_cast<const uint16_t*>(kv.k) + off[j], buf, hd), buf)
                             : static_cast<const float*>(kv.k) + off[j];
    for (int32_t h = 0; h < g; ++h) p[h * kTile + j] = dot(q + h * hd, kr, hd);
  }
  for (int32_t h = 0; h < g; ++h) {
    std::fill(p + h * kTile + n, p + (h + 1) * kTile, -std::numeric_limits<float>::infinity());
    fold_scores(p + h * kTile, n, hd, st.m[h], st.l[h], st.o + h * hd);
  }
  for (int32_t j = 0; j < n; ++j) {
    const float* vr = kv.f16 ? (fp16_to_fp32_row(static_cast<const uint16_t*>(kv.v) + off[j], buf, hd), buf)
                             : static_cast<const float*>(kv.v) + off[j];
    for (int32_t h = 0; h < g; ++h) axpy(p[h * kTile + j], vr, st.o + h * hd, hd);
  }
}

template <int NV, bool kF16>
void tile_step_sub(const float* q, int32_t g, int nv_rt, const int64_t* off, int32_t n, const PagedKvView& kv,
                   OnlineState st, float* p) {
  switch (g) {
    case 1: return tile_step<NV, kF16, 1>(q, nv_rt, off, n, kv, st, p);
    case 2: return tile_step<NV, kF16, 2>(q, nv_rt, off, n, kv, st, p);
    case 3: return tile_step<NV, kF16, 3>(q, nv_rt, off, n, kv, st, p);
    default: return tile_step<NV, kF16, 4>(q, nv_rt, off, n, kv, st, p);
  }
}

using TileFn = void (*)(const float*, int32_t, int, const int64_t*, int32_t, const PagedKvView&, OnlineState, float*);

template <bool kF16>
TileFn pick_tile_fn(int32_t hd) {
  switch (hd) {
    case 16: return tile_step_sub<2, kF16>;
    case 32: return tile_step_sub<4, kF16>;
    case 64: return tile_step_sub<8, kF16>;
    case 128: return tile_step_sub<16, kF16>;
    default: return tile_step_sub<0, kF16>;
  }
}

// The 512-bit decode kernel where the level asks for it and g and the cache type allow
// (fp16; f32 for groups of 8, whose score pass has the heads in lanes, and for other
// groups where f32_wide), else null. What attend_range runs and what
// decode_attention_vector_bits reports.
// fp16_math: fp16 caches on the build whose value pass (and groups of 4 and 8's score pass)
// multiplies in half precision, where the CPU has AVX512-FP16 (decode_attention_fp16_math).
RowsFn wide_rows_fn(Isa isa, int32_t hd, int32_t g, bool f16, bool f32_wide, bool row_prefetch = true,
                    bool fp16_math = false, bool bf16_scores = false) {
  if (isa < Isa::kAvx512VnniZmm || !(f16 || f32_wide || detail::zmm_query_lanes(g) != 0)) return nullptr;
  if (decode_attention_fp16_math(fp16_math, isa, f16)) {
    return detail::isa_avx512fp16::pick_rows_fn_zmm(hd, g, f16, row_prefetch);
  }
  if (decode_attention_bf16_scores(bf16_scores, fp16_math, isa, f16, g, hd)) {
    return detail::isa_avx512bf16dec::pick_rows_fn_zmm(hd, g, f16, row_prefetch);
  }
  return detail::isa_avx512::pick_rows_fn_zmm(hd, g, f16, row_prefetch);
}

// The queries q (heads = g * KV heads, hd floats each) in the 512-bit kernel's layout
// (detail::zmm_query_lanes): per KV head, register c of its g * hd floats holds q_h[c * R
// + r] in lane h * R + r. bf16 (the bf16 scores' kernel, R = 2): in bf16 (rounded to
// nearest, ties to even), two per lane: per KV head, register c of its g * hd / 2 floats
// holds q_h[4c + t] in 16-bit element 4h + t (t < 4), in the first half of its g * hd floats.
void interleave_query(const float* q, int32_t heads, int32_t g, int32_t hd, float* out, bool bf16) {
  const int32_t r = detail::zmm_query_lanes(g);
  if (bf16) {
    for (int32_t h0 = 0; h0 < heads; h0 += g) {
      const float* src = q + static_cast<int64_t>(h0) * hd;
      uint16_t* dst = reinterpret_cast<uint16_t*>(out + static_cast<int64_t>(h0) * hd);
      for (int32_t c = 0; c < hd / 4; ++c) {
        for (int32_t h = 0; h < g; ++h) {
          for (int32_t t = 0; t < 4; ++t) {
            dst[c * 32 + h * 4 + t] = fp32_to_bf16(src[static_cast<int64_t>(h) * hd + 4 * c + t]);
          }
        }
      }
    }
    return;
  }
  for (int32_t h0 = 0; h0 < heads; h0 += g) {
    const float* src = q + static_cast<int64_t>(h0) * hd;
    float* dst = out + static_cast<int64_t>(h0) * hd;
    for (int32_t c = 0; c < hd / r; ++c) {
      for (int32_t h = 0; h < g; ++h) {
        for (int32_t i = 0; i < r; ++i) dst[c * 16 + h * r + i] = src[static_cast<int64_t>(h) * hd + c * r + i];
      }
    }
  }
}

// The queries in fp16 for the half-precision score pass (scores_lanes_half) of groups of 8,
// from interleave_query's float layout `in` (g = 8: register c lane 2h + r = q_h[2c + r]):
// per KV head, its 8 * hd halves at out + kvh * 8 * hd, 16-bit element 4h + t of register c
// (32 halves) holding q_h[4c + t], rounded to nearest. Register c's halves are dword h of
// float register 2c, then dword h of 2c + 1, for h = 0..7: two registers' fp16 dwords
// interleaved.
void interleave_half_query8(const float* in, int32_t heads, int32_t hd, uint16_t* out) {
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT;
  for (int64_t c = 0; c < static_cast<int64_t>(heads) * hd / 32; ++c) {
    const float* a = in + 32 * c;  // float registers 2c and 2c + 1
    const __m128i a_lo = _mm256_cvtps_ph(_mm256_loadu_ps(a), kRound);
    const __m128i a_hi = _mm256_cvtps_ph(_mm256_loadu_ps(a + 8), kRound);
    const __m128i b_lo = _mm256_cvtps_ph(_mm256_loadu_ps(a + 16), kRound);
    const __m128i b_hi = _mm256_cvtps_ph(_mm256_loadu_ps(a + 24), kRound);
    __m128i* dst = reinterpret_cast<__m128i*>(out + 32 * c);
    _mm_storeu_si128(dst, _mm_unpacklo_epi32(a_lo, b_lo));  // heads 0, 1
    _mm_storeu_si128(dst + 1, _mm_unpackhi_epi32(a_lo, b_lo));
    _mm_storeu_si128(dst + 2, _mm_unpacklo_epi32(a_hi, b_hi));  // heads 4, 5
    _mm_storeu_si128(dst + 3, _mm_unpackhi_epi32(a_hi, b_hi));
  }
}

// As interleave_half_query8 for groups of 4, from the queries head after head (q_h at in + h
// * hd): 16-bit element 8h + t of register c holding q_h[8c + t].
void interleave_half_query4(const float* in, int32_t heads, int32_t hd, uint16_t* out) {
  for (int32_t h = 0; h < heads; ++h) {
    const float* src = in + static_cast<int64_t>(h) * hd;
    uint16_t* dst = out + static_cast<int64_t>(h / 4) * 4 * hd + 8 * (h % 4);
    for (int32_t c = 0; c < hd / 8; ++c) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 32 * c),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + 8 * c), _MM_FROUND_TO_NEAREST_INT));
    }
  }
}

// The softmax states of the g query heads of each KV head in [kv0, kv1) over positions
// [begin, end), into st (m = -inf, l = o = 0 first); head (kvh - kv0) * g + h reads
// q[((kvh - kv0) * g + h) * hd ...]. Positions are walked in tiles in the outer loop and
// KV heads in the inner one, so one pass reads each position's [kv0, kv1) rows together
// (contiguous for all heads: one page's worth of rows at a time, not one row per page).
// The position-major kernel (rows_step) where the shape allows, else tile_step per KV head.
// `stream` (attend_token only: kv0 = 0, kv1 = n_head_kv): see DecodeStream.
// Scratch: `p` holds p_floats(heads) floats, `buf` 2 * heads * hd, `rows` end - begin +
// kPrefetchAhead int64s.
void attend_range(const float* q, int32_t g, int32_t kv0, int32_t kv1, int32_t begin, int32_t end,
                  const PagedKvView& kv, int32_t hd, float scale, OnlineState st, float* p, float* buf,
                  int64_t* rows, const AttentionDims& d, const DecodeStream& stream = {}) {
  const Isa isa = d.isa;
  const int32_t heads = g * (kv1 - kv0);
  // The kernels take the query times the score scale, as attend_chunk's do: decode and
  // prefill round the same products, so their scores differ only in the order of the sums.
  float* const q_scaled = buf + static_cast<int64_t>(heads) * hd;
  for (int64_t i = 0; i < static_cast<int64_t>(heads) * hd; ++i) q_scaled[i] = q[i] * scale;
  q = q_scaled;
  std::fill(st.m, st.m + heads, -std::numeric_limits<float>::infinity());
  std::fill(st.l, st.l + heads, 0.0f);
  std::fill(st.o, st.o + static_cast<int64_t>(heads) * hd, 0.0f);
  const TileFn fn = hd % 8 != 0 ? nullptr : kv.f16 ? pick_tile_fn<true>(hd) : pick_tile_fn<false>(hd);
  if (begin < end) tile_offsets(kv, begin, end - begin, 0, hd, rows);
  const bool bf16 = decode_attention_bf16_scores(d.bf16_scores, d.fp16_math, isa, kv.f16, g, hd);
  RowsFn rf = wide_rows_fn(isa, hd, g, kv.f16, d.f32_wide, d.row_prefetch, d.fp16_math, bf16);
  // The fp16 math kernel scores groups of 4 and 8 of fp16 caches in half precision: the
  // queries in fp16 too (in the half of buf the float queries do not use).
  const bool half = rf && kv.f16 && decode_attention_fp16_math(d.fp16_math, isa, kv.f16) &&
                    detail::decode_half_scores(g);
  const uint16_t* qh = nullptr;
  if (rf && detail::zmm_query_lanes(g) != 0) {
    // buf's first heads * hd floats: tile_step_generic's, unused here.
    interleave_query(q, heads, g, hd, buf, bf16);
    q = buf;
    if (half) {
      interleave_half_query8(buf, heads, hd, reinterpret_cast<uint16_t*>(q_scaled));
      qh = reinterpret_cast<const uint16_t*>(q_scaled);
    }
  } else if (half) {
    interleave_half_query4(q_scaled, heads, hd, reinterpret_cast<uint16_t*>(buf));
    qh = reinterpret_cast<const uint16_t*>(buf);
  }
  if (!rf) {
    rf = isa >= Isa::kAvx512Vnni ? detail::isa_avx512::pick_rows_fn(hd, g, kv.f16)
                                 : detail::isa_avx2::pick_rows_fn(hd, g, kv.f16);
  }
  if (rf) {
    // The kernel prefetches kPrefetchAhead positions on; past `end` it runs on into the
    // next call's first positions (rows after end - begin), if the caller named them.
    int32_t extra = 0;
    if (stream.next && stream.next_n_ctx > 0) {
      extra = std::min(kPrefetchAhead, stream.next_n_ctx);
      tile_offsets(*stream.next, 0, extra, 0, hd, rows + (end - begin));
    }
    // The first ones are asked for here, unless the call before streamed them in.
    const int64_t row_bytes = static_cast<int64_t>(kv1 - kv0) * hd * (kv.f16 ? 2 : 4);
    for (int32_t j = 0; !stream.started && j < std::min(kPrefetchAhead, end - begin); ++j) {
      const int64_t at = (rows[j] + static_cast<int64_t>(kv0) * hd) * (kv.f16 ? 2 : 4);
      for (int64_t b = 0; b < row_bytes; b += 64) {
        _mm_prefetch(static_cast<const char*>(kv.k) + at + b, _MM_HINT_T1);
        _mm_prefetch(static_cast<const char*>(kv.v) + at + b, _MM_HINT_T1);
      }
    }
    // Page leaders (kLeadAhead) for rows [j0, j1) of `rows`, where the rows are small.
    const int32_t n_rows = end - begin + extra;
    uintptr_t last_k = 0, last_v = 0;
    auto leaders = [&](int32_t j0, int32_t j1) {
      if (row_bytes > kLeadMaxRowBytes) return;
      auto fetch = [](uintptr_t x) { _mm_prefetch(reinterpret_cast<const char*>(x), _MM_HINT_T1); };
      for (int32_t j = j0; j < std::min(j1, n_rows); ++j) {
        const int64_t at = (rows[j] + static_cast<int64_t>(kv0) * hd) * (kv.f16 ? 2 : 4);
        page_jumps(reinterpret_cast<uintptr_t>(kv.k) + at, row_bytes, &last_k, fetch);
        page_jumps(reinterpret_cast<uintptr_t>(kv.v) + at, row_bytes, &last_v, fetch);
      }
    };
    if (!stream.started) leaders(kPrefetchAhead, kLeadAhead);
    for (int32_t p0 = begin; p0 < end; p0 += kRowTile) {
      leaders(p0 - begin + kLeadAhead, p0 - begin + kLeadAhead + kRowTile);
      rf(q, qh, kv0, kv1, rows + (p0 - begin), std::min(kRowTile, end - p0), end - p0 + extra, kv, st, p);
    }
    return;
  }
  int64_t loc[kTile];  // this tile's rows of one KV head
  for (int32_t p0 = begin; p0 < end; p0 += kTile) {
    const int32_t n = std::min(kTile, end - p0);
    const int64_t* off = rows + (p0 - begin);
    for (int32_t kvh = kv0; kvh < kv1; ++kvh) {
      const int64_t head_off = static_cast<int64_t>(kvh) * hd;
      for (int32_t j = 0; j < n; ++j) loc[j] = off[j] + head_off;
      for (int32_t h0 = 0; h0 < g; h0 += kMaxSub) {
        const int32_t sub = std::min(kMaxSub, g - h0);
        const int64_t h = static_cast<int64_t>(kvh - kv0) * g + h0;
        const OnlineState s{st.m + h, st.l + h, st.o + h * hd};
        const float* qs = q + h * hd;
        if (fn) {
          fn(qs, sub, hd / 8, loc, n, kv, s, p);
        } else {
          tile_step_generic(qs, sub, hd, loc, n, kv, s, p, buf);
        }
      }
    }
  }
}

// Floats of attend_range's `p` scratch for `heads` query heads.
inline size_t p_floats(int32_t heads) {
  return std::max<size_t>(kMaxSub * kTile, static_cast<size_t>(kRowTile) * ((heads + 7) & ~7));
}

// attend_range over [0, n_ctx), normalised into out[heads * hd].
void attend_heads(const float* q, int32_t g, int32_t kv0, int32_t kv1, int32_t n_ctx, const PagedKvView& kv,
                  int32_t hd, float scale, const AttentionDims& d, float* out,
                  AttentionScratch& scratch, const DecodeStream& stream = {}) {
  const int32_t heads = g * (kv1 - kv0);
  const size_t o_size = static_cast<size_t>(heads) * hd;
  scratch.scores.resize(2 * static_cast<size_t>(heads) + o_size + p_floats(heads) + 2 * o_size);
  float* base = scratch.scores.data();
  const OnlineState st{base, base + heads, base + 2 * heads};
  float* p = base + 2 * heads + o_size;
  scratch.rows.resize(static_cast<size_t>(n_ctx) + kPrefetchAhead);
  attend_range(q, g, kv0, kv1, 0, n_ctx, kv, hd, scale, st, p, p + p_floats(heads), scratch.rows.data(), d, stream);
  for (int32_t h = 0; h < heads; ++h) {
    scale_inplace(st.o + static_cast<int64_t>(h) * hd, 1.0f / st.l[h], hd);
    std::memcpy(out + static_cast<int64_t>(h) * hd, st.o + static_cast<int64_t>(h) * hd, hd * sizeof(float));
  }
}

}  // namespace

void attend_one(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d,
                float* out, AttentionScratch& scratch) {
  attend_heads(q, 1, kv_head, kv_head + 1, n_ctx, kv, d.head_dim, score_scale(d), d, out, scratch);
}

void attend_group(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d,
                  float* out, AttentionScratch& scratch) {
  attend_heads(q, d.n_head / d.n_head_kv, kv_head, kv_head + 1, n_ctx, kv, d.head_dim, score_scale(d), d, out,
               scratch);
}

bool attention_f32_wide_for(const CpuFeatures& cpu) { return cpu.vendor == "GenuineIntel"; }

StatusOr<bool> attention_f32_wide_from_env() {
  return switch_from_env("ECOSERVE_ATTENTION_F32_WIDE", attention_f32_wide_for(detect_cpu_features()));
}

bool default_attention_f32_wide() {
  static const bool kWide = [] {
    StatusOr<bool> w = attention_f32_wide_from_env();
    return w.ok() ? *w : attention_f32_wide_for(detect_cpu_features());
  }();
  return kWide;
}

bool attention_row_prefetch_for(const CpuFeatures&) { return true; }

StatusOr<bool> attention_row_prefetch_from_env() {
  return switch_from_env("ECOSERVE_ATTENTION_ROW_PREFETCH", attention_row_prefetch_for(detect_cpu_features()));
}

bool default_attention_row_prefetch() {
  static const bool kRows = [] {
    StatusOr<bool> r = attention_row_prefetch_from_env();
    return r.ok() ? *r : attention_row_prefetch_for(detect_cpu_features());
  }();
  return kRows;
}

int32_t decode_attention_vector_bits(Isa isa, int32_t head_dim, int32_t group, bool f16, bool f32_wide) {
  return wide_rows_fn(isa, head_dim, group, f16, f32_wide) != nullptr ? 512 : 256;
}

int32_t prefill_attention_vector_bits(Isa isa, int32_t head_dim) {
  return isa >= Isa::kAvx512VnniZmm && head_dim % 16 == 0 ? 512 : 256;
}

bool decode_attention_fp16_math(bool fp16_math, Isa isa, bool f16) {
  static const bool kCpu = detect_cpu_features().avx512_fp16;
  return fp16_math && f16 && kCpu && isa >= Isa::kAvx512VnniZmm;
}

bool decode_attention_bf16_scores(bool bf16_scores, bool fp16_math, Isa isa, bool f16, int32_t g, int32_t head_dim) {
  static const bool kCpu = detect_cpu_features().avx512_bf16;
  return bf16_scores && f16 && g == 8 && (head_dim == 64 || head_dim == 128) && kCpu && isa >= Isa::kAvx512VnniZmm &&
         !decode_attention_fp16_math(fp16_math, isa, f16);
}

StatusOr<bool> attention_fp16_math_from_env() { return switch_from_env("ECOSERVE_ATTENTION_FP16_MATH", true); }

bool default_attention_fp16_math() {
  static const bool kOn = [] {
    StatusOr<bool> on = attention_fp16_math_from_env();
    return !on.ok() || *on;
  }();
  return kOn;
}

bool prefill_attention_amx_bf16(bool amx_bf16, Isa isa, int32_t head_dim, int32_t n_q) {
  static const bool kCpu = amx_bf16_supported(detect_cpu_features());
  return amx_bf16 && kCpu && isa == Isa::kAvx512Amx && head_dim % 32 == 0 && n_q >= kAmxBf16MinTokens;
}

bool prefill_attention_bf16_vectors(bool bf16_vectors, Isa isa, int32_t head_dim, int32_t n_q) {
  static const bool kCpu = detect_cpu_features().avx512_bf16;
  return bf16_vectors && kCpu && isa == Isa::kAvx512VnniZmm && head_dim % 32 == 0 && n_q >= kAmxBf16MinTokens;
}

StatusOr<bool> attention_bf16_from_env() {
  return switch_from_env("ECOSERVE_ATTENTION_BF16", detect_cpu_features().fast_bf16_dot);
}

bool default_attention_bf16() {
  static const bool kOn = [] {
    StatusOr<bool> on = attention_bf16_from_env();
    return on.ok() ? *on : detect_cpu_features().fast_bf16_dot;
  }();
  return kOn;
}

void attend_token(const float* q, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d, float* out,
                  AttentionScratch& scratch, const DecodeStream& stream) {
  attend_heads(q, d.n_head / d.n_head_kv, 0, d.n_head_kv, n_ctx, kv, d.head_dim, score_scale(d), d, out, scratch,
               stream);
}

void attend_kv_heads(const float* q, int32_t kv_begin, int32_t kv_end, int32_t n_ctx, const PagedKvView& kv,
                     const AttentionDims& d, float* out, AttentionScratch& scratch) {
  const int32_t g = d.n_head / d.n_head_kv;
  const int64_t first = static_cast<int64_t>(kv_begin) * g * d.head_dim;
  attend_heads(q + first, g, kv_begin, kv_end, n_ctx, kv, d.head_dim, score_scale(d), d, out + first, scratch);
}

void attend_partial(const float* q, int32_t begin, int32_t end, const PagedKvView& kv, const AttentionDims& d,
                    AttentionPartial& part, AttentionScratch& scratch) {
  const int32_t hd = d.head_dim;
  part.max.resize(d.n_head);
  part.sum.resize(d.n_head);
  part.acc.resize(static_cast<size_t>(d.n_head) * hd);
  scratch.scores.resize(p_floats(d.n_head) + 2 * static_cast<size_t>(d.n_head) * hd);
  scratch.rows.resize(static_cast<size_t>(std::max(0, end - begin)) + kPrefetchAhead);
  attend_range(q, d.n_head / d.n_head_kv, 0, d.n_head_kv, begin, end, kv, hd, score_scale(d),
               OnlineState{part.max.data(), part.sum.data(), part.acc.data()}, scratch.scores.data(),
               scratch.scores.data() + p_floats(d.n_head), scratch.rows.data(), d);
}

void merge_partials(std::span<const AttentionPartial> parts, int32_t n_head, int32_t head_dim, float* out) {
  for (int32_t h = 0; h < n_head; ++h) {
    float mx = -std::numeric_limits<float>::infinity();
    for (const AttentionPartial& pt : parts) mx = std::max(mx, pt.max[h]);
    float* o = out + static_cast<int64_t>(h) * head_dim;
    std::fill(o, o + head_dim, 0.0f);
    float l = 0.0f;
    for (const AttentionPartial& pt : parts) {
      if (pt.max[h] == -std::numeric_limits<float>::infinity()) continue;  // an empty range
      const float w = std::exp2(pt.max[h] - mx);
      l += w * pt.sum[h];
      axpy(w, pt.acc.data() + static_cast<int64_t>(h) * head_dim, o, head_dim);
    }
    scale_inplace(o, 1.0f / l, head_dim);
  }
}

void attend_chunk(const float* q, int64_t q_stride, int32_t n_q, int32_t start, int32_t kv_head,
                  const PagedKvView& kv, const AttentionDims& d, float* out, int64_t out_stride,
                  AttentionScratch& scratch) {
  const int32_t hd = d.head_dim;
  const int32_t n_ctx = start + n_q;
  const int32_t group = d.n_head / d.n_head_kv;
  // Query tiles of `tile` tokens with all `group` heads of this KV head: m = group * tile
  // rows (row = token * group + head; a token's heads are adjacent in q and out).
  const int32_t tile = std::max<int32_t>(1, kQueryRows / group);
  const int64_t head0 = static_cast<int64_t>(kv_head) * group * hd;  // this KV head's first query head
  const bool amx = prefill_attention_amx_bf16(d.amx_bf16, d.isa, hd, n_q);
  if (amx || prefill_attention_bf16_vectors(d.bf16_vectors, d.isa, hd, n_q)) {
    const int64_t n_pad = (static_cast<int64_t>(n_ctx) + 31) / 32 * 32;
    // Buffers carved from scratch.k, each rounded up to 64 bytes (16 floats).
    auto floats = [](int64_t n) { return (n + 15) / 16 * 16; };
    const int64_t kv_floats = floats(n_pad * hd / 2), q_floats = floats(16 * hd / 2), p_floats16 = floats(16 * 32 / 2);
    const int64_t total = 2 * kv_floats + q_floats + p_floats16 + 16 * hd + 2 * 16 * 32;
    scratch.k.resize(static_cast<size_t>(total + 16));
    float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.k.data()) + 63) / 64 * 64);
    scratch.rows.resize(static_cast<size_t>(n_ctx));
    for (int32_t j = 0; j < n_ctx; ++j) scratch.rows[j] = offset_of(kv, j, kv_head, hd);
    detail::Bf16ChunkArgs a{};
    a.q = q, a.q_stride = q_stride, a.n_q = n_q, a.start = start, a.head0 = head0;
    a.k = kv.k, a.v = kv.v, a.f16 = kv.f16, a.off = scratch.rows.data();
    a.hd = hd, a.group = group, a.scale = score_scale(d), a.out = out, a.out_stride = out_stride;
    float* at = base;
    auto take = [&](int64_t n) {
      float* p = at;
      at += n;
      return p;
    };
    a.buf.k = reinterpret_cast<uint16_t*>(take(kv_floats));
    a.buf.v = reinterpret_cast<uint16_t*>(take(kv_floats));
    a.buf.q = reinterpret_cast<uint16_t*>(take(q_floats));
    a.buf.p = reinterpret_cast<uint16_t*>(take(p_floats16));
    a.buf.o = take(16 * hd);
    a.buf.s = take(2 * 16 * 32);
    if (amx) {
      detail::isa_avx512amx::chunk_bf16(a);
    } else {
      detail::isa_avx512bf16::chunk_bf16(a);
    }
    return;
  }
  if (hd % 16 == 0) {
    using detail::ChunkBuffers;
    using detail::kKeyBlock;
    // Fused: K transposed and V gathered once (fp16 widened exactly), then per tile and
    // key block the scores, an online softmax per row, and the values, in L1-sized
    // buffers. A row's result depends only on its own query and positions (key blocks
    // start at multiples of kKeyBlock), not on the tile or the chunk it is computed in.
    const int64_t n_pad = (static_cast<int64_t>(n_ctx) + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
    const int64_t rows_max = static_cast<int64_t>(tile) * group;
    scratch.k.resize(static_cast<size_t>(hd * n_pad));
    scratch.v.resize(static_cast<size_t>(n_ctx) * hd);
    scratch.q.resize(static_cast<size_t>(rows_max * hd));
    scratch.o.resize(static_cast<size_t>(rows_max * hd));
    scratch.scores.resize(static_cast<size_t>(rows_max * (kKeyBlock + 2)));
    float* kt = scratch.k.data();
    float* vv = scratch.v.data();
    float* qs = scratch.q.data();
    float* s = scratch.scores.data();  // rows_max x kKeyBlock scores, then m and l
    const ChunkBuffers b{kt, vv, qs, scratch.o.data(), s, s + rows_max * kKeyBlock, s + rows_max * (kKeyBlock + 1)};
    const detail::ChunkBlockFn key_block = d.isa >= Isa::kAvx512VnniZmm ? detail::isa_avx512::chunk_key_block_zmm
                                           : d.isa >= Isa::kAvx512Vnni  ? detail::isa_avx512::chunk_key_block
                                                                        : detail::isa_avx2::chunk_key_block;
    // K transposed 8 positions x 8 dimensions at a time (8-aligned runs of positions lie
    // in one key block), then the last positions and the padding one value at a time.
    int32_t j8 = 0;
    for (; j8 + 8 <= n_ctx; j8 += 8) {
      int64_t off[8];
      for (int r = 0; r < 8; ++r) off[r] = offset_of(kv, j8 + r, kv_head, hd);
      float* kt_block = kt + static_cast<int64_t>(j8 / kKeyBlock) * hd * kKeyBlock + j8 % kKeyBlock;
      for (int32_t i0 = 0; i0 < hd; i0 += 8) {
        __m256 rows[8], cols[8];
        for (int r = 0; r < 8; ++r) {
          rows[r] = kv.f16 ? detail::load8<true>(kv.k, off[r] + i0) : detail::load8<false>(kv.k, off[r] + i0);
        }
        transpose8(rows, cols);
        for (int c = 0; c < 8; ++c) _mm256_storeu_ps(kt_block + static_cast<int64_t>(i0 + c) * kKeyBlock, cols[c]);
      }
      for (int r = 0; r < 8; ++r) widen_row(kv.v, kv.f16, off[r], vv + static_cast<int64_t>(j8 + r) * hd, hd);
    }
    for (int32_t j = j8; j < n_pad; ++j) {
      float* kt_col = kt + static_cast<int64_t>(j / kKeyBlock) * hd * kKeyBlock + j % kKeyBlock;
      if (j >= n_ctx) {  // the last block's padding: read by score tiles, masked
        for (int32_t i = 0; i < hd; ++i) kt_col[i * kKeyBlock] = 0.0f;
        continue;
      }
      const int64_t off = offset_of(kv, j, kv_head, hd);
      for (int32_t i0 = 0; i0 < hd; i0 += 16) {
        float w[16];
        widen_row(kv.k, kv.f16, off + i0, w, 16);
        for (int32_t i = 0; i < 16; ++i) kt_col[(i0 + i) * kKeyBlock] = w[i];
      }
      widen_row(kv.v, kv.f16, off, vv + static_cast<int64_t>(j) * hd, hd);
    }
    const __m256 vscale = _mm256_set1_ps(score_scale(d));
    for (int32_t i0 = 0; i0 < n_q; i0 += tile) {
      const int32_t rows = std::min(tile, n_q - i0);
      const int32_t m = rows * group;
      const int32_t first_pos = start + i0;
      for (int32_t r = 0; r < rows; ++r) {
        const float* src = q + (i0 + r) * q_stride + head0;
        float* dst = qs + static_cast<int64_t>(r) * group * hd;
        for (int64_t i = 0; i < static_cast<int64_t>(group) * hd; i += 8) {
          _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(src + i), vscale));
        }
      }
      std::fill(b.o, b.o + static_cast<int64_t>(m) * hd, 0.0f);
      std::fill(b.m, b.m + m, -std::numeric_limits<float>::infinity());
      std::fill(b.l, b.l + m, 0.0f);
      const int32_t last_pos = first_pos + rows - 1;
      for (int32_t kb = 0; kb <= last_pos; kb += kKeyBlock) {
        key_block(b, hd, m, kb, std::min(kKeyBlock, last_pos + 1 - kb), first_pos, group);
      }
      for (int32_t r = 0; r < m; ++r) {
        const float* o = b.o + static_cast<int64_t>(r) * hd;
        float* dst = out + (i0 + r / group) * out_stride + head0 + static_cast<int64_t>(r % group) * hd;
        const __m256 inv = _mm256_set1_ps(1.0f / b.l[r]);
        for (int32_t i = 0; i < hd; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(o + i), inv));
      }
    }
    return;
  }
  detail::make_openblas_single_threaded();
  // Other head sizes: K and V gathered into contiguous [n_ctx, hd] matrices, GEMMs (OpenBLAS).
  scratch.k.resize(static_cast<size_t>(n_ctx) * hd);
  scratch.v.resize(static_cast<size_t>(n_ctx) * hd);
  for (int32_t j = 0; j < n_ctx; ++j) {
    float* kd = scratch.k.data() + static_cast<size_t>(j) * hd;
    float* vd = scratch.v.data() + static_cast<size_t>(j) * hd;
    const int64_t off = offset_of(kv, j, kv_head, hd);
    widen_row(kv.k, kv.f16, off, kd, hd);
    widen_row(kv.v, kv.f16, off, vd, hd);
  }
  scratch.q.resize(static_cast<size_t>(tile) * group * hd);
  scratch.o.resize(scratch.q.size());
  scratch.scores.resize(static_cast<size_t>(tile) * group * n_ctx);
  float* s = scratch.scores.data();
  for (int32_t i0 = 0; i0 < n_q; i0 += tile) {
    const int32_t rows = std::min(tile, n_q - i0);
    const int32_t m = rows * group;
    const int32_t len = start + i0 + rows;  // keys the last token of the tile sees
    const float scale = score_scale(d);
    for (int32_t r = 0; r < rows; ++r) {
      const float* src = q + (i0 + r) * q_stride + head0;
      float* dst = scratch.q.data() + static_cast<int64_t>(r) * group * hd;
      for (int64_t i = 0; i < static_cast<int64_t>(group) * hd; ++i) dst[i] = src[i] * scale;
    }
    // S[m, len] = (scale * Q_tile) K[0..len)^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, len, hd, 1.0f, scratch.q.data(), hd, scratch.k.data(),
                hd, 0.0f, s, len);
    for (int32_t row = 0; row < m; ++row) {
      softmax_prefix(s + static_cast<int64_t>(row) * len, start + i0 + row / group + 1, len);
    }
    // O_tile[m, hd] = P V[0..len)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, len, 1.0f, s, len, scratch.v.data(), hd, 0.0f,
                scratch.o.data(), hd);
    for (int32_t r = 0; r < rows; ++r) {
      std::memcpy(out + (i0 + r) * out_stride + head0, scratch.o.data() + static_cast<int64_t>(r) * group * hd,
                  sizeof(float) * group * hd);
    }
  }
}

}  // namespace ecoserve::kernels
