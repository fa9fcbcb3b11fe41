// Activation quantization for the quantized-weight kernels, and the choice of
// kernel build per ISA level (the kernels: matmul_quant_impl.h).
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

inline std::int64_t round_up(std::int64_t v, std::int64_t a) { return (v + a - 1) / a * a; }

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Lane j of the result: v[j]'s 8 lanes combined by op (max of floats, sum of int32s), for
// 8 vectors at once (a transpose folded into the combining, 7 + 14 instructions for what
// 8 horizontal reductions do in ~50). Max and integer sums are exact in any order.
template <class Op>
inline __m256 lanes_combine8(const __m256 (&v)[8], Op op) {
  // op(unpacklo, unpackhi) of a pair: [a0|2, b0|2, a1|3, b1|3] per 128-bit half (x|y: x op y).
  auto level1 = [&](__m256 a, __m256 b) { return op(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b)); };
  // Then of two such: [a, b, c, d] per 128-bit half, each over its half's 4 lanes.
  auto level2 = [&](__m256 ab, __m256 cd) {
    return op(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  };
  const __m256 v03 = level2(level1(v[0], v[1]), level1(v[2], v[3]));
  const __m256 v47 = level2(level1(v[4], v[5]), level1(v[6], v[7]));
  // Low halves of both beside the high halves of both.
  return op(_mm256_permute2f128_ps(v03, v47, 0x20), _mm256_permute2f128_ps(v03, v47, 0x31));
}

inline __m256 lanes_max8(const __m256 (&v)[8]) {
  return lanes_combine8(v, [](__m256 a, __m256 b) { return _mm256_max_ps(a, b); });
}

inline __m256i lanes_sum8(const __m256i (&v)[8]) {
  __m256 f[8];
  for (int j = 0; j < 8; ++j) f[j] = _mm256_castsi256_ps(v[j]);
  return _mm256_castps_si256(lanes_combine8(f, [](__m256 a, __m256 b) {
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b)));
  }));
}

// max |x| of x[0, 32) as 8 lanes.
inline __m256 abs_max32(const float* x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
  const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
  return _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign_mask, v0), _mm256_andnot_ps(sign_mask, v1)),
                       _mm256_max_ps(_mm256_andnot_ps(sign_mask, v2), _mm256_andnot_ps(sign_mask, v3)));
}

// round(x[i] * id) for x[0, 32), in iv[0..4), and those packed to int8 in order. The
// conversion rounds in the MXCSR mode, to nearest even as the program never changes it
// (what vroundps did before it, and std::nearbyint in the tests); no vroundps: 8-12%.
inline __m256i quantize32(const float* x, __m256 id, __m256i (&iv)[4]) {
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int k = 0; k < 4; ++k) {
    iv[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), id));
  }
  const __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]);
  const __m256i p23 = _mm256_packs_epi32(iv[2], iv[3]);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), perm);
}

// 127 / amax where amax > 0, else 0, per lane (the scalar rule's division, so the same float).
inline __m256 inverse_scales(__m256 amax) {
  return _mm256_and_ps(_mm256_cmp_ps(amax, _mm256_setzero_ps(), _CMP_GT_OQ),
                       _mm256_div_ps(_mm256_set1_ps(127.0f), amax));
}

}  // namespace

std::size_t quantized_acts_bytes(std::int64_t n_tokens, std::int64_t cols) {
  const std::int64_t nb = cols / 32;
  const std::int64_t q_stride = round_up(cols, kActAlign);
  return static_cast<std::size_t>(kActAlign + n_tokens * q_stride + 2 * round_up(n_tokens * nb * 4, kActAlign) +
                                  round_up(n_tokens * nb * 32, kActAlign) + n_tokens * nb * 4);
}

