// `ecoserve simulate cost`, run as the binary: exact output for a case no profile
// covers (so the lines depend only on the presets and the roofline constants),
// the profile's line on an H100 when the shared data is there, the JSON agreeing
// with the in-process models, and the errors.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "base/test_data.h"
#include "sim/gpu_profile_cost_model.h"
#include "sim/roofline_cost_model.h"

namespace ecoserve::sim {
namespace {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliRun run_cli(const std::vector<std::string>& args) {
  const std::string binary = std::string(ECOSERVE_BINARY_DIR) + "/ecoserve";
  const std::string err_path =
      (std::filesystem::temp_directory_path() / ("ecoserve_simulate_cost_" + std::to_string(::getpid()) + ".err"))
          .string();
  std::vector<std::string> argv = {binary, "simulate", "cost"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p;
  CliRun r;
  if (!p.start(argv, SubprocessOptions{.stderr_path = err_path}).ok()) return r;
  r.exit_code = p.wait(&r.out);
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

TEST(SimulateCostCli, PrintsTheRooflineBreakdownAndWhyTheProfileDoesNotApply) {
  const CliRun r = run_cli({"--model", "llama-2-7b", "--gpu", "a100-80gb", "--prefill-tokens", "512",
                            "--prefill-context", "256", "--decode-batch", "32", "--decode-context", "1024"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "model: llama-2-7b (32 layers, 6.74B params = 12.55 GiB, KV 512 KiB per token)\n"
            "instance: 1 x a100-80gb (tp=1, pp=1; nvlink 300 GB/s per direction)\n"
            "kv capacity: 119704 tokens (90% of each GPU's 80.0 GiB, after 12.55 GiB of weights and a 1.0 GiB "
            "reserve)\n"
            "step: prefill 512 tokens over 256 cached + decode 32 x 1024 context tokens\n"
            "roofline: 47.800 ms = compute 28.267 + memory 16.423 + overhead 3.110 + tp comm 0.000 + pp comm 0.000 ms\n"
            "  qkv               214.1 us per layer (compute)\n"
            "  attn_prefill       16.9 us per layer (compute)\n"
            "  attn_decode       285.9 us per layer (memory)\n"
            "  o                  71.4 us per layer (compute)\n"
            "  mlp_up            383.6 us per layer (compute)\n"
            "  mlp_down          191.8 us per layer (compute)\n"
            "  elementwise       227.4 us per layer (memory)\n"
            "  lm_head           178.0 us once     (compute)\n"
            "h100-profile: not covered: the profile was measured on h100-sxm, not a100-80gb\n");
  // The total is the in-process roofline's.
  auto model = RooflineCostModel::create(*model_preset("llama-2-7b"), *gpu_preset("a100-80gb"));
  ASSERT_TRUE(model.ok());
  const double ms = (*model)->step_seconds({.prefill_seqs = 1,
                                            .prefill_tokens = 512,
                                            .prefill_context_tokens = 256,
                                            .decode_seqs = 32,
                                            .decode_context_tokens = 32 * 1024}) *
                    1e3;
  EXPECT_NE(r.out.find(fmt::format("roofline: {:.3f} ms", ms)), std::string::npos);
}

TEST(SimulateCostCli, ProfileLineOnAnH100) {
  // Without the profile directory: the reason, and the exit is still 0.
  CliRun r = run_cli({"--model", "Llama-2-7B", "--gpu", "H100-SXM", "--decode-batch", "1", "--decode-context", "1024",
                      "--profile-dir", "/nonexistent/h100-bf16"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nh100-profile: not covered: profile directory /nonexistent/h100-bf16 not found (pass "
                       "--profile-dir)\n"),
            std::string::npos)
      << r.out;
  // A shape the profile never measured.
  r = run_cli({"--model", "opt-13b", "--gpu", "h100-sxm", "--decode-batch", "1", "--decode-context", "10"});
  EXPECT_NE(r.out.find("\nh100-profile: not covered: no profiled model has opt-13b's shape (profiled: llama2-7b, "
                       "llama3-8b, llama2-13b, qwen2-7b, llama2-70b)\n"),
            std::string::npos)
      << r.out;

  constexpr const char* kMeta = "profiles/h100-bf16/meta.json";
  if (!shared_data_path(kMeta)) GTEST_SKIP() << missing_data_message(kMeta);
  const std::string dir = std::filesystem::path(*shared_data_path(kMeta)).parent_path().string();
  r = run_cli({"--model", "llama-2-70b", "--gpu", "h100-sxm", "--tp", "2", "--decode-batch", "8", "--decode-context",
               "1000", "--profile-dir", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nh100-profile: not covered: gpu profile " + dir +
                       " has no tp=2 for llama2-70b (profiled: tp 4, 8)\n"),
            std::string::npos)
      << r.out;
  // Covered: the JSON's numbers are the in-process models'.
  r = run_cli({"--model", "llama-2-7b", "--gpu", "h100-sxm", "--prefill-tokens", "300", "--decode-batch", "16",
               "--decode-context", "2000", "--profile-dir", dir, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  const policy::StepShape shape{
      .prefill_seqs = 1, .prefill_tokens = 300, .decode_seqs = 16, .decode_context_tokens = 16 * 2000};
  auto profile = GpuProfileCostModel::load(dir, "llama2-7b", 1);
  ASSERT_TRUE(profile.ok());
  auto roofline = RooflineCostModel::create(*model_preset("llama-2-7b"), *gpu_preset("h100-sxm"));
  ASSERT_EQ(j["predictions"].size(), 2u);
  EXPECT_EQ(j["predictions"][0]["name"], "roofline");
  EXPECT_DOUBLE_EQ(j["predictions"][0]["step_seconds"].get<double>(), (*roofline)->step_seconds(shape));
  EXPECT_EQ(j["predictions"][1]["name"], "h100-profile");
  EXPECT_EQ(j["predictions"][1]["covered"], true);
  EXPECT_DOUBLE_EQ(j["predictions"][1]["step_seconds"].get<double>(), (*profile)->step_seconds(shape));
  EXPECT_EQ(j["kv_capacity_tokens"], 119704);
}

TEST(SimulateCostCli, Errors) {
  CliRun r = run_cli({"--model", "gpt-5", "--gpu", "h100-sxm", "--decode-batch", "1", "--decode-context", "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "error: unknown model preset 'gpt-5' (known: opt-13b, opt-66b, opt-175b, llama-2-7b, llama-2-13b, "
            "llama-2-70b, llama-30b, codellama-34b, llama-3-8b, llama-3-70b, qwen2-7b, qwen2-72b)\n");
  r = run_cli({"--model", "llama-2-7b", "--gpu", "v100", "--decode-batch", "1", "--decode-context", "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: unknown gpu preset 'v100' (known: a100-80gb, a800, h100-sxm, h200, l20, l40s)\n");
  r = run_cli(
      {"--model", "llama-2-7b", "--gpu", "h100-sxm", "--tp", "3", "--decode-batch", "1", "--decode-context", "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: model 'llama-2-7b': tp=3 does not divide its 32 attention heads\n");
  r = run_cli({"--model", "llama-2-7b", "--gpu", "h100-sxm"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: nothing to run: give --prefill-tokens and/or --decode-batch\n");
  r = run_cli({"--model", "llama-2-7b", "--gpu", "h100-sxm", "--decode-batch", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: --decode-context must be >= 1 when --decode-batch is > 0\n");
}

}  // namespace
}  // namespace ecoserve::sim
