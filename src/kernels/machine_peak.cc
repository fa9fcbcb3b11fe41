#include "kernels/machine_peak.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace ecoserve::kernels {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best rate (units/s) of `body(iterations)` over runs of about `seconds` / 4 each.
template <class F>
double best_rate(double seconds, double units_per_iteration, F&& body) {
  std::int64_t iters = 1 << 16;
  for (;;) {  // calibrate to ~10 ms per run
    const double t0 = now_seconds();
    body(iters);
    if (now_seconds() - t0 > 0.01) break;
    iters *= 2;
  }
  double best = 0;
  const double end = now_seconds() + seconds;
  do {
    const double t0 = now_seconds();
    body(iters);
    best = std::max(best, static_cast<double>(iters) * units_per_iteration / (now_seconds() - t0));
  } while (now_seconds() < end);
  return best;
}

// 10 independent FMA chains (8 lanes each) per iteration: 80 multiply-adds.
void fma_loop(std::int64_t n) {
  __asm__ volatile(
      "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
      "vmovaps %%ymm0, %%ymm1\n\tvmovaps %%ymm0, %%ymm2\n\tvmovaps %%ymm0, %%ymm3\n\tvmovaps %%ymm0, %%ymm4\n\t"
      "vmovaps %%ymm0, %%ymm5\n\tvmovaps %%ymm0, %%ymm6\n\tvmovaps %%ymm0, %%ymm7\n\tvmovaps %%ymm0, %%ymm8\n\t"
      "vmovaps %%ymm0, %%ymm9\n\tvmovaps %%ymm0, %%ymm14\n\tvmovaps %%ymm0, %%ymm15\n\t"
      "1:\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm1\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm2\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm3\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm4\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm5\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm6\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm7\n\t"
      "vfmadd231ps %%ymm14, %%ymm15, %%ymm8\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm9\n\t"
      "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm14", "xmm15", "cc");
}

// The same on zmm registers (AVX-512F): 10 x 16 multiply-adds per iteration.
void fma_zmm_loop(std::int64_t n) {
  __asm__ volatile(
      "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
      "vmovaps %%zmm0, %%zmm1\n\tvmovaps %%zmm0, %%zmm2\n\tvmovaps %%zmm0, %%zmm3\n\tvmovaps %%zmm0, %%zmm4\n\t"
      "vmovaps %%zmm0, %%zmm5\n\tvmovaps %%zmm0, %%zmm6\n\tvmovaps %%zmm0, %%zmm7\n\tvmovaps %%zmm0, %%zmm8\n\t"
      "vmovaps %%zmm0, %%zmm9\n\tvmovaps %%zmm0, %%zmm14\n\tvmovaps %%zmm0, %%zmm15\n\t"
      "1:\n\t"
      "vfmadd231ps %%zmm14, %%zmm15, %%zmm0\n\tvfmadd231ps %%zmm14, %%zmm15, %%zmm1\n\t"
      "vfmadd231ps %%zmm14, %%zmm15, %%zmm2\n\tvfmadd231ps %%zmm14, %%zmm15, %%zmm3\n\t"
      "vfmadd231ps %%zmm14, %%zmm15, %%zmm4\n\tvfmadd231ps %%zmm14, %%zmm15, %%zmm5\n\t"
      "vfmadd231ps %%zmm14, %%zmm15, %%zmm6\n\tvfmadd231ps %%zmm14, %%zmm15, %%zmm7\n\t"
      "vfmadd231ps %%zmm14, %%zmm15, %%zmm8\n\tvfmadd231ps %%zmm14, %%zmm15, %%zmm9\n\t"
      "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm14", "xmm15", "cc");
}