QuantizedActs layout_quantized_acts(std::uint8_t* scratch, std::int64_t n_tokens, std::int64_t cols, bool k_format) {
  QuantizedActs a;
  a.nb = cols / 32;
  a.k_format = k_format;
  a.q_stride = round_up(cols, kActAlign);
  auto base = reinterpret_cast<std::uintptr_t>(scratch);
  base = (base + kActAlign - 1) / kActAlign * kActAlign;
  auto* p = reinterpret_cast<std::uint8_t*>(base);
  a.q = reinterpret_cast<const std::int8_t*>(p);
  p += n_tokens * a.q_stride;
  a.d = reinterpret_cast<const float*>(p);
  p += round_up(n_tokens * a.nb * 4, kActAlign);
  a.bsums = reinterpret_cast<const std::int16_t*>(p);
  p += round_up(n_tokens * a.nb * 4, kActAlign);
  a.xc = reinterpret_cast<const std::int32_t*>(p);
  p += round_up(n_tokens * a.nb * 32, kActAlign);
  a.xt = reinterpret_cast<const std::int32_t*>(p);
  if (k_format) {
    a.bpairs = a.xt;                                    // n_tokens * nb / 2 int32 of the nb
    a.qu = reinterpret_cast<const std::uint8_t*>(a.xc);  // n_tokens * q_stride (= cols) bytes of the nb * 32
    a.xc = nullptr;
  }
  return a;
}

namespace {

// K format: per 256 values one scale amax / 127 (float, as ggml's Q8_K), and the sum of each 16 q.
void quantize_acts_k(const float* x, std::int64_t cols, std::int64_t t0, std::int64_t t1, const QuantizedActs& a) {
  const std::int64_t nsb = a.nb / 8;
  for (std::int64_t t = t0; t < t1; ++t) {
    auto* q = const_cast<std::int8_t*>(a.q + t * a.q_stride);
    auto* d = const_cast<float*>(a.d + t * nsb);
    auto* bs = const_cast<std::int16_t*>(a.bsums + t * 2 * a.nb);
    auto* bp = const_cast<std::int32_t*>(a.bpairs + t * 4 * nsb);
    auto* qu = const_cast<std::uint8_t*>(a.qu + t * a.q_stride);
    const float* xt = x + t * cols;
    for (std::int64_t s = 0; s < nsb; ++s) {
      const float* xs = xt + 256 * s;
      // Eight blocks' maxima side by side, then across (max is exact in any order).
      __m256 m = abs_max32(xs);
      for (int b = 1; b < 8; ++b) m = _mm256_max_ps(m, abs_max32(xs + 32 * b));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float amax = _mm_cvtss_f32(m4);
      // 1 / (127 / amax), as ggml's Q8_K (d = 1 / iscale): the same float, so
      // greedy output follows llama.cpp's.
      d[s] = amax > 0.0f ? 1.0f / (127.0f / amax) : 0.0f;
      const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
      // Sums of 16: block b's halves are vectors 2b and 2b + 1 of its half of the
      // super-block, summed across lanes 8 at a time.
      __m256i half_sums[2];
      for (int h = 0; h < 2; ++h) {
        __m256i sums[8];
        for (int j = 0; j < 4; ++j) {
          const int b = 4 * h + j;
          __m256i iv[4];
          const __m256i p = quantize32(xs + 32 * b, id, iv);
          _mm256_store_si256(reinterpret_cast<__m256i*>(q + 256 * s + 32 * b), p);
          _mm256_store_si256(reinterpret_cast<__m256i*>(qu + 256 * s + 32 * b),
                             _mm256_xor_si256(p, _mm256_set1_epi8(static_cast<char>(0x80))));
          sums[2 * j] = _mm256_add_epi32(iv[0], iv[1]);
          sums[2 * j + 1] = _mm256_add_epi32(iv[2], iv[3]);
        }
        half_sums[h] = lanes_sum8(sums);
      }
      // |sum of 16| <= 16 * 127 fits int16; packs interleaves 128-bit halves, the permute undoes it.
      const __m256i packed = _mm256_packs_epi32(half_sums[0], half_sums[1]);
      const __m256i bs16 = _mm256_permute4x64_epi64(packed, 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(bs + 16 * s), bs16);
      // The 8 sums of 32 (|sum| <= 32 * 127, int16), packed in sub-block order (packs keeps
      // each 128-bit half's: int32 elements 0, 1 of the low half then of the high half).
      const __m256i b32 = _mm256_madd_epi16(bs16, _mm256_set1_epi16(1));
      const __m256i b16 = _mm256_packs_epi32(b32, b32);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(bp + 4 * s),
                       _mm256_castsi256_si128(_mm256_permute4x64_epi64(b16, 0x08)));
    }
  }
}

}  // namespace

