// Internal tile kernels behind kernels::matmul (matmul.h). Not a public API:
// the engine calls matmul(); tests and benchmarks may call these directly.
//
// Every kernel computes, for a block of weight rows and a block of tokens,
// y[t, r] = sum_c W[r, c] * x[t, c]. Each output element is accumulated in
// exactly the same order whatever the tile shape, the number of tokens or the
// thread that computes it (one 8-lane accumulator per element, columns in
// ascending order, then a fixed horizontal sum), so results are bitwise
// identical for a token computed alone or inside a batch, at any thread count.
// Up to 4 tokens take a multi-stream GEMV loop (several far-apart row ranges
// read at once, for memory bandwidth) with that same per-element arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/ggml_type.h"
#include "kernels/isa.h"

namespace ecoserve::kernels::detail {

// Float weights: matmul uses the GEMV up to 4 tokens and the tile kernels above
// (results bitwise independent of n_tokens and thread count); on avx512vnni-zmm the
// tokens-in-lanes kernels take every batch from kLanesMinTokens on, prompts included,
// with the tiles' bits. Quantized weights always take the int8 kernels: at pp512 they
// beat dequantize + sgemm (Zen 4, 1 thread, 2048x2048: Q8_0 60 vs 46 GMAC/s with VNNI,
// 46 vs 46 on AVX2; Q4_K 76 vs 44; Q6_K 76 vs 43), and a prompt's rows are then bitwise
// those of the same tokens decoded one by one.

// Activations quantized to int8, the operand of every quantized-weight kernel.
// Row t of token data: q + t * q_stride (64-byte aligned).
//  - Block format (Q8_0, Q4_0 weights): one float scale per block of 32:
//    d + t * nb, and xc, xt (below).
//  - K format (Q4_K, Q6_K weights; ggml's Q8_K): one float scale per 256
//    values, d + t * (nb / 8), bsums + t * 2 * nb: the sum of each 16 q, and
//    bpairs + t * (nb / 2): per super-block the sums of its 8 sub-blocks of 32 q as 4
//    int32 of int16 pairs (sub-blocks 2i, 2i + 1), each the broadcast operand of the
//    512-bit Q4_K tiles' mins (in the block format's xt space, unused in this one), and
//    qu + t * q_stride: q + 128 as unsigned bytes, the Q6_K tiles' operand (in the block
//    format's xc space).
struct QuantizedActs {
  const std::int8_t* q = nullptr;   // [n_tokens][cols] int8, x ~ q * d
  const float* d = nullptr;         // block scales
  const std::int16_t* bsums = nullptr;  // K format: [n_tokens][cols / 16] sums of 16 q
  const std::int32_t* bpairs = nullptr;  // K format: [n_tokens][cols / 256][4] pairs of sums of 32 q
  // Block format: [n_tokens][nb][8] int32, lane i = -128 * (q[4i] + ... + q[4i+3])
  // of the block (the VNNI kernels' start value for biased unsigned weights).
  const std::int32_t* xc = nullptr;
  // Block format: [n_tokens][nb] int32, -128 * (sum of the block's 32 q) (the
  // start value of the interleaved-layout VNNI kernels, matmul_packed_impl.h).
  const std::int32_t* xt = nullptr;
  const std::uint8_t* qu = nullptr;  // K format: [n_tokens][q_stride] q ^ 0x80 (q + 128 unsigned)
  std::int64_t q_stride = 0;        // bytes between token rows of q
  std::int64_t nb = 0;              // blocks of 32 per token row
  bool k_format = false;
  // Weight streams of the kRows8 single-token GEMV (KernelContext::gemv_streams):
  // 0 = the level's own count, else 2 or 4.
  std::int32_t gemv_streams = 0;
  // Bytes ahead of each weight stream the 1-4 token GEMVs (and kRows8 Q8_0's 5-15 token streaming
  // wide tiles) prefetch (KernelContext::gemv_prefetch; 0: none).
  std::int32_t gemv_prefetch = 0;
  // The avx512vnni-zmm Q4_K tile for 5 or more tokens (KernelContext::q4k_tile_pairs): 1 or 2 pairs of groups.
  std::int32_t q4k_tile_pairs = 1;
  // The avx512vnni-zmm Q4_K tile's GFNI form (KernelContext::q4k_gfni; only where the CPU has GFNI).
  bool q4k_gfni = false;
  // The avx512vnni-zmm Q8_0 kernel of 32+ tokens: tokens in lanes (KernelContext::q8_lanes).
  bool q8_lanes = false;
  // The avx512vnni-zmm Q4_K kernel of 32+ tokens: tokens in lanes (KernelContext::q4k_lanes).
  bool q4k_lanes = false;
  // The avx512vnni-zmm Q6_K kernel of 16+ tokens: tokens in lanes (KernelContext::q6k_lanes).
  bool q6k_lanes = false;
};

// Whether weights of `type` take K-format activations (Q4_K, Q6_K).
constexpr bool takes_k_format(GgmlType type) { return type == GgmlType::kQ4_K || type == GgmlType::kQ6_K; }

// Bytes of scratch quantize_acts needs for n_tokens x cols (cols % 32 == 0;
// % 256 for the K format), alignment included.
std::size_t quantized_acts_bytes(std::int64_t n_tokens, std::int64_t cols);
// Quantizes tokens [t0, t1) of x [n_tokens, cols] into the layout described by
// `acts` (whose pointers point into scratch laid out by layout_quantized_acts).
void quantize_acts(const float* x, std::int64_t cols, std::int64_t t0, std::int64_t t1, const QuantizedActs& acts);
// Lays out QuantizedActs for n_tokens x cols inside scratch (quantized_acts_bytes long).
QuantizedActs layout_quantized_acts(std::uint8_t* scratch, std::int64_t n_tokens, std::int64_t cols,
                                    bool k_format = false);

// Floats of per-call scratch the quantized kernels need per block of 32 columns
// (weight block scales and the tiles' combined scales, K-quant rows unpacked, or the
// avx512amx kernels' copy of a pair of groups as AMX tiles: 576 bytes for Q8_0, 624 for Q4_K;
// the most, the avx512vnni-zmm level's Q8_0 tokens in lanes: 96 tokens' activations, 3840
// bytes, matmul_q8_lanes_impl.h).
constexpr std::int64_t kQuantScratchFloatsPerBlock = 1024;

// Weight rows [r0, r1) times tokens [t0, t1) of acts; y is [n_tokens][y_stride].
// One function per weight type, per ISA level (kernels/matmul_quant_<isa>.cc).
// scratch: kQuantScratchFloatsPerBlock * (cols / 32) floats private to the caller.
using QuantRowsFn = void (*)(const std::uint8_t* w, std::size_t row_bytes, const QuantizedActs& acts, std::int64_t r0,
                             std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y, std::int64_t y_stride,
                             float* scratch);
// *_rows8: weights in WeightLayout::kRows8 (r0, r1 multiples of 8).
struct QuantRowKernels {
  QuantRowsFn q8_0, q4_0, q4_k, q6_k, q8_0_rows8, q4_k_rows8;
};
const QuantRowKernels* quant_row_kernels_avx2();
const QuantRowKernels* quant_row_kernels_avxvnni();
const QuantRowKernels* quant_row_kernels_avx512vnni();
// The register tiles of a level's batched (5+ token) int8 kernels, as compiled: Q8_0 and Q4_K in
// kRows8 take groups of 8 rows x tokens, the GGUF-row K-quants (Q6_K) rows x tokens. Defined for
// the levels below avx512vnni-zmm (whose 512-bit tiles q8_tile_summary and its kin describe).
struct Int8Tiles {
  int q8_groups, q8_tokens, q4k_groups, q4k_tokens, k_rows, k_tokens;
};
Int8Tiles int8_tiles_avx2();
Int8Tiles int8_tiles_avxvnni();
Int8Tiles int8_tiles_avx512vnni();
// avx512vnni with the 512-bit tiles of matmul_packed_impl.h (Q8_0 and Q4_K in kRows8) for 5+ tokens.
const QuantRowKernels* quant_row_kernels_avx512vnni_zmm();
// avx512vnni-zmm with Q8_0 and Q4_K in kRows8 on AMX tiles from 16 tokens on (matmul_amx_impl.h's rows8_amx).
const QuantRowKernels* quant_row_kernels_avx512amx();

// The avx512amx level's bf16 prompt kernel (KernelContext::amx_bf16; matmul_amx_bf16_impl.h;
// the CPU needs AMX-BF16 and AVX-512 BF16 too). Activations: tiles of 16 tokens of bf16,
// amx_bf16_acts_bytes long (64-byte aligned), token tiles [tile0, tile1) of x [n_tokens][cols]
// written by amx_bf16_pack_acts. amx_bf16_rows: weight rows [r0, r1) (r0 % 16 == 0, r1 % 8
// == 0) of a matrix of `type` (Q8_0, Q4_K in kRows8; F32, F16, BF16, Q6_K in GGUF rows, cols
// % 32 == 0) times all n_tokens tokens into y [n_tokens][y_stride], in runs of run_blocks
// blocks of 32 columns (a multiple of 8 or all of them; only the speed depends on it);
// wbuf: 4 * run_blocks * 1 KiB, 64-byte aligned, private to the caller. vectors: the products
// on AVX512-BF16 vectors instead of AMX tiles (KernelContext::bf16_vectors, the
// avx512vnni-zmm level; the CPU needs AVX-512 BF16 only), the same roundings, other sums.
// made: null, or the matrix's tiles from amx_bf16_make_tiles, read in place of the per-call
// copies (the same bits). amx_bf16_make_tiles: pairs [p0, p1) of the `groups` 8-row groups
// (rows / 8) of a matrix as B tiles, pair p's block b at out + (p * cols / 32 + b) * 512
// (64-byte aligned); the last pair of an odd count repeats its group.
std::size_t amx_bf16_acts_bytes(std::int64_t n_tokens, std::int64_t cols);
// up: null, or the activations are silu(x) * up (kernels::silu_mul's values and bits).
void amx_bf16_pack_acts(const float* x, const float* up, std::int64_t cols, std::int64_t n_tokens, std::int64_t tile0,
                        std::int64_t tile1, std::uint16_t* a);
void amx_bf16_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                   const std::uint16_t* a, std::int64_t n_tokens, std::int64_t r0, std::int64_t r1,
                   std::int64_t run_blocks, float* y, std::int64_t y_stride, std::uint16_t* wbuf, bool vectors,
                   const std::uint16_t* made);
