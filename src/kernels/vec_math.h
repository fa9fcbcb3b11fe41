// Vectorized transcendental functions (AVX2/FMA) for the forward pass.
// exp8: e^x for 8 floats, relative error ~2e-7 over the float range
// (Cephes-style: x = n ln2 + r, |r| <= ln2/2, degree-7 polynomial for e^r, then
// scale by 2^n through the exponent bits); underflows to 0 below -87.3. Used by
// silu; attention's softmax uses softmax_exp2_8 (below).
#pragma once

#include <immintrin.h>

namespace ecoserve::kernels {

// exp8's constants. In an unnamed namespace (as softmax_exp2_8's), like the functions'
// internal linkage: an unoptimized build emits kP, and a weak copy in a per-ISA object
// is what scripts/check_isa_objects.sh forbids.
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

// exp8's algorithm is written once, over a register width (ExpLanes8 and ExpLanes16: the
// few operations it needs), so that exp16 (below, AVX-512 objects) gives exp8's bits lane by
// lane.
namespace {
struct ExpLanes8 {
  using V = __m256;
  using Mask = __m256;  // all ones where x < kLo
  static __m256 set1(float v) { return _mm256_set1_ps(v); }
  static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256 fnmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fnmadd_ps(a, b, c); }
  static __m256 clamp(__m256 x, __m256 lo, __m256 hi) { return _mm256_min_ps(_mm256_max_ps(x, lo), hi); }
  static __m256 round(__m256 x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static Mask below(__m256 x, __m256 lo) { return _mm256_cmp_ps(x, lo, _CMP_LT_OQ); }
  static __m256 zero_where(Mask m, __m256 y) { return _mm256_andnot_ps(m, y); }
  // 2^n for n integral in float: (n + 127) << 23 as the bits of a float.
  static __m256 pow2(__m256 n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
};
#ifdef __AVX512F__
struct ExpLanes16 {
  using V = __m512;
  using Mask = __mmask16;
  static __m512 set1(float v) { return _mm512_set1_ps(v); }
  static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
  static __m512 fnmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fnmadd_ps(a, b, c); }
  static __m512 clamp(__m512 x, __m512 lo, __m512 hi) { return _mm512_min_ps(_mm512_max_ps(x, lo), hi); }
  static __m512 round(__m512 x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static Mask below(__m512 x, __m512 lo) { return _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ); }
  static __m512 zero_where(Mask m, __m512 y) { return _mm512_maskz_mov_ps(static_cast<__mmask16>(~m), y); }
  static __m512 pow2(__m512 n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
};
#endif

template <class L>
inline typename L::V exp_lanes(typename L::V x) {
  using C = ExpConstants;
  using V = typename L::V;
  const V lo = L::set1(C::kLo);
  const typename L::Mask underflow = L::below(x, lo);
  x = L::clamp(x, lo, L::set1(C::kHi));
  const V n = L::round(L::mul(x, L::set1(C::kLog2e)));
  V r = L::fnmadd(n, L::set1(C::kLn2Hi), x);
  r = L::fnmadd(n, L::set1(C::kLn2Lo), r);
  V p = L::set1(C::kP[0]);
#pragma GCC unroll 5
  for (int k = 1; k < 6; ++k) p = L::fmadd(p, r, L::set1(C::kP[k]));
  const V r2 = L::mul(r, r);
  const V y = L::fmadd(p, r2, L::add(r, L::set1(1.0f)));
  return L::zero_where(underflow, L::mul(y, L::pow2(n)));
}
}  // namespace

// Internal linkage (static): per-ISA objects include this, and an out-of-line copy
// compiled with their flags must not be shared with the rest of the program.
static inline __m256 exp8(__m256 x) { return exp_lanes<ExpLanes8>(x); }

#ifdef __AVX512F__
// exp8 on 16 lanes, its bits lane by lane (internal linkage, as exp8).
static inline __m512 exp16(__m512 x) { return exp_lanes<ExpLanes16>(x); }
#endif

// softmax_exp2_8: 2^x for attention's softmax weights. The attention kernels scale
// their scores by log2(e) with the usual 1/sqrt(head_dim) (in the query, once), so a
// weight e^(s - max) is 2^x with x = (s - max) log2(e) <= 0 (or -inf where masked), and
// the range reduction needs no multiply: n = round(x) from the rounding of x + 1.5 *
// 2^23 (whose low mantissa bits are then n), f = x - n exactly, 2^f = 1 + f Q(f) (Q of
// degree 5, minimax for the relative error on |f| <= 1/2: 2e-9), and 2^n added to the
// exponent bits as an integer. Six multiply-adds against exp8's eleven (in prefill
// attention at head_dim 64 those were a third of the FMA work), and no error from ln 2's
// rounding: relative error under 1e-7 over [kLo, 0] (ops_test.cc; exp8 1.2e-7), 2^0 = 1
// and 2^-1 = 0.5 exactly, 0 below kLo. Valid for x <= 127 (positive x are not clamped);
// attention_rows_impl.h's softmax_exp2_16 makes the same operations per lane.
namespace {
struct SoftmaxExp2Constants {
  // Below kLo: 0 (2^-125 = 2.4e-38); from it up, n >= -125 keeps y * 2^n a normal
  // float, so adding n to y's exponent bits is exact.
  static constexpr float kLo = -125.0f;
  static constexpr float kLog2e = 1.44269504088896341f;  // the scores' extra factor
  static constexpr float kRound = 12582912.0f;           // 1.5 * 2^23
  // 2^f ~ 1 + f (kQ[0] f^5 + kQ[1] f^4 + ... + kQ[5]), Horner from kQ[0].
  static constexpr float kQ[6] = {1.5353341e-4f, 1.3398900e-3f, 9.6184376e-3f,
                                  5.5503324e-2f, 2.4022648e-1f, 6.9314720e-1f};
};
}  // namespace

static inline __m256 softmax_exp2_8(__m256 x) {
  using C = SoftmaxExp2Constants;
  const __m256 lo = _mm256_set1_ps(C::kLo);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 u = _mm256_max_ps(x, lo);
  const __m256 t = _mm256_add_ps(u, _mm256_set1_ps(C::kRound));
  const __m256 f = _mm256_sub_ps(u, _mm256_sub_ps(t, _mm256_set1_ps(C::kRound)));
  __m256 q = _mm256_set1_ps(C::kQ[0]);
#pragma GCC unroll 5
  for (int k = 1; k < 6; ++k) q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(C::kQ[k]));
  const __m256 y = _mm256_fmadd_ps(q, f, _mm256_set1_ps(1.0f));
  const __m256i scaled = _mm256_add_epi32(_mm256_castps_si256(y), _mm256_slli_epi32(_mm256_castps_si256(t), 23));
  return _mm256_andnot_ps(underflow, _mm256_castsi256_ps(scaled));
}

// The sum of v's 8 lanes as a tree: lanes i and i + 4, then pairs, then the last two
// (internal linkage, as exp8).
static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// out[j][i] = r[i][j]: an 8 x 8 transpose (internal linkage, as exp8).
static inline void transpose8(const __m256 (&r)[8], __m256 (&out)[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    out[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

#ifdef __AVX512F__
// 2^x on 16 lanes by softmax_exp2_8's range reduction, then 2^f = 1 + f Q(f) with Q's
// coefficients q[0..N) from the highest power (Horner), then 2^n added to the exponent bits.
// Internal linkage, as exp8.
template <int N>
static inline __m512 exp2_16_poly(__m512 x, const float (&q)[N]) {
  using C = SoftmaxExp2Constants;
  const __m512 lo = _mm512_set1_ps(C::kLo);
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __m512 u = _mm512_max_ps(x, lo);
  const __m512 t = _mm512_add_ps(u, _mm512_set1_ps(C::kRound));
  const __m512 f = _mm512_sub_ps(u, _mm512_sub_ps(t, _mm512_set1_ps(C::kRound)));
  __m512 p = _mm512_set1_ps(q[0]);
#pragma GCC unroll 8
  for (int k = 1; k < N; ++k) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(q[k]));
  const __m512 y = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  const __m512i scaled = _mm512_add_epi32(_mm512_castps_si512(y), _mm512_slli_epi32(_mm512_castps_si512(t), 23));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), _mm512_castsi512_ps(scaled));
}

// softmax_exp2_8's arithmetic on 16 lanes (the same operations in the same order: the
// same bits per lane). Only in objects built with AVX-512 (attention_rows_avx512.cc,
// attention_bf16_impl.h's objects).
static inline __m512 softmax_exp2_16(__m512 x) { return exp2_16_poly(x, SoftmaxExp2Constants::kQ); }

// 2^x for softmax weights that are rounded to bf16 next (attention_bf16_impl.h): Q of degree
// 2 (minimax for the relative error on |f| <= 1/2: 1.0e-4 in float, a twentieth of bf16's
// rounding, 2^-9), three multiply-adds where softmax_exp2_16 takes six. 2^0 = 1 and 2^-1 =
// 0.5 exactly, 0 below kLo, valid for x <= 127.
static inline __m512 bf16_weight_exp2_16(__m512 x) {
  static constexpr float kQ[3] = {5.5008959e-2f, 2.42211375e-1f, 6.9328297e-1f};
  return exp2_16_poly(x, kQ);
}

// PREFETCHW: the line into L1 in a state that a store may write without a further request
// (every CPU of the AVX-512 levels has it; GCC emits it only with -mprfchw). For outputs
// past L2 whose stores would each wait for a read for ownership.
static inline void prefetch_for_write(const char* line) { asm volatile("prefetchw %0" : : "m"(*line)); }
#endif  // __AVX512F__

}  // namespace ecoserve::kernels
