// Quantized-weight tile kernels (Q8_0, Q4_0, Q4_K, Q6_K) for matmul.
//
// Activations are quantized to int8 in blocks of 32 with a float scale
// (QuantizedActs). Each weight block of 32 is unpacked to signed int8 with a
// float scale (and, for Q6_K, two int16 sub-block scales; for Q4_K, a min
// term), then multiplied with AVX2: maddubs(|w|, sign(x, w)) -> madd -> cvt ->
// one FMA per block into an 8-lane float accumulator per output element.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels::detail {
namespace {

constexpr std::int64_t kActAlign = 64;
// Tokens whose quantized activations stay hot (L2) while weight rows stream past.
constexpr std::int64_t kActChunkBytes = 128 * 1024;

inline std::int64_t round_up(std::int64_t v, std::int64_t a) { return (v + a - 1) / a * a; }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// ---- Unpackers: one weight block of 32 values -> int8 vector + scales ----

struct Block {
  __m256i q;   // weight values as int8 (signed, or unsigned 0..15 when kUnsigned)
  __m256i aq;  // |q| (== q when kUnsigned)
  __m256i sv;  // int16 multipliers for madd (ones unless kScaled)
  float m;     // min coefficient (kHasMin): value contribution -m * sum(x)
};

struct UnpackQ8_0 {
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr bool kUnsigned = false, kScaled = false, kHasMin = false;
  static Block unpack(const std::uint8_t* row, std::int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    Block o;
    o.q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs));
    o.aq = _mm256_sign_epi8(o.q, o.q);
    return o;
  }
  static float scale(const std::uint8_t* row, std::int64_t b) {
    return fp16_to_fp32((reinterpret_cast<const BlockQ8_0*>(row) + b)->d);
  }
};

struct UnpackQ4_0 {
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr bool kUnsigned = false, kScaled = false, kHasMin = false;
  static Block unpack(const std::uint8_t* row, std::int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(v, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), mask);
    Block o;
    o.q = _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
    o.aq = _mm256_sign_epi8(o.q, o.q);
    return o;
  }
  static float scale(const std::uint8_t* row, std::int64_t b) {
    return fp16_to_fp32((reinterpret_cast<const BlockQ4_0*>(row) + b)->d);
  }
};

inline void scale_min_k4(int j, const std::uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

struct UnpackQ4_K {
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ4_K) / 8;
  static constexpr bool kUnsigned = true, kScaled = false, kHasMin = true;
  static Block unpack(const std::uint8_t* row, std::int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
    const int j = static_cast<int>(b % 8);
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * (j / 2)));
    const __m256i mask = _mm256_set1_epi8(0x0F);
    Block o;
    o.q = (j & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), mask) : _mm256_and_si256(v, mask);
    o.aq = o.q;
    int sc, m;
    scale_min_k4(j, blk->scales, &sc, &m);
    o.m = fp16_to_fp32(blk->dmin) * static_cast<float>(m);
    return o;
  }
  static float scale(const std::uint8_t* row, std::int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
    int sc, m;
    scale_min_k4(static_cast<int>(b % 8), blk->scales, &sc, &m);
    return fp16_to_fp32(blk->d) * static_cast<float>(sc);
  }
};

struct UnpackQ6_K {
  static constexpr std::size_t kBlockBytes = sizeof(BlockQ6_K) / 8;
  static constexpr bool kUnsigned = false, kScaled = true, kHasMin = false;
  static Block unpack(const std::uint8_t* row, std::int64_t b) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row) + b / 8;
    const int j = static_cast<int>(b % 8);
    const int h = j / 4, jj = j % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->ql + 64 * h + 32 * (jj % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * h));
    const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(ql, _mm_cvtsi32_si128(4 * (jj / 2))), _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * jj)), _mm256_set1_epi8(3));
    Block o;
    o.q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
    o.aq = _mm256_sign_epi8(o.q, o.q);
    const std::int8_t* sc = blk->scales + 8 * h + 2 * jj;
    o.sv = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
    return o;
  }
  static float scale(const std::uint8_t* row, std::int64_t b) {
    return fp16_to_fp32((reinterpret_cast<const BlockQ6_K*>(row) + b / 8)->d);
  }
};

// ---- Tiles ----

