// `ecoserve simulate`, run as the binary: exact report lines from a hand-made CPU
// profile, byte-identical JSON for the same seed, config errors.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/cli_test_util.h"

namespace ecoserve::sim {
namespace {

using testing::CliRun;

class SimulateCli : public testing::CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    // Prefill: 20 ms for 16 tokens, 36 ms for 32; a decode step 6 ms (one row: constant).
    profile_ = write("p.json", R"({"version": 1, "model_id": "m:1", "machine": "test", "threads": 1,
      "kv_cache_dtype": "f32",
      "prefill": [{"tokens": 16, "context": 0, "seconds": 0.020}, {"tokens": 32, "context": 0, "seconds": 0.036}],
      "decode": [{"batch": 1, "context": 32, "seconds": 0.006}, {"batch": 2, "context": 32, "seconds": 0.006}]})");
  }
  CliRun simulate(const std::vector<std::string>& args) { return run("simulate", args); }
  std::string config(const std::string& extra) {
    return write("c.yaml", "strategy: nodg\ncost_model: cpu-profile\ncost_profile: " + profile_ +
                               "\nkv_blocks: 64\nmax_context: 256\nkv_bytes_per_token: 1024\n"
                               "dataset: synthetic\n" + extra);
  }
  std::string profile_;
};

TEST_F(SimulateCli, OneRequestGivesTheProfilesTimes) {
  // One 32-token prompt, 3 tokens: TTFT = P(32) = 36 ms; then two 6 ms decode steps.
  // (prompt_extra_tokens 0: the prompt as asked, without the BOS token serve would add.)
  const CliRun r = simulate({"--config", config("input_len: 32\noutput_len: 3\nnum_prompts: 1\n"),
                             "--prompt-extra-tokens", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Successful requests:                     1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Total input tokens:                      32\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Mean TTFT (ms):                          36.00\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Mean TPOT (ms):                          6.00\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Mean E2EL (ms):                          48.00\n"), std::string::npos) << r.out;
}

TEST_F(SimulateCli, CpuProfileRunsLikeServe) {
  // With a CPU profile every prompt gets serve's BOS token, the scheduler limits are
  // serve's, and under padg every request carries serve's derived SLOs: TPOT 5 x a
  // batch-1 decode (6 ms), TTFT max(1 s, 5 x the prefill of half the context).
  const std::string json_path = (dir_ / "padg.json").string();
  const CliRun r = simulate({"--config", config("strategy: padg\ninstances: 2\ninput_len: 32\noutput_len: 3\n"
                                                "num_prompts: 1\n"),
                             "--result-json", json_path});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Total input tokens:                      33\n"), std::string::npos) << r.out;
  const std::string j = read("padg.json");
  EXPECT_NE(j.find("\"max_num_seqs\": 64,"), std::string::npos);
  EXPECT_NE(j.find("\"max_num_batched_tokens\": 512,"), std::string::npos);
  EXPECT_NE(j.find("\"chunk_size\": 0,"), std::string::npos);
  EXPECT_NE(j.find("\"prompt_extra_tokens\": 1,"), std::string::npos);
  EXPECT_NE(j.find("\"request_slo_tpot_ms\": 30.0"), std::string::npos) << j.substr(0, 3000);
  EXPECT_NE(j.find("\"request_slo_ttft_ms\": 1000.0"), std::string::npos) << j.substr(0, 3000);
}

TEST_F(SimulateCli, ClusterFlagsAreCheckedAsServeChecksThem) {
  CliRun r = simulate({"--config", config("strategy: llumnix\ninstances: 2\n"), "--migrate-source-freeness", "20",
                       "--migrate-destination-freeness", "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ecoserve simulate: --migrate-source-freeness must be below --migrate-destination-freeness\n");
  r = simulate({"--config", config("instances: 2\n"), "--scale-up-freeness", "2", "--scale-down-freeness", "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ecoserve simulate: --scale-up-freeness/--scale-down-freeness need --strategy llumnix\n");
  r = simulate({"--config", config("strategy: llumnix\ninstances: 2\n"), "--migration-choice", "random"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown migration_choice 'random'"), std::string::npos) << r.err;
}

TEST_F(SimulateCli, FlagsWinOverTheConfig) {
  const CliRun r = simulate({"--config", config("input_len: 32\noutput_len: 3\nnum_prompts: 1\n"), "--num-prompts", "4",
                          "--rate", "1000"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("Successful requests:                     4\n"), std::string::npos) << r.out;
}

TEST_F(SimulateCli, SameSeedGivesByteIdenticalJson) {
  const std::string c = config("instances: 2\ninput_len: uniform:16:64\noutput_len: uniform:1:20\n"
                               "num_prompts: 60\nrate: 20\nseed: 5\n");
  const std::string a = (dir_ / "a.json").string(), b = (dir_ / "b.json").string();
  ASSERT_EQ(simulate({"--config", c, "--result-json", a}).exit_code, 0);
  ASSERT_EQ(simulate({"--config", c, "--result-json", b}).exit_code, 0);
  const std::string ja = read("a.json"), jb = read("b.json");
  EXPECT_GT(ja.size(), 1000u);
  EXPECT_EQ(ja, jb);
  const std::string other = (dir_ / "c.json").string();
  ASSERT_EQ(simulate({"--config", c, "--seed", "6", "--result-json", other}).exit_code, 0);
  EXPECT_NE(read("c.json"), ja) << "another seed must give another run";
}

TEST_F(SimulateCli, SweepRatePrintsOneRowPerRate) {
  const CliRun r = simulate({"--config", config("input_len: 32\noutput_len: 4\nnum_prompts: 40\nslo_ttft_ms: 100\n"
                                             "slo_tpot_ms: 20\n"),
                          "--sweep-rate", "1,100"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\n1            1.000"), std::string::npos) << r.out;  // all attain at 1 req/s
  EXPECT_NE(r.out.find("\n100          0."), std::string::npos) << r.out;     // not at 100 req/s
}

TEST_F(SimulateCli, BadSettingsAreNamed) {
  const std::string c = write("bad.yaml", "stratgy: nodg\n");
  CliRun r = simulate({"--config", c});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ecoserve simulate: unknown setting 'stratgy'\n");
  r = simulate({"--config", (dir_ / "missing.yaml").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ecoserve simulate: cannot read config '" + (dir_ / "missing.yaml").string() + "'\n");
  r = simulate({"--strategy", "fudg", "--prefill-instances", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ecoserve simulate: fudg needs prefill and decode instances (0 prefill, 1 decode)\n");
  r = simulate({"--model", "llama-9000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("llama-9000"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ecoserve::sim
