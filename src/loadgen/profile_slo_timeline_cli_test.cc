// The `ecoserve profile slo` and `ecoserve timeline --from` commands, run as the
// binary on files written here (no server, no model): exact output lines and
// exit codes; and `ecoserve profile engine --phases` on the TinyStories model: every
// test's step time split into the engine's phases (engine::StepPhase), in JSON and text,
// with --roofline the linear layers' and attention's own bounds and the peaks' drift.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"

namespace ecoserve::loadgen {
namespace {

std::string ecoserve_binary() { return std::string(ECOSERVE_BINARY_DIR) + "/ecoserve"; }

struct CliRun {
  int exit_code = -1;
  std::string out;
};

CliRun run_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {ecoserve_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p;
  SubprocessOptions o;
  o.stderr_path = "/dev/null";
  CliRun r;
  if (!p.start(argv, o).ok()) return r;
  r.exit_code = p.wait(&r.out);
  return r;
}

class CliFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ecoserve_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::filesystem::path dir_;
};

TEST_F(CliFiles, ProfileSloDerivesTheTable4SlosFromASavedProfile) {
  // Prefill 4 ms + 1 ms per token (one context row); a batch-1 decode step 6 ms.
  const std::string profile = write("p.json", R"({"version": 1, "model_id": "m:1", "machine": "test", "threads": 1,
    "kv_cache_dtype": "f32",
    "prefill": [{"tokens": 16, "context": 0, "seconds": 0.020}, {"tokens": 32, "context": 0, "seconds": 0.036}],
    "decode": [{"batch": 1, "context": 32, "seconds": 0.006}, {"batch": 2, "context": 32, "seconds": 0.010}]})");
  // alpaca x 0.5: a mean prompt of round(20.63 x 0.5) = 10 tokens, prefilled in
  // 20 - 6 x 1 = 14 ms (the first segment's line): TTFT 5 x 14 = 70 ms; TPOT 5 x 6.
  CliRun r = run_cli({"profile", "slo", "--profile", profile, "--preset", "alpaca", "--length-scale", "0.5"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "slo_ttft_ms=70 slo_tpot_ms=30\n");
  // Explicit lengths and factors: a 100-token prompt is 104 ms; x 2 = 208; TPOT 3 x 6.
  r = run_cli({"profile", "slo", "--profile", profile, "--input-len", "100", "--output-len", "20", "--ttft-factor", "2",
           "--tpot-factor", "3"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "slo_ttft_ms=208 slo_tpot_ms=18\n");
  // No workload, a bad one, and a file that is not a profile: exit 1, nothing on stdout.
  EXPECT_EQ(run_cli({"profile", "slo", "--profile", profile}).exit_code, 1);
  EXPECT_EQ(run_cli({"profile", "slo", "--profile", profile, "--preset", "banana"}).exit_code, 1);
  const CliRun bad = run_cli({"profile", "slo", "--profile", write("bad.json", "{\"prefill\": 3}"), "--preset", "alpaca"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out, "");
}

TEST_F(CliFiles, TimelineFromASavedFileDrawsAndSummarizes) {
  const std::string timeline = write("t.json", R"({"seconds": 10, "instances": [
    {"name": "a", "steps": [[0.0, 1.0, 100, 0], [2.0, 1.0, 50, 3]]},
    {"name": "b", "steps": [[0.5, 1.0, 30, 0, 1, 0, 1], [2.0, 1.0, 0, 8, 0, 8, 2]]}]})");
  const std::string svg = (dir_ / "t.svg").string();
  CliRun r = run_cli({"timeline", "--from", timeline, "-o", svg});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("wrote " + svg + ": 2 instance(s), 4 steps\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  instance b: busy 67%, prompt work 33% (1 of 2 steps)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at once: 16.7% of the time (22.2% if they were independent)"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(svg));
  // Without -o only the summary; a file that is not a timeline fails.
  r = run_cli({"timeline", "--from", timeline});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.find("wrote"), std::string::npos);
  EXPECT_NE(r.out.find("over 3.0 s:"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli({"timeline", "--from", write("x.json", "[1, 2]")}).exit_code, 1);
  EXPECT_EQ(run_cli({"timeline", "--from", write("y.json", "not json")}).exit_code, 1);
}

const std::string kModel = std::string(ECOSERVE_SHARED_DATA) + "/models/tinystories-656k-q8_0.gguf";
const std::vector<std::string> kSmall = {"profile", "engine", "-m",       kModel, "-t",    "1",  "--prompt-len",
                                         "48",      "--batches", "1", "4", "--decode-steps", "3", "--repeats", "1"};
const char* const kPhaseKeys[] = {"linear", "attention", "output", "sampling", "other"};

// How many times `needle` occurs in `text`.
size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(needle, at)) != std::string::npos; ++at) ++n;
  return n;
}