// Twelve chains of vdpbf16ps on zmm (AVX512-BF16): 12 x 32 multiply-adds per iteration
// (twelve, not ten: Zen 5 issues two per cycle at about six cycles' latency). The operands
// are pairs of bf16 1.0.
void bf16_dot_zmm_loop(std::int64_t n) {
  __asm__ volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovdqa64 %%zmm0, %%zmm1\n\tvmovdqa64 %%zmm0, %%zmm2\n\tvmovdqa64 %%zmm0, %%zmm3\n\t"
      "vmovdqa64 %%zmm0, %%zmm4\n\tvmovdqa64 %%zmm0, %%zmm5\n\tvmovdqa64 %%zmm0, %%zmm6\n\t"
      "vmovdqa64 %%zmm0, %%zmm7\n\tvmovdqa64 %%zmm0, %%zmm8\n\tvmovdqa64 %%zmm0, %%zmm9\n\t"
      "vmovdqa64 %%zmm0, %%zmm10\n\tvmovdqa64 %%zmm0, %%zmm11\n\t"
      "movl $0x3f803f80, %%eax\n\tvpbroadcastd %%eax, %%zmm14\n\t"
      "1:\n\t"
      "vdpbf16ps %%zmm14, %%zmm14, %%zmm0\n\tvdpbf16ps %%zmm14, %%zmm14, %%zmm1\n\t"
      "vdpbf16ps %%zmm14, %%zmm14, %%zmm2\n\tvdpbf16ps %%zmm14, %%zmm14, %%zmm3\n\t"
      "vdpbf16ps %%zmm14, %%zmm14, %%zmm4\n\tvdpbf16ps %%zmm14, %%zmm14, %%zmm5\n\t"
      "vdpbf16ps %%zmm14, %%zmm14, %%zmm6\n\tvdpbf16ps %%zmm14, %%zmm14, %%zmm7\n\t"
      "vdpbf16ps %%zmm14, %%zmm14, %%zmm8\n\tvdpbf16ps %%zmm14, %%zmm14, %%zmm9\n\t"
      "vdpbf16ps %%zmm14, %%zmm14, %%zmm10\n\tvdpbf16ps %%zmm14, %%zmm14, %%zmm11\n\t"
      "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      :
      : "eax", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm14", "cc");
}

// Five chains of vpmaddubsw + vpmaddwd + vpaddd into ymm0-4 (ymm5-9 temporaries).
#define ECO_AVX2_DOT5                                                                                 \
  "vpmaddubsw %%ymm14, %%ymm14, %%ymm5\n\tvpmaddubsw %%ymm14, %%ymm14, %%ymm6\n\t"                     \
  "vpmaddubsw %%ymm14, %%ymm14, %%ymm7\n\tvpmaddubsw %%ymm14, %%ymm14, %%ymm8\n\t"                     \
  "vpmaddubsw %%ymm14, %%ymm14, %%ymm9\n\t"                                                          \
  "vpmaddwd %%ymm12, %%ymm5, %%ymm5\n\tvpmaddwd %%ymm12, %%ymm6, %%ymm6\n\t"                           \
  "vpmaddwd %%ymm12, %%ymm7, %%ymm7\n\tvpmaddwd %%ymm12, %%ymm8, %%ymm8\n\t"                           \
  "vpmaddwd %%ymm12, %%ymm9, %%ymm9\n\t"                                                             \
  "vpaddd %%ymm5, %%ymm0, %%ymm0\n\tvpaddd %%ymm6, %%ymm1, %%ymm1\n\tvpaddd %%ymm7, %%ymm2, %%ymm2\n\t" \
  "vpaddd %%ymm8, %%ymm3, %%ymm3\n\tvpaddd %%ymm9, %%ymm4, %%ymm4\n\t"

// Ten of those chains per iteration (two rounds of five): 10 x 32 int8 multiply-adds.
void int8_avx2_loop(std::int64_t n) {
  __asm__ volatile(
      "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"
      "vmovdqa %%ymm0, %%ymm1\n\tvmovdqa %%ymm0, %%ymm2\n\tvmovdqa %%ymm0, %%ymm3\n\tvmovdqa %%ymm0, %%ymm4\n\t"
      "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n\t"
      "vpabsw %%ymm13, %%ymm12\n\t"  // int16 ones
      "vpabsb %%ymm13, %%ymm14\n\t"  // bytes 1
      "1:\n\t" ECO_AVX2_DOT5 ECO_AVX2_DOT5
      "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm12", "xmm13", "xmm14",
        "cc");
}

