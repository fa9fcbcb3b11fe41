#include "kernels/packed_weights.h"

#include <algorithm>
#include <cstring>

#include "base/status.h"
#include "kernels/quant.h"

namespace ecoserve::kernels {
namespace {

constexpr std::int64_t kGroupRows = 8;
constexpr std::int64_t kChunkValues = 4;
constexpr std::int64_t kQ4kGroupSuperBytes = 8 * static_cast<std::int64_t>(sizeof(BlockQ4_K));  // 1152

// ---- Q8_0: offsets inside a group of nb blocks (runs: packed_weights.h) ----
inline std::int64_t q8_scale_offset(std::int64_t nb, std::int64_t b, std::int64_t j) {
  return q8_block_offsets(nb, b).scales + 2 * j;
}
inline std::int64_t q8_quant_offset(std::int64_t nb, std::int64_t b, std::int64_t j, std::int64_t k) {
  // value k of the block: chunk k / 4, byte k % 4 of row j's 4 bytes.
  return q8_block_offsets(nb, b).quants + 32 * (k / kChunkValues) + kChunkValues * j + k % kChunkValues;
}

// Blocks [b0, b0 + n) of row j of the Q8_0 group at gd (nb blocks per row), in GGUF's form.
void q8_unpack_blocks(const std::uint8_t* gd, std::int64_t nb, std::int64_t j, std::int64_t b0, std::int64_t n,
                      BlockQ8_0* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t b = b0 + i;
    std::memcpy(&out[i].d, gd + q8_scale_offset(nb, b, j), 2);
    for (std::int64_t k = 0; k < kQK8_0; ++k) {
      out[i].qs[k] = static_cast<std::int8_t>(gd[q8_quant_offset(nb, b, j, k)] ^ 0x80u);
    }
  }
}

// ---- Q4_K: one super-block of a group (sup: its 1152 bytes), row j ----

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block i from the 12 bytes q.
void k4_scale_min(const std::uint8_t* q, int i, int* sc, int* mn) {
  if (i < 4) {
    *sc = q[i] & 63;
    *mn = q[i + 4] & 63;
  } else {
    *sc = (q[i + 4] & 0xF) | ((q[i - 4] >> 6) << 4);
    *mn = (q[i + 4] >> 4) | ((q[i] >> 6) << 4);
  }
}

// Where sub-block i's min of row j goes (packed_weights.h): m = pair * 16 + row * 2 + odd.
std::int64_t q4k_min_index(int i, std::int64_t j) { return (i / 2) * 16 + j * 2 + i % 2; }

void q4k_pack_row(const BlockQ4_K& blk, std::int64_t j, std::uint8_t* sup) {
  std::memcpy(sup + 2 * j, &blk.d, 2);
  std::memcpy(sup + 16 + 2 * j, &blk.dmin, 2);
  for (int i = 0; i < 8; ++i) {
    int sc, mn;
    k4_scale_min(blk.scales, i, &sc, &mn);
    const std::int64_t e = i * kGroupRows + j, m = q4k_min_index(i, j);
    sup[32 + e] = static_cast<std::uint8_t>((sup[32 + e] & 0xC0) | sc);
    sup[32 + m] = static_cast<std::uint8_t>((sup[32 + m] & 0x3F) | ((mn >> 4) << 6));
    std::uint8_t& nib = sup[96 + m % 32];
    nib = m < 32 ? static_cast<std::uint8_t>((nib & 0xF0) | (mn & 0xF))
                 : static_cast<std::uint8_t>((nib & 0x0F) | ((mn & 0xF) << 4));
  }
  for (std::int64_t p = 0; p < 4; ++p) {
    for (std::int64_t c = 0; c < 8; ++c) {
      std::memcpy(sup + 128 + 256 * p + 32 * c + kChunkValues * j, blk.qs + 32 * p + kChunkValues * c, kChunkValues);
    }
  }
}

void q4k_unpack_row(const std::uint8_t* sup, std::int64_t j, BlockQ4_K* blk) {
  std::memcpy(&blk->d, sup + 2 * j, 2);
  std::memcpy(&blk->dmin, sup + 16 + 2 * j, 2);
  int sc[8], mn[8];
  for (int i = 0; i < 8; ++i) {
    const std::int64_t e = i * kGroupRows + j, m = q4k_min_index(i, j);
    const std::uint8_t nib = m < 32 ? (sup[96 + m] & 0xF) : (sup[96 + m - 32] >> 4);
    sc[i] = sup[32 + e] & 63;
    mn[i] = ((sup[32 + m] >> 6) << 4) | nib;
  }
  // The inverse of k4_scale_min.
  std::uint8_t* q = blk->scales;
  for (int i = 0; i < 4; ++i) {
    q[i] = static_cast<std::uint8_t>((sc[i] & 63) | ((sc[i + 4] >> 4) << 6));
    q[i + 4] = static_cast<std::uint8_t>((mn[i] & 63) | ((mn[i + 4] >> 4) << 6));
    q[i + 8] = static_cast<std::uint8_t>((sc[i + 4] & 0xF) | ((mn[i + 4] & 0xF) << 4));
  }
  for (std::int64_t p = 0; p < 4; ++p) {
    for (std::int64_t c = 0; c < 8; ++c) {
      std::memcpy(blk->qs + 32 * p + kChunkValues * c, sup + 128 + 256 * p + 32 * c + kChunkValues * j, kChunkValues);
    }
  }
}

void check_rows8(GgmlType type, std::int64_t rows, std::int64_t cols) {
  ECO_CHECK_MSG(type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K, "rows8: {} cannot be repacked", type_name(type));
  ECO_CHECK_MSG(rows % kGroupRows == 0 && cols % type_traits(type)->block_elems == 0, "rows8: bad {} shape {}x{}",
                type_name(type), rows, cols);
}

}  // namespace