// Aborts naming `fn` and `type`, a type the bf16 tiles do not take (a broken invariant: the
// callers check amx_bf16_takes); outside the ISA objects, which must not build strings.
[[noreturn]] void amx_bf16_bad_type(const char* fn, GgmlType type);
void amx_bf16_make_tiles(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                         std::int64_t groups, std::int64_t p0, std::int64_t p1, std::uint16_t* out);

// The kernel for `type` (one of Q8_0, Q4_0, Q4_K, Q6_K) stored in `layout`
// (kRows8: Q8_0, Q4_K) at ISA level `isa` (which the CPU must support: the
// kernels use its instructions).
QuantRowsFn quant_rows_kernel(Isa isa, GgmlType type, WeightLayout layout = WeightLayout::kGguf);

// Weight rows [r0, r1) times tokens [t0, t1) of acts with quant_rows_kernel(isa, type).
void matmul_quantized_rows(Isa isa, GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                           const QuantizedActs& acts, std::int64_t r0, std::int64_t r1, std::int64_t t0,
                           std::int64_t t1, float* y, std::int64_t y_stride, float* scratch);

// Same for float-like weights (F32, F16, BF16) against float activations x [n_tokens][cols],
// with the kernels of ISA level `isa` (avx512vnni: the AVX-512VL build's wider tiles;
// bitwise the same results); gemv_prefetch: KernelContext::gemv_prefetch, for 1-4 tokens.
void matmul_float_rows(Isa isa, GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                       const float* x, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride, std::int32_t gemv_prefetch);
// The per-ISA builds (matmul_float_impl.h); the avx512 one needs AVX-512F/VL/BW.
namespace isa_avx2 {
void matmul_float_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x,
                       std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride, std::int32_t gemv_prefetch);
}
namespace isa_avx512 {
void matmul_float_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x,
                       std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride, std::int32_t gemv_prefetch);