TEST(ProfileEngineCli, PhasesSplitEveryTestsStep) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  std::vector<std::string> args = kSmall;
  args.insert(args.end(), {"--phases", "--roofline", "--json"});
  const CliRun r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);  // pp48, batch 1, batch 4
  for (const auto& test : j) {
    SCOPED_TRACE(test.at("test").get<std::string>());
    const nlohmann::json& p = test.at("phases");
    ASSERT_EQ(p.size(), 5u);
    double share = 0;
    for (const char* key : kPhaseKeys) {
      const nlohmann::json& e = p.at(key);
      EXPECT_GE(e.at("seconds_per_step").get<double>(), 0.0) << key;
      share += e.at("share").get<double>();
      // Only the linear layers and attention have a bound of their own.
      const bool bounded = std::string(key) == "linear" || std::string(key) == "attention";
      EXPECT_EQ(e.contains("roofline_pct"), bounded) << key;
    }
    EXPECT_NEAR(share, 1.0, 1e-9);
    // The peaks measured again at the end, on every row.
    EXPECT_TRUE(test.at("fma_peak_drift_pct").is_number());
    EXPECT_TRUE(test.at("read_drift_pct").is_number());
    // Every step runs the layers' matmuls, attention and the sampled rows' output layer.
    for (const char* key : {"linear", "attention", "output"}) {
      EXPECT_GT(p.at(key).at("seconds_per_step").get<double>(), 0.0) << key;
    }
  }
  // The phases of a step are its wall time: together no more than the test's own time.
  const nlohmann::json& b4 = j.at(2);
  double per_step = 0;
  for (const char* key : kPhaseKeys) per_step += b4.at("phases").at(key).at("seconds_per_step").get<double>();
  EXPECT_LE(per_step, 4.0 / b4.at("tokens_per_second").get<double>() * 1.0001);
}

// A decode row's step times: min <= median <= p90 <= max (nearest ranks of the steps), the
// median's tokens/s is the batch over the median step, and the mean (tokens/s over all the
// steps, with the loop between them) lies between the fastest step and the slowest plus
// that loop. The prompt, timed as a whole, has none.
TEST(ProfileEngineCli, DecodeRowsGiveTheirStepSpread) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  std::vector<std::string> args = kSmall;
  args.push_back("--json");
  const CliRun r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_FALSE(j.at(0).contains("step_seconds"));
  EXPECT_FALSE(j.at(0).contains("median_tokens_per_second"));
  for (int i : {1, 2}) {
    const nlohmann::json& row = j.at(i);
    SCOPED_TRACE(row.at("test").get<std::string>());
    const double batch = i == 1 ? 1.0 : 4.0;
    const nlohmann::json& s = row.at("step_seconds");
    const double mn = s.at("min").get<double>(), med = s.at("median").get<double>(), p90 = s.at("p90").get<double>(),
                 mx = s.at("max").get<double>();
    EXPECT_GT(mn, 0.0);
    EXPECT_LE(mn, med);
    EXPECT_LE(med, p90);
    EXPECT_LE(p90, mx);
    // 3 steps: the median is the second fastest, p90 the slowest.
    EXPECT_EQ(p90, mx);
    EXPECT_DOUBLE_EQ(row.at("median_tokens_per_second").get<double>(), batch / med);
    const double mean_step = batch / row.at("tokens_per_second").get<double>();
    EXPECT_GE(mean_step, mn);
    EXPECT_LE(mean_step, mx + 0.05);
  }
  // In text, one line per decode row.
  const CliRun text = run_cli(kSmall);
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_EQ(occurrences(text.out, "steps: median "), 2u) << text.out;
  EXPECT_NE(text.out.find(" tokens/s, p90 "), std::string::npos) << text.out;
}

