// Paged attention over a sequence's KV cache (float32 or fp16 values, blocks of
// block_size tokens, layout [block][slot][kv_head][head_dim]). fp16 K/V are
// widened to float32 exactly as they are read, so the arithmetic is the float32
// kernels' on the stored values.
//
// Kernels with the same result up to float rounding:
//  - attend_group: the g = n_head / n_head_kv query heads of one KV head, one token,
//    against positions [0, n_ctx), in one pass over K and V (online softmax over
//    tiles of positions, K/V read in place once for all g heads). For decode tokens
//    and short chunks;
//  - attend_one: the same for a single query head;
//  - attend_token: all query heads of one token in one pass over the context (reads
//    whole K/V position rows; the fastest decode kernel); attend_kv_heads: the same for
//    a range of KV heads (one thread's share of a token);
//  - attend_partial + merge_partials: attend_token over a range of positions, kept as
//    an unnormalised softmax state, and the log-sum-exp merge of such states
//    (flash-decoding: split one long context across threads);
//  - attend_chunk: a run of n_q query tokens of one sequence at positions
//    [start, start + n_q), all query heads of one KV head (GQA group). For prefill
//    chunks. With head_dim a multiple of 16, a fused kernel (flash attention: K
//    transposed and V gathered once, then per tile of query rows and block of 64
//    positions the scores, an online softmax and the values, in L1-sized buffers;
//    compiled per ISA level like the decode kernel, the same bits at every level), in
//    which a token's result does not depend on how its prompt is chunked; otherwise
//    GEMMs (OpenBLAS) over K/V gathered into contiguous buffers, in query tiles.
// Pure functions on caller-owned buffers; thread-safe with one scratch per thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "kernels/cpu_features.h"