// The same on the avx512vnni-zmm level: its tiles (5+ tokens) hold two rows per 512-bit
// register (matmul_float_impl.h, tile_zmm); bitwise the same results.
void matmul_float_rows_zmm(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                           const float* x, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                           std::int64_t y_stride, std::int32_t gemv_prefetch);
// Tokens in lanes (the avx512vnni-zmm level, from kLanesMinTokens tokens on; see
// matmul_float_impl.h): x [n_tokens][cols] packed k-major in chunks of kLaneTokens tokens,
// chunk c at xt + c * lanes_cols(cols) * kLaneTokens (64-byte aligned, zero-padded past
// the last token and past cols); pack_token_lanes writes the columns of blocks [b0, b1)
// (8 columns each, b1 <= lanes_cols(cols) / 8) of every chunk.
void pack_token_lanes(const float* x, std::int64_t cols, std::int64_t n_tokens, std::int64_t b0, std::int64_t b1,
                      float* xt);
// Rows [r0, r1) against every token of xt, into y[t * y_stride + r]: bitwise the tile
// kernels' results. wbuf: kLaneRows * lanes_cols(cols) floats of scratch.
void matmul_float_lanes(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                        const float* xt, std::int64_t n_tokens, std::int64_t r0, std::int64_t r1, float* y,
                        std::int64_t y_stride, float* wbuf);
}
// The tokens-in-lanes layout: tokens per packed chunk, weight rows per register tile, and
// the batch from which matmul takes it on the avx512vnni-zmm level (below it, the tiles).
// Zen 5, synth 1b F16, two threads, decode tok/s, tiles -> lanes: batch 16 107-110 ->
// 94-98 (one register of tokens: 12 FMAs per 13 loads, and the widening of the rows
// spread over only 16 tokens), 20 109-111 -> 92-102, 24 110-117 -> 110-122 (synth 110m
// F16 753 -> 691, F32 605 -> 836; one thread faster for all three), 32 111-115 -> 143-162.
constexpr std::int64_t kLaneTokens = 32;
constexpr int kLaneRows = 12;
constexpr std::int64_t kLanesMinTokens = 32;
constexpr std::int64_t lanes_cols(std::int64_t cols) { return (cols + 7) / 8 * 8; }

// Our ThreadPool provides the parallelism; OpenBLAS must not start its own threads
// (they would oversubscribe the cores shared by every engine). Idempotent.
void make_openblas_single_threaded();

}  // namespace ecoserve::kernels::detail
