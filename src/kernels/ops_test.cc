#include "kernels/ops.h"

#include "base/fp16.h"
#include "kernels/vec_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace ecoserve::kernels {
namespace {

TEST(OpsTest, DotAndAxpyMatchScalar) {
  for (int n : {1, 7, 8, 15, 16, 33, 100}) {
    std::vector<float> a(n), b(n), y(n, 1.0f);
    double ref = 0;
    for (int i = 0; i < n; ++i) {
      a[i] = 0.1f * (i % 7) - 0.3f;
      b[i] = 0.05f * (i % 5) + 0.2f;
      ref += static_cast<double>(a[i]) * b[i];
    }
    EXPECT_NEAR(dot(a.data(), b.data(), n), ref, 1e-5) << n;
    axpy(2.0f, a.data(), y.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], 1.0f + 2.0f * a[i]);
  }
}

TEST(OpsTest, RmsNorm) {
  std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 2, 0.5f}, out(4);
  rms_norm(x.data(), w.data(), 4, 0.0f, out.data());
  const float inv = 1.0f / std::sqrt(30.0f / 4.0f);
  EXPECT_NEAR(out[0], 1 * inv, 1e-6);
  EXPECT_NEAR(out[2], 3 * inv * 2, 1e-6);
  EXPECT_NEAR(out[3], 4 * inv * 0.5f, 1e-6);
}

// Every length through the vector loops and their tails, in place and not: the
// float64 formula out = (x * scale) * w, scale = 1 / sqrt(mean(x^2) + eps).
TEST(OpsTest, RmsNormMatchesTheFormulaAtEveryLengthAndInPlace) {
  for (int n : {1, 5, 8, 15, 16, 17, 31, 33, 768, 2051}) {
    std::vector<float> x(n), w(n), out(n);
    double ss = 0;
    for (int i = 0; i < n; ++i) {
      x[i] = std::sin(0.37f * i) * (1.0f + static_cast<float>(i % 11));
      w[i] = 0.5f + 0.01f * static_cast<float>(i % 13);
      ss += static_cast<double>(x[i]) * x[i];
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + 1e-5));
    rms_norm(x.data(), w.data(), n, 1e-5f, out.data());
    for (int i = 0; i < n; ++i) EXPECT_FLOAT_EQ(out[i], x[i] * scale * w[i]) << "n=" << n << " i=" << i;
    rms_norm(x.data(), w.data(), n, 1e-5f, x.data());
    for (int i = 0; i < n; ++i) EXPECT_EQ(x[i], out[i]) << "in place, n=" << n << " i=" << i;
  }
}

TEST(OpsTest, RopeRotatesPairsByPositionAngle) {
  // One head, head_dim 4, rope_dim 4: pair 0 rotates by pos, pair 1 by pos * base^(-1/2).
  std::vector<float> cs(4);
  rope_cos_sin(3, 4, 100.0f, 1.0f, cs.data());
  std::vector<float> x = {1, 0, 0, 1};
  rope_apply(x.data(), 1, 4, 4, false, cs.data());
  EXPECT_NEAR(x[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[2], -std::sin(0.3), 1e-6);
  EXPECT_NEAR(x[3], std::cos(0.3), 1e-6);
  // NeoX pairs (0, 2) and (1, 3).
  std::vector<float> y = {1, 0, 0, 1};
  rope_apply(y.data(), 1, 4, 4, true, cs.data());
  EXPECT_NEAR(y[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(y[2], std::sin(3.0), 1e-6);
  EXPECT_NEAR(y[1], -std::sin(0.3), 1e-6);
  EXPECT_NEAR(y[3], std::cos(0.3), 1e-6);
}

// Every pair, in the vector lanes or the scalar tail, is (fma(x0, c, -(x1 s)), fma(x0, s,
// x1 c)): rope_dim 6, 18, 24, 64, 128 (3, 9, 12, 32, 64 pairs: the tail alone, vectors and
// a tail, vectors alone), a rope_dim below head_dim (the other dims untouched), several
// heads, both pair layouts.
TEST(OpsTest, RopeGivesTheFusedFormulaBitsInEveryLane) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (const bool neox : {false, true}) {
    for (const auto& [head_dim, rope_dim] : {std::pair{6, 6}, std::pair{18, 18}, std::pair{64, 24},
                                             std::pair{64, 64}, std::pair{128, 128}}) {
      const int32_t n_heads = 3, half = rope_dim / 2;
      std::vector<float> cs(rope_dim);
      rope_cos_sin(1234, rope_dim, 10000.0f, 1.0f, cs.data());
      std::vector<float> x(static_cast<size_t>(n_heads) * head_dim);
      for (auto& v : x) v = nd(rng);
      std::vector<float> want = x;
      for (int32_t h = 0; h < n_heads; ++h) {
        float* v = want.data() + h * head_dim;
        for (int32_t i = 0; i < half; ++i) {
          const int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
          const float x0 = v[a], x1 = v[b], c = cs[2 * i], s = cs[2 * i + 1];
          v[a] = std::fma(x0, c, -(x1 * s));
          v[b] = std::fma(x0, s, x1 * c);
        }
      }
      rope_apply(x.data(), n_heads, head_dim, rope_dim, neox, cs.data());
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(x[i], want[i]) << "neox " << neox << " head_dim " << head_dim << " rope_dim " << rope_dim
                                 << " i " << i;
      }
    }
  }
}

TEST(OpsTest, SiluMul) {
  std::vector<float> g = {0.0f, 1.0f, -2.0f}, u = {3.0f, 2.0f, 1.0f}, out(3);
  silu_mul(g.data(), u.data(), 3, out.data());
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 2.0f / (1.0f + std::exp(-1.0f)), 1e-6);
  EXPECT_NEAR(out[2], -2.0f / (1.0f + std::exp(2.0f)), 1e-6);
}

}  // namespace
}  // namespace ecoserve::kernels

