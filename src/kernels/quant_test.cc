#include "kernels/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"

namespace ecoserve::kernels {
namespace {

TEST(QuantTest, Q8_0HandBuiltBlock) {
  BlockQ8_0 b;
  b.d = fp32_to_fp16(0.5f);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<std::int8_t>(i - 3);
  float y[32];
  dequantize_row(GgmlType::kQ8_0, &b, y, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], (i - 3) * 0.5f) << i;
}

TEST(QuantTest, Q4_0HandBuiltBlock) {
  BlockQ4_0 b;
  b.d = fp32_to_fp16(0.25f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<std::uint8_t>((j & 0xF) | (((15 - j) & 0xF) << 4));
  float y[32];
  dequantize_row(GgmlType::kQ4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.25f) << j;
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.25f) << j;
  }
}

TEST(QuantTest, F16AndBF16) {
  const std::uint16_t h[4] = {0x3C00, 0xC000, 0x3800, 0x0000};  // 1, -2, 0.5, 0
  float y[4];
  dequantize_row(GgmlType::kF16, h, y, 4);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], 0.5f);
  EXPECT_EQ(y[3], 0.0f);
  const std::uint16_t b[3] = {0x3F80, 0xC040, 0x3E00};  // 1, -3, 0.125
  dequantize_row(GgmlType::kBF16, b, y, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  EXPECT_EQ(y[2], 0.125f);
}

// Q4_K: sub-block j (32 elements) has 6-bit scale sc_j and min m_j, value = d*sc_j*q - dmin*m_j.
// Scales packing: j<4: scales[j] low 6 bits = sc, scales[j+4] low 6 bits = m;
// j>=4: scales[j+4] = (sc & 15) | (m & 15) << 4, top 2 bits of sc in scales[j-4] bits 6-7,
// top 2 bits of m in scales[j] bits 6-7. Quants: for chunk c (64 elements), byte qs[32c+l]
// holds element 64c+l in the low nibble and 64c+32+l in the high nibble.
TEST(QuantTest, Q4_KHandBuiltSuperBlock) {
  const int sc[8] = {1, 7, 20, 63, 33, 17, 48, 5};
  const int mn[8] = {0, 3, 9, 62, 16, 40, 1, 63};
  BlockQ4_K b;
  std::memset(&b, 0, sizeof b);
  b.d = fp32_to_fp16(0.5f);
  b.dmin = fp32_to_fp16(0.25f);
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<std::uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<std::uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  auto q_of = [](int e) { return (e * 7 + 3) % 16; };
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * c + l] = static_cast<std::uint8_t>(q_of(64 * c + l) | (q_of(64 * c + 32 + l) << 4));
    }
  }
  float y[256];
  dequantize_row(GgmlType::kQ4_K, &b, y, 256);
  for (int e : {0, 1, 31, 32, 63, 64, 100, 127, 128, 150, 191, 200, 255}) {
    const int j = e / 32;
    const float expect = 0.5f * sc[j] * q_of(e) - 0.25f * mn[j];
    EXPECT_FLOAT_EQ(y[e], expect) << "element " << e;
  }
  // Fully explicit spot checks: element 255 is sub-block 7 (sc 5, m 63), q = (255*7+3)%16 = 12.
  EXPECT_FLOAT_EQ(y[255], 0.5f * 5 * 12 - 0.25f * 63);
  // Element 130: sub-block 4 (sc 33, m 16), q = (130*7+3)%16 = 913%16 = 1.
  EXPECT_FLOAT_EQ(y[130], 0.5f * 33 * 1 - 0.25f * 16);
}

