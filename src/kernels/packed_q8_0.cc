#include "kernels/packed_q8_0.h"

#include <algorithm>
#include <cstring>

#include "base/status.h"
#include "kernels/quant.h"

namespace ecoserve::kernels {
namespace {

constexpr std::int64_t kGroupRows = 8;
constexpr std::int64_t kChunkValues = 4;

// Offsets inside a group of nb blocks.
inline std::int64_t scale_offset(std::int64_t b, std::int64_t j) { return 2 * (b * kGroupRows + j); }
inline std::int64_t quant_offset(std::int64_t nb, std::int64_t b, std::int64_t j, std::int64_t k) {
  // value k of the block: chunk k / 4, byte k % 4 of row j's 4 bytes.
  return 16 * nb + 256 * b + 32 * (k / kChunkValues) + kChunkValues * j + k % kChunkValues;
}

// Blocks [b0, b0 + n) of row j of the group at gd (nb blocks per row), in GGUF's form.
void unpack_blocks(const std::uint8_t* gd, std::int64_t nb, std::int64_t j, std::int64_t b0, std::int64_t n,
                   BlockQ8_0* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t b = b0 + i;
    std::memcpy(&out[i].d, gd + scale_offset(b, j), 2);
    for (std::int64_t k = 0; k < kQK8_0; ++k) out[i].qs[k] = static_cast<std::int8_t>(gd[quant_offset(nb, b, j, k)] ^ 0x80u);
  }
}

}  // namespace

bool can_pack_rows8(const WeightView& w) {
  return w.type == GgmlType::kQ8_0 && w.layout == WeightLayout::kGguf && w.rows > 0 && w.rows % kGroupRows == 0 &&
         w.cols > 0 && w.cols % kQK8_0 == 0;
}

void pack_q8_0_rows8(const std::uint8_t* src, std::int64_t rows, std::int64_t cols, std::uint8_t* dst) {
  ECO_CHECK_MSG(rows % kGroupRows == 0 && cols % kQK8_0 == 0, "pack_q8_0_rows8: bad shape {}x{}", rows, cols);
  const std::int64_t nb = cols / kQK8_0;
  const std::int64_t row_bytes = nb * static_cast<std::int64_t>(sizeof(BlockQ8_0));
  const std::int64_t group_bytes = kGroupRows * row_bytes;
  for (std::int64_t g = 0; g < rows / kGroupRows; ++g) {
    std::uint8_t* gd = dst + g * group_bytes;
    for (std::int64_t j = 0; j < kGroupRows; ++j) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(src + (g * kGroupRows + j) * row_bytes);
      for (std::int64_t b = 0; b < nb; ++b) {
        std::memcpy(gd + scale_offset(b, j), &blk[b].d, 2);
        for (std::int64_t k = 0; k < kQK8_0; ++k) {
          gd[quant_offset(nb, b, j, k)] = static_cast<std::uint8_t>(blk[b].qs[k]) ^ 0x80u;
        }
      }
    }
  }
}

void unpack_q8_0_rows8_row(const std::uint8_t* packed, std::int64_t cols, std::int64_t row, std::uint8_t* dst) {
  const std::int64_t nb = cols / kQK8_0;
  const std::int64_t row_bytes = nb * static_cast<std::int64_t>(sizeof(BlockQ8_0));
  unpack_blocks(packed + row / kGroupRows * kGroupRows * row_bytes, nb, row % kGroupRows, 0, nb,
                reinterpret_cast<BlockQ8_0*>(dst));
}

void dequantize_weight_row(const WeightView& w, std::int64_t row, float* out) {
  ECO_CHECK_MSG(row >= 0 && row < w.rows, "dequantize_weight_row: row {} of {}", row, w.rows);
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  if (w.layout == WeightLayout::kGguf) {
    dequantize_row(w.type, data + row * static_cast<std::int64_t>(w.row_bytes), out, w.cols);
    return;
  }
  ECO_CHECK_MSG(w.type == GgmlType::kQ8_0, "dequantize_weight_row: kRows8 needs q8_0, not {}", type_name(w.type));
  const std::int64_t nb = w.cols / kQK8_0;
  const std::uint8_t* gd = data + row / kGroupRows * kGroupRows * static_cast<std::int64_t>(w.row_bytes);
  // Up to 64 blocks (2048 values) at a time through the stack.
  BlockQ8_0 blocks[64];
  for (std::int64_t b0 = 0; b0 < nb; b0 += 64) {
    const std::int64_t n = std::min<std::int64_t>(64, nb - b0);
    unpack_blocks(gd, nb, row % kGroupRows, b0, n, blocks);
    dequantize_row(GgmlType::kQ8_0, blocks, out + b0 * kQK8_0, n * kQK8_0);
  }
}

}  // namespace ecoserve::kernels