namespace ecoserve::kernels {
namespace {

// softmax_exp2_8 over about a million floats of [-30, 0] by bit pattern (tiny ones as
// many as large) and [kLo, -30] sampled: within 1e-7 of 2^x; 2^0 and 2^-0 exactly 1,
// 2^-1 exactly 0.5; below kLo = -125 (and -inf, the masked scores) exactly 0.
TEST(VecMathTest, SoftmaxExp2MatchesStdExp2ForNonPositiveInputs) {
  double worst = 0.0;
  float worst_at = 0.0f;
  float x[8];
  int fill = 0;
  auto push = [&](float v) {
    x[fill++] = v;
    if (fill < 8) return;
    fill = 0;
    alignas(32) float xa[8], y[8];
    std::memcpy(xa, x, sizeof xa);
    _mm256_store_ps(y, softmax_exp2_8(_mm256_load_ps(xa)));
    for (int i = 0; i < 8; ++i) {
      if (x[i] < -125.0f) {
        EXPECT_EQ(y[i], 0.0f) << x[i];
        continue;
      }
      const double rel = std::abs(y[i] / std::exp2(static_cast<double>(x[i])) - 1.0);
      if (rel > worst) {
        worst = rel;
        worst_at = x[i];
      }
    }
  };
  for (uint32_t bits = 0x80000000u; bits <= 0xc1f00000u; bits += 1021) {  // -0 .. -30
    float v;
    std::memcpy(&v, &bits, 4);
    push(v);
  }
  for (float v = -125.5f; v < -30.0f; v += 0.000917f) push(v);
  EXPECT_LT(worst, 1e-7) << "at " << worst_at;
  const float special[8] = {0.0f, -0.0f, -1.0f, -125.0f, -125.01f, -1000.0f, -std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::denorm_min()};
  alignas(32) float xs[8], y[8];
  std::memcpy(xs, special, sizeof xs);
  _mm256_store_ps(y, softmax_exp2_8(_mm256_load_ps(xs)));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 0.5f);
  EXPECT_NEAR(y[3] / std::exp2(-125.0), 1.0, 1e-7);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_EQ(y[7], 1.0f);
}

TEST(VecMathTest, Exp8MatchesStdExp) {
  for (float base : {-100.0f, -87.0f, -20.0f, -1.0f, -0.3f, 0.0f, 0.2f, 1.0f, 10.0f, 80.0f}) {
    alignas(32) float x[8], y[8];
    for (int i = 0; i < 8; ++i) x[i] = base + 0.137f * i;
    _mm256_store_ps(y, exp8(_mm256_load_ps(x)));
    for (int i = 0; i < 8; ++i) {
      const double want = std::exp(static_cast<double>(x[i]));
      if (x[i] < -87.3f) {
        EXPECT_EQ(y[i], 0.0f) << x[i];
      } else {
        EXPECT_NEAR(y[i] / want, 1.0, 5e-7) << x[i];
      }
    }
  }
}

TEST(OpsTest, SiluMulVectorPathMatchesScalar) {
  std::vector<float> g(37), u(37), out(37);
  for (int i = 0; i < 37; ++i) {
    g[i] = -6.0f + 0.33f * i;
    u[i] = 0.5f + 0.01f * i;
  }
  silu_mul(g.data(), u.data(), 37, out.data());
  for (int i = 0; i < 37; ++i) {
    const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    EXPECT_NEAR(out[i], want, 1e-6 * std::max(1.0, std::abs(want))) << i;
  }
}

// Rows of any length (vector body + scalar tail) convert exactly as the scalar
// F16C conversions do, round-to-nearest-even included, and back exactly.
TEST(OpsTest, Fp16RowsConvertLikeTheScalarConversion) {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159265f, 1.0f + 1.0f / 2048.0f,
                          1.0f + 3.0f / 2048.0f, 7e4f, -1e-5f};  // the last: a subnormal half
  for (int i = 0; i < 10; ++i) x.push_back(0.1f * static_cast<float>(i) - 0.37f);
  std::vector<uint16_t> h(x.size());
  fp32_to_fp16_row(x.data(), h.data(), static_cast<int64_t>(x.size()));
  std::vector<float> back(x.size());
  fp16_to_fp32_row(h.data(), back.data(), static_cast<int64_t>(h.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], fp32_to_fp16(x[i])) << "value " << x[i];
    EXPECT_EQ(back[i], fp16_to_fp32(h[i])) << "value " << x[i];
  }
  EXPECT_EQ(h[7], 0x3C00);   // 1 + 2^-11 is a tie: rounds to even (1.0)
  EXPECT_EQ(h[8], 0x3C02);   // 1 + 3 * 2^-11 is a tie: rounds to even (1 + 2^-9)
  EXPECT_EQ(h[9], 0x7C00);   // above the largest half: infinity
}

}  // namespace
}  // namespace ecoserve::kernels
