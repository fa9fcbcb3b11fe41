// `ecoserve plan`, run as the binary on a small case: the report's fixed lines, the
// JSON file, and errors (unknown model, missing SLO) with nothing on stdout.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/cli_test_util.h"

namespace ecoserve::sim {
namespace {

using testing::CliRun;

class PlanCli : public testing::CliTest {
 protected:
  CliRun plan(const std::vector<std::string>& args) { return run("plan", args); }
  std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::stringstream ss(text);
    for (std::string l; std::getline(ss, l);) out.push_back(l);
    return out;
  }
};

// Llama-2-7B on 2 A100s, 256 tokens in and 32 out, few and short probes.
const std::vector<std::string> kSmall = {
    "--model", "llama-2-7b", "--gpu", "a100-80gb", "--gpus", "2", "--gpus-per-node", "2",
    "--strategies", "nodg,fudg", "--input-len", "256", "--output-len", "32", "--num-prompts", "50",
    "--slo-ttft-ms", "300", "--slo-tpot-ms", "40", "--probe-requests", "100", "--max-probe-requests", "600",
    "--search-steps", "3"};

TEST_F(PlanCli, PrintsTheCandidatesAndTheRecommendation) {
  std::vector<std::string> args = kSmall;
  args.push_back("--json");
  args.push_back((dir_ / "plan.json").string());
  const CliRun r = plan(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << read("stderr.txt");
  const std::vector<std::string> l = lines(r.out);
  ASSERT_GE(l.size(), 7u) << r.out;
  EXPECT_EQ(l[0], "plan: llama-2-7b on 2 x a100-80gb (roofline cost model), 2 GPUs per node, nvlink, 100 Gb/s between nodes");
  EXPECT_EQ(l[1], "workload: 50 requests, mean 256 tokens in, 32 out; SLO: 90% within TTFT 300 ms and TPOT 40 ms");
  EXPECT_EQ(l[2], "  strategy layout                                 GPUs   goodput goodput/GPU  note");
  // nodg, fudg packed and fudg paired (one marked "*"), the recommendation, the time.
  ASSERT_EQ(l.size(), 8u) << r.out;
  int marked = 0;
  for (size_t i = 3; i < 6; ++i) marked += l[i].rfind("* ", 0) == 0;
  EXPECT_EQ(marked, 1) << r.out;
  EXPECT_EQ(l[6].rfind("recommended: ", 0), 0u) << r.out;
  EXPECT_NE(l[6].find(" because it has the most goodput per GPU"), std::string::npos) << r.out;
  EXPECT_EQ(l[7].rfind("planned in ", 0), 0u) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read("plan.json"));
  ASSERT_EQ(j["candidates"].size(), 3u);
  EXPECT_EQ(j["model"], "llama-2-7b");
  EXPECT_TRUE(j["recommended"].is_number());
  EXPECT_TRUE(j["candidates"][j["recommended"].get<size_t>()]["recommended"].get<bool>());
  EXPECT_FALSE(j["evaluations"].empty());
}

TEST_F(PlanCli, ErrorsGoToStderrWithExitCode1) {
  std::vector<std::string> args = kSmall;
  args[1] = "llama-9000";
  CliRun r = plan(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(read("stderr.txt").find("llama-9000"), std::string::npos) << read("stderr.txt");
  r = plan({"--model", "llama-2-7b", "--slo-ttft-ms", "300"});  // no TPOT limit
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  args = kSmall;
  args[9] = "nodg,banana";
  r = plan(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(read("stderr.txt").find("unknown strategy 'banana'"), std::string::npos) << read("stderr.txt");
}

}  // namespace
}  // namespace ecoserve::sim
