// Paged attention over a sequence's KV cache (float32 or fp16 values, blocks of
// block_size tokens, layout [block][slot][kv_head][head_dim]). fp16 K/V are
// widened to float32 exactly as they are read, so the arithmetic is the float32
// kernels' on the stored values.
//
// Two kernels with the same result up to float rounding:
//  - attend_one: one query vector (one token, one head) against positions [0, n_ctx),
//    for decode tokens and short chunks (reads K/V in place);
//  - attend_chunk: a run of n_q query tokens of one sequence at positions
//    [start, start + n_q), all query heads of one KV head (GQA group), as GEMMs
//    (OpenBLAS) over K/V gathered into contiguous buffers, in query tiles so the
//    causal mask wastes little work. For prefill chunks.
// Pure functions on caller-owned buffers; thread-safe with one scratch per thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/ids.h"

namespace ecoserve::kernels {

struct PagedKvView {
  const void* k = nullptr;         // float32, or uint16_t fp16 when f16
  const void* v = nullptr;
  int64_t kv_dim = 0;              // n_head_kv * head_dim
  int32_t block_size = 0;
  std::span<const BlockId> block_table;  // the sequence's blocks, in order
  bool f16 = false;                // K and V hold fp16 values
};

struct AttentionDims {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;              // usually 1/sqrt(head_dim)
};

struct AttentionScratch {
  std::vector<float> k, v, scores;
};

// out[0..head_dim) = softmax(q . K[0..n_ctx) * scale) V, for KV head kv_head.
void attend_one(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d,
                float* out, AttentionScratch& scratch);

// For every query head h of KV head kv_head (h in [kv_head*g, (kv_head+1)*g), g = n_head/n_head_kv)
// and query token i < n_q at position start + i (causal: it sees positions <= start + i):
// out[i * out_stride + h * head_dim ...] = attention of q[i * q_stride + h * head_dim ...].
void attend_chunk(const float* q, int64_t q_stride, int32_t n_q, int32_t start, int32_t kv_head,
                  const PagedKvView& kv, const AttentionDims& d, float* out, int64_t out_stride,
                  AttentionScratch& scratch);

}  // namespace ecoserve::kernels