// Register tile: kRows weight rows x kTokens tokens.
// 3x3 measured best among 4x2, 3x3, 2x3, 2x4 (no register spills with GCC 12;
// the inner loop is bound by the two integer multiplies per block pair).
constexpr int kRows = 3;
constexpr int kTokens = 3;
// Software prefetch (without it, short Q8_0 rows stream at a third of the
// bandwidth): a tile's rows are contiguous in memory, and it sweeps the bytes
// kPrefetchBytes ahead of its linear position (2-8 KiB measured alike; a
// per-row prefetch of the next tile was 40% slower).
constexpr std::int64_t kPrefetchBytes = 4096;
// Weight-row streams gemv reads at once for 1, 2, 3, 4 tokens (4 streams of a
// single-token Q8_0 matmul read at ~23 GB/s vs ~15 GB/s for one; more than 4,
// or software prefetch on top, measured no better; with more tokens fewer
// streams keep the accumulators in registers).
constexpr int kGemvStreams[] = {4, 4, 3, 2};

// kPre: the combined block scales dw * dx come precomputed (dw: [R][nb] weight
// block scales from the caller; scales: room for [R][T][nb]); otherwise (a
// single token streaming the weights) each is computed in the main loop. Both
// compute the same float product, so results do not depend on kPre.
template <class U, bool kPre, int R, int T>
void tile(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t t0, const float* dw,
          float* scales, float* y, std::int64_t y_stride, std::int64_t pf_ahead) {
  // scales[(r * T + t) * nb + b] = dw[r][b] * dx[t][b]: every block's combined
  // scale, computed 8 blocks at a time before the main loop.
  const std::int64_t nb = a.nb;
  const std::int64_t nb8 = nb & ~std::int64_t{7};
#pragma GCC unroll 8
  for (int r = 0; r < (kPre ? R : 0); ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float* dxt = a.d + (t0 + t) * nb;
      float* st = scales + (r * T + t) * nb;
      std::int64_t b = 0;
      for (; b < nb8; b += 8) {
        _mm256_storeu_ps(st + b, _mm256_mul_ps(_mm256_loadu_ps(dw + r * nb + b), _mm256_loadu_ps(dxt + b)));
      }
      for (; b < nb; ++b) st[b] = dw[r * nb + b] * dxt[b];
    }
  }
  __m256 acc[R][T];
  float macc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm256_setzero_ps();
      macc[r][t] = 0.0f;
    }
  const __m256i ones = _mm256_set1_epi16(1);
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  const float* xs = a.s + t0 * a.nb;
  for (std::int64_t b = 0; b < a.nb; ++b) {
    if (pf_ahead > 0) {
      const std::uint8_t* p = w + pf_ahead + b * R * U::kBlockBytes;
#pragma GCC unroll 8
      for (std::size_t off = 0; off < R * U::kBlockBytes + 63; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const Block wb = U::unpack(w + r * row_bytes, b);
      [[maybe_unused]] __m256 dwv;
      if constexpr (!kPre) dwv = _mm256_set1_ps(U::scale(w + r * row_bytes, b));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + t * a.q_stride + 32 * b));
        const __m256i sx = U::kUnsigned ? xv : _mm256_sign_epi8(xv, wb.q);
        const __m256i p = _mm256_maddubs_epi16(wb.aq, sx);
        const __m256i i = _mm256_madd_epi16(p, U::kScaled ? wb.sv : ones);
        __m256 scale;
        if constexpr (kPre) {
          scale = _mm256_broadcast_ss(scales + (r * T + t) * nb + b);
        } else {
          scale = _mm256_mul_ps(dwv, _mm256_broadcast_ss(a.d + (t0 + t) * nb + b));
        }
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), scale, acc[r][t]);
        if constexpr (U::kHasMin) macc[r][t] += wb.m * xs[t * a.nb + b];
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[t * y_stride + r] = hsum(acc[r][t]) - macc[r][t];
}

// kTokens tokens (t0..) against kStreams streams of consecutive weight rows:
// stream s is rows s * stream_rows + i, i < count (w points at row 0, y at its
// output for token t0). Each output element gets exactly the arithmetic of
// tile() (per block cvt(int dot) * (dw * dx) into one 8-lane accumulator,
// blocks ascending, then hsum), so results match the tiles bitwise. Several
// far-apart streams keep more DRAM requests in flight than one sequential
// sweep (the hardware prefetchers track each stream): 4 streams read a
// weight-bound single-token matmul ~1.5x faster than one.
template <class U, int kStreams, int kTokens>
void gemv(const std::uint8_t* w, std::size_t row_bytes, std::int64_t stream_rows, std::int64_t count,
          const QuantizedActs& a, std::int64_t t0, float* y, std::int64_t y_stride) {
  const std::int64_t nb = a.nb;
  const std::int8_t* xq = a.q + t0 * a.q_stride;
  const float* dx = a.d + t0 * nb;
  const float* xs = a.s + t0 * nb;
  const __m256i ones = _mm256_set1_epi16(1);
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint8_t* rows[kStreams];
    __m256 acc[kStreams][kTokens];
    float macc[kStreams][kTokens];
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s) {
      rows[s] = w + (s * stream_rows + i) * row_bytes;
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        acc[s][t] = _mm256_setzero_ps();
        macc[s][t] = 0.0f;
      }
    }
    for (std::int64_t b = 0; b < nb; ++b) {
      __m256i xv[kTokens];
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        xv[t] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + t * a.q_stride + 32 * b));
      }
