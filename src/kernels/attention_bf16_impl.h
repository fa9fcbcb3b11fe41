// attend_chunk's bf16 prefill attention (AttentionDims::amx_bf16, AttentionDims::bf16_vectors),
// compiled once per product unit: included by attention_rows_avx512amx.cc (ECO_BF16_TILES 1:
// the two products on AMX-BF16 tiles) and attention_rows_avx512bf16.cc (ECO_BF16_TILES 0: on
// AVX512-BF16 vectors, vdpbf16ps) after defining ECO_BF16_NS (the namespace). Internal linkage
// apart from chunk_bf16, and no call to an inline function with external linkage
// (scripts/check_isa_objects.sh).
//
// Flash attention with the online softmax on vectors, the query rows in lanes. A query tile
// is 16 rows (row = token * group + head, the chunk's rows in order; rows past the last are
// zero, see what the last row sees and are never written back); per step of 32 positions
// (steps start at multiples of 32, so a row's steps do not depend on the chunk it is in):
//   scores  S^T (32 positions x 16 rows) = K Q^T, Q^T the rows times scale * log2(e) in bf16,
//           K in bf16: on tiles, A tiles of 16 positions x 32 dimensions (as the cache holds
//           them) times Q^T's B tiles, summed in the tile unit; on vectors, per position one
//           chain of vdpbf16ps over the head's pairs of dimensions (Q^T's pair c, 16 rows,
//           times the position's pair c in every lane);
//   softmax per position vector, each lane a row, in log2 units as the float kernels:
//           positions past a row's own masked; m moves to the step's largest score only
//           where that exceeds m by more than kLazyMax (the first step always: m starts at
//           -inf), so that most steps rescale nothing and the weights stay below
//           2^kLazyMax; alpha = 2^(m - m_new) (2^0 = 1 exactly where m stayed), p = 2^(s -
//           m_new) rounded to bf16 (P^T: pairs of positions x 16 rows), l = alpha * l + the
//           sum of the rounded weights;
//   values  O^T (dimensions x 16 rows) = alpha * O^T + V^T P^T, V^T (16 dimensions x 32
//           positions per tile: dword k of dimension d holds positions 2k, 2k + 1) times
//           P^T: on tiles, summed in the tile unit, O^T held there for the query tile's
//           steps where it fits (heads of up to 64 dimensions: four tiles; stored, scaled
//           on vectors and loaded back only at a step with alpha != 1), else loaded and
//           stored at each step; on vectors, per dimension one chain of vdpbf16ps over the
//           step's 16 pairs of positions, O^T kept in memory.
// While a query tile's steps run, the next tile's query rows are prefetched into L1 and its
// output rows for writing (a prompt's queries and outputs lie past L2; the outputs' reads
// for ownership had stalled each tile's stores).
//
// Intel Xeon (family 6 model 167), attention_bench BM_PrefillAttention tiles, one thread, ms
// per layer, five alternating rounds: synth 1b (32 / 4 heads of 64) 512 tokens 3.37-3.43 ->
// 2.46-2.53, 2048 tokens 45.5-45.7 -> 32.2-33.3; Llama (32 / 8 of 128) 512 5.63-6.05 ->
// 4.82-5.01, 2048 71.1-71.4 -> 58.8-62.7 (of which the prefetches: synth 1b 512 -> 3.10-3.14
// when issued at once at the tile's start, 2.46-2.53 spread over its steps two rows each; one
// row alike, four or eight 2.59-2.68; the query rows alone nothing, the outputs alone 3.20-3.23;
// O^T in tiles with m moving at every step 3.10-3.14, with kLazyMax 2.70-2.75). Tried, slower:
// the next step's scores stored right after their products (5.19 / 2.67) or after the
// softmax (2.57); the softmax without masks in whole steps (a second copy) and the position
// mask folded into the exponential's, both within the noise. Engine profile pp512 synth 1b Q8_0,
// one thread: attention 102-106 -> 65-68 ms a prompt, 389-400 -> 403-409 tok/s.
// A row with no visible position in a step gets alpha = 1, zero weights and zero products:
// o * 1 + 0 and l * 1 + 0 are exactly what they were, so a row's bits depend only on its
// query, its position and the cache, not on the tile, the chunk or the rows beside it (each
// output element is its own sum). They are not the float kernels' bits, and the tiles' and
// the vectors' differ from each other (each sums in its own order): the query, K, V and the
// weights carry bf16's 8 significant bits (attention_amx_bf16_test.cc checks the bound).
#ifndef ECO_BF16_NS
#error "define ECO_BF16_NS (and ECO_BF16_TILES) before including attention_bf16_impl.h"
#endif
#if !defined(__AVX512BF16__)
#error "attention_bf16_impl.h is built only into objects compiled with -mavx512bf16"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/attention_rows.h"
#include "kernels/bf16_transpose.h"
#include "kernels/vec_math.h"
#if ECO_BF16_TILES
#include "kernels/amx_tiles.h"
#endif

