// Helpers for the matmul tests (matmul_test.cc, packed_weights_test.cc). Test-only header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace ecoserve::kernels::testing {

// n tokens x cols activations, uniform in [-1, 1), with an outlier of -9 in
// every third token (a -127 after quantization) and, when n > 1, token 1 all zero.
inline std::vector<float> make_acts(std::int64_t n, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n * cols);
  for (auto& v : x) v = dist(rng);
  for (std::int64_t t = 0; t < n; t += 3) x[t * cols + (t * 7) % cols] = -9.0f;
  if (n > 1) std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);
  return x;
}

}  // namespace ecoserve::kernels::testing
