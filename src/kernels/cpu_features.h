// Which x86 instruction sets this CPU (and OS) supports, and which kernel
// path ("ISA level") the engine runs.
//
// ecoserve is one binary for every x86-64 CPU with AVX2 (x86-64-v3). The
// matmul kernels come in several builds (kernels/matmul_quant_<isa>.cc), each
// compiled for one ISA level; KernelContext picks one per engine at run time.
// The default is the best level this CPU supports, capped by the environment
// variable ECOSERVE_ISA (or the CLI's --isa), so a lower path can be run and
// compared on the same machine.
//
// Levels, lowest first (each needs everything the previous one needs except
// where noted):
//   avx2        AVX2 + FMA + F16C: int8 dots as vpmaddubsw + vpmaddwd.
//   avxvnni     + AVX-VNNI (VEX vpdpbusd on 256-bit vectors; Alder Lake+, Zen 5).
//   avx512vnni  AVX-512 F/BW/VL/DQ + AVX512_VNNI (EVEX vpdpbusd, 32 vector
//               registers; Ice Lake+, Zen 4+). Does not need AVX-VNNI.
//   avx512vnni-zmm  the same instructions, but the int8 tiles of batches
//               (prefill, batched decode) on 512-bit registers: 64 products
//               per vpdpbusd. Runs on every avx512vnni CPU; the best level only
//               where 512-bit vpdpbusd runs at twice the 256-bit rate
//               (CpuFeatures::full_rate_512: Zen 5, Intel's server cores; Zen 4
//               splits 512-bit operations in two, so 256 bits do as well there).
//   avx512amx   avx512vnni-zmm, and Q8_0 and Q4_K weights in kRows8 times batches of
//               16 or more tokens on AMX tiles (matmul_amx_impl.h): AMX-TILE
//               and AMX-INT8, with Linux's permission for the tile state (asked for
//               by detect_cpu_features). Intel Xeon from Sapphire Rapids on.
//
// Results of int8 kernels are bitwise identical on every level (the integer
// dot products are exact and the float arithmetic around them is the same).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/isa.h"

namespace ecoserve::kernels {

struct CpuFeatures {
  std::string brand;  // e.g. "AMD EPYC 9R14 96-Core Processor" (empty when the CPU does not say)
  std::string vendor;  // cpuid's vendor id: "GenuineIntel", "AuthenticAMD", ...
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx512_fp16 = false, avx_vnni = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool gfni = false;  // GFNI (gf2p8affineqb): Ice Lake and Zen 4 on
  // Measured, not a cpuid flag: 512-bit vpdpbusd does at least 1.5x the
  // multiply-adds per second of the 256-bit one (machine_peak.h's probe, run
  // once per process when avx512vnni is there; taken as true with AMX-INT8, whose
  // CPUs all have it, so that a noisy probe never costs them the AMX level). Not in flags().
  bool full_rate_512 = false;
  // Measured, not a cpuid flag: 512-bit vdpbf16ps does at least 0.7x the multiply-adds per second
  // of a 512-bit float FMA (machine_peak.h's bf16_dot_at_float_rate, run once per process when
  // AVX512-BF16 is there). Where it does not, the bf16 vectors are off by default
  // (ECOSERVE_MATMUL_BF16, ECOSERVE_ATTENTION_BF16): they would be slower than the float kernels.
  bool fast_bf16_dot = false;
  // The flags above that are set, in a fixed order ("avx2 fma f16c avx512f ...").
  std::string flags() const;
};

// Why a bf16-vector switch left unset is off on a CPU whose fast_bf16_dot is false, for `model
// info`: "<env_var> unset, and vdpbf16ps does under 0.7x ... here".
std::string bf16_dot_slow_reason(std::string_view env_var);

// This CPU's features (cpuid, with xgetbv for the OS's save of AVX/AVX-512 state). Cheap: the two
// measured fields, full_rate_512 and fast_bf16_dot, are measured once per process.
CpuFeatures detect_cpu_features();

std::string_view isa_name(Isa isa);  // "avx2", "avxvnni", "avx512vnni", "avx512vnni-zmm", "avx512amx"
// Every level, lowest first.
std::vector<Isa> all_isas();
bool isa_supported(Isa isa, const CpuFeatures& cpu);
// The levels `cpu` can run, lowest first (always starts with avx2 on a supported CPU).
std::vector<Isa> supported_isas(const CpuFeatures& cpu);
Isa best_isa(const CpuFeatures& cpu);
// What a one-line description of the instructions a level uses for int8 dots says ("vpmaddubsw+vpmaddwd", ...).
std::string_view isa_int8_dot(Isa isa);

// Parses a level name ("avx2", ..., "avx512amx"; "native" or "" = best
// for cpu). Errors name the valid levels, or say which feature the CPU lacks.
StatusOr<Isa> resolve_isa(std::string_view name, const CpuFeatures& cpu);

// The level from ECOSERVE_ISA (unset = best). An invalid or unsupported value
// is an error here; default_isa() below falls back to the best level instead.
StatusOr<Isa> isa_from_env();
// isa_from_env(), or the best level when it fails. Computed once per process
// (immutable afterwards).
Isa default_isa();

// The integer in environment variable `name`, or `fallback` when it is unset; `valid`
// says which values the variable takes (`what` names them in the INVALID_ARGUMENT error
// otherwise, with the variable's name). For the kernel settings tuned per CPU vendor
// (ECOSERVE_GEMV_STREAMS, ECOSERVE_GEMV_PREFETCH, ECOSERVE_ATTENTION_F32_WIDE).
StatusOr<std::int32_t> int_from_env(const char* name, std::int32_t fallback, bool (*valid)(std::int32_t),
                                    std::string_view what);
// A 0-or-1 environment variable `name` (int_from_env), or `fallback` when it is unset.
StatusOr<bool> switch_from_env(const char* name, bool fallback);

}  // namespace ecoserve::kernels
