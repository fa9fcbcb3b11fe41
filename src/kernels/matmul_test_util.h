// Helpers for the matmul tests (matmul_test.cc, packed_weights_test.cc,
// matmul_amx_bf16_test.cc). Test-only header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/ggml_type.h"
#include "kernels/matmul.h"
#include "kernels/packed_weights.h"
#include "kernels/quant.h"

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

// A matrix in GGUF's layout and, for Q8_0 and Q4_K, its kRows8 repacking.
struct PackedMatrix {
  GgmlType type;
  std::int64_t rows, cols;
  std::size_t row_bytes;
  std::vector<std::uint8_t> gguf, packed;

  WeightView gguf_view() const { return WeightView{type, gguf.data(), rows, cols, row_bytes}; }
  WeightView packed_view() const {
    return WeightView{type, packed.data(), rows, cols, row_bytes, WeightLayout::kRows8};
  }
  // kRows8 where the type has it, else GGUF's rows.
  WeightView engine_view() const { return packed.empty() ? gguf_view() : packed_view(); }
};

inline PackedMatrix make_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                                GgmlType type = GgmlType::kQ8_0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  PackedMatrix m{type, rows, cols, row_bytes(*type_traits(type), cols), {}, {}};
  m.gguf.resize(m.row_bytes * rows);
  std::vector<float> src(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (auto& v : src) v = dist(rng);
    if (r % 5 == 1) src[r % cols] = 6.0f;                 // an outlier: a q of +-127
    if (r == 2) std::fill(src.begin(), src.end(), 0.0f);  // an all-zero row
    if (r % 7 == 3) src[(r * 3) % cols] = -7.0f;          // and a -127
    if (type == GgmlType::kQ4_K && r % 3 == 0) {  // uneven magnitudes: large 6-bit scales and mins
      for (std::int64_t c = 0; c < cols; ++c) src[c] = src[c] * float(1 + c / 32 % 5) + float(c / 64 % 3);
    }
    quantize_row(type, src.data(), m.gguf.data() + r * m.row_bytes, cols);
  }
  if (type != GgmlType::kQ8_0 && type != GgmlType::kQ4_K) return m;
  m.packed.resize(m.gguf.size());
  pack_rows8(type, m.gguf.data(), rows, cols, m.packed.data());
  return m;
}

}  // namespace ecoserve::kernels::testing
