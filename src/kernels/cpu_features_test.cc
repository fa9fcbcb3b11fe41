#include "kernels/cpu_features.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <utility>
#include <string>

#include "kernels/matmul.h"

namespace ecoserve::kernels {
namespace {

CpuFeatures avx2_only() {
  CpuFeatures f;
  f.brand = "Test CPU";
  f.avx2 = f.fma = f.f16c = true;
  return f;
}

TEST(CpuFeaturesTest, ThisCpuRunsTheBaselineAndReportsItsFlags) {
  const CpuFeatures cpu = detect_cpu_features();
  EXPECT_TRUE(cpu.avx2 && cpu.fma && cpu.f16c) << cpu.flags();  // the build targets x86-64-v3
  EXPECT_TRUE(isa_supported(Isa::kAvx2, cpu));
  EXPECT_NE(cpu.flags().find("avx2"), std::string::npos);
  // avx512vnni needs the AVX-512 foundation and its VNNI extension.
  EXPECT_EQ(isa_supported(Isa::kAvx512Vnni, cpu), cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq &&
                                                    cpu.avx512_vnni);
  EXPECT_EQ(isa_supported(Isa::kAvxVnni, cpu), cpu.avx_vnni);
  // The 512-bit tiles run wherever avx512vnni does; the probe only decides whether they are the best.
  EXPECT_EQ(isa_supported(Isa::kAvx512VnniZmm, cpu), isa_supported(Isa::kAvx512Vnni, cpu));
  EXPECT_TRUE(!cpu.full_rate_512 || isa_supported(Isa::kAvx512Vnni, cpu));
  // AMX int8 tiles on top of them (granted to this process: detect asked Linux for them).
  EXPECT_EQ(isa_supported(Isa::kAvx512Amx, cpu), isa_supported(Isa::kAvx512VnniZmm, cpu) && cpu.amx_int8);
  EXPECT_TRUE(isa_supported(best_isa(cpu), cpu));
  std::printf("this CPU: %s; full-rate 512-bit vpdpbusd: %s; best level %s\n", cpu.flags().c_str(),
              cpu.full_rate_512 ? "yes" : "no", std::string(isa_name(best_isa(cpu))).c_str());
}

TEST(CpuFeaturesTest, VendorIsReadAndSetsTheGemvStreamsAndPrefetch) {
  const CpuFeatures cpu = detect_cpu_features();
  EXPECT_EQ(cpu.vendor.size(), 12u) << cpu.vendor;  // "GenuineIntel", "AuthenticAMD", ...
  CpuFeatures intel = cpu, amd = cpu;
  intel.vendor = "GenuineIntel";
  amd.vendor = "AuthenticAMD";
  EXPECT_EQ(gemv_streams_for(intel), 4);
  EXPECT_EQ(gemv_streams_for(amd), 0);
  EXPECT_EQ(default_gemv_streams(), *gemv_streams_from_env());
  EXPECT_EQ(gemv_streams_summary(4), "4 weight streams");
  EXPECT_EQ(gemv_streams_summary(0), "the level's weight streams");
  // And the GEMV's software prefetch: 1 KiB ahead on Intel, none elsewhere.
  EXPECT_EQ(gemv_prefetch_for(intel), 1024);
  EXPECT_EQ(gemv_prefetch_for(amd), 0);
  EXPECT_EQ(default_gemv_prefetch(), *gemv_prefetch_from_env());
  EXPECT_EQ(KernelContext(nullptr).gemv_prefetch, default_gemv_prefetch());
  EXPECT_EQ(gemv_prefetch_summary(1024), "1024 bytes ahead");
  EXPECT_EQ(gemv_prefetch_summary(0), "none");
  // And the avx512vnni-zmm Q4_K tile: 1 pair x 7 tokens on Intel, 2 pairs x 3 elsewhere.
  EXPECT_EQ(q4k_tile_pairs_for(intel), 1);
  EXPECT_EQ(q4k_tile_pairs_for(amd), 2);
  EXPECT_EQ(default_q4k_tile_pairs(), *q4k_tile_pairs_from_env());
  EXPECT_EQ(KernelContext(nullptr).q4k_tile_pairs, default_q4k_tile_pairs());
  EXPECT_EQ(cpu_has_gfni(), detect_cpu_features().gfni);
  EXPECT_EQ(q4k_tile_pairs_summary(1), "1 pair of 8-row groups x 7 tokens");
  EXPECT_EQ(q4k_tile_pairs_summary(2), "2 pairs of 8-row groups x 3 tokens");
  EXPECT_EQ(q4k_tile_summary(2, false, false), "2 pairs of 8-row groups x 3 tokens");
  EXPECT_EQ(q4k_tile_summary(1, false, false), "1 pair of 8-row groups x 7 tokens");
  EXPECT_EQ(q4k_tile_summary(1, true, false), "1 pair of 8-row groups x 8 tokens, GFNI nibbles and vpdpwssd scales");
  // And its Q8_0 and Q4_K kernels of 32+ tokens and Q6_K of 16+: tokens in lanes on Intel only.
  EXPECT_TRUE(q8_lanes_for(intel));
  EXPECT_FALSE(q8_lanes_for(amd));
  EXPECT_EQ(default_q8_lanes(), *q8_lanes_from_env());
  EXPECT_EQ(KernelContext(nullptr).q8_lanes, default_q8_lanes());
  EXPECT_TRUE(q4k_lanes_for(intel));
  EXPECT_FALSE(q4k_lanes_for(amd));
  EXPECT_EQ(default_q4k_lanes(), *q4k_lanes_from_env());
  EXPECT_EQ(KernelContext(nullptr).q4k_lanes, default_q4k_lanes());
  EXPECT_TRUE(q6k_lanes_for(intel));
  EXPECT_FALSE(q6k_lanes_for(amd));
  EXPECT_EQ(default_q6k_lanes(), *q6k_lanes_from_env());
  EXPECT_EQ(KernelContext(nullptr).q6k_lanes, default_q6k_lanes());
  EXPECT_EQ(q6k_tile_summary(false), "4 rows x 6 tokens in pairs");
  EXPECT_EQ(q6k_tile_summary(true), "4 rows x 6 tokens in pairs, tokens in lanes from 16 tokens");
  EXPECT_EQ(q8_tile_summary(false), "2 pairs of 8-row groups x 7 tokens");
  EXPECT_EQ(q8_tile_summary(true), "2 pairs of 8-row groups x 7 tokens, tokens in lanes from 32 tokens");
  EXPECT_EQ(q4k_tile_summary(2, true, false),
            "2 pairs of 8-row groups x 3 tokens, GFNI nibbles and vpdpwssd scales");
  EXPECT_EQ(q4k_tile_summary(1, true, true),
            "1 pair of 8-row groups x 8 tokens, GFNI nibbles and vpdpwssd scales, tokens in lanes from 32 tokens");
  EXPECT_EQ(q4k_tile_summary(1, false, true), "1 pair of 8-row groups x 7 tokens, tokens in lanes from 32 tokens");
  EXPECT_EQ(KernelContext(nullptr).q4k_gfni, detect_cpu_features().gfni);
}

// The batched int8 tiles the levels below avx512vnni-zmm run, as compiled (model info's lines
// there): AVX2's 2 x 3 rows8 tiles, AVX-VNNI's 1 x 2 Q4_K tile, the 32-register avx512vnni level's
// bigger ones; nothing for the 512-bit levels (their settings' summaries above) or other types.
TEST(CpuFeaturesTest, Int8TilesBelowTheZmmLevelAreTheCompiledOnes) {
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx2, GgmlType::kQ8_0), "2 groups of 8 rows x 3 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx2, GgmlType::kQ4_K), "2 groups of 8 rows x 3 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx2, GgmlType::kQ6_K), "2 rows x 4 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvxVnni, GgmlType::kQ8_0), "2 groups of 8 rows x 3 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvxVnni, GgmlType::kQ4_K), "1 group of 8 rows x 2 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx512Vnni, GgmlType::kQ8_0), "3 groups of 8 rows x 4 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx512Vnni, GgmlType::kQ4_K), "2 groups of 8 rows x 4 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx512Vnni, GgmlType::kQ6_K), "4 rows x 4 tokens");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx512VnniZmm, GgmlType::kQ8_0), "");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx512Amx, GgmlType::kQ4_K), "");
  EXPECT_EQ(int8_tiles_summary(Isa::kAvx2, GgmlType::kF16), "");
}