void quantize_acts(const float* x, std::int64_t cols, std::int64_t t0, std::int64_t t1, const QuantizedActs& a) {
  if (a.k_format) return quantize_acts_k(x, cols, t0, t1, a);
  // -128 * (sum of each 4 values): vpmaddubsw with 1s, vpmaddwd with -128s.
  auto sums4_of = [](__m256i p) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(-128));
  };
  for (std::int64_t t = t0; t < t1; ++t) {
    auto* q = const_cast<std::int8_t*>(a.q + t * a.q_stride);
    auto* d = const_cast<float*>(a.d + t * a.nb);
    auto* xc = const_cast<std::int32_t*>(a.xc + t * a.nb * 8);
    auto* xt_sum = const_cast<std::int32_t*>(a.xt + t * a.nb);
    const float* xt = x + t * cols;
    std::int64_t b = 0;
    // Eight blocks at a time: their maxima, scales and sums on vectors (a block's values,
    // scale and sums are those of the one-block loop below: max and integer sums are exact
    // in any order, and each lane divides and rounds as the scalar code does).
    for (; b + 8 <= a.nb; b += 8) {
      __m256 m[8];
      for (int j = 0; j < 8; ++j) m[j] = abs_max32(xt + 32 * (b + j));
      const __m256 amax = lanes_max8(m);
      // The block scale is rounded to fp16, as llama.cpp stores it in its Q8_0 activation
      // blocks (block_q8_0.d), so integer dots scale identically and greedy output agrees.
      _mm256_storeu_ps(d + b, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_div_ps(amax, _mm256_set1_ps(127.0f)),
                                                               _MM_FROUND_TO_NEAREST_INT)));
      alignas(32) float id[8];
      _mm256_store_ps(id, inverse_scales(amax));
      __m256i s4[8];
      for (int j = 0; j < 8; ++j) {
        __m256i iv[4];
        const __m256i p = quantize32(xt + 32 * (b + j), _mm256_broadcast_ss(id + j), iv);
        _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32 * (b + j)), p);
        s4[j] = sums4_of(p);
        _mm256_store_si256(reinterpret_cast<__m256i*>(xc + 8 * (b + j)), s4[j]);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xt_sum + b), lanes_sum8(s4));
    }
    for (; b < a.nb; ++b) {
      const __m256 m = abs_max32(xt + 32 * b);
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float amax = _mm_cvtss_f32(m4);
      const float db = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
      __m256i iv[4];
      const __m256i p = quantize32(xt + 32 * b, _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f), iv);
      _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32 * b), p);
      const __m256i s4 = sums4_of(p);
      _mm256_store_si256(reinterpret_cast<__m256i*>(xc + 8 * b), s4);
      xt_sum[b] = hsum_i32(s4);
      d[b] = db;
    }
  }
}

QuantRowsFn quant_rows_kernel(Isa isa, GgmlType type, WeightLayout layout) {
  const QuantRowKernels* k = nullptr;
  switch (isa) {
    case Isa::kAvx2: k = quant_row_kernels_avx2(); break;
    case Isa::kAvxVnni: k = quant_row_kernels_avxvnni(); break;
    case Isa::kAvx512Vnni: k = quant_row_kernels_avx512vnni(); break;
    case Isa::kAvx512VnniZmm: k = quant_row_kernels_avx512vnni_zmm(); break;
    case Isa::kAvx512Amx: k = quant_row_kernels_avx512amx(); break;
  }
  ECO_CHECK_MSG(k != nullptr, "quant_rows_kernel: unknown ISA level {}", static_cast<int>(isa));
  if (layout == WeightLayout::kRows8) {
    ECO_CHECK_MSG(type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K,
                  "quant_rows_kernel: the kRows8 layout holds q8_0 or q4_K, not {}", type_name(type));
    return type == GgmlType::kQ8_0 ? k->q8_0_rows8 : k->q4_k_rows8;
  }
  switch (type) {
    case GgmlType::kQ8_0: return k->q8_0;
    case GgmlType::kQ4_0: return k->q4_0;
    case GgmlType::kQ4_K: return k->q4_k;
    case GgmlType::kQ6_K: return k->q6_k;
    default:
      ECO_CHECK_MSG(false, "matmul_quantized_rows: not a quantized type: {}", type_name(type));
  }
  return nullptr;
}

void matmul_quantized_rows(Isa isa, GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                           const QuantizedActs& acts, std::int64_t r0, std::int64_t r1, std::int64_t t0,
                           std::int64_t t1, float* y, std::int64_t y_stride, float* scratch) {
  quant_rows_kernel(isa, type)(w, row_bytes, acts, r0, r1, t0, t1, y, y_stride, scratch);
}

}  // namespace ecoserve::kernels::detail
