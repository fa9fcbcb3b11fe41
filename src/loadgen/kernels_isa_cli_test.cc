// The kernel path choice (kernels/cpu_features.h) through the binary:
// ECOSERVE_ISA and --isa refuse bad values with exit codes and messages, and
// every ISA level this CPU runs generates the same greedy text.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"

namespace ecoserve::loadgen {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
};

// Runs `env VARS... ecoserve ARGS...`; stderr goes to err_path.
CliRun run_cli(const std::vector<std::string>& env, const std::vector<std::string>& args, const std::string& err_path) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(std::string(ECOSERVE_BINARY_DIR) + "/ecoserve");
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p;
  SubprocessOptions o;
  o.stderr_path = err_path;
  CliRun r;
  if (!p.start(argv, o).ok()) return r;
  r.exit_code = p.wait(&r.out);
  return r;
}

std::string read_file(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

const std::string kModel = std::string(ECOSERVE_SHARED_DATA) + "/models/tinystories-656k-q8_0.gguf";

TEST(KernelsIsaCli, BadEnvironmentValueIsAnErrorNotAFallback) {
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_isa_env.err";
  const CliRun r = run_cli({"ECOSERVE_ISA=sse9"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(read_file(err),
            "error: ECOSERVE_ISA: unknown ISA level 'sse9' (valid: avx2, avxvnni, avx512vnni, avx512vnni-zmm, "
            "avx512amx, native)\n");
  std::filesystem::remove(err);
}

TEST(KernelsIsaCli, EveryLevelThisCpuRunsGeneratesTheSameText) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_isa_gen.err";
  std::string first, long_first;
  const char* kLongPrompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her mom";
  for (kernels::Isa isa : kernels::supported_isas(kernels::detect_cpu_features())) {
    const std::string name(kernels::isa_name(isa));
    const CliRun r = run_cli({}, {"generate", "-m", kModel, "-p", "Once upon a time", "-n", "48", "--isa", name}, err);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << read_file(err);
    EXPECT_NE(r.out.find("Lily"), std::string::npos) << name << ": " << r.out;
    if (first.empty()) {
      first = r.out;
    } else {
      EXPECT_EQ(r.out, first) << "--isa " << name << " differs from avx2";
    }
    // The environment variable selects the same path.
    const CliRun e =
        run_cli({"ECOSERVE_ISA=" + name}, {"generate", "-m", kModel, "-p", "Once upon a time", "-n", "48"}, err);
    EXPECT_EQ(e.out, r.out) << "ECOSERVE_ISA=" << name;
    // A prompt of 16+ tokens: its prefill runs avx512amx's AMX tiles where the CPU has them.
    const CliRun l = run_cli({}, {"generate", "-m", kModel, "-p", kLongPrompt, "-n", "16", "--isa", name}, err);
    ASSERT_EQ(l.exit_code, 0) << name << ": " << read_file(err);
    if (long_first.empty()) {
      long_first = l.out;
    } else {
      EXPECT_EQ(l.out, long_first) << "--isa " << name << " differs from avx2 on a long prompt";
    }
  }
  // --isa native is ECOSERVE_ISA's level, not the CPU's best, when the variable is set.
  const CliRun capped = run_cli({"ECOSERVE_ISA=avx2"},
                                {"profile", "engine", "-m", kModel, "-t", "1", "--batches", "1", "--prompt-len", "4",
                                 "--decode-steps", "1", "--repeats", "1", "--isa", "native", "--json"},
                                err);
  ASSERT_EQ(capped.exit_code, 0) << read_file(err);
  EXPECT_NE(capped.out.find("\"isa\": \"avx2\""), std::string::npos) << capped.out;
  // A level this CPU lacks is refused by name.
  for (kernels::Isa isa : kernels::all_isas()) {
    if (kernels::isa_supported(isa, kernels::detect_cpu_features())) continue;
    const std::string name(kernels::isa_name(isa));
    const CliRun r = run_cli({}, {"generate", "-m", kModel, "-p", "x", "-n", "1", "--isa", name}, err);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(read_file(err).find("ISA level '" + name + "' is not supported by this CPU"), std::string::npos)
        << read_file(err);
  }
  std::filesystem::remove(err);
}

// A bad ECOSERVE_GEMV_PREFETCH, ECOSERVE_GEMV_STREAMS, ECOSERVE_Q4K_TILE_PAIRS or
// ECOSERVE_ATTENTION_F32_WIDE or ECOSERVE_ATTENTION_ROW_PREFETCH stops
// the binary with exit code 2 and a message naming the variable, before any command runs.
TEST(KernelsIsaCli, BadKernelSettingIsAnError) {
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_gemv_env.err";
  const CliRun prefetch = run_cli({"ECOSERVE_GEMV_PREFETCH=100"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(prefetch.exit_code, 2);
  EXPECT_EQ(read_file(err), "error: ECOSERVE_GEMV_PREFETCH: '100' is not a multiple of 64 bytes in [0, 65536]\n");
  const CliRun streams = run_cli({"ECOSERVE_GEMV_STREAMS=3"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(streams.exit_code, 2);
  EXPECT_EQ(read_file(err), "error: ECOSERVE_GEMV_STREAMS: '3' is not 0 (the level's count), 2 or 4\n");
  const CliRun wide = run_cli({"ECOSERVE_ATTENTION_F32_WIDE=yes"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(wide.exit_code, 2);
  EXPECT_EQ(read_file(err), "error: ECOSERVE_ATTENTION_F32_WIDE: 'yes' is not 0 or 1\n");
  const CliRun order = run_cli({"ECOSERVE_ATTENTION_ROW_PREFETCH=2"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(order.exit_code, 2);
  EXPECT_EQ(read_file(err), "error: ECOSERVE_ATTENTION_ROW_PREFETCH: '2' is not 0 or 1\n");
  const CliRun tile = run_cli({"ECOSERVE_Q4K_TILE_PAIRS=3"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(tile.exit_code, 2);
  EXPECT_EQ(read_file(err), "error: ECOSERVE_Q4K_TILE_PAIRS: '3' is not 1 or 2\n");
  const CliRun bf16 = run_cli({"ECOSERVE_AMX_BF16=on"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(bf16.exit_code, 2);
  EXPECT_EQ(read_file(err), "error: ECOSERVE_AMX_BF16: 'on' is not 0 or 1\n");
  const CliRun matmul_bf16 = run_cli({"ECOSERVE_MATMUL_BF16=2"}, {"model", "info", "/nonexistent.gguf"}, err);
  EXPECT_EQ(matmul_bf16.exit_code, 2);
  EXPECT_EQ(read_file(err), "error: ECOSERVE_MATMUL_BF16: '2' is not 0 or 1\n");
  std::filesystem::remove(err);
}

// ECOSERVE_MATMUL_BF16 as model info reports it: on only at the avx512vnni-zmm level of a CPU
// with AVX512-BF16 (else it says why not), there on by default where vdpbf16ps is fast
// (CpuFeatures::fast_bf16_dot; else off, saying why).
TEST(KernelsIsaCli, MatmulBf16FromTheEnvironmentIsReported) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_matmul_bf16_info.err";
  const kernels::CpuFeatures cpu = kernels::detect_cpu_features();
  const bool supported = kernels::bf16_vectors_supported(cpu) && kernels::default_isa() == kernels::Isa::kAvx512VnniZmm;
  for (const char* value : {"0", "1"}) {
    const std::vector<std::string> env = {std::string("ECOSERVE_MATMUL_BF16=") + value};
    const CliRun json = run_cli(env, {"model", "info", "--json", kModel}, err);
    ASSERT_EQ(json.exit_code, 0) << read_file(err);
    const bool on = std::string(value) == "1";
    EXPECT_EQ(nlohmann::json::parse(json.out).at("kernels").at("matmul_bf16_vectors"), on && supported) << value;
    const CliRun text = run_cli(env, {"model", "info", kModel}, err);
    const std::string expect = !kernels::bf16_vectors_supported(cpu) ? "matmul bf16:          not on this CPU"
                               : on && cpu.fast_bf16_dot ? "matmul bf16:          on (ECOSERVE_MATMUL_BF16 unset or 1"
                               : on                      ? "matmul bf16:          on (ECOSERVE_MATMUL_BF16=1;"
                                                         : "matmul bf16:          off (ECOSERVE_MATMUL_BF16=0:";
    EXPECT_NE(text.out.find(expect), std::string::npos) << text.out;
  }
  const CliRun unset = run_cli({"-u", "ECOSERVE_MATMUL_BF16"}, {"model", "info", "--json", kModel}, err);
  ASSERT_EQ(unset.exit_code, 0) << read_file(err);
  // fast_bf16_dot is a measurement, made again in each process: compared within one.
  const nlohmann::json kernels_json = nlohmann::json::parse(unset.out).at("kernels");
  ASSERT_TRUE(kernels_json.at("fast_bf16_dot").is_boolean()) << kernels_json;
  EXPECT_EQ(kernels_json.at("matmul_bf16_vectors"), supported && kernels_json.at("fast_bf16_dot").get<bool>())
      << "on by default where vdpbf16ps is fast";
  if (!cpu.avx512_bf16) {
    EXPECT_FALSE(kernels_json.at("fast_bf16_dot").get<bool>());
  }
  const CliRun text = run_cli({"-u", "ECOSERVE_MATMUL_BF16"}, {"model", "info", kModel}, err);
  const bool slow = text.out.find("; vdpbf16ps slower than float FMAs)") != std::string::npos;
  if (kernels::bf16_vectors_supported(cpu) && slow) {
    EXPECT_NE(text.out.find("matmul bf16:          off (ECOSERVE_MATMUL_BF16 unset, and vdpbf16ps does under 0.7x"),
              std::string::npos)
        << text.out;
  }
  std::filesystem::remove(err);
}

// The decode attention's f32 width from the environment is the one model info reports,
// in text (with the variable as what chose it) and JSON.
TEST(KernelsIsaCli, AttentionF32WidthFromTheEnvironmentIsReported) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_attn_info.err";
  const bool zmm_on_cpu = kernels::isa_supported(kernels::Isa::kAvx512VnniZmm, kernels::detect_cpu_features());
  for (auto [value, bits] : {std::pair{"0", "256"}, {"1", "512"}}) {
    const std::vector<std::string> env = {std::string("ECOSERVE_ATTENTION_F32_WIDE=") + value};
    const CliRun json = run_cli(env, {"model", "info", "--json", kModel}, err);
    ASSERT_EQ(json.exit_code, 0) << read_file(err);
    EXPECT_EQ(nlohmann::json::parse(json.out).at("kernels").at("attention_f32_wide"), std::string(value) == "1");
    // The avx512vnni-zmm level's setting: its line there; below it (every CPU runs avx2), the
    // level's own 256-bit kernel, then the setting where the CPU has that level.
    const std::string zmm_line = std::string("fp16 KV on 512-bit registers, f32 KV on 512-bit for GQA groups of 8 and ") +
                                 bits + "-bit for groups of 2 and 4 (ECOSERVE_ATTENTION_F32_WIDE); GQA groups 2-8 and "
                                        "head_dim 64 or 128, else 256-bit\n";
    std::vector<std::string> env_avx2 = env;
    env_avx2.push_back("ECOSERVE_ISA=avx2");
    const CliRun avx2 = run_cli(env_avx2, {"model", "info", kModel}, err);
    EXPECT_NE(avx2.out.find("decode attention:     on avx2: f32 and fp16 KV on 256-bit registers" +
                            (zmm_on_cpu ? "; on avx512vnni-zmm: " + zmm_line : std::string("\n"))),
              std::string::npos)
        << avx2.out;
    if (zmm_on_cpu) {
      std::vector<std::string> env_zmm = env;
      env_zmm.push_back("ECOSERVE_ISA=avx512vnni-zmm");
      const CliRun text = run_cli(env_zmm, {"model", "info", kModel}, err);
      EXPECT_NE(text.out.find("decode attention:     on avx512vnni-zmm, " + zmm_line), std::string::npos) << text.out;
    }
  }
  std::filesystem::remove(err);
}

// ECOSERVE_AMX_BF16 as model info reports it: on only where the CPU has AMX-BF16 (else it
// says why not), there on by default; and a long prompt generates with it either way.
TEST(KernelsIsaCli, AmxBf16FromTheEnvironmentIsReported) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_bf16_info.err";
  const bool supported = kernels::amx_bf16_supported(kernels::detect_cpu_features());
  for (const char* value : {"0", "1"}) {
    const std::vector<std::string> env = {std::string("ECOSERVE_AMX_BF16=") + value};
    const CliRun json = run_cli(env, {"model", "info", "--json", kModel}, err);
    ASSERT_EQ(json.exit_code, 0) << read_file(err);
    const bool on = std::string(value) == "1" && supported;
    EXPECT_EQ(nlohmann::json::parse(json.out).at("kernels").at("amx_bf16"), on) << value;
    const CliRun text = run_cli(env, {"model", "info", kModel}, err);
    const std::string expect = !supported ? "amx bf16:             not on this CPU"
                               : on       ? "amx bf16:             on (ECOSERVE_AMX_BF16 unset or 1"
                                          : "amx bf16:             off (ECOSERVE_AMX_BF16=0:";
    EXPECT_NE(text.out.find(expect), std::string::npos) << text.out;
    // 32+ prompt tokens: the bf16 tiles run where the CPU has them.
    const CliRun gen = run_cli(env,
                               {"generate", "-m", kModel, "-n", "8", "-p",
                                "Once upon a time, there was a little girl named Lily. She loved to play outside in "
                                "the park with her mom and her dog. One day, she saw a big red ball under a tall "
                                "tree near the"},
                               err);
    ASSERT_EQ(gen.exit_code, 0) << read_file(err);
    const std::string log = read_file(err);
    const size_t at = log.find("prompt ");
    ASSERT_NE(at, std::string::npos) << log;
    EXPECT_GE(std::stoi(log.substr(at + 7)), 32) << log;
    EXPECT_GT(gen.out.size(), 150u) << gen.out;
  }
  const CliRun unset = run_cli({"-u", "ECOSERVE_AMX_BF16"}, {"model", "info", "--json", kModel}, err);
  ASSERT_EQ(unset.exit_code, 0) << read_file(err);
  EXPECT_EQ(nlohmann::json::parse(unset.out).at("kernels").at("amx_bf16"), supported) << "on by default";
  std::filesystem::remove(err);
}

// The GEMV settings from the environment are the ones model info reports, and they
// change only timing: the greedy text is the same with none and with every line prefetched.
TEST(KernelsIsaCli, GemvSettingsFromTheEnvironmentRunAndAreReported) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_gemv_info.err";
  const std::vector<std::string> env = {"ECOSERVE_GEMV_STREAMS=2", "ECOSERVE_GEMV_PREFETCH=2048",
                                        "ECOSERVE_Q4K_TILE_PAIRS=2", "ECOSERVE_Q8_LANES=0", "ECOSERVE_Q4K_LANES=1",
                                        "ECOSERVE_Q6K_LANES=0"};
  const CliRun json = run_cli(env, {"model", "info", "--json", kModel}, err);
  ASSERT_EQ(json.exit_code, 0) << read_file(err);
  const nlohmann::json k = nlohmann::json::parse(json.out).at("kernels");
  EXPECT_EQ(k.at("gemv_streams"), 2);
  EXPECT_EQ(k.at("gemv_prefetch"), 2048);
  EXPECT_EQ(k.at("q4k_tile_pairs"), 2);
  EXPECT_EQ(k.at("q8_lanes"), false);
  EXPECT_EQ(k.at("q4k_lanes"), true);
  EXPECT_EQ(k.at("q6k_lanes"), false);
  const bool gfni = kernels::detect_cpu_features().gfni;
  EXPECT_EQ(k.at("q4k_gfni"), gfni);
  const CliRun text = run_cli(env, {"model", "info", kModel}, err);
  EXPECT_NE(text.out.find("int8 gemv:            batch-1 decode of Q8_0 / Q4_K (read in rows of 8) on 2 weight "
                          "streams (ECOSERVE_GEMV_STREAMS)\n"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("gemv prefetch:        batch-1 to 4 decode, every weight type: 2048 bytes ahead "
                          "(ECOSERVE_GEMV_PREFETCH)\n"),
            std::string::npos)
      << text.out;
  // The tile settings are the avx512vnni-zmm level's: reported as its tiles there, and below it
  // after the level's own compiled tiles (with them as that level's where the CPU has it).
  const std::string q4k = std::string("2 pairs of 8-row groups x 3 tokens") +
                          (gfni ? ", GFNI nibbles and vpdpwssd scales" : "") +
                          ", tokens in lanes from 32 tokens (ECOSERVE_Q4K_TILE_PAIRS, ECOSERVE_Q4K_LANES)";
  const std::string q8 = "2 pairs of 8-row groups x 7 tokens (ECOSERVE_Q8_LANES)";
  const std::string q6k = "4 rows x 6 tokens in pairs (ECOSERVE_Q6K_LANES)";
  const bool zmm_on_cpu = kernels::isa_supported(kernels::Isa::kAvx512VnniZmm, kernels::detect_cpu_features());
  std::vector<std::string> env_avx2 = env;
  env_avx2.push_back("ECOSERVE_ISA=avx2");
  const CliRun avx2 = run_cli(env_avx2, {"model", "info", kModel}, err);
  ASSERT_EQ(avx2.exit_code, 0) << read_file(err);
  const std::string zmm_q4k = zmm_on_cpu ? "; on avx512vnni-zmm: " + q4k : "";
  const std::string zmm_q8 = zmm_on_cpu ? "; on avx512vnni-zmm: " + q8 : "";
  const std::string zmm_q6k = zmm_on_cpu ? "; on avx512vnni-zmm: " + q6k : "";
  EXPECT_NE(avx2.out.find("q4_k tiles:           5+ tokens on avx2: 2 groups of 8 rows x 3 tokens (the level's own)" +
                          zmm_q4k + "\n"),
            std::string::npos)
      << avx2.out;
  EXPECT_NE(avx2.out.find("q8_0 tiles:           5+ tokens on avx2: 2 groups of 8 rows x 3 tokens (the level's own)" +
                          zmm_q8 + "\n"),
            std::string::npos)
      << avx2.out;
  EXPECT_NE(avx2.out.find("q6_k tiles:           5+ tokens on avx2: 2 rows x 4 tokens (the level's own)" + zmm_q6k +
                          "\n"),
            std::string::npos)
      << avx2.out;
  if (zmm_on_cpu) {
    std::vector<std::string> env_zmm = env;
    env_zmm.push_back("ECOSERVE_ISA=avx512vnni-zmm");
    const CliRun zmm = run_cli(env_zmm, {"model", "info", kModel}, err);
    ASSERT_EQ(zmm.exit_code, 0) << read_file(err);
    EXPECT_NE(zmm.out.find("q4_k tiles:           5+ tokens on avx512vnni-zmm: " + q4k + "\n"), std::string::npos)
        << zmm.out;
    EXPECT_NE(zmm.out.find("q8_0 tiles:           5+ tokens on avx512vnni-zmm: " + q8 + "\n"), std::string::npos)
        << zmm.out;
    EXPECT_NE(zmm.out.find("q6_k tiles:           5+ tokens on avx512vnni-zmm: " + q6k + "\n"), std::string::npos)
        << zmm.out;
  }
  const CliRun profile = run_cli(env,
                                 {"profile", "engine", "-m", kModel, "-t", "1", "--batches", "1", "--prompt-len", "4",
                                  "--decode-steps", "1", "--repeats", "1", "--json"},
                                 err);
  ASSERT_EQ(profile.exit_code, 0) << read_file(err);
  EXPECT_NE(profile.out.find("\"q4k_tile_pairs\": 2"), std::string::npos) << profile.out;
  EXPECT_NE(profile.out.find("\"q8_lanes\": false"), std::string::npos) << profile.out;
  EXPECT_NE(profile.out.find("\"q4k_lanes\": true"), std::string::npos) << profile.out;
  EXPECT_NE(profile.out.find("\"q6k_lanes\": false"), std::string::npos) << profile.out;
  EXPECT_NE(profile.out.find(gfni ? "\"q4k_gfni\": true" : "\"q4k_gfni\": false"), std::string::npos) << profile.out;
  EXPECT_NE(profile.out.find("\"gemv_prefetch\": 2048"), std::string::npos) << profile.out;
  const std::vector<std::string> gen = {"generate", "-m", kModel, "-p", "Once upon a time", "-n", "32"};
  const CliRun none = run_cli({"ECOSERVE_GEMV_PREFETCH=0"}, gen, err);
  ASSERT_EQ(none.exit_code, 0) << read_file(err);
  const CliRun far = run_cli({"ECOSERVE_GEMV_PREFETCH=65536", "ECOSERVE_GEMV_STREAMS=4"}, gen, err);
  ASSERT_EQ(far.exit_code, 0) << read_file(err);
  EXPECT_NE(none.out.find("Lily"), std::string::npos) << none.out;
  EXPECT_EQ(far.out, none.out);
  std::filesystem::remove(err);
}

// `model info` says which kernels run float-weight matmuls, which OpenBLAS kernels
// are loaded and whether the CPU's 512-bit units run at full rate; OPENBLAS_CORETYPE is
// OpenBLAS's own choice, which ecoserve leaves to the user.
TEST(KernelsIsaCli, ModelInfoNamesTheOpenBlasKernelsAndTheVectorWidth) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  const std::string err = std::filesystem::temp_directory_path() / "ecoserve_isa_blas.err";
  const CliRun r = run_cli({"OPENBLAS_CORETYPE=Haswell"}, {"model", "info", "--json", kModel}, err);
  ASSERT_EQ(r.exit_code, 0) << read_file(err);
  const nlohmann::json k = nlohmann::json::parse(r.out).at("kernels");
  EXPECT_EQ(k.at("openblas_core"), "Haswell");
  EXPECT_EQ(k.at("float_matmul"), kernels::float_matmul_kernels_summary(kernels::default_isa())) << k;
  // A measurement (kernels::int8_512bit_full_rate), so only its presence is checked across processes.
  EXPECT_TRUE(k.at("full_rate_512").is_boolean());
  const CliRun text = run_cli({"OPENBLAS_CORETYPE=Haswell"}, {"model", "info", kModel}, err);
  EXPECT_NE(text.out.find("openblas:             Haswell kernels (prefill attention of head sizes not a multiple of "
                          "16)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("float matmul:         " + kernels::float_matmul_kernels_summary(kernels::default_isa())),
            std::string::npos)
      << text.out;
  // ECOSERVE_ISA caps the level, and the float kernels follow it.
  const CliRun avx2 = run_cli({"ECOSERVE_ISA=avx2"}, {"model", "info", kModel}, err);
  EXPECT_NE(avx2.out.find("float matmul:         gemv up to 4 tokens, tiles from 5\n"), std::string::npos)
      << avx2.out;
  std::filesystem::remove(err);
}

}  // namespace
}  // namespace ecoserve::loadgen
