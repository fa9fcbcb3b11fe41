// Matrix multiplication against stored weights: the engine's hot path.
//
// y[t, r] = sum_c W[r, c] * x[t, c]   for t < n_tokens, r < w.rows
//
// W is a weight matrix as stored in GGUF: w.rows output features, each row of
// w.cols input values encoded in w.type (ggml's ne0 = cols), row after row
// (w.layout kGguf) or, for Q8_0 and Q4_K, repacked 8 rows at a time (kRows8,
// kernels/packed_weights.h: the faster int8 kernels). x is row-major
// [n_tokens, cols] float, y is row-major [n_tokens, rows] float.
// The work is split over ctx.pool's threads, with the kernels of ctx.isa.
// ctx.scratch and ctx.tile_scratch are reused between calls (quantized
// activations; each thread's block scales and unpacked rows); a KernelContext
// belongs to one engine and is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/ggml_type.h"

namespace ecoserve::kernels {

struct WeightView {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  std::int64_t rows = 0;       // output features
  std::int64_t cols = 0;       // input features
  std::size_t row_bytes = 0;   // bytes of one stored row (in GGUF's layout)
  WeightLayout layout = WeightLayout::kGguf;
};

// KernelContext::gemv_streams for `cpu`: 4 on Intel CPUs, else 0 (the level's count).
// One Intel core reaches its read bandwidth only with more misses in flight than
// one AMD core: on a Xeon (family 6 model 207, avx512vnni-zmm) 4 streams decode
// synth 1b Q8_0 and Q4_K at batch 1 8-12% faster than 2 (8 streams: no better), while
// on Zen 5 2 streams beat 4 by 12% and on Zen 4 they are alike (docs/kernels.md).
std::int32_t gemv_streams_for(const CpuFeatures& cpu);
// The count from environment variable ECOSERVE_GEMV_STREAMS (0, 2 or 4), or
// gemv_streams_for(detect_cpu_features()) when it is unset; another value is an
// INVALID_ARGUMENT error naming the variable (the CLI reports it, like ECOSERVE_ISA).
// For measuring a CPU these defaults were not tuned on.
StatusOr<std::int32_t> gemv_streams_from_env();
// gemv_streams_from_env(), or gemv_streams_for(detect_cpu_features()) when it fails;
// computed once per process.
std::int32_t default_gemv_streams();
// "4 weight streams" or "the level's weight streams" (0), for `model info` and `profile`.
std::string gemv_streams_summary(std::int32_t streams);
// KernelContext::gemv_prefetch for `cpu`: 1024 bytes on Intel CPUs, else 0 (none). On a
// Xeon (family 6 model 207) one core's hardware prefetchers keep too few DRAM reads in
// flight for a GEMV's weight streams: batch-1 decode of synth 1b F16 ran at 77% of the
// read probe, 92-93% with each stream's lines prefetched 1 KiB ahead (docs/kernels.md,
// twenty-fifth pass), and the kRows8 ones of synth 1b Q4_K and Q8_0 on one thread 69-79%
// -> 85-89% and 85-88% -> 93-94% (twenty-sixth pass); on Zen 4 a float GEMV sweep 4 KiB
// ahead was 10% slower.
std::int32_t gemv_prefetch_for(const CpuFeatures& cpu);
// The bytes from environment variable ECOSERVE_GEMV_PREFETCH (a multiple of 64 in
// [0, 65536]), or gemv_prefetch_for(detect_cpu_features()) when it is unset; another
// value is an INVALID_ARGUMENT error naming the variable.
StatusOr<std::int32_t> gemv_prefetch_from_env();
// gemv_prefetch_from_env(), or gemv_prefetch_for(detect_cpu_features()) when it fails;
// computed once per process.
std::int32_t default_gemv_prefetch();
// "1024 bytes ahead" or "none" (0), for `model info` and `profile`.
std::string gemv_prefetch_summary(std::int32_t bytes);

// KernelContext::q4k_tile_pairs for `cpu`: 1 on Intel CPUs, else 2. The avx512vnni-zmm
// level's Q4_K tiles (5 or more tokens) hold 1 pair of 8-row groups x 7 tokens or 2
// pairs x 3 tokens. On a Xeon (family 6 model 207), where 512-bit work issues on two
// ports, 1 x 7 spends fewer multiply slots on the pair inserts and nibble masks: synth 1b
// Q4_K, one thread, pp512 134-136 -> 150 tok/s. On Zen 5 (family 26) 2 x 3 wins
// (docs/kernels.md, thirtieth pass): synth 1b Q4_K, 1 x 7 -> 2 x 3, one thread, pp512
// 325-327 -> 339-341 tok/s, batch-32 decode 295-298 -> 306-307 (two threads 626-639 ->
// 647-651 and 562-567 -> 564-573); kernels_bench 2048 x 768 x 512 2313-2353 -> 2198-2204 us.
std::int32_t q4k_tile_pairs_for(const CpuFeatures& cpu);
// The count from environment variable ECOSERVE_Q4K_TILE_PAIRS (1 or 2), or
// q4k_tile_pairs_for(detect_cpu_features()) when it is unset; another value is an
// INVALID_ARGUMENT error naming the variable.
StatusOr<std::int32_t> q4k_tile_pairs_from_env();
// q4k_tile_pairs_from_env(), or q4k_tile_pairs_for(detect_cpu_features()) when it
// fails; computed once per process.
std::int32_t default_q4k_tile_pairs();
// Whether this CPU has GFNI (detect_cpu_features().gfni), read once per process: the default
// of KernelContext::q4k_gfni, and what matmul checks it against.
bool cpu_has_gfni();
// "1 pair of 8-row groups x 7 tokens" or "2 pairs of 8-row groups x 3 tokens", for `model info`.
std::string q4k_tile_pairs_summary(std::int32_t pairs);
// The same with the tile's form (KernelContext::q4k_gfni; its one-pair tile takes 8 tokens):
// "1 pair of 8-row groups x 8 tokens, GFNI nibbles and vpdpwssd scales", with ", tokens in
// lanes from 32 tokens" where `lanes` (KernelContext::q4k_lanes).
std::string q4k_tile_summary(std::int32_t pairs, bool gfni, bool lanes);

// KernelContext::q8_lanes for `cpu`: true on Intel CPUs, else false. The avx512vnni-zmm
// level's Q8_0 kernel for 32 or more tokens in kRows8: with it, the tokens in the lanes
// (matmul_q8_lanes_impl.h: no pair inserts, which take a vpdpbusd slot where every 512-bit
// instruction issues on the same two ports); without, packed_tile_wide's rows in the lanes.
// Both give the same bits. Emerald Rapids Xeon (family 6 model 207), synth 1b Q8_0, one
// thread: pp512 172-178 -> 186-190 tok/s, batch 32 134-139 -> 141-143. Not measured on
// Zen 5, whose 512-bit inserts do not compete with vpdpbusd, so off there.
bool q8_lanes_for(const CpuFeatures& cpu);
// The setting from environment variable ECOSERVE_Q8_LANES (0 or 1), or q8_lanes_for(
// detect_cpu_features()) when it is unset; another value is an INVALID_ARGUMENT error.
StatusOr<bool> q8_lanes_from_env();
// q8_lanes_from_env(), or q8_lanes_for(detect_cpu_features()) when it fails; computed once.
bool default_q8_lanes();
// "2 pairs of 8-row groups x 7 tokens", with ", tokens in lanes from 32 tokens" where `lanes`,
// for `model info` and `profile`.
std::string q8_tile_summary(bool lanes);

// KernelContext::q4k_lanes for `cpu`: true on Intel CPUs, else false. The avx512vnni-zmm
// level's Q4_K kernel for 32 or more tokens in kRows8: with it, the tokens in the lanes
// (matmul_q4k_lanes_impl.h: each pair of groups' nibbles unpacked to bytes per super-block,
// no pair inserts or nibble masks in the tile); without, q4k_tile_wide's rows in the lanes.
// Both give the same bits. Emerald Rapids Xeon (family 6 model 207), synth 1b Q4_K, one
// thread: pp512 165-169 -> 177-181 tok/s, batch 32 145-147 -> 156-158, batch 64 144-150 ->
// 159-163 (docs/kernels.md, sixty-eighth pass). Not measured on Zen 5, so off there.
bool q4k_lanes_for(const CpuFeatures& cpu);
// The setting from environment variable ECOSERVE_Q4K_LANES (0 or 1), or q4k_lanes_for(
// detect_cpu_features()) when it is unset; another value is an INVALID_ARGUMENT error.
StatusOr<bool> q4k_lanes_from_env();
// q4k_lanes_from_env(), or q4k_lanes_for(detect_cpu_features()) when it fails; computed once.
bool default_q4k_lanes();

// KernelContext::q6k_lanes for `cpu`: true on Intel CPUs, else false. The avx512vnni-zmm and
// avx512amx levels' Q6_K kernel for 16 or more tokens: with it, the tokens in the lanes
// (matmul_q6k_zmm_impl.h: per sub-block 4 vpdpbusd and one vpmulld by the scale); without, the
// tiles of 6 tokens in pairs (one vpdpwssd per vpdpbusd). Both give the same bits. Emerald
// Rapids Xeon (family 6 model 207), synth 1b Q6_K, one thread: pp512 117-118 -> 152-156 tok/s,
// batch 32 90 -> 133-134 (docs/kernels.md, sixty-ninth pass). Not measured on Zen 5, so off there.
bool q6k_lanes_for(const CpuFeatures& cpu);
// The setting from environment variable ECOSERVE_Q6K_LANES (0 or 1), or q6k_lanes_for(
// detect_cpu_features()) when it is unset; another value is an INVALID_ARGUMENT error.
StatusOr<bool> q6k_lanes_from_env();
// q6k_lanes_from_env(), or q6k_lanes_for(detect_cpu_features()) when it fails; computed once.
bool default_q6k_lanes();
// "4 rows x 6 tokens in pairs", with ", tokens in lanes from 16 tokens" where `lanes`, for
// `model info` and `profile`.
std::string q6k_tile_summary(bool lanes);
// The batched (5+ token) int8 register tiles of a level below avx512vnni-zmm (whose settings
// above do not reach them), for `model info`: Q8_0 and Q4_K (kRows8) "2 groups of 8 rows x 3
// tokens", Q6_K (GGUF rows) "2 rows x 4 tokens"; an empty string for other types and levels.
std::string int8_tiles_summary(Isa isa, GgmlType type);

// KernelContext::bf16_vectors from environment variable ECOSERVE_MATMUL_BF16 (0 or 1; unset:
// CpuFeatures::fast_bf16_dot, so off where vdpbf16ps would be slower than the float kernels);
// another value is an INVALID_ARGUMENT error naming the variable.
StatusOr<bool> matmul_bf16_from_env();
// matmul_bf16_from_env(), or fast_bf16_dot when it fails; computed once per process.
bool default_matmul_bf16();

// KernelContext::amx_bf16 from environment variable ECOSERVE_AMX_BF16 (0 or 1; unset: 1);
// another value is an INVALID_ARGUMENT error naming the variable.
StatusOr<bool> amx_bf16_from_env();
// amx_bf16_from_env(), or true when it fails; computed once per process.
bool default_amx_bf16();

// isa: which kernel build runs (default: the best this CPU supports, capped by
// ECOSERVE_ISA); it must be one the CPU supports (isa_supported).
// gemv_streams: how many far-apart runs of weight rows the single-token GEMV of a
// kRows8 matrix (Q8_0, Q4_K) reads at once; 0 = the ISA level's own count (2 on the
// AVX-512 levels; 4 for Q8_0 and 2 for Q4_K on avx2 and avxvnni), or 2 or 4. Every
// count gives the same bits. Default: default_gemv_streams().
// gemv_prefetch: how many bytes ahead of each weight stream the 1-4 token GEMVs prefetch
// its lines (every weight type and layout: float, GGUF-layout quantized and kRows8),
// 0 = none (the hardware prefetchers alone), else a multiple of 64 up to 65536; only
// timing changes. On the Xeon the kRows8 Q4_K GEMV read a 302 MB matrix at 12.3-12.8
// GiB/s without, 14.1-15.7 with 1 KiB. Where it is set, kRows8 Q8_0 batches of 5-15 tokens
// on the avx512vnni-zmm and avx512amx levels stream their weights the same way (one wide tile of all the tokens
// per pair of groups, matmul_packed_impl.h's rows8_stream): synth 1b, one thread, 8 tokens
// 71-72 -> 80-82 tok/s.
// Default: default_gemv_prefetch().
// q4k_tile_pairs: the avx512vnni-zmm level's Q4_K tile for 5 or more tokens, 1 (pair of
// 8-row groups x 7 tokens, 8 in the GFNI form) or 2 (pairs x 3 tokens); both give the same
// bits, only timing changes. Default: default_q4k_tile_pairs().
// q4k_gfni: that tile's GFNI form (matmul_packed_impl.h's q4k_tile_wide: the high nibbles by
// gf2p8affineqb, the scales by vpdpwssd instead of vpmulld); the same bits, only timing changes
// (Emerald Rapids Xeon, synth 1b Q4_K, 32 tokens: 210-212 -> 197-202 ms). Only where the CPU has
// GFNI (matmul checks). Default: cpu_has_gfni().
// amx_bf16: on the avx512amx level of a CPU with AMX-BF16 and AVX-512 BF16, the weights
// amx_bf16_takes (Q8_0 and Q4_K in kRows8; F32, F16, BF16 and Q6_K in GGUF rows) times
// amx_bf16_min_tokens(type, made) or more tokens (32; F16 and BF16 8, F32 12, Q6_K 16; with
// the tiles made at load, bf16_weights, Q8_0 16, Q4_K 24, Q6_K 8, F32, F16 and BF16 4) take bf16
// tiles (amx_bf16_applies): prompts and decode batches run faster, and their results are no
// longer bitwise those of the same tokens decoded one by one (bf16 weights and activations, 8
// significant bits; see matmul_amx_bf16_impl.h); they still do not depend on the batch, the
// token's place in it or the thread count. Default: default_amx_bf16()
// (on; ECOSERVE_AMX_BF16=0, or false here, so that every batch gives the bits of batch 1).
// bf16_vectors: the same for the avx512vnni-zmm level on a CPU with AVX-512 BF16, for the
// weights bf16_vectors_takes (F32, F16, BF16 and Q6_K in GGUF rows; Q8_0 and Q4_K stay on
// the int8 kernels, which run faster there): the bf16 tiles' roundings with the products on
// vdpbf16ps (bf16_vectors_applies). Default: default_matmul_bf16() (on;
// ECOSERVE_MATMUL_BF16=0, or false here, for the bits of batch 1).
class Bf16WeightTiles;  // kernels/bf16_weight_tiles.h

struct KernelContext {
  explicit KernelContext(ThreadPool* p, Isa i = default_isa()) : pool(p), isa(i) {}
  ThreadPool* pool;
  Isa isa;
  std::int32_t gemv_streams = default_gemv_streams();
  std::int32_t gemv_prefetch = default_gemv_prefetch();
  std::int32_t q4k_tile_pairs = default_q4k_tile_pairs();
  bool q4k_gfni = cpu_has_gfni();
  // The avx512vnni-zmm Q8_0 kernel of 32+ tokens (q8_lanes_for); only timing changes.
  bool q8_lanes = default_q8_lanes();
  // The avx512vnni-zmm Q4_K kernel of 32+ tokens (q4k_lanes_for); only timing changes.
  bool q4k_lanes = default_q4k_lanes();
  // The avx512vnni-zmm and avx512amx Q6_K kernel of 16+ tokens (q6k_lanes_for); only timing changes.
  bool q6k_lanes = default_q6k_lanes();
  bool amx_bf16 = default_amx_bf16();
  bool bf16_vectors = default_matmul_bf16();
  // Matrices whose bf16 tiles were made at load (null: none): the bf16 tiles and vectors
  // read them instead of copying the weights per call. Not owned; outlives the context's use.
  const Bf16WeightTiles* bf16_weights = nullptr;
  std::vector<std::uint8_t> scratch;
  std::vector<float> tile_scratch;  // per thread: the int8 kernels' block scales and unpacked rows
};

void matmul(const WeightView& w, const float* x, std::int64_t n_tokens, float* y, KernelContext& ctx);

// A gated FFN's down projection: y = x W^T with x = silu(gate) * up (gate and up [n_tokens]
// [w.cols]), bitwise what silu_mul (ops.h) then matmul give. Where the bf16 products run
// (bf16_products_apply) x is made inside their packing of the activations, one pass over gate
// and up with no float x stored; elsewhere silu_mul writes x over gate first. gate's contents
// are unspecified afterwards either way.
void matmul_gated(const WeightView& w, float* gate, const float* up, std::int64_t n_tokens, float* y,
                  KernelContext& ctx);

// The OpenBLAS kernels this process runs ("Haswell", "Cooperlake", ...: OpenBLAS's
// core name, chosen once when it is loaded, from the environment variable
// OPENBLAS_CORETYPE or else from its own CPU table). Only prefill attention of head
// sizes that are not a multiple of 16 calls OpenBLAS; matmul never does.
std::string openblas_core();

// On the avx512amx level, Q8_0 weights in WeightLayout::kRows8 take AMX tiles (16 tokens
// each, and one tile of the tokens left) in batches of kAmxMinTokens or more tokens, Q4_K
// from kAmxQ4kMinTokens; smaller batches take the avx512vnni-zmm kernels. The same bits.
// Q4_K's AMX kernel first copies each pair of groups' nibbles out as bytes, which one
// tile of 16 tokens does not repay: synth 1b Q4_K, batch-16 decode, 138-139 tok/s on
// avx512vnni-zmm, 114 on AMX (Intel Xeon, family 6 model 167, one thread).
inline constexpr std::int64_t kAmxMinTokens = 16;
inline constexpr std::int64_t kAmxQ4kMinTokens = 32;
// kAmxMinTokens or kAmxQ4kMinTokens for weights of `type` (0: no AMX kernel).
constexpr std::int64_t amx_min_tokens(GgmlType type) {
  return type == GgmlType::kQ8_0 ? kAmxMinTokens : type == GgmlType::kQ4_K ? kAmxQ4kMinTokens : 0;
}

// With KernelContext::amx_bf16, the batches from which the weights amx_bf16_takes run on
// bf16 tiles. Intel Xeon (family 6 model 167), synth 1b decode, tok/s, int8 -> bf16 tiles,
// 1 / 2 threads: batch 32 Q8_0 154 -> 184 / 288-294 -> 333-343, Q4_K 155-159 -> 165 /
// 290-304 -> 317-333; batch 16 Q8_0 101-113 -> 109-112, Q4_K 128-132 -> 102 (each
// weight's bf16 copy is then shared by too few tokens).
inline constexpr std::int64_t kAmxBf16MinTokens = 32;
// The float-weight types and Q6_K (GGUF rows) start lower: below 32 tokens their own kernels
// are the float FMA tiles or the GGUF-layout int8 K-quant kernels, which the bf16 tiles beat
// from a handful of tokens (each weight's copy into a bf16 tile costs about what 5 tokens'
// float FMAs do). Xeon family 6 model 167, kernels_bench 2048 x 768, one thread, us, own
// kernels / bf16 tiles: F16 5 tokens 314 / 310, 8 483 / 309, 16 866 / 322, 24 1254 / 402;
// F32 8 439 / 456, 16 791 / 458; Q6_K 12 438 / 466, 16 577 / 473, 24 818 / 517. Engine
// decode, one thread, tok/s: synth 1b F16 batch 8 16.4-19.2 -> 30.0-30.4, batch 16
// 19.4-23.5 -> 52.5-56.9; synth 110m F16 batch 6 191-203 -> 144-155 (its weights in L3: why
// F16 starts at 8, not 6), batch 8 172-178 -> 183-208; synth 110m Q6_K batch 12 278-280 ->
// 253-261, batch 16 255-289 -> 300-306 (docs/kernels.md, fortieth pass).
// With the tiles made at load (`made`: KernelContext::bf16_weights holds the matrix), no
// copy is left to share and the tiles read 2 bytes per weight: Q8_0 starts at 16, Q4_K at
// 24, Q6_K at 8. Same Xeon, kernels_bench BM_Synth1bMatmuls (the weights from DRAM), one
// thread, ms, own kernels / made tiles, two rounds: Q8_0 8 139-158 / 187-254, 12 169-172 /
// 263-274, 16 229-230 / 190-223, 24 284-365 / 213-227; Q4_K 12 170-172 / 228-248, 16
// 237-247 / 246-265, 24 354-365 / 187-201; Q6_K 4 175-212 / 214-230, 8 373-388 / 213-222;
// F16 4 224-259 / 206-230, 8 313-318 / 204-253; F32 (the float tiles and the GEMV read 4
// bytes per weight, the made tiles 2) 4 285-287 / 161-162, 8 607-682 / 174-182: from 4.
// Since the made tiles of a slab read by 1-2 tile calls prefetch it into L1 (kFewTileCalls in
// matmul_amx_bf16_impl.h), F16 and BF16 start at 4 too: same bench, own kernels / made tiles,
// F16 2 138 / 132-140, 4 169-173 / 134-137; Q8_0 12 133-136 / 141-188, 16 150-151 / 144-148;
// Q4_K 16 120-122 / 146-148, 24 169-170 / 156-164; Q6_K 4 111-112 / 134-143, 8 210-215 /
// 144-163 (those stay).
// The batches from which weights of `type` (as amx_bf16_takes them) run on bf16 tiles.
constexpr std::int64_t amx_bf16_min_tokens(GgmlType type, bool made = false) {
  switch (type) {
    case GgmlType::kF16:
    case GgmlType::kBF16: return made ? 4 : 8;
    case GgmlType::kF32: return made ? 4 : 12;
    case GgmlType::kQ6_K: return made ? 8 : 16;
    case GgmlType::kQ8_0: return made ? 16 : kAmxBf16MinTokens;
    case GgmlType::kQ4_K: return made ? 24 : kAmxBf16MinTokens;
    default: return kAmxBf16MinTokens;
  }
}
// With KernelContext::bf16_vectors (the avx512vnni-zmm level), the batches from which weights
// of `type` (as bf16_vectors_takes them) run on AVX512-BF16 vectors. Tuned on Zen 5 (family 26
// model 2), the CPU whose default level this is: there vdpbf16ps does twice the multiply-adds
// of a 512-bit FMA at the same rate, the float weights' own kernels below 32 tokens are the
// 256-bit float tiles (slower per token at 16-24 than the tokens-in-lanes kernels at 32), and
// Q6_K's are the int8 K-quant kernels. With the tiles made at load (`made`: no per-call copy, 2
// bytes read per weight): F32 from 2 (its GEMV reads 4), F16 and BF16 from 4 (at 2 the GEMV,
// reading as many bytes, is as fast), Q6_K from 8 (the engine's batches of 4 ran as fast or
// faster on its own kernels, though the kernel alone was faster made). With per-call copies:
// F16 and BF16 from 8, F32 and Q6_K from 16. kernels_bench BM_Synth1bMatmuls (weights from DRAM), one
// thread, ms, two rounds, own kernels / made vectors: F16 2 80-81 / 80-102, 4 136-144 /
// 74-84, 8 173-177 / 77-87, 16 327-350 / 103-104, 24 503-536 / 139-157; F32 2 123-127 / 82-87,
// 4 212-221 / 74-89, 8 229-233 / 77-91, 16 387-401 / 122-139; Q6_K 2 66-69 / 81-92, 4 92-99
// / 74-89, 8 161-170 / 74-81, 16 251-311 / 102-104; own kernels / per-call copies: F16 4
// 136-144 / 123-154, 8 173-177 / 120-158, 16 327-350 / 172-197; F32 8 229-233 / 271-299, 16
// 387-401 / 296-320; Q6_K 8 161-170 / 228-240, 16 251-311 / 238-272. Engine decode (synth 1b,
// `profile engine`, one thread, tok/s): docs/kernels.md, forty-fifth pass. An AMX Xeon forced
// to this level crosses over later (F16 8-16, F32 8-12, Q6_K 32+: its vdpbf16ps is no faster
// than its FMAs; the forty-first pass), but runs the avx512amx level by default.
constexpr std::int64_t bf16_vectors_min_tokens(GgmlType type, bool made = false) {
  switch (type) {
    case GgmlType::kF32: return made ? 2 : 16;
    case GgmlType::kF16:
    case GgmlType::kBF16: return made ? 4 : 8;
    case GgmlType::kQ6_K: return made ? 8 : 16;
    default: return kAmxBf16MinTokens;
  }
}
// Whether the bf16 tiles take weights w: Q8_0 or Q4_K in kRows8, or F32, F16, BF16 or Q6_K
// in GGUF rows, with rows % 8 == 0 and cols % 32 == 0.
bool amx_bf16_takes(const WeightView& w);
// Whether a matmul of w by n_tokens tokens with ctx runs the bf16 tiles: ctx.amx_bf16, the
// avx512amx level on a CPU with AMX-BF16 and AVX-512 BF16, amx_bf16_takes(w),
// amx_bf16_min_tokens(w.type, made) or more tokens (made: ctx.bf16_weights holds w's tiles).
bool amx_bf16_applies(const KernelContext& ctx, const WeightView& w, std::int64_t n_tokens);
// Whether this CPU runs the bf16 tiles at all (AMX-BF16 and AVX-512 BF16 with the avx512amx level).
bool amx_bf16_supported(const CpuFeatures& cpu);
// For `model info`: whether prompts take the bf16 tiles (setting `on`) on `cpu`, and why.
std::string amx_bf16_summary(bool on, const CpuFeatures& cpu);
// KernelContext::bf16_vectors: whether its vectors take weights w (F32, F16, BF16 or Q6_K in
// GGUF rows, rows % 8 == 0, cols % 32 == 0); whether a matmul of n_tokens tokens runs on
// them (ctx.bf16_vectors, the avx512vnni-zmm level on a CPU with AVX-512 BF16,
// bf16_vectors_takes(w), bf16_vectors_min_tokens(w.type, made) or more tokens); whether this CPU has them; for
// `model info`, whether prompts take them (setting `on`) on `cpu`, and why. Zen 5 (family
// 26 model 2), kernels_bench BM_Synth1bMatmuls at 512 tokens, one thread: see
// docs/kernels.md's thirty-ninth pass.
bool bf16_vectors_takes(const WeightView& w);
bool bf16_vectors_applies(const KernelContext& ctx, const WeightView& w, std::int64_t n_tokens);
bool bf16_vectors_supported(const CpuFeatures& cpu);
std::string bf16_vectors_summary(bool on, const CpuFeatures& cpu);
// amx_bf16_applies or bf16_vectors_applies.
bool bf16_products_apply(const KernelContext& ctx, const WeightView& w, std::int64_t n_tokens);

// The kernels of a float-weight (F32, F16, BF16) matmul of n_tokens tokens at ISA level
// isa: up to 4 tokens the GEMV, then the tiles (256-bit FMAs), prompts included; on
// avx512vnni-zmm from 32 tokens on the tokens-in-lanes kernels (512-bit FMAs). All three
// give the same bits, so a prompt's rows are those of its tokens decoded alone, at every
// level. (OpenBLAS's sgemm ran prompts of 65+ tokens until 2026-11-29: on Zen 4 the
// tiles beat its own pick, Cooperlake, by 13-29% at pp512 and 33-55% at pp128.)
enum class FloatMatmulKernel { kGemv, kTiles, kLanes };
FloatMatmulKernel float_matmul_kernel(Isa isa, std::int64_t n_tokens);
// "gemv", "tiles" or "tokens in lanes".
std::string float_matmul_kernel_name(FloatMatmulKernel kernel);
// The register width of its multiply-adds: 512 for kLanes, else 256.
std::int32_t float_matmul_vector_bits(Isa isa, std::int64_t n_tokens);
// Which kernels take which batch sizes at level isa, for `model info`: "gemv up to 4
// tokens, tiles from 5" (+ ", tokens in lanes from 32" on avx512vnni-zmm).
std::string float_matmul_kernels_summary(Isa isa);

// One product of matmul_many: y = x W^T for the matrix w, y row-major [n_tokens, w->rows].
struct MatmulTarget {
  const WeightView* w;
  float* y;
};

// matmul(*t.w, x, n_tokens, t.y, ctx) for every target (matrices with the same cols that
// read the same x: a layer's Q, K and V projections, or its gate and up), bitwise the same
// results. When all are quantized types taking the same activation format and every
// matrix's rows are a multiple of 16, x is quantized once and all matrices' rows are
// shared out in one pass over the pool (one synchronisation, not one per matrix);
// otherwise it calls matmul per target.
void matmul_many(std::span<const MatmulTarget> targets, const float* x, std::int64_t n_tokens, KernelContext& ctx);

}  // namespace ecoserve::kernels
