// The interleaved layout WeightLayout::kRows8 (Q8_0 and Q4_K) and conversions
// to and from it.
//
// A matrix of R rows (R % 8 == 0) is R / 8 groups of 8 consecutive rows, each
// group 8 * row_bytes bytes (the same size as in GGUF). The int8 kernels
// (matmul_packed_impl.h) read one 32-byte chunk, 4 values of each of the 8
// rows, as the unsigned operand of vpdpbusd against 4 broadcast activation
// values: the 8 int32 lanes are the 8 rows.
//  - Q8_0 (nb = C / 32 blocks per row), a group: runs of 4 blocks (the last
//    run holds the nb % 4 left, if any), each n blocks of run:
//      scales: [n][8] fp16, the 8 rows' scales of each block;
//      quants: [n][8 chunks][8 rows][4] bytes, chunk c = values 4c..4c+3 of
//              the block of each row, biased: q ^ 0x80 (= q + 128, unsigned).
//    So a group is read front to back as one stream (with all the scales
//    first, the GEMV's 4 group streams were 8: synth 1b batch-1 decode on one
//    Zen 4 thread was 25% slower).
//  - Q4_K, per super-block of 256 columns, 1152 bytes of a group:
//      d[8], dmin[8] fp16;
//      64 bytes: byte e = sub-block * 8 + row holds that 6-bit scale in its low
//                bits and the top 2 bits of min m = e in its high bits;
//      32 bytes: the mins' low 4 bits, min m in the low nibble of byte m (m < 32)
//                or the high nibble of byte m - 32;
//      mins numbered m = (sub-block / 2) * 16 + row * 2 + sub-block % 2, so
//      unpacked they are each sub-block pair's [row][2] (the int16 pairs the
//      kernels multiply by a token's pair of 32-value sums);
//      quants [pair j < 4][chunk c < 8][row][4] bytes: low nibbles = values
//                4c..4c+3 of sub-block 2j, high nibbles = of sub-block 2j + 1.
// Pure functions.
#pragma once

#include <cstdint>

#include "kernels/ggml_type.h"
#include "kernels/matmul.h"

namespace ecoserve::kernels {

// Q8_0 in kRows8: blocks per run, and the bytes of one block of a group (8 fp16
// scales and 8 chunks of 32 bytes).
inline constexpr std::int64_t kQ8RunBlocks = 4;
inline constexpr std::int64_t kQ8BlockBytes = 16 + 256;

// Where block b of a Q8_0 group of nb blocks per row keeps its 8 fp16 scales and
// its 8 chunks of quants, in bytes from the group's start. Used by the packing code
// and by the per-ISA kernels; `static` (internal linkage) so that no kernel object
// defines a weak out-of-line copy (scripts/check_isa_objects.sh).
struct Q8BlockOffsets {
  std::int64_t scales;
  std::int64_t quants;
};
static constexpr Q8BlockOffsets q8_block_offsets(std::int64_t nb, std::int64_t b) {
  const std::int64_t run = b / kQ8RunBlocks * kQ8RunBlocks, in_run = b - run;
  const std::int64_t run_blocks = nb - run < kQ8RunBlocks ? nb - run : kQ8RunBlocks;
  return {run * kQ8BlockBytes + 16 * in_run, run * kQ8BlockBytes + 16 * run_blocks + 256 * in_run};
}

// Whether w (in GGUF's layout) can be repacked: Q8_0 or Q4_K with rows % 8 == 0.
bool can_pack_rows8(const WeightView& w);

// Writes the kRows8 form of rows `src` (rows x cols of `type`, GGUF layout) to
// dst (rows * row_bytes bytes, not overlapping src). type: Q8_0 or Q4_K.
void pack_rows8(GgmlType type, const std::uint8_t* src, std::int64_t rows, std::int64_t cols, std::uint8_t* dst);

// The inverse: GGUF-layout bytes of row `row` of a kRows8 matrix into dst
// (row_bytes bytes).
void unpack_rows8_row(GgmlType type, const std::uint8_t* packed, std::int64_t cols, std::int64_t row,
                      std::uint8_t* dst);

// Row `row` of w (any supported type and layout) as w.cols floats.
void dequantize_weight_row(const WeightView& w, std::int64_t row, float* out);

}  // namespace ecoserve::kernels