// `model synth --context-length` writes a model that takes long contexts, so `profile
// engine --context` measures decode attention at 4k+ positions in the engine; the
// preset's 2048 refuses them, and a negative length is a usage error that writes nothing.
TEST_F(CliFiles, SynthContextLengthLetsProfileEngineDecodeLongContexts) {
  const std::string vocab = std::string(ECOSERVE_SHARED_DATA) + "/vocab/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(vocab)) GTEST_SKIP() << "shared data missing: " << vocab;
  const std::string longer = (dir_ / "long.gguf").string(), plain = (dir_ / "plain.gguf").string();
  const CliRun w = run_cli({"model", "synth", "--preset", "tiny", "--vocab", vocab, "--context-length", "8192", "-o",
                            longer});
  ASSERT_EQ(w.exit_code, 0) << w.out;
  EXPECT_NE(w.out.find(", context 8192, "), std::string::npos) << w.out;
  ASSERT_EQ(run_cli({"model", "synth", "--preset", "tiny", "--vocab", vocab, "-o", plain}).exit_code, 0);
  const CliRun info = run_cli({"model", "info", longer, "--json"});
  ASSERT_EQ(info.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(info.out).at("context_length").get<int>(), 8192) << info.out;

  const std::vector<std::string> profile = {
      "profile", "engine",    "-t", "1", "--prompt-len",     "8",   "--batches", "1", "--context", "6000",
      "--decode-steps", "2", "--repeats", "1", "--kv-cache-dtype", "f16", "--json",    "-m"};
  std::vector<std::string> args = profile;
  args.push_back(longer);
  const CliRun r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j.at(1).at("context").get<int>(), 6000);
  EXPECT_EQ(j.at(1).at("kv_cache_type").get<std::string>(), "f16");
  EXPECT_GT(j.at(1).at("tokens_per_second").get<double>(), 0.0);
  args = profile;
  args.push_back(plain);
  EXPECT_EQ(run_cli(args).exit_code, 1);

  const std::string bad = (dir_ / "bad.gguf").string();
  EXPECT_NE(run_cli({"model", "synth", "--preset", "tiny", "--vocab", vocab, "--context-length", "-5", "-o", bad})
                .exit_code,
            0);
  EXPECT_FALSE(std::filesystem::exists(bad));
}

TEST(ProfileEngineCli, PhasesInTextOnlyWhenAsked) {
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "shared data missing: " << kModel;
  std::vector<std::string> args = kSmall;
  args.push_back("--phases");
  const CliRun with = run_cli(args);
  ASSERT_EQ(with.exit_code, 0) << with.out;
  EXPECT_EQ(occurrences(with.out, "phases per step: linear layers "), 3u) << with.out;
  EXPECT_NE(with.out.find(", attention "), std::string::npos);
  EXPECT_EQ(with.out.find("of its roofline"), std::string::npos) << "bounds only with --roofline";
  EXPECT_EQ(with.out.find("peaks measured again"), std::string::npos) << "only with --roofline";
  const CliRun without = run_cli(kSmall);
  ASSERT_EQ(without.exit_code, 0);
  EXPECT_EQ(without.out.find("phases per step"), std::string::npos) << without.out;
}

}  // namespace
}  // namespace ecoserve::loadgen
