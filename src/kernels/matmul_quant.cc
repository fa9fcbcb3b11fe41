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
  return a;
}

namespace {

// K format: per 256 values one scale amax / 127 (float, as ggml's Q8_K), and the sum of each 16 q.
void quantize_acts_k(const float* x, std::int64_t cols, std::int64_t t0, std::int64_t t1, const QuantizedActs& a) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const std::int64_t nsb = a.nb / 8;
  for (std::int64_t t = t0; t < t1; ++t) {
    auto* q = const_cast<std::int8_t*>(a.q + t * a.q_stride);
    auto* d = const_cast<float*>(a.d + t * nsb);
    auto* bs = const_cast<std::int16_t*>(a.bsums + t * 2 * a.nb);
    const float* xt = x + t * cols;
    for (std::int64_t s = 0; s < nsb; ++s) {
      const float* xs = xt + 256 * s;
      __m256 m = _mm256_setzero_ps();
      for (int k = 0; k < 32; ++k) m = _mm256_max_ps(m, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xs + 8 * k)));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float amax = _mm_cvtss_f32(m4);
      // 1 / (127 / amax), as ggml's Q8_K (d = 1 / iscale): the same float, so
      // greedy output follows llama.cpp's.
      d[s] = amax > 0.0f ? 1.0f / (127.0f / amax) : 0.0f;
      const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
      for (int b = 0; b < 8; ++b) {
        __m256i iv[4];
        for (int k = 0; k < 4; ++k) {
          iv[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xs + 32 * b + 8 * k), id),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        }
        bs[16 * s + 2 * b] = static_cast<std::int16_t>(hsum_i32(_mm256_add_epi32(iv[0], iv[1])));
        bs[16 * s + 2 * b + 1] = static_cast<std::int16_t>(hsum_i32(_mm256_add_epi32(iv[2], iv[3])));
        const __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]);
        const __m256i p23 = _mm256_packs_epi32(iv[2], iv[3]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(q + 256 * s + 32 * b),
                           _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), perm));
      }
    }
  }
}

}  // namespace

void quantize_acts(const float* x, std::int64_t cols, std::int64_t t0, std::int64_t t1, const QuantizedActs& a) {
  if (a.k_format) return quantize_acts_k(x, cols, t0, t1, a);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (std::int64_t t = t0; t < t1; ++t) {
    auto* q = const_cast<std::int8_t*>(a.q + t * a.q_stride);
    auto* d = const_cast<float*>(a.d + t * a.nb);
    auto* xc = const_cast<std::int32_t*>(a.xc + t * a.nb * 8);
    auto* xt_sum = const_cast<std::int32_t*>(a.xt + t * a.nb);
    const float* xt = x + t * cols;
    for (std::int64_t b = 0; b < a.nb; ++b) {
      // Four named loads: as a loop into an array, GCC 12 copied the block to the stack in
      // 16-byte pieces and read it back in 32-byte ones (a store-forwarding stall per load).
      const __m256 v0 = _mm256_loadu_ps(xt + 32 * b), v1 = _mm256_loadu_ps(xt + 32 * b + 8);
      const __m256 v2 = _mm256_loadu_ps(xt + 32 * b + 16), v3 = _mm256_loadu_ps(xt + 32 * b + 24);
      const __m256 v[4] = {v0, v1, v2, v3};
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
      // -128 * (sum of each 4 values): vpmaddubsw with 1s, vpmaddwd with -128s.
      const __m256i sums4 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(-128));
      _mm256_store_si256(reinterpret_cast<__m256i*>(xc + 8 * b), sums4);
      xt_sum[b] = -128 * sum;
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