// Q6_K: 16 sub-blocks of 16, value = d * scales[e/16] * (q - 32), q 6 bits.
// For half h (128 elements) and l < 32: ql[64h+l] low nibble = element 128h+l, high nibble =
// element 128h+64+l; ql[64h+32+l] low = 128h+32+l, high = 128h+96+l; qh[32h+l] bits 0-1,
// 2-3, 4-5, 6-7 are the top bits of elements 128h+l, +32, +64, +96.
TEST(QuantTest, Q6_KHandBuiltSuperBlock) {
  BlockQ6_K b;
  std::memset(&b, 0, sizeof b);
  b.d = fp32_to_fp16(0.125f);
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<std::int8_t>(i * 9 - 70);
  auto q_of = [](int e) { return (e * 13 + 5) % 64; };
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int base = 128 * h + l;
      const int q0 = q_of(base), q1 = q_of(base + 32), q2 = q_of(base + 64), q3 = q_of(base + 96);
      b.ql[64 * h + l] = static_cast<std::uint8_t>((q0 & 15) | ((q2 & 15) << 4));
      b.ql[64 * h + 32 + l] = static_cast<std::uint8_t>((q1 & 15) | ((q3 & 15) << 4));
      b.qh[32 * h + l] = static_cast<std::uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
  }
  float y[256];
  dequantize_row(GgmlType::kQ6_K, &b, y, 256);
  for (int e : {0, 5, 16, 31, 32, 47, 64, 95, 96, 127, 128, 160, 200, 233, 255}) {
    const float expect = 0.125f * (e / 16 * 9 - 70) * (q_of(e) - 32);
    EXPECT_FLOAT_EQ(y[e], expect) << "element " << e;
  }
  // Element 0: scale -70, q = 5 -> 0.125 * -70 * -27.
  EXPECT_FLOAT_EQ(y[0], 0.125f * -70 * -27);
}

struct ErrCase {
  GgmlType type;
  double max_rel_rmse;  // RMSE / RMS of the data
};

class QuantRoundTrip : public ::testing::TestWithParam<ErrCase> {};

TEST_P(QuantRoundTrip, ErrorWithinBound) {
  const auto [type, bound] = GetParam();
  const std::int64_t n = 1024;
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  x[7] = 4.5f;  // an outlier
  const TypeTraits* t = type_traits(type);
  std::vector<std::uint8_t> q(row_bytes(*t, n));
  quantize_row(type, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(type, q.data(), y.data(), n);
  double se = 0, ss = 0, max_err = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    se += (x[i] - y[i]) * (x[i] - y[i]);
    ss += x[i] * x[i];
    max_err = std::max(max_err, static_cast<double>(std::fabs(x[i] - y[i])));
  }
  const double rel = std::sqrt(se / ss);
  EXPECT_LT(rel, bound) << type_name(type) << " max abs err " << max_err;
  // Re-quantizing the dequantized values must be (nearly) stable: same error class.
  std::vector<std::uint8_t> q2(q.size());
  quantize_row(type, y.data(), q2.data(), n);
  std::vector<float> y2(n);
  dequantize_row(type, q2.data(), y2.data(), n);
  double se2 = 0;
  for (std::int64_t i = 0; i < n; ++i) se2 += (y[i] - y2[i]) * (y[i] - y2[i]);
  EXPECT_LT(std::sqrt(se2 / ss), bound) << type_name(type);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantRoundTrip,
                         ::testing::Values(ErrCase{GgmlType::kF32, 1e-9}, ErrCase{GgmlType::kF16, 5e-4},
                                           ErrCase{GgmlType::kBF16, 3e-3}, ErrCase{GgmlType::kQ8_0, 0.008},
                                           ErrCase{GgmlType::kQ4_0, 0.11}, ErrCase{GgmlType::kQ4_K, 0.09},
                                           ErrCase{GgmlType::kQ6_K, 0.03}),
                         [](const auto& info) { return std::string(type_name(info.param.type)); });

TEST(QuantTest, Q8_0QuantizeExactOnRepresentableValues) {
  // Values k * 0.5 with |k| <= 127 and max 63.5 -> d = 0.5 exactly, all values exact.
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.5f;
  x[31] = 63.5f;
  BlockQ8_0 b;
  quantize_row(GgmlType::kQ8_0, x, &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 0.5f);
  float y[32];
  dequantize_row(GgmlType::kQ8_0, &b, y, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], x[i]) << i;
}

TEST(QuantTest, ZerosStayZero) {
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    std::vector<float> x(256, 0.0f), y(256, 1.0f);
    std::vector<std::uint8_t> q(row_bytes(*type_traits(t), 256));
    quantize_row(t, x.data(), q.data(), 256);
    dequantize_row(t, q.data(), y.data(), 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.0f) << type_name(t) << " " << i;
  }
}

}  // namespace
}  // namespace ecoserve::kernels