#pragma GCC unroll 8
      for (int s = 0; s < kStreams; ++s) {
        const Block wb = U::unpack(rows[s], b);
        const float dw = U::scale(rows[s], b);
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t) {
          const __m256i sx = U::kUnsigned ? xv[t] : _mm256_sign_epi8(xv[t], wb.q);
          const __m256i p = _mm256_maddubs_epi16(wb.aq, sx);
          const __m256i iv = _mm256_madd_epi16(p, U::kScaled ? wb.sv : ones);
          const __m256 scale = _mm256_set1_ps(dw * dx[t * nb + b]);
          acc[s][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv), scale, acc[s][t]);
          if constexpr (U::kHasMin) macc[s][t] += wb.m * xs[t * nb + b];
        }
      }
    }
#pragma GCC unroll 8
    for (int s = 0; s < kStreams; ++s)
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) y[t * y_stride + s * stream_rows + i] = hsum(acc[s][t]) - macc[s][t];
  }
}

// Tokens [t0, t0 + kTokens) times rows [r0, r1) with gemv: kStreams streams of
// equal length, then the remaining rows one at a time.
template <class U, int kStreams, int kTokens>
void gemv_rows(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, float* y, std::int64_t y_stride) {
  const std::int64_t m = (r1 - r0) / kStreams;
  float* yt = y + t0 * y_stride;
  if (m > 0) gemv<U, kStreams, kTokens>(w + r0 * row_bytes, row_bytes, m, m, a, t0, yt + r0, y_stride);
  const std::int64_t rest = r0 + kStreams * m;
  if (rest < r1) gemv<U, 1, kTokens>(w + rest * row_bytes, row_bytes, 0, r1 - rest, a, t0, yt + rest, y_stride);
}

using TileFn = void (*)(const std::uint8_t*, std::size_t, const QuantizedActs&, std::int64_t, const float*, float*,
                        float*, std::int64_t, std::int64_t);

template <class U, bool kPre, int R, int... Ts>
constexpr void fill_row(TileFn* out, std::integer_sequence<int, Ts...>) {
  ((out[Ts] = &tile<U, kPre, R, Ts + 1>), ...);
}

template <class U, bool kPre, int... Rs>
struct TileTable {
  TileFn fns[kRows][kTokens];
  constexpr TileTable() : fns{} {
    (fill_row<U, kPre, Rs + 1>(fns[Rs], std::make_integer_sequence<int, kTokens>{}), ...);
  }
};

template <class U, bool kPre, int... Rs>
constexpr TileTable<U, kPre, Rs...> make_table(std::integer_sequence<int, Rs...>) {
  return TileTable<U, kPre, Rs...>();
}

template <class U>
void rows_impl(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& a, std::int64_t r0, std::int64_t r1,
               std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride) {
  // Up to 4 tokens (decode): bound by weight bandwidth, streamed by gemv.
  switch (t1 - t0) {
    case 1:
      return gemv_rows<U, kGemvStreams[0], 1>(w, row_bytes, a, r0, r1, t0, y, y_stride);
    case 2:
      return gemv_rows<U, kGemvStreams[1], 2>(w, row_bytes, a, r0, r1, t0, y, y_stride);
    case 3:
      return gemv_rows<U, kGemvStreams[2], 3>(w, row_bytes, a, r0, r1, t0, y, y_stride);
    case 4:
      return gemv_rows<U, kGemvStreams[3], 4>(w, row_bytes, a, r0, r1, t0, y, y_stride);
    default:
      break;
  }
  static constexpr auto kPreTable = make_table<U, true>(std::make_integer_sequence<int, kRows>{});
  static constexpr auto kInlineTable = make_table<U, false>(std::make_integer_sequence<int, kRows>{});
  const std::int64_t chunk = std::max<std::int64_t>(kTokens, kActChunkBytes / a.q_stride / kTokens * kTokens);
  const std::int64_t pf_ahead = kPrefetchBytes;
  // The first tiles are not covered by the tiles' own prefetches.
  const std::int64_t head = std::min<std::int64_t>(pf_ahead, (r1 - r0) * row_bytes);
  for (std::int64_t off = 0; off < head; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(w + r0 * row_bytes + off), _MM_HINT_T0);
  // Per row block: the weight block scales as floats, and the per-tile combined scales.
  std::vector<float> buf(static_cast<std::size_t>(kRows * a.nb + kRows * kTokens * a.nb));
  float* dw = buf.data();
  float* scales = dw + kRows * a.nb;
  for (std::int64_t tc = t0; tc < t1; tc += chunk) {
    const std::int64_t te = std::min(t1, tc + chunk);
    const bool pre = te - tc >= kTokens;
    const auto& table = pre ? kPreTable.fns : kInlineTable.fns;
    for (std::int64_t r = r0; r < r1; r += kRows) {
      const int nr = static_cast<int>(std::min<std::int64_t>(kRows, r1 - r));
      for (int i = 0; i < (pre ? nr : 0); ++i) {
        for (std::int64_t b = 0; b < a.nb; ++b) dw[i * a.nb + b] = U::scale(w + (r + i) * row_bytes, b);
      }
      for (std::int64_t t = tc; t < te; t += kTokens) {
        const int nt = static_cast<int>(std::min<std::int64_t>(kTokens, te - t));
        table[nr - 1][nt - 1](w + r * row_bytes, row_bytes, a, t, dw, scales, y + t * y_stride + r, y_stride,
                              t == tc ? pf_ahead : 0);
      }
    }
  }
}

}  // namespace