bool can_pack_rows8(const WeightView& w) {
  if (w.type != GgmlType::kQ8_0 && w.type != GgmlType::kQ4_K) return false;
  return w.layout == WeightLayout::kGguf && w.rows > 0 && w.rows % kGroupRows == 0 && w.cols > 0 &&
         w.cols % type_traits(w.type)->block_elems == 0;
}

void pack_rows8(GgmlType type, const std::uint8_t* src, std::int64_t rows, std::int64_t cols, std::uint8_t* dst) {
  check_rows8(type, rows, cols);
  const auto row_bytes = static_cast<std::int64_t>(kernels::row_bytes(*type_traits(type), cols));
  const std::int64_t group_bytes = kGroupRows * row_bytes;
  for (std::int64_t g = 0; g < rows / kGroupRows; ++g) {
    std::uint8_t* gd = dst + g * group_bytes;
    for (std::int64_t j = 0; j < kGroupRows; ++j) {
      const std::uint8_t* row = src + (g * kGroupRows + j) * row_bytes;
      if (type == GgmlType::kQ8_0) {
        const auto* blk = reinterpret_cast<const BlockQ8_0*>(row);
        const std::int64_t nb = cols / kQK8_0;
        for (std::int64_t b = 0; b < nb; ++b) {
          std::memcpy(gd + q8_scale_offset(nb, b, j), &blk[b].d, 2);
          for (std::int64_t k = 0; k < kQK8_0; ++k) {
            gd[q8_quant_offset(nb, b, j, k)] = static_cast<std::uint8_t>(blk[b].qs[k]) ^ 0x80u;
          }
        }
      } else {
        const auto* blk = reinterpret_cast<const BlockQ4_K*>(row);
        for (std::int64_t s = 0; s < cols / kQK_K; ++s) q4k_pack_row(blk[s], j, gd + s * kQ4kGroupSuperBytes);
      }
    }
  }
}

void unpack_rows8_row(GgmlType type, const std::uint8_t* packed, std::int64_t cols, std::int64_t row,
                      std::uint8_t* dst) {
  check_rows8(type, kGroupRows, cols);
  const auto row_bytes = static_cast<std::int64_t>(kernels::row_bytes(*type_traits(type), cols));
  const std::uint8_t* gd = packed + row / kGroupRows * kGroupRows * row_bytes;
  const std::int64_t j = row % kGroupRows;
  if (type == GgmlType::kQ8_0) {
    const std::int64_t nb = cols / kQK8_0;
    q8_unpack_blocks(gd, nb, j, 0, nb, reinterpret_cast<BlockQ8_0*>(dst));
  } else {
    auto* blk = reinterpret_cast<BlockQ4_K*>(dst);
    for (std::int64_t s = 0; s < cols / kQK_K; ++s) q4k_unpack_row(gd + s * kQ4kGroupSuperBytes, j, blk + s);
  }
}

void dequantize_weight_row(const WeightView& w, std::int64_t row, float* out) {
  ECO_CHECK_MSG(row >= 0 && row < w.rows, "dequantize_weight_row: row {} of {}", row, w.rows);
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  if (w.layout == WeightLayout::kGguf) {
    dequantize_row(w.type, data + row * static_cast<std::int64_t>(w.row_bytes), out, w.cols);
    return;
  }
  if (w.type == GgmlType::kQ8_0) {
    const std::int64_t nb = w.cols / kQK8_0;
    const std::uint8_t* gd = data + row / kGroupRows * kGroupRows * static_cast<std::int64_t>(w.row_bytes);
    // Up to 64 blocks (2048 values) at a time through the stack: embed() runs per token.
    BlockQ8_0 blocks[64];
    for (std::int64_t b0 = 0; b0 < nb; b0 += 64) {
      const std::int64_t n = std::min<std::int64_t>(64, nb - b0);
      q8_unpack_blocks(gd, nb, row % kGroupRows, b0, n, blocks);
      dequantize_row(GgmlType::kQ8_0, blocks, out + b0 * kQK8_0, n * kQK8_0);
    }
    return;
  }
  // Q4_K: one super-block at a time through the stack, as for Q8_0 above.
  const std::uint8_t* gd = data + row / kGroupRows * kGroupRows * static_cast<std::int64_t>(w.row_bytes);
  BlockQ4_K blk;
  for (std::int64_t s = 0; s < w.cols / kQK_K; ++s) {
    q4k_unpack_row(gd + s * kQ4kGroupSuperBytes, row % kGroupRows, &blk);
    dequantize_row(GgmlType::kQ4_K, &blk, out + s * kQK_K, kQK_K);
  }
}

}  // namespace ecoserve::kernels