namespace ecoserve::kernels {

struct PagedKvView {
  const void* k = nullptr;         // float32, or uint16_t fp16 when f16
  const void* v = nullptr;
  int64_t kv_dim = 0;              // n_head_kv * head_dim
  int32_t block_size = 0;
  std::span<const BlockId> block_table;  // the sequence's blocks, in order
  bool f16 = false;                // K and V hold fp16 values
};

// AttentionDims::f32_wide for `cpu`: true on Intel CPUs. On a Xeon (family 6 model 207,
// two 512-bit FMA ports, 256-bit FMAs at half their peak) the 512-bit decode kernel ran
// an f32 cache of the synth 1b shape (GQA 32/4, head_dim 64) in 7-8% less time than the
// 256-bit one from DRAM, 23-35% less from the L3 and 37-38% less from L2 (a Llama GQA
// 32/8, head_dim 128 cache alike from DRAM; docs/kernels.md, twenty-seventh pass). On
// Zen 5 (family 26, one thread) the Llama shape's f32 cache ran 8-14% slower on it from
// DRAM (4096 positions 1214-1254 -> 1352-1387 us; batched decode at 2048 positions
// 613-633 -> 660-713) though 24% faster from L2, so AMD keeps groups of 2 and 4 on the
// 256-bit kernel; groups of 8 (the query-lanes score pass) take the 512-bit one on every
// CPU whatever this says: there Zen 5 ran 4096 positions from DRAM in 322-339 us against
// 463-479 and from L2 in 203-211 against 341-342 (thirtieth pass).
bool attention_f32_wide_for(const CpuFeatures& cpu);
// The setting from environment variable ECOSERVE_ATTENTION_F32_WIDE (0 or 1), or
// attention_f32_wide_for(detect_cpu_features()) when it is unset; another value is an
// INVALID_ARGUMENT error naming the variable (the CLI reports it, like ECOSERVE_ISA).
StatusOr<bool> attention_f32_wide_from_env();
// attention_f32_wide_from_env(), or attention_f32_wide_for(detect_cpu_features()) when it
// fails; computed once per process.
bool default_attention_f32_wide();

// AttentionDims::row_prefetch for `cpu`: true (row order) on every CPU measured so far.
// On Zen 5 a load loop in the 512-bit kernel's order read 28 GB/s on one thread with its
// prefetches in row order, 22 with each line prefetched as the same line of the position
// 32 before it is read; a Xeon (family 6 model 207) took row order too for f32 caches and
// the synth 1b shape. A Xeon with AMX (family 6 model 167, thirty-third pass of
// docs/kernels.md) ran the Llama shape's f32 cache 8-14% faster the other way (fp16 and the
// synth 1b shape mixed): no CPU feature tells these apart, so
// ECOSERVE_ATTENTION_ROW_PREFETCH=0 picks that order by hand.
bool attention_row_prefetch_for(const CpuFeatures& cpu);
// ECOSERVE_ATTENTION_ROW_PREFETCH (0 or 1), or attention_row_prefetch_for(
// detect_cpu_features()) when it is unset; another value is an INVALID_ARGUMENT error.
StatusOr<bool> attention_row_prefetch_from_env();
// attention_row_prefetch_from_env(), or the CPU's default when it fails; once per process.
bool default_attention_row_prefetch();

// The default of AttentionDims::fp16_math where the engine sets it: environment variable
// ECOSERVE_ATTENTION_FP16_MATH (0 or 1; unset: 1, used only where the CPU has AVX512-FP16);
// another value is an INVALID_ARGUMENT error naming the variable.
StatusOr<bool> attention_fp16_math_from_env();
// attention_fp16_math_from_env(), or true when it fails; once per process.
bool default_attention_fp16_math();

// The default of AttentionDims::bf16_vectors and bf16_scores where the engine sets them:
// environment variable ECOSERVE_ATTENTION_BF16 (0 or 1; unset: CpuFeatures::fast_bf16_dot,
// so off where vdpbf16ps would be slower than the float kernels; used only where
// prefill_attention_bf16_vectors, or decode_attention_bf16_scores, allows it); another value
// is an INVALID_ARGUMENT error naming the variable.
StatusOr<bool> attention_bf16_from_env();
// attention_bf16_from_env(), or fast_bf16_dot when it fails; once per process.
bool default_attention_bf16();

struct AttentionDims {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;              // usually 1/sqrt(head_dim)
  // Kernel path: avx512vnni runs the decode kernel's AVX-512VL build (32 registers),
  // avx512vnni-zmm its 512-bit build where the GQA group is 2, 4 or 8 and the cache
  // fp16, or f32 with group 8 or f32_wide (else the AVX-512VL one), the other levels its AVX2
  // build; all give the same bits, except the 512-bit build's scores (within float
  // rounding). Prefill (attend_chunk) likewise: 512-bit tiles on avx512vnni-zmm, the same
  // bits as the others. Must be supported here.
  Isa isa = default_isa();
  // avx512vnni-zmm only: f32 caches of GQA groups 2 and 4 go to the 512-bit decode
  // kernel too (groups of 8 always do; its scores agree with the 256-bit one's within
  // float rounding, as fp16 caches' do). Default: default_attention_f32_wide().
  bool f32_wide = default_attention_f32_wide();
  // The 512-bit decode kernel's software prefetch of the K and V rows kPrefetchAhead (32)
  // positions on: true = line by line in row order, spread over each tile's passes; false
  // = each line as the same line of the position 32 before it is read. Speed only: the
  // same bits either way. Default: default_attention_row_prefetch().
  bool row_prefetch = default_attention_row_prefetch();
  // Prefill (attend_chunk) of kAmxBf16MinTokens or more tokens on AMX-BF16 tiles where isa
  // is avx512amx on a CPU with AMX-BF16 (amx_bf16_supported) and head_dim is a multiple of
  // 32 (else the fused float kernel), as KernelContext::amx_bf16 does for the linear
  // layers: the query, K, V and the softmax weights rounded to bf16 (8 significant bits),
  // sums in float. A token's result depends on neither the chunk it is in nor the tokens
  // beside it (chunks of kAmxBf16MinTokens or more give the bits of the whole prompt), but
  // it is not the float kernels'. The engine sets it from EngineOptions::amx_bf16.
  bool amx_bf16 = false;
  // Prefill (attend_chunk) of kAmxBf16MinTokens or more tokens on AVX512-BF16 vectors
  // (vdpbf16ps: 32 multiply-adds per instruction, a 512-bit FMA's 16) where isa is
  // avx512vnni-zmm on a CPU with AVX512-BF16 and head_dim is a multiple of 32
  // (prefill_attention_bf16_vectors; at avx512amx, amx_bf16 decides): amx_bf16's rounding
  // (the query, K, V and the weights in bf16, sums in float) and its independence of the
  // chunk, each sum in its own order (not the tiles' bits). The engine sets it from
  // EngineOptions::attention_bf16.
  bool bf16_vectors = false;
  // Decode (attend_token, attend_kv_heads, attend_partial, attend_group) of fp16 caches on the
  // 512-bit kernel where the CPU has AVX512-FP16 (decode_attention_fp16_math): the value pass
  // multiplies V as the cache holds it, in half precision (weights and products rounded to
  // fp16, a tile's positions summed in fp16, within about 10 * 2^-11 of sum p |v|; see
  // attention_rows_fp16_impl.h), not widening it to float: not the float value pass's bits.
  // With GQA groups of 4 and 8 the score pass is in half precision too (the query rounded to
  // fp16, products and sums in fp16, within about (head_dim / 8 + 3) * 2^-11 of sum |q_i K_i|;
  // scores_lanes_half), a group whose scores leave fp16's range scored again in float.
  // The engine sets it from EngineOptions::attention_fp16_math.
  bool fp16_math = false;
  // Decode of fp16 caches with GQA groups of 8 on the 512-bit kernel (the avx512vnni-zmm
  // level) where the CPU has AVX512-BF16, unless fp16_math's kernel runs
  // (decode_attention_bf16_scores): the score pass on vdpbf16ps, the query (times the score
  // scale) and K rounded to bf16 (8 significant bits; sums in float), the value pass in float
  // as without it. 15-20% faster on one Zen 5 core (docs/kernels.md, forty-eighth pass); not
  // the float score pass's bits. The engine sets it from EngineOptions::attention_bf16, as
  // bf16_vectors.
  bool bf16_scores = false;
};

struct AttentionScratch {
  std::vector<float> k, v, scores, q, o;
  std::vector<int64_t> rows;
};

// Softmax state of all n_head query heads of one token over a range of positions
// (attend_partial's result), in base 2 as the kernels compute it: with s_j = log2(e) *
// scale * q . k_j, for head h, max[h] = the largest s_j (-inf for an empty range),
// sum[h] = sum_j 2^(s_j - max[h]), acc[h * head_dim + i] = sum_j 2^(s_j - max[h]) v_j[i].
struct AttentionPartial {
  std::vector<float> max, sum, acc;
};

// out[0..head_dim) = softmax(q . K[0..n_ctx) * scale) V, for KV head kv_head.
// n_ctx >= 1. Only d.head_dim and d.scale are used.
void attend_one(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d,
                float* out, AttentionScratch& scratch);

// attend_one for all g = d.n_head / d.n_head_kv query heads of KV head kv_head at
// once: out[h * head_dim ...] = attention of q[h * head_dim ...] for h < g (the heads
// kv_head * g + h of a token, contiguous as in a [n_head][head_dim] row). Reads each
// K and V row of the context once. n_ctx >= 1.
void attend_group(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d,
                  float* out, AttentionScratch& scratch);

// Consecutive decode tokens on one thread (attend_token calls on the same layer's cache:
// the same k, v, kv_dim and block size): the call reads `next`'s first positions into
// L2 while it finishes its own context, in the same one-prefetch-per-line-read stream,
// so the next call does not start with its first tiles missing the cache (a short
// context is mostly start: at 128 positions, a quarter). Only where those lines go
// differs; the results are the same bits with or without it.
struct DecodeStream {
  const PagedKvView* next = nullptr;  // the context the thread's next attend_token reads, or null
  int32_t next_n_ctx = 0;             // its length (only its first positions are read here)
  bool started = false;               // this call's first positions were prefetched by the call before
};

// The register width (256 or 512 bits) of the float multiply-adds the decode kernel
// (attend_token, attend_kv_heads, attend_partial) runs on ISA level `isa` for this head
// shape and cache type: 512 on the avx512vnni-zmm level for fp16 caches, and f32 ones
// where g = 8 or f32_wide (AttentionDims::f32_wide), with group g in {2, 4, 8} and head_dim 64 or
// 128, else 256. `profile engine --roofline` counts decode attention against the FMA
// peak of that width.
int32_t decode_attention_vector_bits(Isa isa, int32_t head_dim, int32_t group, bool f16, bool f32_wide);

// The same for prefill attention (attend_chunk): 512 on the avx512vnni-zmm level where
// head_dim is a multiple of 16 (its fused kernel; the results are the same bits as the
// 256-bit build's), else 256 (the fused kernel on 256-bit registers, or OpenBLAS's sgemm
// for other head sizes, counted at 256 bits).
int32_t prefill_attention_vector_bits(Isa isa, int32_t head_dim);

// Whether attend_chunk runs a chunk of n_q tokens on AMX-BF16 tiles: amx_bf16 set
// (AttentionDims::amx_bf16), the avx512amx level on a CPU with AMX-BF16 (amx_bf16_supported),
// head_dim a multiple of 32 and n_q >= kAmxBf16MinTokens (kernels/matmul.h). `profile
// engine --roofline` counts such prompts' attention against the bf16 tiles' peak.
bool prefill_attention_amx_bf16(bool amx_bf16, Isa isa, int32_t head_dim, int32_t n_q);

// Whether attend_chunk runs a chunk of n_q tokens on AVX512-BF16 vectors: bf16_vectors set
// (AttentionDims::bf16_vectors), the avx512vnni-zmm level on a CPU with AVX512-BF16, head_dim a
// multiple of 32 and n_q >= kAmxBf16MinTokens. `profile engine --roofline` counts such
// prompts' attention against the vdpbf16ps peak (measure_avx512_bf16_gmacs).
bool prefill_attention_bf16_vectors(bool bf16_vectors, Isa isa, int32_t head_dim, int32_t n_q);

// Whether the decode kernel runs the half-precision value pass (and, for groups of 4 and 8,
// score pass; AttentionDims::fp16_math):
// fp16_math set, an fp16 cache, the avx512vnni-zmm level or above on a CPU with AVX512-FP16;
// it then runs for the shapes the 512-bit kernel takes (decode_attention_vector_bits 512),
// which this does not check.
bool decode_attention_fp16_math(bool fp16_math, Isa isa, bool f16);

// Whether the decode kernel scores on vdpbf16ps (AttentionDims::bf16_scores): bf16_scores set,
// an fp16 cache, group g = 8, head_dim 64 or 128, the avx512vnni-zmm level or above on a CPU
// with AVX512-BF16 where decode_attention_fp16_math does not hold (that kernel is its own).
bool decode_attention_bf16_scores(bool bf16_scores, bool fp16_math, Isa isa, bool f16, int32_t g, int32_t head_dim);

// All n_head query heads of one token (q and out: [n_head][head_dim] rows) against
// positions [0, n_ctx), n_ctx >= 1: attend_group for every KV head, in one pass over the
// context that reads each position's K and V rows of all KV heads together (contiguous
// in the cache, so memory is read in page-sized runs rather than one row per page).
// The decode kernel.
void attend_token(const float* q, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d, float* out,
                  AttentionScratch& scratch, const DecodeStream& stream = {});

// attend_token for the query heads of KV heads [kv_begin, kv_end) only (0 <= kv_begin <
// kv_end <= n_head_kv): q and out are the token's whole [n_head][head_dim] rows, and only
// those heads' rows of out are written. Splits a short decode token across threads by
// heads, with nothing to merge.
void attend_kv_heads(const float* q, int32_t kv_begin, int32_t kv_end, int32_t n_ctx, const PagedKvView& kv,
                     const AttentionDims& d, float* out, AttentionScratch& scratch);

// attend_token's softmax state over positions [begin, end) only (0 <= begin <= end <=
// the context the block table covers); resizes `part`. With merge_partials, splits one
// long context across threads (flash-decoding).
void attend_partial(const float* q, int32_t begin, int32_t end, const PagedKvView& kv, const AttentionDims& d,
                    AttentionPartial& part, AttentionScratch& scratch);

// out[h * head_dim ...] for h < n_head = attention over the union of the parts' disjoint
// position ranges (log-sum-exp merge). At least one part must be non-empty.
void merge_partials(std::span<const AttentionPartial> parts, int32_t n_head, int32_t head_dim, float* out);

// For every query head h of KV head kv_head (h in [kv_head*g, (kv_head+1)*g), g = n_head/n_head_kv)
// and query token i < n_q at position start + i (causal: it sees positions <= start + i):
// out[i * out_stride + h * head_dim ...] = attention of q[i * q_stride + h * head_dim ...].
void attend_chunk(const float* q, int64_t q_stride, int32_t n_q, int32_t start, int32_t kv_head,
                  const PagedKvView& kv, const AttentionDims& d, float* out, int64_t out_stride,
                  AttentionScratch& scratch);

}  // namespace ecoserve::kernels