// GCC 12's AVX-512 headers (GCC bug 105593): see matmul_packed_impl.h.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ecoserve::kernels::detail::ECO_BF16_NS {
namespace {

#if ECO_BF16_TILES
// Tile numbers (GCC's tile intrinsics take literals).
#define ECO_AT_Q 0   // A: 16 query rows x 32 dimensions
#define ECO_AT_K 1   // B: 16 pairs of dimensions x 16 positions
#define ECO_AT_S0 2  // C: the step's scores, positions 0-15
#define ECO_AT_S1 3  // C: positions 16-31
#define ECO_AT_P 4   // A: 16 rows x the step's 32 weights
#define ECO_AT_V 5   // B: 16 pairs of positions x 16 dimensions
#define ECO_AT_O0 6  // C: 16 rows x 16 dimensions of P V
#define ECO_AT_O1 7
// Heads of up to 64 dimensions keep a query tile's O^T in tiles 4-7 (one per 16 dimensions)
// for all its steps; P^T then shares tile 0 with Q^T, V^T tile 1 with K.
#define ECO_AT_QP 0
#define ECO_AT_KV 1
#define ECO_O_TILES(op) \
  do {                  \
    op(4, 0);           \
    op(5, 1);           \
    if (dn_n > 2) {     \
      op(6, 2);         \
      op(7, 3);         \
    }                   \
  } while (0)
#define ECO_O_ZERO(t, n) _tile_zero(t)
#define ECO_O_STORE(t, n) _tile_stored(t, ot + 256 * (n), 64)
#define ECO_O_LOAD(t, n) _tile_loadd(t, ot + 256 * (n), 64)
#define ECO_O_VALUES(t, n)                                        \
  do {                                                            \
    _tile_loadd(ECO_AT_KV, vstep + (n) * kTileElems, 64);         \
    _tile_dpbf16ps(t, ECO_AT_KV, ECO_AT_QP);                      \
  } while (0)

void configure() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.set(t, 16, 64);
  cfg.load();
}
#else
// The dword (a pair of bf16) at p, in every lane.
inline __m512bh pair_bcast(const uint16_t* p) {
  int32_t x;
  std::memcpy(&x, p, 4);
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(x));
}

inline __m512bh load_bh(const uint16_t* p) { return reinterpret_cast<__m512bh>(_mm512_load_si512(p)); }
#endif

constexpr int32_t kStep = 32;        // positions per softmax step
constexpr float kLazyMax = 8.0f;     // how far (log2 units) a step's max may pass a row's before m moves
constexpr int64_t kPrefetchRowsPerStep = 2;  // the next query tile's rows prefetched per step
constexpr int64_t kTileElems = 512;  // bf16 in one A or B tile (16 rows of 64 bytes)

// 16 cache values at element `off` as float (fp16 widened exactly).
inline __m512 load16(const void* base, bool f16, int64_t off) {
  if (f16) {
    const auto* h = static_cast<const uint16_t*>(base) + off;
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
  }
  return _mm512_loadu_ps(static_cast<const float*>(base) + off);
}

// lo then hi as 32 bf16 (each rounded to nearest even once).
inline __m512i bf16x32(__m512 lo, __m512 hi) { return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)); }

// The 16 bf16 of `b` (lanes 0-15 of a bf16x32 half) back as floats, exactly.
inline __m512 widen_bf16(__m256i b) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16)); }

}  // namespace

