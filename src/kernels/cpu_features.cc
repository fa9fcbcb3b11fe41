#include "kernels/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "kernels/machine_peak.h"

namespace ecoserve::kernels {
namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

std::uint64_t xgetbv0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned v, int i) { return (v >> i) & 1u; }

// Linux gives a process the AMX tile data state only once it asks (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, kernel 5.16 on); before that the first
// tile instruction faults (SIGILL). The permission is the whole process's, so it is
// asked once, and AMX counts as present only where it is granted.
bool amx_permitted() {
  static const bool kGranted = [] {
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtileData = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return kGranted;
}

}  // namespace

std::string bf16_dot_slow_reason(std::string_view env_var) {
  return fmt::format("{} unset, and vdpbf16ps does under {:g}x the multiply-adds per second of 512-bit float FMAs on "
                     "this CPU (measured at start)",
                     env_var, kBf16DotMinFloatRatio);
}

std::string CpuFeatures::flags() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(avx_vnni, "avx_vnni");
  add(amx_tile, "amx_tile");
  add(amx_int8, "amx_int8");
  add(amx_bf16, "amx_bf16");
  add(gfni, "gfni");
  return s;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;            // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const Regs l7 = cpuid(7, 0);
  // XTILECFG and XTILEDATA state saved by the OS, and this process allowed to use it.
  const bool os_amx = (xcr0 & 0x60000) == 0x60000 && bit(l7.d, 24) && amx_permitted();
  const Regs l71 = l7.a >= 1 ? cpuid(7, 1) : Regs{};
  f.fma = os_avx && bit(l1.c, 12);
  f.f16c = os_avx && bit(l1.c, 29);
  f.avx2 = os_avx && bit(l7.b, 5);
  f.avx512f = os_avx512 && bit(l7.b, 16);
  f.avx512dq = os_avx512 && bit(l7.b, 17);
  f.avx512bw = os_avx512 && bit(l7.b, 30);
  f.avx512vl = os_avx512 && bit(l7.b, 31);
  f.avx512_vnni = os_avx512 && bit(l7.c, 11);
  f.avx512_bf16 = os_avx512 && bit(l71.a, 5);
  f.avx512_fp16 = os_avx512 && bit(l7.d, 23);
  f.avx_vnni = os_avx && bit(l71.a, 4);
  f.amx_bf16 = os_amx && bit(l7.d, 22);
  f.amx_tile = os_amx && bit(l7.d, 24);
  f.amx_int8 = os_amx && bit(l7.d, 25);
  f.gfni = os_avx && bit(l7.c, 8);
  // A CPU with AMX-INT8 is an Intel server core (Sapphire Rapids on), whose 512-bit vpdpbusd
  // runs at full rate: not timed, since on a shared host the probe misjudged about one start in
  // eight on such a Xeon, and that start then ran without the AMX tiles (avx512vnni).
  f.full_rate_512 = isa_supported(Isa::kAvx512Vnni, f) && (f.amx_int8 || int8_512bit_full_rate());
  f.fast_bf16_dot = f.avx512_bf16 && f.avx512f && bf16_dot_at_float_rate();
  const Regs l0 = cpuid(0, 0);  // vendor id: EBX, EDX, ECX
  char vendor[13] = {};
  std::memcpy(vendor, &l0.b, 4);
  std::memcpy(vendor + 4, &l0.d, 4);
  std::memcpy(vendor + 8, &l0.c, 4);
  f.vendor = vendor;
  // Brand string: leaves 0x80000002..4.
  if (cpuid(0x80000000u, 0).a >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i, 0);
      std::memcpy(brand + 16 * i, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    f.brand = brand;
    while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
    while (!f.brand.empty() && f.brand.front() == ' ') f.brand.erase(f.brand.begin());
  }
  return f;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx2: return "avx2";
    case Isa::kAvxVnni: return "avxvnni";
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvx512VnniZmm: return "avx512vnni-zmm";
    case Isa::kAvx512Amx: return "avx512amx";
  }
  return "unknown";
}