// 10 independent vpdpbusd chains: 10 x 32 int8 multiply-adds. {vex}: AVX-VNNI's encoding.
#define ECO_DPBUSD_LOOP(prefix)                                                                                   \
  __asm__ volatile(                                                                                               \
      "vpxor %%ymm0, %%ymm0, %%ymm0\n\t"                                                                          \
      "vmovdqa %%ymm0, %%ymm1\n\tvmovdqa %%ymm0, %%ymm2\n\tvmovdqa %%ymm0, %%ymm3\n\tvmovdqa %%ymm0, %%ymm4\n\t" \
      "vmovdqa %%ymm0, %%ymm5\n\tvmovdqa %%ymm0, %%ymm6\n\tvmovdqa %%ymm0, %%ymm7\n\tvmovdqa %%ymm0, %%ymm8\n\t" \
      "vmovdqa %%ymm0, %%ymm9\n\t"                                                                                \
      "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n\t"                                                                    \
      "vpabsb %%ymm13, %%ymm14\n\t"                                                                               \
      "1:\n\t" prefix "vpdpbusd %%ymm14, %%ymm14, %%ymm0\n\t" prefix "vpdpbusd %%ymm14, %%ymm14, %%ymm1\n\t" prefix \
      "vpdpbusd %%ymm14, %%ymm14, %%ymm2\n\t" prefix "vpdpbusd %%ymm14, %%ymm14, %%ymm3\n\t" prefix                \
      "vpdpbusd %%ymm14, %%ymm14, %%ymm4\n\t" prefix "vpdpbusd %%ymm14, %%ymm14, %%ymm5\n\t" prefix                \
      "vpdpbusd %%ymm14, %%ymm14, %%ymm6\n\t" prefix "vpdpbusd %%ymm14, %%ymm14, %%ymm7\n\t" prefix                \
      "vpdpbusd %%ymm14, %%ymm14, %%ymm8\n\t" prefix "vpdpbusd %%ymm14, %%ymm14, %%ymm9\n\t"                       \
      "dec %0\n\tjnz 1b\n\t"                                                                                     \
      "vzeroupper\n\t"                                                                                            \
      : "+r"(n)                                                                                                   \
      :                                                                                                           \
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm13", "xmm14", "cc")

void int8_avxvnni_loop(std::int64_t n) { ECO_DPBUSD_LOOP("%{vex%} "); }
void int8_avx512vnni_loop(std::int64_t n) { ECO_DPBUSD_LOOP(""); }

// 10 independent vpdpbusd chains on zmm registers: 10 x 64 int8 multiply-adds.
void int8_avx512vnni_zmm_loop(std::int64_t n) {
  __asm__ volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovdqa64 %%zmm0, %%zmm1\n\tvmovdqa64 %%zmm0, %%zmm2\n\tvmovdqa64 %%zmm0, %%zmm3\n\t"
      "vmovdqa64 %%zmm0, %%zmm4\n\tvmovdqa64 %%zmm0, %%zmm5\n\tvmovdqa64 %%zmm0, %%zmm6\n\t"
      "vmovdqa64 %%zmm0, %%zmm7\n\tvmovdqa64 %%zmm0, %%zmm8\n\tvmovdqa64 %%zmm0, %%zmm9\n\t"
      "vpternlogd $0xff, %%zmm14, %%zmm14, %%zmm14\n\t"
      "vpabsb %%zmm14, %%zmm14\n\t"
      "1:\n\t"
      "vpdpbusd %%zmm14, %%zmm14, %%zmm0\n\tvpdpbusd %%zmm14, %%zmm14, %%zmm1\n\t"
      "vpdpbusd %%zmm14, %%zmm14, %%zmm2\n\tvpdpbusd %%zmm14, %%zmm14, %%zmm3\n\t"
      "vpdpbusd %%zmm14, %%zmm14, %%zmm4\n\tvpdpbusd %%zmm14, %%zmm14, %%zmm5\n\t"
      "vpdpbusd %%zmm14, %%zmm14, %%zmm6\n\tvpdpbusd %%zmm14, %%zmm14, %%zmm7\n\t"
      "vpdpbusd %%zmm14, %%zmm14, %%zmm8\n\tvpdpbusd %%zmm14, %%zmm14, %%zmm9\n\t"
      "dec %0\n\tjnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm14", "cc");
}

// Six independent chains of the AMX multiply `insn` (tdpbssd, tdpbf16ps) into tiles 2-7
// from tiles 0 (A) and 1 (B), with the tile shapes of `cfg`, n times. Assembly: this file
// is built for the baseline, and the assembler needs no -mamx flags.
#define ECO_AMX_SIX_CHAINS(insn)                                                                   \
  "ldtilecfg %1\n\t"                                                                               \
  "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t"                     \
  "tilezero %%tmm4\n\ttilezero %%tmm5\n\ttilezero %%tmm6\n\ttilezero %%tmm7\n\t"                     \
  "1:\n\t" insn " %%tmm1, %%tmm0, %%tmm2\n\t" insn " %%tmm1, %%tmm0, %%tmm3\n\t" insn              \
  " %%tmm1, %%tmm0, %%tmm4\n\t" insn " %%tmm1, %%tmm0, %%tmm5\n\t" insn " %%tmm1, %%tmm0, %%tmm6\n\t" \
  insn " %%tmm1, %%tmm0, %%tmm7\n\t"                                                              \
  "dec %0\n\tjnz 1b\n\t"                                                                          \
  "tilerelease\n\t"