void chunk_bf16(const Bf16ChunkArgs& a) {
  const int32_t hd = a.hd, group = a.group, n_ctx = a.start + a.n_q;
  const int32_t dc_n = hd / 32, dn_n = hd / 16;
  const int64_t n_pad = (static_cast<int64_t>(n_ctx) + kStep - 1) / kStep * kStep;
  // K in bf16 per 16 positions and 32 dimensions ([n_pad / 16][dc_n] tiles): on tiles as A
  // tiles (a row per position, as the cache holds them), on vectors transposed (a row per
  // pair of dimensions, dword j = position j), so that a pair's 16 positions lie in one line.
  // Positions past the context are zero.
  uint16_t* kt = a.buf.k;
  uint16_t* vt = a.buf.v;  // V^T: [n_pad / 32][dn_n] tiles (16 dimensions x 32 positions)
  for (int64_t p0 = 0; p0 < n_pad; p0 += 16) {
    for (int32_t dc = 0; dc < dc_n; ++dc) {
      uint16_t* tile = kt + (p0 / 16 * dc_n + dc) * kTileElems;
      __m512i r[16];
      for (int n = 0; n < 16; ++n) {
        const int64_t pos = p0 + n;
        r[n] = _mm512_setzero_si512();
        if (pos < n_ctx) {
          const int64_t off = a.off[pos] + 32 * dc;
          r[n] = bf16x32(load16(a.k, a.f16, off), load16(a.k, a.f16, off + 16));
        }
#if ECO_BF16_TILES
        _mm512_store_si512(tile + 32 * n, r[n]);
#endif
      }
#if !ECO_BF16_TILES
      bf16_store_transposed(r, tile);
#endif
    }
  }
  // V transposed: per 32 positions and 16 dimensions, the pairs (2k, 2k + 1) of positions
  // interleaved dimension by dimension (r[k], dword n = dimension n), then the 16 x 16
  // dwords transposed (tile row n = dimension n, dword k = positions 2k, 2k + 1).
  // Positions past the context are zero (their weights are zero; 0 x a stale value could
  // be NaN).
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3,
                       18, 2, 17, 1, 16, 0);
  for (int64_t p0 = 0; p0 < n_pad; p0 += kStep) {
    for (int32_t dn = 0; dn < dn_n; ++dn) {
      __m512i r[16];
      for (int k = 0; k < 16; ++k) {
        const int64_t pa = p0 + 2 * k, pb = pa + 1;
        const __m512 va = pa < n_ctx ? load16(a.v, a.f16, a.off[pa] + 16 * dn) : _mm512_setzero_ps();
        const __m512 vb = pb < n_ctx ? load16(a.v, a.f16, a.off[pb] + 16 * dn) : _mm512_setzero_ps();
        r[k] = _mm512_permutexvar_epi16(interleave, bf16x32(va, vb));
      }
      bf16_store_transposed(r, vt + (p0 / kStep * dn_n + dn) * kTileElems);
    }
  }

#if ECO_BF16_TILES
  configure();
  const bool resident = dn_n <= 4;
