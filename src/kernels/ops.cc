#include "kernels/ops.h"

#include <immintrin.h>

#include <cmath>

#include "base/fp16.h"
#include "kernels/vec_math.h"

namespace ecoserve::kernels {

namespace {
inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  lo = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, lo);
  lo = _mm_add_ss(lo, sh);
  return _mm_cvtss_f32(lo);
}
}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

void add_inplace(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

void scale_inplace(float* y, float a, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
  for (; i < n; ++i) y[i] *= a;
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  // Sum of squares in double (each square is exact there), 16 lanes at a time: a
  // single scalar chain of double adds was 3% of a prefill step.
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    const __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(a)), d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
    const __m256d d2 = _mm256_cvtps_pd(_mm256_castps256_ps128(b)), d3 = _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1));
    acc[0] = _mm256_fmadd_pd(d0, d0, acc[0]);
    acc[1] = _mm256_fmadd_pd(d1, d1, acc[1]);
    acc[2] = _mm256_fmadd_pd(d2, d2, acc[2]);
    acc[3] = _mm256_fmadd_pd(d3, d3, acc[3]);
  }
  const __m256d s4 = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, s4);
  double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  // out = (x * scale) * w, in that order (out may be x).
  const __m256 vs = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void rope_cos_sin(int64_t pos, int32_t rope_dim, float base, float freq_scale, float* cos_sin) {
  const double p = static_cast<double>(pos) * freq_scale;
  for (int32_t i = 0; i < rope_dim / 2; ++i) {
    const double theta = p * std::pow(static_cast<double>(base), -2.0 * i / rope_dim);
    cos_sin[2 * i] = static_cast<float>(std::cos(theta));
    cos_sin[2 * i + 1] = static_cast<float>(std::sin(theta));
  }
}

void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, bool neox,
                const float* cos_sin) {
  const int32_t half = rope_dim / 2;
  // Pairs in the outer loop and heads in the inner one: each chunk's cos and sin are
  // loaded (and, for NeoX, deinterleaved) once for all heads.
  int32_t i = 0;
  if (neox) {
    // Pairs (v[i], v[i + half]), eight i at a time; c and s of pairs i..i+7 from the
    // interleaved table: [c s c s | c s c s] x 2 -> evens and odds, halves in order.
    for (; i + 8 <= half; i += 8) {
      const __m256 lo = _mm256_loadu_ps(cos_sin + 2 * i), hi = _mm256_loadu_ps(cos_sin + 2 * i + 8);
      const __m256d ev = _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88));
      const __m256d od = _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd));
      const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(ev, 0xd8));
      const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(od, 0xd8));
      for (int32_t h = 0; h < n_heads; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim;
        const __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
        _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
      }
    }
  } else {
    // Adjacent pairs, four per register: even lanes x0 c - x1 s, odd lanes x0 s + x1 c
    // (fmaddsub of x0 against [c s] with x1 times [s c]).
    for (; i + 4 <= half; i += 4) {
      const __m256 cs = _mm256_loadu_ps(cos_sin + 2 * i), sc = _mm256_permute_ps(cs, 0xb1);
      for (int32_t h = 0; h < n_heads; ++h) {
        float* v = x + static_cast<int64_t>(h) * head_dim + 2 * i;
        const __m256 xv = _mm256_loadu_ps(v);
        const __m256 t = _mm256_mul_ps(_mm256_movehdup_ps(xv), sc);
        _mm256_storeu_ps(v, _mm256_fmaddsub_ps(_mm256_moveldup_ps(xv), cs, t));
      }
    }
  }
  for (; i < half; ++i) {
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const int32_t a = neox ? i : 2 * i;
    const int32_t b = neox ? i + half : 2 * i + 1;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<int64_t>(h) * head_dim;
      const float x0 = v[a], x1 = v[b];
      v[a] = std::fma(x0, c, -(x1 * s));
      v[b] = std::fma(x0, s, x1 * c);
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

}  // namespace ecoserve::kernels