TEST(CpuFeaturesTest, LevelsAreChosenFromTheFeatures) {
  CpuFeatures f = avx2_only();
  EXPECT_EQ(best_isa(f), Isa::kAvx2);
  EXPECT_EQ(supported_isas(f), std::vector<Isa>{Isa::kAvx2});
  f.avx_vnni = true;
  EXPECT_EQ(best_isa(f), Isa::kAvxVnni);
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  EXPECT_EQ(best_isa(f), Isa::kAvxVnni);  // AVX-512 without VNNI has no int8 dot instruction
  f.avx512_vnni = true;
  EXPECT_EQ(best_isa(f), Isa::kAvx512Vnni);  // 512-bit operations at half rate (Zen 4): 256-bit tiles
  EXPECT_EQ(supported_isas(f),
            (std::vector<Isa>{Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni, Isa::kAvx512VnniZmm}));
  f.full_rate_512 = true;  // Zen 5, Intel server cores
  EXPECT_EQ(best_isa(f), Isa::kAvx512VnniZmm);
  f.amx_tile = true;  // AMX's tile state alone has no int8 multiply
  EXPECT_EQ(best_isa(f), Isa::kAvx512VnniZmm);
  f.amx_int8 = true;  // Intel Xeon from Sapphire Rapids on
  EXPECT_EQ(best_isa(f), Isa::kAvx512Amx);
  EXPECT_EQ(supported_isas(f), (std::vector<Isa>{Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni, Isa::kAvx512VnniZmm,
                                                 Isa::kAvx512Amx}));
  f.amx_tile = f.amx_int8 = false;
  f.full_rate_512 = false;
  f.avx_vnni = false;  // Zen 4: AVX-512 VNNI but no AVX-VNNI
  EXPECT_EQ(supported_isas(f), (std::vector<Isa>{Isa::kAvx2, Isa::kAvx512Vnni, Isa::kAvx512VnniZmm}));
  EXPECT_EQ(f.flags(), "avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni");
  f.gfni = true;
  EXPECT_EQ(f.flags(), "avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni gfni");
}

