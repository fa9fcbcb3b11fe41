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

namespace ecoserve::kernels::detail {

// matmul uses the tile kernels below this many tokens (decode batches up to 64:
// results bitwise independent of n_tokens and thread count) and OpenBLAS from
// it on (prefill), where sgemm is faster (measured crossover: ~64 tokens).
constexpr std::int64_t kBlasMinTokens = 65;

// Activations quantized to int8 in blocks of 32 (one float scale per block),
// the operand of every quantized-weight kernel. Row t of token data:
// q + t * q_stride (32-byte aligned), d + t * nb, s + t * nb.
struct QuantizedActs {
  const std::int8_t* q = nullptr;  // [n_tokens][cols] int8, x ~ q * d
  const float* d = nullptr;        // [n_tokens][nb] block scales
  const float* s = nullptr;        // [n_tokens][nb] d * sum(q) of each block
  std::int64_t q_stride = 0;       // bytes between token rows of q
  std::int64_t nb = 0;             // blocks of 32 per token row
};

// Bytes of scratch quantize_acts needs for n_tokens x cols (cols % 32 == 0), alignment included.
std::size_t quantized_acts_bytes(std::int64_t n_tokens, std::int64_t cols);
// Quantizes tokens [t0, t1) of x [n_tokens, cols] into the layout described by
// `acts` (whose pointers point into scratch laid out by layout_quantized_acts).
void quantize_acts(const float* x, std::int64_t cols, std::int64_t t0, std::int64_t t1, const QuantizedActs& acts);
// Lays out QuantizedActs for n_tokens x cols inside scratch (quantized_acts_bytes long).
QuantizedActs layout_quantized_acts(std::uint8_t* scratch, std::int64_t n_tokens, std::int64_t cols);

// Weight rows [r0, r1) times tokens [t0, t1) of acts; y is [n_tokens][y_stride].
// type is one of Q8_0, Q4_0, Q4_K, Q6_K.
void matmul_quantized_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                           const QuantizedActs& acts, std::int64_t r0, std::int64_t r1, std::int64_t t0,
                           std::int64_t t1, float* y, std::int64_t y_stride);

// Same for float-like weights (F32, F16, BF16) against float activations x [n_tokens][cols].
void matmul_float_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x,
                       std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride);

// Large batches (prefill): OpenBLAS sgemm (run single-threaded inside our
// pool's threads) on weight rows [r0, r1) against float activations x for all
// n_tokens tokens. Non-F32 weights are dequantized panel by panel into
// `panel` (blas_panel_floats(cols) floats, private to the calling thread).
// Faster than the tile kernels for many tokens, but its summation order is
// OpenBLAS's, so results differ in the last bits from the tile kernels (and,
// for quantized weights, by the activation rounding the tile kernels do).
std::size_t blas_panel_floats(std::int64_t cols);
// Our ThreadPool provides the parallelism; OpenBLAS must not start its own threads
// (they would oversubscribe the cores shared by every engine). Idempotent.
void make_openblas_single_threaded();
void matmul_blas_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x,
                      std::int64_t n_tokens, std::int64_t r0, std::int64_t r1, float* y, std::int64_t y_stride,
                      float* panel);

}  // namespace ecoserve::kernels::detail