#endif
  const int64_t m_total = static_cast<int64_t>(a.n_q) * group;
  const __m512 vscale = _mm512_set1_ps(a.scale);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  uint16_t* qt = a.buf.q;  // Q^T: [dc_n] B tiles (16 pairs of dimensions x 16 rows)
  uint16_t* pt = a.buf.p;  // P^T: one B tile (16 pairs of positions x 16 rows)
  float* ot = a.buf.o;     // O^T: [hd][16 rows]
  float* s = a.buf.s;      // S^T of two steps: [2][32 positions][16 rows]
  for (int64_t r0 = 0; r0 < m_total; r0 += 16) {
    const int32_t rows = static_cast<int32_t>(m_total - r0 < 16 ? m_total - r0 : 16);
    // The query rows times the score scale, transposed into B tiles; rows past the last
    // are zero and see what the last row sees.
    alignas(64) int32_t pos_of[16];
    for (int32_t dc = 0; dc < dc_n; ++dc) {
      __m512i r[16];
      for (int32_t i = 0; i < 16; ++i) {
        const int64_t row = r0 + i;
        r[i] = _mm512_setzero_si512();
        if (i < rows) {
          const float* src = a.q + (row / group) * a.q_stride + a.head0 + (row % group) * hd + 32 * dc;
          r[i] = bf16x32(_mm512_mul_ps(_mm512_loadu_ps(src), vscale), _mm512_mul_ps(_mm512_loadu_ps(src + 16), vscale));
        }
      }
      bf16_store_transposed(r, qt + dc * kTileElems);
    }
    for (int32_t i = 0; i < 16; ++i) {
      pos_of[i] = a.start + static_cast<int32_t>((r0 + (i < rows ? i : rows - 1)) / group);
    }
    // The next tile's query rows into L1 and its output rows for writing, kPrefetchRowsPerStep a
    // step while this tile's steps run, the rest after them (a prompt's queries, 4 MB for 512
    // tokens of synth 1b, are past L2).
    int64_t pf_row = r0 + 16;
    const int64_t pf_end = r0 + 32 < m_total ? r0 + 32 : m_total;
    auto prefetch_rows = [&](int64_t n) {
      for (const int64_t stop = pf_row + n < pf_end ? pf_row + n : pf_end; pf_row < stop; ++pf_row) {
        const int64_t tok = pf_row / group, h = pf_row - tok * group;
        const char* qrow = reinterpret_cast<const char*>(a.q + tok * a.q_stride + a.head0 + h * hd);
        const char* orow = reinterpret_cast<const char*>(a.out + tok * a.out_stride + a.head0 + h * hd);
        for (int32_t line = 0; line < hd / 16; ++line) {
          _mm_prefetch(qrow + 64 * line, _MM_HINT_T0);
          prefetch_for_write(orow + 64 * line);
        }
      }
    };
    const __m512i pos = _mm512_load_si512(pos_of);
    const int32_t first_pos = pos_of[0], last_pos = pos_of[15];
    __m512 m = neg_inf, l = _mm512_setzero_ps();
#if ECO_BF16_TILES
    if (resident) {
      ECO_O_TILES(ECO_O_ZERO);
    } else {
      for (int32_t d = 0; d < hd; ++d) _mm512_store_ps(ot + 16 * d, _mm512_setzero_ps());
    }
    // S^T of step ks into the score tiles (stored by the caller once it needs them).
    auto scores = [&](int32_t ks) {
      _tile_zero(ECO_AT_S0);
      _tile_zero(ECO_AT_S1);
      for (int32_t dc = 0; dc < dc_n; ++dc) {
        _tile_loadd(ECO_AT_Q, qt + dc * kTileElems, 64);
        _tile_loadd(ECO_AT_K, kt + (ks / 16 * dc_n + dc) * kTileElems, 64);
        _tile_dpbf16ps(ECO_AT_S0, ECO_AT_K, ECO_AT_Q);
        _tile_loadd(ECO_AT_K, kt + ((ks / 16 + 1) * dc_n + dc) * kTileElems, 64);
        _tile_dpbf16ps(ECO_AT_S1, ECO_AT_K, ECO_AT_Q);
      }
    };
    // Software-pipelined: step ks + 32's scores are multiplied in the tile unit while the
    // vector units run step ks's softmax (s holds two steps' scores, alternately).
    scores(0);
    _tile_stored(ECO_AT_S0, s, 64);
    _tile_stored(ECO_AT_S1, s + 256, 64);
#else
    for (int32_t d = 0; d < hd; ++d) _mm512_store_ps(ot + 16 * d, _mm512_setzero_ps());
    // S^T of step ks into dst: 16 positions at a time, one chain per position (16 chains
    // cover vdpbf16ps's latency), Q^T's pair c loaded once for the 16 and their pairs c
    // broadcast from one line of K^T.
    auto scores = [&](int32_t ks, float* dst) {
      for (int32_t half = 0; half < 2; ++half) {
        const uint16_t* kblk = kt + static_cast<int64_t>(ks / 16 + half) * 16 * hd;
        __m512 acc[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
        for (int32_t c = 0; c < hd / 2; ++c) {
          const __m512bh qc = load_bh(qt + 32 * c);
          const uint16_t* kc = kblk + 32 * c;
#pragma GCC unroll 16
          for (int j = 0; j < 16; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], qc, pair_bcast(kc + 2 * j));
        }
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) _mm512_store_ps(dst + 256 * half + 16 * j, acc[j]);
      }
    };
    scores(0, s);