// A CPU with AMX-INT8 always gets the AMX level: its 512-bit rate is not left to a timing
// probe, which a busy host can fool (it once picked avx512vnni in eight starts on a Xeon).
TEST(CpuFeaturesTest, AmxCpusAlwaysGetTheAmxLevel) {
  const CpuFeatures f = detect_cpu_features();
  if (!f.amx_int8 || !isa_supported(Isa::kAvx512Vnni, f)) GTEST_SKIP() << "no AMX-INT8 here";
  EXPECT_TRUE(f.full_rate_512);
  EXPECT_EQ(best_isa(f), Isa::kAvx512Amx);
}

TEST(CpuFeaturesTest, ResolveNamesLevelsAndExplainsRefusals) {
  const CpuFeatures f = avx2_only();
  EXPECT_EQ(*resolve_isa("avx2", f), Isa::kAvx2);
  EXPECT_EQ(*resolve_isa("native", f), Isa::kAvx2);
  EXPECT_EQ(*resolve_isa("", f), Isa::kAvx2);
  const StatusOr<Isa> bad = resolve_isa("sse2", f);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "unknown ISA level 'sse2' (valid: avx2, avxvnni, avx512vnni, avx512vnni-zmm, avx512amx, native)");
  const StatusOr<Isa> missing = resolve_isa("avx512vnni", f);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "ISA level 'avx512vnni' is not supported by this CPU (Test CPU; flags: avx2 fma f16c); supported here: "
            "avx2");
}