std::size_t quantized_acts_bytes(std::int64_t n_tokens, std::int64_t cols) {
  const std::int64_t nb = cols / 32;
  const std::int64_t q_stride = round_up(cols, kActAlign);
  return static_cast<std::size_t>(kActAlign + n_tokens * q_stride + 2 * round_up(n_tokens * nb * 4, kActAlign));
}

QuantizedActs layout_quantized_acts(std::uint8_t* scratch, std::int64_t n_tokens, std::int64_t cols) {
  QuantizedActs a;
  a.nb = cols / 32;
  a.q_stride = round_up(cols, kActAlign);
  auto base = reinterpret_cast<std::uintptr_t>(scratch);
  base = (base + kActAlign - 1) / kActAlign * kActAlign;
  auto* p = reinterpret_cast<std::uint8_t*>(base);
  a.q = reinterpret_cast<const std::int8_t*>(p);
  p += n_tokens * a.q_stride;
  a.d = reinterpret_cast<const float*>(p);
  p += round_up(n_tokens * a.nb * 4, kActAlign);
  a.s = reinterpret_cast<const float*>(p);
  return a;
}

void quantize_acts(const float* x, std::int64_t cols, std::int64_t t0, std::int64_t t1, const QuantizedActs& a) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (std::int64_t t = t0; t < t1; ++t) {
    auto* q = const_cast<std::int8_t*>(a.q + t * a.q_stride);
    auto* d = const_cast<float*>(a.d + t * a.nb);
    auto* s = const_cast<float*>(a.s + t * a.nb);
    const float* xt = x + t * cols;
    for (std::int64_t b = 0; b < a.nb; ++b) {
      __m256 v[4];
      for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(xt + 32 * b + 8 * k);
      __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign_mask, v[0]), _mm256_andnot_ps(sign_mask, v[1])),
                               _mm256_max_ps(_mm256_andnot_ps(sign_mask, v[2]), _mm256_andnot_ps(sign_mask, v[3])));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float amax = _mm_cvtss_f32(m4);
      // The block scale is rounded to fp16, as llama.cpp stores it in its Q8_0 activation
      // blocks (block_q8_0.d), so integer dots scale identically and greedy output agrees.
      const float db = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
      const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
      __m256i iv[4];
      for (int k = 0; k < 4; ++k) {
        iv[k] =
            _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3])));
      const __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]);
      const __m256i p23 = _mm256_packs_epi32(iv[2], iv[3]);
      const __m256i p = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), perm);
      _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32 * b), p);
      d[b] = db;
      s[b] = db * static_cast<float>(sum);
    }
  }
}

void matmul_quantized_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                           const QuantizedActs& acts, std::int64_t r0, std::int64_t r1, std::int64_t t0,
                           std::int64_t t1, float* y, std::int64_t y_stride) {
  switch (type) {
    case GgmlType::kQ8_0:
      return rows_impl<UnpackQ8_0>(w, row_bytes, acts, r0, r1, t0, t1, y, y_stride);
    case GgmlType::kQ4_0:
      return rows_impl<UnpackQ4_0>(w, row_bytes, acts, r0, r1, t0, t1, y, y_stride);
    case GgmlType::kQ4_K:
      return rows_impl<UnpackQ4_K>(w, row_bytes, acts, r0, r1, t0, t1, y, y_stride);
    case GgmlType::kQ6_K:
      return rows_impl<UnpackQ6_K>(w, row_bytes, acts, r0, r1, t0, t1, y, y_stride);
    default:
      ECO_CHECK_MSG(false, "matmul_quantized_rows: not a quantized type: {}", type_name(type));
  }
}

}  // namespace ecoserve::kernels::detail