struct alignas(64) AmxConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// AMX: tdpbssd on the avx512amx level's Q8_0 tiles (matmul_amx_impl.h: A = 16 rows x 32
// bytes, B = 8 rows x 64 bytes, C = 16 x 16 int32), 6 x 8192 int8 multiply-adds. (4
// chains give the same rate: the tile unit pipelines a chain's accumulation.)
void int8_amx_loop(std::int64_t n) {
  const AmxConfig cfg{1, 0, {}, {32, 64, 64, 64, 64, 64, 64, 64}, {16, 8, 16, 16, 16, 16, 16, 16}};
  __asm__ volatile(ECO_AMX_SIX_CHAINS("tdpbssd") : "+r"(n) : "m"(cfg) : "cc", "memory");
}

// AMX-BF16: tdpbf16ps on the bf16 prompt kernel's tiles (matmul_amx_bf16_impl.h: A and B
// 16 rows x 64 bytes, C 16 x 16 floats), 6 x 8192 bf16 multiply-adds. Zero tiles: the
// rate does not depend on the values.
void bf16_amx_loop(std::int64_t n) {
  const AmxConfig cfg{1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};
  __asm__ volatile(ECO_AMX_SIX_CHAINS("tdpbf16ps") : "+r"(n) : "m"(cfg) : "cc", "memory");
}
#undef ECO_AMX_SIX_CHAINS

// Seconds of the fastest of `runs` calls of body(iters).
template <class F>
double fastest(int runs, std::int64_t iters, F&& body) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const double t0 = now_seconds();
    body(iters);
    best = std::min(best, now_seconds() - t0);
  }
  return best;
}

}  // namespace

double measure_f32_fma_gmacs(double seconds, int vector_bits) {
  return vector_bits == 512 ? best_rate(seconds, 160.0, fma_zmm_loop) / 1e9 : best_rate(seconds, 80.0, fma_loop) / 1e9;
}

double measure_int8_dot_gmacs(Isa isa, double seconds) {
  switch (isa) {
    case Isa::kAvx2: return best_rate(seconds, 320.0, int8_avx2_loop) / 1e9;
    case Isa::kAvxVnni: return best_rate(seconds, 320.0, int8_avxvnni_loop) / 1e9;
    case Isa::kAvx512Vnni: return best_rate(seconds, 320.0, int8_avx512vnni_loop) / 1e9;
    case Isa::kAvx512VnniZmm: return best_rate(seconds, 640.0, int8_avx512vnni_zmm_loop) / 1e9;
    case Isa::kAvx512Amx: return best_rate(seconds, 6.0 * 8192.0, int8_amx_loop) / 1e9;
  }
  return 0.0;
}

double measure_amx_bf16_gmacs(double seconds) { return best_rate(seconds, 6.0 * 8192.0, bf16_amx_loop) / 1e9; }

double measure_avx512_bf16_gmacs(double seconds) { return best_rate(seconds, 12.0 * 32.0, bf16_dot_zmm_loop) / 1e9; }

bool int8_512bit_full_rate() {
  static const bool kFull = [] {
    // Well under a millisecond: 20 runs each of 40k vpdpbusd, interleaved so that
    // a slow moment of a shared host hits both; the fastest of each is compared.
    constexpr std::int64_t kIters = 4000;
    double ymm = 1e30, zmm = 1e30;
    for (int round = 0; round < 4; ++round) {
      ymm = std::min(ymm, fastest(5, kIters, int8_avx512vnni_loop));
      zmm = std::min(zmm, fastest(5, kIters, int8_avx512vnni_zmm_loop));
    }
    // Multiply-adds per second, 512-bit over 256-bit: 2 * ymm / zmm.
    return 2.0 * ymm / zmm >= 1.5;
  }();
  return kFull;
}

double bf16_dot_float_ratio() {
  // About a millisecond where vdpbf16ps is slow: 20 runs each of 4000 iterations (40k
  // 512-bit FMAs, 48k vdpbf16ps), interleaved as int8_512bit_full_rate's are. Runs of
  // 15-35 us: a busy host preempts few of them, where the 10 ms runs of best_rate can all be.
  constexpr std::int64_t kIters = 4000;
  double fma = 1e30, bf16 = 1e30;
  fastest(3, kIters, fma_zmm_loop);  // not counted: an Intel core's 512-bit units start slowly
  for (int round = 0; round < 4; ++round) {
    fma = std::min(fma, fastest(5, kIters, fma_zmm_loop));
    bf16 = std::min(bf16, fastest(5, kIters, bf16_dot_zmm_loop));
  }
  // Multiply-adds per second, vdpbf16ps over FMA: (384 / bf16) / (160 / fma).
  return 384.0 * fma / (160.0 * bf16);
}

