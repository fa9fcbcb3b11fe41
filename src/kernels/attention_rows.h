// The position-major decode attention kernel (rows_step, kernels/attention.cc's
// attend_range), declared once and compiled once per ISA level: attention_rows_avx2.cc
// (AVX2 + FMA, 16 vector registers) and attention_rows_avx512.cc (the same AVX2
// intrinsics under -mavx512vl, so the compiler has 32 registers: 4 positions per q
// load for fp16 GQA and 4 accumulated vectors per head in the V pass; and, for fp16
// caches at the avx512vnni-zmm level, on 512-bit registers). The two 256-bit builds do
// the same arithmetic for every output element (the same sums in the same order; only
// how many run side by side differs), so they agree bitwise; the 512-bit kernel sums
// each score in its own order (16 dimensions per register, or for GQA group 8 the heads
// in lanes, two dimensions each) and agrees with them within float rounding (its value
// pass is the same chains). The prefill kernel's key-block
// step (chunk_key_block, attend_chunk's fused path) is built the same way: register
// tiles of 6 rows x 16 floats, or 6 x 32 with 32 registers.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/attention.h"

namespace ecoserve::kernels::detail {

// Positions per call of the position-major kernel (RowsFn). The 512-bit kernel (Lanes16)
// runs them as one tile (one softmax update and one read-modify-write of the outputs per
// 16 positions), the 256-bit one (Lanes8) as two tiles of 8 (see rows_step).
constexpr int32_t kRowTile = 16;
// Software prefetch, into L2 (_MM_HINT_T1), of every line of the K and V rows this many
// positions ahead (4 tiles): measured on Zen 4, prefetching into L1 one tile ahead
// evicted the tile in use (a tile's K rows alone fill L1), and the hardware prefetcher
// alone left compute and memory time adding up rather than overlapping.
constexpr int32_t kPrefetchAhead = 32;

// Page leaders: where a cache's rows are small (kLeadMaxRowBytes or less), attend_range
// also prefetches, kLeadAhead positions on, the first line of each 4 KiB page of the K and
// V rows that does not follow the page before it (a jump between scattered blocks), so that
// the page's translation and the L2 streamer start before the row-order prefetch
// (kPrefetchAhead on) reaches it; pages in a run of consecutive blocks get none. The AMX
// Xeon (family 6 model 167, under KVM): loads alone over 8 KiB chunks read 10.1 GB/s
// shuffled over 1 GiB against 14.6 in order, with each line prefetched 16 KiB ahead; 11.0
// with a leader 64 KiB ahead. attention_bench, synth 1b shape (512 B and 1 KiB rows), shuffled
// blocks: 8-20% faster (docs/kernels.md, fifty-ninth pass).
constexpr int32_t kLeadAhead = 64;
constexpr int64_t kLeadMaxRowBytes = 1024;

// Calls fn(x) for the first address x in each 4 KiB page that [a, a + bytes) touches, except
// *last (the page of the previous call's last byte) and the page right after it; *last
// becomes the last page touched (as a page number, address >> 12).
template <class Fn>
inline void page_jumps(uintptr_t a, int64_t bytes, uintptr_t* last, Fn&& fn) {
  const uintptr_t end = a + static_cast<uintptr_t>(bytes);
  for (uintptr_t x = a; x < end; x = (x | 4095) + 1) {
    const uintptr_t page = x >> 12;
    if (page != *last && page != *last + 1) fn(x);
    *last = page;
  }
}

// 8 values at element `off` of a K or V cache, as float32. Internal linkage (static):
// each per-ISA object has its own copy, compiled with its flags.
template <bool kF16>
static inline __m256 load8(const void* base, int64_t off) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + off)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(base) + off);
  }
}

// The query layout of the 512-bit decode kernel for GQA group g: for g = 8, two
// dimensions of each head in a register (R = 2; lane h * R + r of register c holds
// q_h[c * R + r], scores_lanes in attention_rows_impl.h); 0 where it reads the queries
// head after head (g in {2, 4}: scores16). interleave_query (attention.cc) lays them out.
constexpr int zmm_query_lanes(int32_t g) { return g == 8 ? 2 : 0; }

// Running softmax state of `g` heads: m[g], l[g], o[g * hd] (see AttentionPartial).
struct OnlineState {
  float* m;
  float* l;
  float* o;
};

// The H = G * (kv1 - kv0) query heads (q: their rows times the score scale) over the
// n <= kRowTile positions whose head-0 row offsets are off[0..n), folded into st;
// off[n..n_ahead) are the positions after them (prefetched). qh: the same queries in fp16
// (interleave_half_query8 or 4's layout) where the kernel scores in half precision
// (decode_half_scores), else null. See attention_rows_impl.h.
using RowsFn = void (*)(const float* q, const uint16_t* qh, int32_t kv0, int32_t kv1, const int64_t* off, int32_t n,
                        int32_t n_ahead, const PagedKvView& kv, OnlineState st, float* pbuf);

// Whether the 512-bit kernel of the fp16 math build scores GQA group g of an fp16 cache in
// half precision (groups of 4 and 8; scores_lanes_half), given that build runs.
constexpr bool decode_half_scores(int32_t g) { return g == 4 || g == 8; }

