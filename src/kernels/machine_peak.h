// Measured hardware ceilings of this machine, for roofline bounds on engine
// speed (`ecoserve profile engine --roofline`).
//
// - measure_f32_fma_gmacs: one core's peak float multiply-adds per second:
//   10 independent FMA chains, so FMA latency is hidden and only the FMA ports
//   limit, on ymm registers (8 lanes: the float matmul tiles, OpenBLAS's
//   Haswell kernels, the attention kernels) or, with vector_bits 512, on zmm
//   (16 lanes: OpenBLAS's AVX-512 kernels, the avx512vnni-zmm level's fp16
//   decode attention; only on a CPU with AVX-512F). Where 512-bit operations
//   are split in two (Zen 4) both give about the same multiply-adds per second.
// - measure_int8_dot_gmacs(isa): one core's peak int8 multiply-adds per
//   second with the CPU's int8 dot instructions of that kernel path, in 10
//   independent chains (ymm, as the kernels use): avx2 vpmaddubsw + vpmaddwd
//   + vpaddd per 32 products (the shortest exact sequence without VNNI);
//   avxvnni / avx512vnni one vpdpbusd (VEX / EVEX); avx512vnni-zmm the same
//   on zmm (64 per instruction); avx512amx AMX's tdpbssd on the tile shape of
//   its Q8_0 and Q4_K kernels (16 tokens x 32 bytes times 8 rows x 64 bytes:
//   8192 per instruction; Q4_K's tdpbsud runs at the same rate; the level's
//   other kernels are avx512vnni-zmm's, measured with that level). The kernels' own overhead (unpacking, scales, float
//   accumulation) counts against them.
// - measure_amx_bf16_gmacs: one core's peak bf16 multiply-adds per second on AMX
//   tiles, TDPBF16PS on the tile shape of the avx512amx level's bf16 prompt kernel
//   (KernelContext::amx_bf16: 16 tokens x 32 bf16 times 16 rows x 32 bf16 into 16 x
//   16 floats, 8192 per instruction), 6 independent chains. Only on a CPU with AMX-BF16.
// - measure_avx512_bf16_gmacs: one core's peak bf16 multiply-adds per second on
//   AVX512-BF16 vectors, vdpbf16ps on zmm (32 per instruction), 12 independent chains: the
//   avx512vnni-zmm level's bf16 prompt attention (AttentionDims::bf16_vectors). Only on a
//   CPU with AVX512-BF16.
// - measure_read_gbps: DRAM read bandwidth when every thread of `pool` sums
//   its share of a `bytes` buffer (bigger than the caches): the best of reading
//   it as 1, 2, 4 and 8 far-apart streams per thread with the hardware prefetchers
//   alone, and as one stream with a software prefetch 16 KiB ahead, its loads back
//   to back or spaced by float FMAs.
//
// Each returns the best of a few timed runs (noise on a shared host only
// ever slows a run down). Takes about `seconds` (compute) or a few sweeps
// (bandwidth). Call from one thread; the pool runs the bandwidth sweep.
#pragma once

#include <cstddef>

#include "base/thread_pool.h"
#include "kernels/isa.h"

namespace ecoserve::kernels {

double measure_f32_fma_gmacs(double seconds, int vector_bits = 256);
double measure_int8_dot_gmacs(Isa isa, double seconds);
double measure_amx_bf16_gmacs(double seconds);
double measure_avx512_bf16_gmacs(double seconds);
double measure_read_gbps(ThreadPool& pool, std::size_t bytes);

// Whether 512-bit vpdpbusd runs at (at least 1.5x, in practice 2x) the
// multiply-add rate of the 256-bit one on this core: true where the vector
// units are 512 bits wide (Zen 5, Intel server cores), false where 512-bit
// operations are split in two (Zen 4). Call only on a CPU with AVX-512 VNNI.
// Measured once per process (well under a millisecond), then cached.
bool int8_512bit_full_rate();

// Whether 512-bit vdpbf16ps does at least kBf16DotMinFloatRatio times the multiply-adds per
// second of 512-bit float FMAs on this core, i.e. whether the AVX512-BF16 vectors (prompt
// attention, float weights' batches) can beat the float kernels: Zen 5 1.8-1.9x, an Intel
// Xeon with AMX 1.0x (there the vectors still win for fp16 weights, which the float kernels
// widen first), an Emerald Rapids Xeon under KVM without AMX 0.5x (there its F16 pp512 ran
// 28% slower on the vectors). Call only on a CPU with AVX512-BF16. Measured once per
// process (about a millisecond), then cached.
inline constexpr double kBf16DotMinFloatRatio = 0.7;
bool bf16_dot_at_float_rate();
// The measurement behind it, made again on each call: vdpbf16ps's multiply-adds per second
// over a 512-bit FMA's (the best of many short interleaved runs of each).
double bf16_dot_float_ratio();

}  // namespace ecoserve::kernels