std::vector<Isa> all_isas() {
  return {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni, Isa::kAvx512VnniZmm, Isa::kAvx512Amx};
}

std::string_view isa_int8_dot(Isa isa) {
  switch (isa) {
    case Isa::kAvx2: return "vpmaddubsw+vpmaddwd (ymm)";
    case Isa::kAvxVnni: return "vpdpbusd (VEX, ymm)";
    case Isa::kAvx512Vnni: return "vpdpbusd (EVEX, ymm, 32 registers)";
    case Isa::kAvx512VnniZmm: return "vpdpbusd (EVEX, zmm, 32 registers)";
    case Isa::kAvx512Amx: return "tdpbssd/tdpbsud (AMX tiles) for Q8_0 batches of 16+ and Q4_K of 32+, else vpdpbusd (zmm)";
  }
  return "unknown";
}

bool isa_supported(Isa isa, const CpuFeatures& cpu) {
  const bool base = cpu.avx2 && cpu.fma && cpu.f16c;
  switch (isa) {
    case Isa::kAvx2: return base;
    case Isa::kAvxVnni: return base && cpu.avx_vnni;
    case Isa::kAvx512Vnni:
    case Isa::kAvx512VnniZmm:
      return base && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq && cpu.avx512_vnni;
    case Isa::kAvx512Amx:
      return isa_supported(Isa::kAvx512VnniZmm, cpu) && cpu.amx_tile && cpu.amx_int8;
  }
  return false;
}

std::vector<Isa> supported_isas(const CpuFeatures& cpu) {
  std::vector<Isa> out;
  for (Isa i : all_isas()) {
    if (isa_supported(i, cpu)) out.push_back(i);
  }
  return out;
}

Isa best_isa(const CpuFeatures& cpu) {
  Isa best = Isa::kAvx2;
  for (Isa i : all_isas()) {
    if (isa_supported(i, cpu) && (i < Isa::kAvx512VnniZmm || cpu.full_rate_512)) best = i;
  }
  return best;
}

StatusOr<Isa> resolve_isa(std::string_view name, const CpuFeatures& cpu) {
  if (name.empty() || name == "native" || name == "best") return best_isa(cpu);
  for (Isa i : all_isas()) {
    if (name != isa_name(i)) continue;
    if (!isa_supported(i, cpu)) {
      std::string have;
      for (Isa j : supported_isas(cpu)) have += (have.empty() ? "" : ", ") + std::string(isa_name(j));
      return invalid_argument_error("ISA level '{}' is not supported by this CPU ({}; flags: {}); supported here: {}",
                                    name, cpu.brand.empty() ? "unknown model" : cpu.brand, cpu.flags(), have);
    }
    return i;
  }
  return invalid_argument_error(
      "unknown ISA level '{}' (valid: avx2, avxvnni, avx512vnni, avx512vnni-zmm, avx512amx, native)", name);
}

StatusOr<Isa> isa_from_env() {
  const char* v = std::getenv("ECOSERVE_ISA");
  StatusOr<Isa> r = resolve_isa(v == nullptr ? "" : v, detect_cpu_features());
  if (!r.ok()) return invalid_argument_error("ECOSERVE_ISA: {}", r.status().message());
  return r;
}

StatusOr<std::int32_t> int_from_env(const char* name, std::int32_t fallback, bool (*valid)(std::int32_t),
                                    std::string_view what) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  const std::string_view text(v);
  std::int32_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || !valid(n)) {
    return invalid_argument_error("{}: '{}' is not {}", name, text, what);
  }
  return n;
}

Isa default_isa() {
  static const Isa kIsa = [] {
    StatusOr<Isa> r = isa_from_env();
    return r.ok() ? *r : best_isa(detect_cpu_features());
  }();
  return kIsa;
}

StatusOr<bool> switch_from_env(const char* name, bool fallback) {
  StatusOr<std::int32_t> n =
      int_from_env(name, fallback ? 1 : 0, [](std::int32_t v) { return v == 0 || v == 1; }, "0 or 1");
  if (!n.ok()) return n.status();
  return *n == 1;
}

}  // namespace ecoserve::kernels