// The kernel for head_dim hd (64 or 128), GQA group g (1, 2, 4 or 8) and the cache
// type, or null when it does not apply. The avx512 one needs AVX-512F/VL/BW.
namespace isa_avx2 {
RowsFn pick_rows_fn(int32_t hd, int32_t g, bool f16);
}
namespace isa_avx512 {
RowsFn pick_rows_fn(int32_t hd, int32_t g, bool f16);
// The kernel on 512-bit registers (the avx512vnni-zmm level: half the FMAs, where the
// CPU runs them at full rate), for g in {2, 4, 8} and hd in {64, 128} (else null), fp16
// or f32 cache (the caller decides whether f32 runs it: groups of 8 always, the others
// where AttentionDims::f32_wide). Its
// scores agree with the 256-bit kernel's within float rounding. row_prefetch: its
// software prefetch order (AttentionDims::row_prefetch; the same bits either way).
RowsFn pick_rows_fn_zmm(int32_t hd, int32_t g, bool f16, bool row_prefetch);
}
namespace isa_avx512fp16 {
// pick_rows_fn_zmm built with AVX512-FP16 (the CPU must have it): for fp16 caches the value
// pass multiplies V as it lies, in half precision (attention_rows_fp16_impl.h states the
// rounding); the score pass and f32 caches as isa_avx512's.
RowsFn pick_rows_fn_zmm(int32_t hd, int32_t g, bool f16, bool row_prefetch);
}
namespace isa_avx512bf16dec {
// pick_rows_fn_zmm built with AVX512-BF16 (the CPU must have it), for fp16 caches and g = 8
// only (else null): the score pass on vdpbf16ps, the query (interleave_query's bf16 layout)
// and K rounded to bf16, sums in float; the value pass as isa_avx512's.
RowsFn pick_rows_fn_zmm(int32_t hd, int32_t g, bool f16, bool row_prefetch);
}

// attend_chunk's fused kernel (head_dim a multiple of 16): flash attention of a tile of
// query rows over key blocks of kKeyBlock positions.
constexpr int32_t kKeyBlock = 64;

// Its buffers (attend_chunk carves them from AttentionScratch). A tile has m rows, row
// = token * group + head (the group's heads of one token adjacent), its first token at
// position first_pos.
struct ChunkBuffers {
  const float* kt;  // K transposed per key block: kt[(pos / kKeyBlock * hd + i) * kKeyBlock + pos % kKeyBlock]
  const float* v;   // v[pos * hd + i]
  const float* q;   // the tile's query rows, times the score scale (log2(e) / sqrt(hd)): q[row * hd + i]
  float* o;         // the tile's unnormalised outputs: o[row * hd + i]
  float* s;         // one key block's scores, then weights: s[row * kKeyBlock + j]
  float* m;         // per row: the largest scaled score so far (-inf before any)
  float* l;         // per row: the sum of 2^(score - m) so far (scores in log2 units)
};

// Folds key block [kb, kb + ncols) (ncols <= kKeyBlock; kb a multiple of kKeyBlock) into
// the m rows' state: each row sees positions <= first_pos + row / group. Every row's
// result is the same sequence of float operations whatever m, the tile and the ISA level
// (only how many rows and columns run side by side differs), so the builds agree bitwise
// and a row does not depend on the tile or chunk it is computed in.
using ChunkBlockFn = void (*)(const ChunkBuffers& b, int32_t hd, int32_t m, int32_t kb, int32_t ncols,
                              int32_t first_pos, int32_t group);
namespace isa_avx2 {
void chunk_key_block(const ChunkBuffers& b, int32_t hd, int32_t m, int32_t kb, int32_t ncols, int32_t first_pos,
                     int32_t group);
}
namespace isa_avx512 {
void chunk_key_block(const ChunkBuffers& b, int32_t hd, int32_t m, int32_t kb, int32_t ncols, int32_t first_pos,
                     int32_t group);
// The same on 512-bit registers (the avx512vnni-zmm level): the same bits.
void chunk_key_block_zmm(const ChunkBuffers& b, int32_t hd, int32_t m, int32_t kb, int32_t ncols, int32_t first_pos,
                         int32_t group);
}

// attend_chunk in bf16 (attention_bf16_impl.h): on AMX-BF16 tiles (the avx512amx level,
// AttentionDims::amx_bf16) or AVX512-BF16 vectors (the avx512vnni-zmm level,
// AttentionDims::bf16_vectors), head_dim a multiple of 32: one KV head's query rows (row =
// token * group + head) against positions [0, start + n_q), each token at position start +
// its index seeing positions <= its own. Every buffer 64-byte aligned, of the sizes Buffers
// gives (attend_chunk carves them from AttentionScratch::k).
struct Bf16ChunkArgs {
  const float* q;            // token t's query heads at q + t * q_stride + head0 (+ h * hd for head h)
  int64_t q_stride;
  int32_t n_q, start;
  int64_t head0;             // this KV head's first query head, in floats from a row's start
  const void* k;             // the cache (float32, or fp16 when f16)
  const void* v;
  bool f16;
  const int64_t* off;        // start + n_q element offsets: position j's row of this KV head
  int32_t hd, group;
  float scale;               // the score scale (times log2(e))
  float* out;                // written like q (out_stride, head0)
  int64_t out_stride;
  struct Buffers {
    uint16_t* k;             // K in bf16: n_pad * hd (n_pad: start + n_q rounded up to 32)
    uint16_t* v;             // V^T in bf16: n_pad * hd
    uint16_t* q;             // a query tile's Q^T: 16 * hd bf16
    uint16_t* p;             // a step's P^T: 16 * 32 bf16
    float* o;                // a query tile's O^T: hd * 16
    float* s;                // two steps' S^T: 2 * 32 * 16
  } buf;
};
namespace isa_avx512amx {
void chunk_bf16(const Bf16ChunkArgs& a);  // the products on AMX tiles (the CPU must have AMX-BF16)
}
namespace isa_avx512bf16 {
void chunk_bf16(const Bf16ChunkArgs& a);  // on vectors (the CPU must have AVX512-BF16)
}

}  // namespace ecoserve::kernels::detail