#endif
    for (int32_t ks = 0, cur = 0; ks <= last_pos; ks += kStep, cur ^= 1) {
      const bool more = ks + kStep <= last_pos;
      prefetch_rows(kPrefetchRowsPerStep);
#if ECO_BF16_TILES
      if (more) scores(ks + kStep);
#else
      if (more) scores(ks + kStep, s + 512 * (cur ^ 1));
#endif
      float* const sc = s + 512 * cur;
      // Lane i of s[j]: row i's score for position ks + j, visible where ks + j <= pos[i]
      // (every lane of every position when the step ends before the tile's first row).
      const bool full = ks + kStep - 1 <= first_pos;
      auto visible = [&](int j) __attribute__((always_inline)) {
        return full ? __mmask16(0xffff) : _mm512_cmpge_epi32_mask(pos, _mm512_set1_epi32(ks + j));
      };
      // Four independent maxima, position j into chain j % 4 (a max is exact: any order
      // gives the same). Named registers, not arrays: an array indexed by j % 4 in a loop
      // not unrolled stays in memory.
      __m512 mx0 = neg_inf, mx1 = neg_inf, mx2 = neg_inf, mx3 = neg_inf;
      for (int j = 0; j < kStep; j += 4) {
        mx0 = _mm512_mask_max_ps(mx0, visible(j), mx0, _mm512_load_ps(sc + 16 * j));
        mx1 = _mm512_mask_max_ps(mx1, visible(j + 1), mx1, _mm512_load_ps(sc + 16 * (j + 1)));
        mx2 = _mm512_mask_max_ps(mx2, visible(j + 2), mx2, _mm512_load_ps(sc + 16 * (j + 2)));
        mx3 = _mm512_mask_max_ps(mx3, visible(j + 3), mx3, _mm512_load_ps(sc + 16 * (j + 3)));
      }
      const __m512 mx = _mm512_max_ps(_mm512_max_ps(mx0, mx1), _mm512_max_ps(mx2, mx3));
      // A row's max moves only when the step's exceeds it by more than kLazyMax (its weights
      // then reach 2^kLazyMax at most), so that most steps rescale nothing. Rows with no
      // visible position keep m (alpha = 2^0 = 1 exactly), add zero weights, so o * 1 + 0
      // and l * 1 + 0 leave them as they were.
      const __m512 m_new =
          _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(mx, _mm512_add_ps(m, _mm512_set1_ps(kLazyMax)), _CMP_GT_OQ), mx);
      const __m512 alpha = bf16_weight_exp2_16(_mm512_sub_ps(m, m_new));
      m = m_new;
      // Positions 2k and 2k + 1's weights into P^T's pair k; returns their sum (the
      // rounded weights, widened exactly).
      auto weights = [&](int k) __attribute__((always_inline)) {
        const __m512 e0 =
            _mm512_maskz_mov_ps(visible(2 * k), bf16_weight_exp2_16(_mm512_sub_ps(_mm512_load_ps(sc + 32 * k), m)));
        const __m512 e1 = _mm512_maskz_mov_ps(visible(2 * k + 1),
                                              bf16_weight_exp2_16(_mm512_sub_ps(_mm512_load_ps(sc + 32 * k + 16), m)));
        const __m512i w = bf16x32(e0, e1);
        _mm512_store_si512(pt + 32 * k, _mm512_permutexvar_epi16(interleave, w));
        return _mm512_add_ps(widen_bf16(_mm512_castsi512_si256(w)), widen_bf16(_mm512_extracti64x4_epi64(w, 1)));
      };
      // The weights' sum in four chains (pair k into chain k % 4), added pairwise at the end.
      __m512 sum0 = _mm512_setzero_ps(), sum1 = sum0, sum2 = sum0, sum3 = sum0;
      for (int k = 0; k < 16; k += 4) {
        sum0 = _mm512_add_ps(sum0, weights(k));
        sum1 = _mm512_add_ps(sum1, weights(k + 1));
        sum2 = _mm512_add_ps(sum2, weights(k + 2));
        sum3 = _mm512_add_ps(sum3, weights(k + 3));
      }
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(sum0, sum1), _mm512_add_ps(sum2, sum3));
      l = _mm512_fmadd_ps(l, alpha, sum);
      const bool rescale = _mm512_cmpneq_ps_mask(alpha, _mm512_set1_ps(1.0f)) != 0;
      const uint16_t* vstep = vt + ks / kStep * dn_n * kTileElems;
