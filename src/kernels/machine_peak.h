// Measured hardware ceilings of this machine, for roofline bounds on engine
// speed (`ecoserve profile engine --roofline`).
//
// - measure_f32_fma_gmacs: one core's peak float multiply-adds per second:
//   10 independent 8-lane FMA chains, so FMA latency is hidden and only the
//   FMA ports limit (the ceiling of F32 weights and of OpenBLAS sgemm).
// - measure_int8_dot_gmacs: one core's rate of the instruction sequence every
//   Q8_0 kernel here (and ggml's AVX2 Q8_0 dot) spends per 32 int8 products
//   without an int8 dot-product instruction (AVX2 has no VNNI): sign,
//   maddubs, madd, int->float convert, FMA. Loads are left out, so this is an
//   upper bound on any such kernel.
// - measure_read_gbps: DRAM read bandwidth when every thread of `pool` sums
//   its share of a `bytes` buffer (bigger than the caches) with 4 streams.
//
// Each returns the best of a few timed runs (noise on a shared host only
// ever slows a run down). Takes about `seconds` (compute) or a few sweeps
// (bandwidth). Call from one thread; the pool runs the bandwidth sweep.
#pragma once

#include <cstddef>

#include "base/thread_pool.h"

namespace ecoserve::kernels {

double measure_f32_fma_gmacs(double seconds);
double measure_int8_dot_gmacs(double seconds);
double measure_read_gbps(ThreadPool& pool, std::size_t bytes);

}  // namespace ecoserve::kernels
