// quantize_acts against the formats' rules written out one value at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels::detail {
namespace {

// Rows of random values with, per block of 32, a spread of magnitudes (scales from
// 1e-3 to 1e3 across blocks), exact zeros (an all-zero block), values on .5 quantization
// boundaries and single large outliers.
std::vector<float> make_input(std::int64_t n_tokens, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n_tokens * cols));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    for (std::int64_t b = 0; b < cols / 32; ++b) {
      float* xb = x.data() + t * cols + 32 * b;
      const int kind = static_cast<int>((t * 7 + b) % 5);
      const float scale = std::pow(10.0f, static_cast<float>((t + 3 * b) % 7) - 3.0f);
      for (int i = 0; i < 32; ++i) xb[i] = u(rng) * scale;
      if (kind == 1) {
        for (int i = 0; i < 32; ++i) xb[i] = 0.0f;
      } else if (kind == 2) {
        xb[static_cast<int>(rng() % 32)] = 127.0f;  // scale 1: the rest land on quantization steps
        for (int i = 0; i < 32; ++i) {
          if (xb[i] != 127.0f) xb[i] = static_cast<float>(static_cast<int>(rng() % 255) - 127) + 0.5f * (i % 2);
        }
      } else if (kind == 3) {
        xb[static_cast<int>(rng() % 32)] = -50.0f * scale;  // a negative outlier sets the scale
      }
    }
  }
  return x;
}

TEST(QuantizeActsTest, BlockFormatFollowsTheScalarRuleForEveryBlockCount) {
  // 1-20 blocks (the eight-block runs, their tails and both alone), and the models' widths.
  std::vector<std::int64_t> widths;
  for (std::int64_t nb = 1; nb <= 20; ++nb) widths.push_back(32 * nb);
  widths.push_back(768);
  widths.push_back(2048);
  for (const std::int64_t cols : widths) {
    const std::int64_t n = 5, nb = cols / 32;
    const std::vector<float> x = make_input(n, cols, static_cast<unsigned>(cols));
    std::vector<std::uint8_t> scratch(quantized_acts_bytes(n, cols));
    const QuantizedActs a = layout_quantized_acts(scratch.data(), n, cols, /*k_format=*/false);
    // Tokens [1, 4) only: the others must stay untouched.
    quantize_acts(x.data(), cols, 1, 4, a);
    for (std::int64_t t = 1; t < 4; ++t) {
      for (std::int64_t b = 0; b < nb; ++b) {
        SCOPED_TRACE(testing::Message() << "cols " << cols << " token " << t << " block " << b);
        const float* xb = x.data() + t * cols + 32 * b;
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        ASSERT_EQ(a.d[t * nb + b], d);
        std::int32_t sum = 0;
        for (int i = 0; i < 32; ++i) {
          const auto qi = static_cast<std::int32_t>(std::nearbyint(xb[i] * id));
          ASSERT_EQ(a.q[t * a.q_stride + 32 * b + i], qi) << "value " << i;
          sum += qi;
        }
        for (int c = 0; c < 8; ++c) {
          std::int32_t s4 = 0;
          for (int i = 0; i < 4; ++i) s4 += a.q[t * a.q_stride + 32 * b + 4 * c + i];
          ASSERT_EQ(a.xc[(t * nb + b) * 8 + c], -128 * s4) << "chunk " << c;
        }
        ASSERT_EQ(a.xt[t * nb + b], -128 * sum);
      }
    }
    for (const std::int64_t t : {std::int64_t{0}, std::int64_t{4}}) {
      for (std::int64_t b = 0; b < nb; ++b) ASSERT_EQ(a.d[t * nb + b], 0.0f) << "token " << t << " was written";
    }
  }
}

TEST(QuantizeActsTest, KFormatFollowsTheScalarRule) {
  for (const std::int64_t cols : {256, 512, 768, 2048}) {
    const std::int64_t n = 3, nsb = cols / 256;
    const std::vector<float> x = make_input(n, cols, static_cast<unsigned>(cols) + 1);
    std::vector<std::uint8_t> scratch(quantized_acts_bytes(n, cols));
    const QuantizedActs a = layout_quantized_acts(scratch.data(), n, cols, /*k_format=*/true);
    quantize_acts(x.data(), cols, 0, n, a);
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t s = 0; s < nsb; ++s) {
        SCOPED_TRACE(testing::Message() << "cols " << cols << " token " << t << " super-block " << s);
        const float* xs = x.data() + t * cols + 256 * s;
        float amax = 0.0f;
        for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(xs[i]));
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        ASSERT_EQ(a.d[t * nsb + s], amax > 0.0f ? 1.0f / id : 0.0f);
        for (int g = 0; g < 16; ++g) {
          std::int32_t sum = 0;
          for (int i = 0; i < 16; ++i) {
            const auto qi = static_cast<std::int32_t>(std::nearbyint(xs[16 * g + i] * id));
            ASSERT_EQ(a.q[t * a.q_stride + 256 * s + 16 * g + i], qi) << "value " << 16 * g + i;
            sum += qi;
          }
          ASSERT_EQ(a.bsums[t * 2 * a.nb + 16 * s + g], sum) << "sum " << g;
        }
        // qu: q + 128 as unsigned bytes.
        for (int i = 0; i < 256; ++i) {
          const std::int64_t at = t * a.q_stride + 256 * s + i;
          ASSERT_EQ(a.qu[at], a.q[at] + 128) << "value " << i;
        }
        // bpairs: int32 i of the super-block = (sum of sub-block 2i, of 2i + 1) as int16s.
        for (int i = 0; i < 4; ++i) {
          std::int16_t pair[2];
          std::memcpy(pair, a.bpairs + (t * nsb + s) * 4 + i, sizeof(pair));
          for (int h = 0; h < 2; ++h) {
            const int sb = 2 * i + h;
            ASSERT_EQ(pair[h], a.bsums[t * 2 * a.nb + 16 * s + 2 * sb] + a.bsums[t * 2 * a.nb + 16 * s + 2 * sb + 1])
                << "pair " << i << " half " << h;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ecoserve::kernels::detail
