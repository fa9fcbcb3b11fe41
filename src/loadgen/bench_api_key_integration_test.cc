// Integration (issue 8, defects 5 and 6): `ecoserve bench` against
// `ecoserve serve --api-key secret` with the tiny TinyStories model, both as child
// processes. Without the key or with a wrong one bench reports the 401 (model
// discovery names it; per-request failures are counted as http_401 in the report)
// and exits 1; with the right key, from --api-key or from OPENAI_API_KEY, all
// requests succeed and it exits 0. 4 requests of 4 tokens per run.
//
// bench runs under /usr/bin/env so each case controls OPENAI_API_KEY exactly
// (unset unless the case sets it), whatever the test's own environment holds.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "base/test_data.h"

namespace ecoserve::loadgen {
namespace {

constexpr const char* kModel = "models/tinystories-656k-q8_0.gguf";
constexpr const char* kEnv = "/usr/bin/env";

std::string ecoserve_binary() { return std::string(ECOSERVE_BINARY_DIR) + "/ecoserve"; }

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct BenchRun {
  int exit_code = -1;
  std::string out;  // the report
  std::string err;  // progress-free stderr (--quiet): discovery failures and the FAILED line
  nlohmann::json result;  // --result-json, or null when bench did not write it
};

// A report line ("Failed requests:" padded to 40, then the value); row_start without the newline.
std::string row_start(const std::string& label, const std::string& value) {
  return fmt::format("{:<40} {}", label, value);
}
std::string row(const std::string& label, const std::string& value) { return row_start(label, value) + "\n"; }

class BenchApiKeyIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = shared_data_path(kModel);
    if (!model) GTEST_SKIP() << missing_data_message(kModel);
    if (!std::filesystem::exists(ecoserve_binary())) GTEST_SKIP() << "no ecoserve binary at " << ecoserve_binary();
    if (!std::filesystem::exists(kEnv)) GTEST_SKIP() << "no " << kEnv;
    dir_ = std::filesystem::temp_directory_path() / ("ecoserve_bench_key_it_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    server_log_ = (dir_ / "serve.stderr").string();
    ASSERT_TRUE(server_
                    .start({ecoserve_binary(), "serve", "--model", *model, "--port", "0", "--threads", "1",
                            "--served-model-name", "tiny", "--api-key", "secret", "--drain-timeout", "5"},
                           {.stderr_path = server_log_})
                    .ok());
    auto port = server_.wait_for_line("ecoserve listening on http://127.0.0.1:", std::chrono::seconds(30));
    ASSERT_TRUE(port.ok()) << port.status().to_string() << "\n" << read_file(server_log_);
    url_ = "http://127.0.0.1:" + std::to_string(std::stoi(*port));
  }