bool bf16_dot_at_float_rate() {
  static const bool kFast = bf16_dot_float_ratio() >= kBf16DotMinFloatRatio;
  return kFast;
}

double measure_read_gbps(ThreadPool& pool, std::size_t bytes) {
  const std::size_t n = std::max<std::size_t>(bytes / sizeof(float), 1 << 20) / 64 * 64;
  // Huge pages where THP allows (as model weights get), written so that reads
  // are not served by the shared zero page.
  constexpr std::size_t kHuge = 2u << 20;
  const std::size_t map_bytes = (n * sizeof(float) + kHuge - 1) / kHuge * kHuge + kHuge;
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 0.0;
  auto* buf = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(m) + kHuge - 1) / kHuge * kHuge);
  madvise(buf, map_bytes - kHuge, MADV_HUGEPAGE);
  std::fill(buf, buf + n, 1.0f);
  std::vector<float> sinks(static_cast<std::size_t>(pool.num_threads()) * 16);
  const int parts = pool.num_threads();
  double best = 0;
  // Each thread reads its share as kStreams far-apart streams, with the hardware
  // prefetchers alone or (kAhead > 0) with one software prefetch into L2 per 64 bytes,
  // kAhead bytes ahead, and kSpace float FMAs (8 chains, no loads) after each 64 bytes;
  // the best of every form is reported. Which reads fastest depends on the core's
  // prefetchers: on Zen 4 one thread read 30-32 GB/s as one stream and 21-26 as 2-8 (two
  // threads: 31-34 in every pattern), and a probe of 4 and 8 streams alone was beaten by
  // 10-18% by the engine's batch-1 decode and by attention_bench's BM_KvRead, so "% of
  // the read bound" read high. On an Intel Xeon with AMX (family 6 model 167, one thread)
  // the best plain read was 15.1-15.4 GB/s, one stream prefetched 16 KiB ahead 15.2-16.0,
  // and the same with its loads spaced by 16 FMAs 15.5-16.5: a kernel with arithmetic
  // between its loads can read that fast (docs/kernels.md, fifty-sixth pass).
  auto sweep = [&]<int kStreams, int kAhead = 0, int kSpace = 0>() {
    const std::size_t len = n / static_cast<std::size_t>(parts) / kStreams / 16 * 16;
    const double bytes_read = static_cast<double>(len) * kStreams * parts * sizeof(float);
    for (int rep = 0; rep < 4; ++rep) {
      const double t0 = now_seconds();
      pool.run([&](int i, int) {
        const float* base = buf + kStreams * len * static_cast<std::size_t>(i);
        __m256 acc[kStreams];
        for (int s = 0; s < kStreams; ++s) acc[s] = _mm256_setzero_ps();
        __m256 work[8];
        for (int j = 0; j < 8; ++j) work[j] = _mm256_set1_ps(1.0f);
        const __m256 mul = _mm256_set1_ps(0.999f), add = _mm256_set1_ps(0.001f);
        for (std::size_t k = 0; k < len; k += 16) {
#pragma GCC unroll 8
          for (int s = 0; s < kStreams; ++s) {
            const float* p = base + s * len + k;
            if constexpr (kAhead > 0) {  // the address as an integer: it may lie past the buffer
              _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) + kAhead), _MM_HINT_T1);
            }
            acc[s] = _mm256_add_ps(acc[s], _mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)));
#pragma GCC unroll 16
            for (int j = 0; j < kSpace; ++j) work[j % 8] = _mm256_fmadd_ps(work[j % 8], mul, add);
          }
        }
        for (int s = 1; s < kStreams; ++s) acc[0] = _mm256_add_ps(acc[0], acc[s]);
        for (int j = 0; j < 8; ++j) acc[0] = _mm256_add_ps(acc[0], work[j]);
        sinks[static_cast<std::size_t>(i) * 16] = _mm256_cvtss_f32(acc[0]);
      });
      if (rep > 0) best = std::max(best, bytes_read / (now_seconds() - t0));  // rep 0 warms up
    }
  };
  sweep.template operator()<1>();
  sweep.template operator()<2>();
  sweep.template operator()<4>();
  sweep.template operator()<8>();
  sweep.template operator()<1, 16384>();
  sweep.template operator()<1, 16384, 16>();
  munmap(m, map_bytes);
  volatile float keep = sinks[0];
  (void)keep;
  return best / 1e9;
}

}  // namespace ecoserve::kernels