#if ECO_BF16_TILES
      auto rescale_ot = [&] {
        for (int32_t d = 0; d < hd; ++d) {
          _mm512_store_ps(ot + 16 * d, _mm512_mul_ps(_mm512_load_ps(ot + 16 * d), alpha));
        }
      };
      if (resident) {
        // O^T += V^T P^T in tiles 4-7; O^T leaves them only for a rescale (none at the
        // first step, where O^T is zero).
        if (rescale && ks > 0) {
          ECO_O_TILES(ECO_O_STORE);
          rescale_ot();
          ECO_O_TILES(ECO_O_LOAD);
        }
        _tile_loadd(ECO_AT_QP, pt, 64);
        ECO_O_TILES(ECO_O_VALUES);
      } else {
        if (rescale) rescale_ot();
        // O^T += V^T P^T, 16 dimensions per tile, accumulated in the tile unit from memory.
        _tile_loadd(ECO_AT_P, pt, 64);
        for (int32_t dn = 0; dn < dn_n; dn += 2) {
          _tile_loadd(ECO_AT_O0, ot + 256 * dn, 64);
          _tile_loadd(ECO_AT_V, vstep + dn * kTileElems, 64);
          _tile_dpbf16ps(ECO_AT_O0, ECO_AT_V, ECO_AT_P);
          _tile_loadd(ECO_AT_O1, ot + 256 * (dn + 1), 64);
          _tile_loadd(ECO_AT_V, vstep + (dn + 1) * kTileElems, 64);
          _tile_dpbf16ps(ECO_AT_O1, ECO_AT_V, ECO_AT_P);
          _tile_stored(ECO_AT_O0, ot + 256 * dn, 64);
          _tile_stored(ECO_AT_O1, ot + 256 * (dn + 1), 64);
        }
      }
      if (more) {
        _tile_stored(ECO_AT_S0, s + 512 * (cur ^ 1), 64);
        _tile_stored(ECO_AT_S1, s + 512 * (cur ^ 1) + 256, 64);
      }
#else
      // O^T = alpha * O^T + V^T P^T, 16 dimensions at a time in registers: per dimension one
      // chain over the step's 16 pairs of positions (P^T's pair k loaded once for the 16).
      for (int32_t d0 = 0; d0 < hd; d0 += 16) {
        __m512 acc[16];
#pragma GCC unroll 16
        for (int d = 0; d < 16; ++d) {
          acc[d] = _mm512_load_ps(ot + 16 * (d0 + d));
          if (rescale) acc[d] = _mm512_mul_ps(acc[d], alpha);
        }
        const uint16_t* vd = vstep + 32 * d0;  // dimension d0's 16 pairs of positions, then d0 + 1's, ...
        for (int k = 0; k < 16; ++k) {
          const __m512bh pk = load_bh(pt + 32 * k);
#pragma GCC unroll 16
          for (int d = 0; d < 16; ++d) acc[d] = _mm512_dpbf16_ps(acc[d], pk, pair_bcast(vd + 32 * d + 2 * k));
        }
#pragma GCC unroll 16
        for (int d = 0; d < 16; ++d) _mm512_store_ps(ot + 16 * (d0 + d), acc[d]);
      }
#endif
    }
    prefetch_rows(16);
#if ECO_BF16_TILES
    if (resident) ECO_O_TILES(ECO_O_STORE);
#endif
    // o / l, back from lanes to rows 16 dimensions at a time (a 16 x 16 transpose).
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), l);
    float* dst[16];
    for (int32_t i = 0; i < rows; ++i) {
      const int64_t row = r0 + i;
      dst[i] = a.out + (row / group) * a.out_stride + a.head0 + (row % group) * hd;
    }
    alignas(64) float back[16 * 16];
    for (int32_t d0 = 0; d0 < hd; d0 += 16) {
      __m512i r[16];
      for (int d = 0; d < 16; ++d) {
        r[d] = _mm512_castps_si512(_mm512_mul_ps(_mm512_load_ps(ot + 16 * (d0 + d)), inv));
      }
      bf16_store_transposed(r, reinterpret_cast<uint16_t*>(back));
      for (int32_t i = 0; i < rows; ++i) _mm512_storeu_ps(dst[i] + d0, _mm512_load_ps(back + 16 * i));
    }
  }
#if ECO_BF16_TILES
  _tile_release();
#endif
}

#if ECO_BF16_TILES
#undef ECO_AT_Q
#undef ECO_AT_K
#undef ECO_AT_S0
#undef ECO_AT_S1
#undef ECO_AT_P
#undef ECO_AT_V
#undef ECO_AT_O0
#undef ECO_AT_O1
#undef ECO_AT_QP
#undef ECO_AT_KV
#undef ECO_O_TILES
#undef ECO_O_ZERO
#undef ECO_O_STORE
#undef ECO_O_LOAD
#undef ECO_O_VALUES
#endif

}  // namespace ecoserve::kernels::detail::ECO_BF16_NS

#pragma GCC diagnostic pop
