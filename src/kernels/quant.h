// Reference (scalar, exact-to-formula) conversion between float and the
// storage types ecoserve supports: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K.
// n must be a multiple of the type's block_elems. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "kernels/ggml_type.h"

namespace ecoserve::kernels {

// dst[0..n) = values encoded in src. Supported types only (type_traits()->supported).
void dequantize_row(GgmlType type, const void* src, float* dst, std::int64_t n);

// Encodes src[0..n) into dst (row_bytes(type, n) bytes), like ggml's reference quantizers.
void quantize_row(GgmlType type, const float* src, void* dst, std::int64_t n);

}  // namespace ecoserve::kernels
