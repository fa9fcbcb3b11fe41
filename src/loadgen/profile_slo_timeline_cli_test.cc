// The `ecoserve profile slo` and `ecoserve timeline --from` commands, run as the
// binary on files written here (no server, no model): exact output lines and
// exit codes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ecoserve::loadgen
