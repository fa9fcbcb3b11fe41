// Tensor element types as numbered in GGUF/ggml, and their block layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ecoserve::kernels {

enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

// How a weight matrix's rows are stored in memory.
//  - kGguf: row after row, as in the GGUF file.
//  - kRows8: Q8_0 and Q4_K, 8 rows interleaved per group for the int8 kernels
//    (kernels/packed_weights.h); the same bytes per matrix, rows % 8 == 0.
enum class WeightLayout : std::uint8_t { kGguf, kRows8 };

struct TypeTraits {
  std::string_view name;     // "q8_0"
  std::int64_t block_elems;  // elements per block (1 for plain types)
  std::size_t block_bytes;   // bytes per block
  bool supported;            // ecoserve can dequantize and multiply it
};

// Traits of a known type, or nullptr for a number ggml does not define.
const TypeTraits* type_traits(GgmlType type);
inline const TypeTraits* type_traits_of(std::uint32_t raw) { return type_traits(static_cast<GgmlType>(raw)); }
std::string_view type_name(GgmlType type);  // "unknown" when not known

// Bytes of a row of n elements; n must be a multiple of block_elems (checked by callers).
inline std::size_t row_bytes(const TypeTraits& t, std::int64_t n) {
  return static_cast<std::size_t>(n / t.block_elems) * t.block_bytes;
}

// Block layouts (little-endian, packed as ggml writes them).
constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  std::uint16_t d;  // fp16 scale
  std::int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

constexpr int kQK4_0 = 32;
struct BlockQ4_0 {
  std::uint16_t d;              // fp16 scale
  std::uint8_t qs[kQK4_0 / 2];  // low nibbles: elements 0..15, high nibbles: 16..31; value = (q - 8) * d
};
static_assert(sizeof(BlockQ4_0) == 18);

constexpr int kQK_K = 256;
constexpr int kKScaleSize = 12;
struct BlockQ4_K {
  std::uint16_t d;                  // fp16 super-block scale for scales
  std::uint16_t dmin;               // fp16 super-block scale for mins
  std::uint8_t scales[kKScaleSize]; // 8 sub-block scales and mins, 6 bits each
  std::uint8_t qs[kQK_K / 2];       // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
  std::uint8_t ql[kQK_K / 2];      // low 4 bits
  std::uint8_t qh[kQK_K / 4];      // high 2 bits
  std::int8_t scales[kQK_K / 16];  // 8-bit sub-block scales
  std::uint16_t d;                 // fp16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

}  // namespace ecoserve::kernels
