// Vectorized transcendental functions (AVX2/FMA) for the forward pass.
// exp8: e^x for 8 floats, relative error ~2e-7 over the float range
// (Cephes-style: x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial for e^r, then
// scale by 2^n through the exponent bits); underflows to 0 below -87.3.
#pragma once

#include <immintrin.h>

namespace ecoserve::kernels {

// exp8's constants, shared with its 16-lane twin (attention_rows_impl.h's exp16, which
// makes the same operations in the same order, so the two agree bitwise per lane). In
// an unnamed namespace, like the functions' internal linkage: an unoptimized build
// emits kP, and a weak copy in a per-ISA object is what scripts/check_isa_objects.sh
// forbids.
namespace {
struct ExpConstants {
  static constexpr float kHi = 88.3762626647949f;    // inputs clamped to [kLo, kHi]
  static constexpr float kLo = -87.3365447505531f;   // below it: 0
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693359375f;      // ln 2 = kLn2Hi + kLn2Lo
  static constexpr float kLn2Lo = -2.12194440e-4f;
  // e^r ~ 1 + r + r^2 (kP[0] r^5 + ... + kP[5]), Horner from kP[0].
  static constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
};
}  // namespace

// Internal linkage (static): per-ISA objects include this, and an out-of-line copy
// compiled with their flags must not be shared with the rest of the program.
static inline __m256 exp8(__m256 x) {
  using C = ExpConstants;
  const __m256 hi = _mm256_set1_ps(C::kHi);
  const __m256 lo = _mm256_set1_ps(C::kLo);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(C::kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(C::kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(C::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(C::kP[0]);
#pragma GCC unroll 5
  for (int k = 1; k < 6; ++k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kP[k]));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(underflow, y);
}

}  // namespace ecoserve::kernels
