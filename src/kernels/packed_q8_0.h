// The interleaved Q8_0 layout WeightLayout::kRows8 and conversions to and from it.
//
// A matrix of R rows (R % 8 == 0) and C columns (nb = C / 32 blocks per row)
// is R / 8 groups of 8 consecutive rows, each group 8 * row_bytes = nb * 272
// bytes (the same size as in GGUF):
//   scales: [nb][8] fp16, the 8 rows' scales of block b;
//   quants: [nb][8 chunks][8 rows][4] bytes, chunk c = values 4c..4c+3 of
//           block b of each row, stored biased: q ^ 0x80 (= q + 128, unsigned).
// The int8 kernels read one chunk as the unsigned operand of vpdpbusd against
// 4 broadcast activation values (matmul_packed_impl.h). Pure functions.
#pragma once

#include <cstdint>

#include "kernels/ggml_type.h"
#include "kernels/matmul.h"

namespace ecoserve::kernels {

// Whether w (in GGUF's layout) can be repacked: Q8_0 with rows % 8 == 0.
bool can_pack_rows8(const WeightView& w);

// Writes the kRows8 form of Q8_0 rows `src` (rows x cols, GGUF layout) to dst
// (rows * row_bytes bytes, not overlapping src).
void pack_q8_0_rows8(const std::uint8_t* src, std::int64_t rows, std::int64_t cols, std::uint8_t* dst);

// The inverse: GGUF-layout Q8_0 bytes of row `row` of a kRows8 matrix into dst
// (row_bytes bytes).
void unpack_q8_0_rows8_row(const std::uint8_t* packed, std::int64_t cols, std::int64_t row, std::uint8_t* dst);

// Row `row` of w (any supported type and layout) as w.cols floats.
void dequantize_weight_row(const WeightView& w, std::int64_t row, float* out);

}  // namespace ecoserve::kernels