// ECOSERVE_GEMV_STREAMS and ECOSERVE_GEMV_PREFETCH override the vendor's GEMV settings
// with a value the kernels take, and anything else is an error that names the variable.
TEST(CpuFeaturesTest, EnvironmentSetsTheGemvStreamsAndPrefetch) {
  const CpuFeatures cpu = detect_cpu_features();
  ASSERT_EQ(unsetenv("ECOSERVE_GEMV_STREAMS"), 0);
  ASSERT_EQ(unsetenv("ECOSERVE_GEMV_PREFETCH"), 0);
  EXPECT_EQ(*gemv_streams_from_env(), gemv_streams_for(cpu));
  EXPECT_EQ(*gemv_prefetch_from_env(), gemv_prefetch_for(cpu));
  for (auto [text, n] : {std::pair{"0", 0}, {"2", 2}, {"4", 4}}) {
    ASSERT_EQ(setenv("ECOSERVE_GEMV_STREAMS", text, 1), 0);
    EXPECT_EQ(*gemv_streams_from_env(), n) << text;
  }
  for (const char* text : {"3", "8", "-2", "two", "", "2 "}) {
    ASSERT_EQ(setenv("ECOSERVE_GEMV_STREAMS", text, 1), 0);
    const StatusOr<std::int32_t> bad = gemv_streams_from_env();
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(),
              fmt::format("ECOSERVE_GEMV_STREAMS: '{}' is not 0 (the level's count), 2 or 4", text));
  }
  for (auto [text, n] : {std::pair{"0", 0}, {"64", 64}, {"1024", 1024}, {"65536", 65536}}) {
    ASSERT_EQ(setenv("ECOSERVE_GEMV_PREFETCH", text, 1), 0);
    EXPECT_EQ(*gemv_prefetch_from_env(), n) << text;
  }
  for (const char* text : {"100", "-64", "65600", "1k", "", "99999999999"}) {
    ASSERT_EQ(setenv("ECOSERVE_GEMV_PREFETCH", text, 1), 0);
    const StatusOr<std::int32_t> bad = gemv_prefetch_from_env();
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().message(),
              fmt::format("ECOSERVE_GEMV_PREFETCH: '{}' is not a multiple of 64 bytes in [0, 65536]", text));
  }
  ASSERT_EQ(unsetenv("ECOSERVE_GEMV_STREAMS"), 0);
  ASSERT_EQ(unsetenv("ECOSERVE_GEMV_PREFETCH"), 0);
  ASSERT_EQ(unsetenv("ECOSERVE_Q4K_TILE_PAIRS"), 0);
  EXPECT_EQ(*q4k_tile_pairs_from_env(), q4k_tile_pairs_for(cpu));
  for (auto [text, n] : {std::pair{"1", 1}, {"2", 2}}) {
    ASSERT_EQ(setenv("ECOSERVE_Q4K_TILE_PAIRS", text, 1), 0);
    EXPECT_EQ(*q4k_tile_pairs_from_env(), n) << text;
  }
  for (const char* text : {"0", "3", "-1", "two", "", "2 "}) {
    ASSERT_EQ(setenv("ECOSERVE_Q4K_TILE_PAIRS", text, 1), 0);
    const StatusOr<std::int32_t> bad = q4k_tile_pairs_from_env();
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(), fmt::format("ECOSERVE_Q4K_TILE_PAIRS: '{}' is not 1 or 2", text));
  }
  ASSERT_EQ(unsetenv("ECOSERVE_Q4K_TILE_PAIRS"), 0);
  // The three tokens-in-lanes switches: unset, 0, 1, and a bad value.
  struct Switch {
    const char* variable;
    StatusOr<bool> (*from_env)();
    bool (*for_cpu)(const CpuFeatures&);
  };
  for (const Switch& sw : {Switch{"ECOSERVE_Q8_LANES", &q8_lanes_from_env, &q8_lanes_for},
                           Switch{"ECOSERVE_Q4K_LANES", &q4k_lanes_from_env, &q4k_lanes_for},
                           Switch{"ECOSERVE_Q6K_LANES", &q6k_lanes_from_env, &q6k_lanes_for}}) {
    ASSERT_EQ(unsetenv(sw.variable), 0);
    EXPECT_EQ(*sw.from_env(), sw.for_cpu(cpu)) << sw.variable;
    for (auto [text, on] : {std::pair{"0", false}, {"1", true}}) {
      ASSERT_EQ(setenv(sw.variable, text, 1), 0);
      EXPECT_EQ(*sw.from_env(), on) << sw.variable << "=" << text;
    }
    ASSERT_EQ(setenv(sw.variable, "yes", 1), 0);
    const StatusOr<bool> bad = sw.from_env();
    ASSERT_FALSE(bad.ok()) << sw.variable;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(sw.variable), std::string::npos) << bad.status().message();
    ASSERT_EQ(unsetenv(sw.variable), 0);
  }
}

TEST(CpuFeaturesTest, EnvironmentCapsTheLevel) {
  ASSERT_EQ(setenv("ECOSERVE_ISA", "avx2", 1), 0);
  EXPECT_EQ(*isa_from_env(), Isa::kAvx2);
  ASSERT_EQ(setenv("ECOSERVE_ISA", "avx9000", 1), 0);
  const StatusOr<Isa> bad = isa_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("ECOSERVE_ISA: unknown ISA level 'avx9000'", 0), 0u) << bad.status().message();
  ASSERT_EQ(unsetenv("ECOSERVE_ISA"), 0);
  EXPECT_EQ(*isa_from_env(), best_isa(detect_cpu_features()));
}

}  // namespace
}  // namespace ecoserve::kernels