  void TearDown() override {
    if (server_.pid() > 0) {
      EXPECT_EQ(server_.stop(SIGTERM), 0) << read_file(server_log_);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // `ecoserve bench` with `args` after the common ones; OPENAI_API_KEY is `env_key` or unset.
  BenchRun bench(const std::string& name, const std::vector<std::string>& args,
                 const std::optional<std::string>& env_key = std::nullopt) {
    const std::string json = (dir_ / (name + ".json")).string();
    const std::string err = (dir_ / (name + ".stderr")).string();
    std::vector<std::string> argv = {kEnv, "-u", "OPENAI_API_KEY"};
    if (env_key) argv.push_back("OPENAI_API_KEY=" + *env_key);
    for (const std::string& a : {ecoserve_binary(), std::string("bench"), std::string("--url"), url_,
                                 std::string("--dataset"), std::string("synthetic"), std::string("--input-len"),
                                 std::string("8"), std::string("--output-len"), std::string("4"),
                                 std::string("--num-prompts"), std::string("4"), std::string("--seed"),
                                 std::string("1"), std::string("--request-timeout"), std::string("60"),
                                 std::string("--result-json"), json, std::string("--quiet")})
      argv.push_back(a);
    argv.insert(argv.end(), args.begin(), args.end());
    BenchRun r;
    Subprocess p;
    if (Status s = p.start(argv, {.stderr_path = err}); !s.ok()) {
      ADD_FAILURE() << s.to_string();
      return r;
    }
    r.exit_code = p.wait(&r.out);
    r.err = read_file(err);
    if (std::filesystem::exists(json)) r.result = nlohmann::json::parse(read_file(json), nullptr, false);
    return r;
  }

  std::filesystem::path dir_;
  std::string server_log_;
  std::string url_;
  Subprocess server_;
};

TEST_F(BenchApiKeyIntegration, NoKeyReports401AndExitsNonZero) {
  // Model discovery (no --model) fails first and says why.
  BenchRun d = bench("nokey_discovery", {});
  EXPECT_EQ(d.exit_code, 1) << d.out << d.err;
  EXPECT_NE(d.err.find("/v1/models: HTTP 401 Unauthorized: missing API key"), std::string::npos) << d.err;
  EXPECT_NE(d.err.find("no API key was sent: pass --api-key KEY or set OPENAI_API_KEY"), std::string::npos) << d.err;

  // With --model every request fails with its 401; the report is printed and written, then exit 1.
  BenchRun r = bench("nokey_requests", {"--model", "tiny"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(row("Successful requests:", "0")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(row("Failed requests:", "4")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(row_start("http_401:", "4 (missing API key")), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("ecoserve bench: FAILED: no request succeeded (4 of 4 failed); errors: http_401 x4 "
                       "(missing API key"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(r.result.is_object()) << "no --result-json written";
  EXPECT_EQ(r.result["metrics"]["failed"], 4);
  EXPECT_EQ(r.result["metrics"]["errors"]["http_401"], 4);
  EXPECT_EQ(r.result["exit_code"], 1);
  EXPECT_EQ(r.result["config"]["api_key"], "none");
}

TEST_F(BenchApiKeyIntegration, WrongKeyReports401AndExitsNonZero) {
  BenchRun d = bench("wrong_flag_discovery", {"--api-key", "wrong"});
  EXPECT_EQ(d.exit_code, 1) << d.out << d.err;
  EXPECT_NE(d.err.find("/v1/models: HTTP 401 Unauthorized: incorrect API key provided"), std::string::npos) << d.err;
  EXPECT_NE(d.err.find("the API key from --api-key was rejected"), std::string::npos) << d.err;

  BenchRun r = bench("wrong_env_requests", {"--model", "tiny"}, "wrong");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find(row("Failed requests:", "4")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(row("http_401:", "4 (incorrect API key provided)")), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("FAILED: no request succeeded (4 of 4 failed); errors: http_401 x4 (incorrect API key "
                       "provided) (the API key from OPENAI_API_KEY was rejected)"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(r.result.is_object());
  EXPECT_EQ(r.result["config"]["api_key"], "OPENAI_API_KEY");
  EXPECT_EQ(r.result.dump().find("wrong"), std::string::npos) << "the key must not be written";

  // A goodput search judges its reported run the same way.
  BenchRun g = bench("wrong_search", {"--model", "tiny", "--api-key", "wrong", "--goodput-search", "--slo-ttft-ms",
                                      "10000", "--search-min-rate", "20", "--search-max-rate", "40", "--search-steps",
                                      "1"});
  EXPECT_EQ(g.exit_code, 1) << g.out << g.err;
  EXPECT_NE(g.out.find("Goodput Search Result"), std::string::npos) << g.out;
  EXPECT_NE(g.err.find("FAILED: the reported run (rate 20.000 req/s): no request succeeded (4 of 4 failed)"),
            std::string::npos)
      << g.err;
}

TEST_F(BenchApiKeyIntegration, RightKeyFromTheFlagOrTheEnvironmentSucceeds) {
  struct Case {
    const char* name;
    std::vector<std::string> args;
    std::optional<std::string> env;
    const char* source;
  };
  const Case cases[] = {{"flag", {"--api-key", "secret"}, std::nullopt, "--api-key"},
                        {"env", {}, "secret", "OPENAI_API_KEY"},
                        {"flag_over_env", {"--api-key", "secret"}, "wrong", "--api-key"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    BenchRun r = bench(c.name, c.args, c.env);  // no --model: discovery must carry the key too
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(row("Successful requests:", "4")), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(row("Failed requests:", "0")), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find("FAILED"), std::string::npos) << r.err;
    ASSERT_TRUE(r.result.is_object());
    EXPECT_EQ(r.result["config"]["model"], "tiny");
    EXPECT_EQ(r.result["config"]["api_key"], c.source);
    EXPECT_EQ(r.result["metrics"]["completed"], 4);
    EXPECT_EQ(r.result["metrics"]["failed"], 0);
    EXPECT_EQ(r.result["exit_code"], 0);
  }
  // A goodput search with the key exits 0: the exit code depends on failures, not on attainment.
  BenchRun g = bench("search", {"--api-key", "secret", "--goodput-search", "--slo-ttft-ms", "10000",
                                "--search-min-rate", "50", "--search-max-rate", "100", "--search-steps", "1"});
  EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
  EXPECT_NE(g.out.find("Goodput Search Result"), std::string::npos) << g.out;
}

TEST_F(BenchApiKeyIntegration, FailureRateThresholdIsValidated) {
  // Checked before any request: a percentage is not a share.
  BenchRun r = bench("bad_rate", {"--api-key", "secret", "--max-failure-rate", "5"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--max-failure-rate must be a share in [0, 1], got 5"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  // A run where everything succeeds passes even the strictest threshold.
  BenchRun ok = bench("strict_ok", {"--api-key", "secret", "--max-failure-rate", "0"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
}

}  // namespace
}  // namespace ecoserve::loadgen
