// `ecoserve bench` run as the binary against the in-test fake OpenAI server (issue 11's
// Llumnix benchmark load): a bursty load where a seeded 10% share of the requests is
// high priority and a seeded 20% share is long. Checks the request bodies the server
// saw, the per-class report and --result-json, and the flag errors (exit 1, nothing sent).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "loadgen/fake_openai_server.h"

namespace ecoserve::loadgen {
namespace {

using testing::FakeOpenAiServer;

std::string ecoserve_binary() { return std::string(ECOSERVE_BINARY_DIR) + "/ecoserve"; }

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t word_count(const std::string& s) {
  std::istringstream in(s);
  std::size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

struct BenchRun {
  int exit_code = -1;
  std::string out, err;
  nlohmann::json result;  // null when no --result-json was written
};

class BenchClassesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ecoserve_binary())) GTEST_SKIP() << "no ecoserve binary at " << ecoserve_binary();
    dir_ = std::filesystem::temp_directory_path() /
           ("ecoserve_bench_classes_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto server = FakeOpenAiServer::start({.base_ttft_ms = 2, .per_load_ms = 0, .tpot_ms = 1});
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // `ecoserve bench` on 50 synthetic requests (8 tokens in, 4 out) plus `args`.
  BenchRun bench(const std::vector<std::string>& args) {
    const std::string json = (dir_ / "result.json").string();
    std::filesystem::remove(json);
    std::vector<std::string> argv = {ecoserve_binary(), "bench", "--url",
                                     fmt::format("http://127.0.0.1:{}", server_->port()), "--model", "fake",
                                     "--dataset", "synthetic", "--input-len", "8", "--output-len", "4",
                                     "--num-prompts", "50", "--rate", "500", "--burstiness", "0.5", "--seed", "0",
                                     "--request-timeout", "30", "--result-json", json, "--quiet"};
    argv.insert(argv.end(), args.begin(), args.end());
    BenchRun r;
    Subprocess p;
    if (Status s = p.start(argv, {.stderr_path = (dir_ / "bench.stderr").string()}); !s.ok()) {
      ADD_FAILURE() << s.to_string();
      return r;
    }
    r.exit_code = p.wait(&r.out);
    r.err = read_file(dir_ / "bench.stderr");
    if (std::filesystem::exists(json)) r.result = nlohmann::json::parse(read_file(json), nullptr, false);
    return r;
  }

  std::filesystem::path dir_;
  std::unique_ptr<FakeOpenAiServer> server_;
};

std::string row(const std::string& label, const std::string& value) { return fmt::format("{:<40} {}\n", label, value); }

TEST_F(BenchClassesCli, HighPriorityAndLongSharesAreSentReportedAndWritten) {
  BenchRun r = bench({"--high-priority-fraction", "0.1", "--long-fraction", "0.2", "--long-input-len", "64",
                      "--long-output-len", "8", "--slo-ttft-ms", "10000"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  // What the server saw: 5 bodies with "priority": -1, the other 45 without; 10 long prompts.
  const auto bodies = server_->bodies();
  ASSERT_EQ(bodies.size(), 50u);
  int with_priority = 0, long_prompts = 0;
  for (const auto& b : bodies) {
    auto j = nlohmann::json::parse(b);
    if (j.contains("priority")) {
      ++with_priority;
      EXPECT_EQ(j["priority"], -1) << b;
    }
    const bool is_long = word_count(j["prompt"].get<std::string>()) == 64;
    long_prompts += is_long;
    EXPECT_EQ(j["max_tokens"], is_long ? 8 : 4) << b;
  }
  EXPECT_EQ(with_priority, 5);
  EXPECT_EQ(long_prompts, 10);

  // The report: the overall result, then one block per class.
  EXPECT_NE(r.out.find(row("Successful requests:", "50")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Class high (5 requests)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Class normal (45 requests)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Class long (10 requests)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Class short (40 requests)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(row("high successful requests:", "5")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("high P99 TTFT (ms):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("normal P99 E2EL (ms):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(row("high SLO attainment (%):", "100.00")), std::string::npos) << r.out;

  // --result-json: config, per-class metrics, and each request's class.
  ASSERT_TRUE(r.result.is_object()) << "no --result-json";
  const auto& config = r.result["config"];
  EXPECT_EQ(config["high_priority_fraction"], 0.1);
  EXPECT_EQ(config["high_priority_value"], -1);
  EXPECT_EQ(config["num_high_priority"], 5);
  EXPECT_EQ(config["long_fraction"], 0.2);
  EXPECT_EQ(config["long_input_len"], "64");
  EXPECT_EQ(config["long_output_len"], "8");
  EXPECT_EQ(config["num_long"], 10);
  EXPECT_EQ(config["burstiness"], "0.5");
  const auto& metrics = r.result["metrics"];
  EXPECT_EQ(metrics["completed"], 50);
  EXPECT_EQ(metrics["by_priority"]["high"]["num_requests"], 5);
  EXPECT_EQ(metrics["by_priority"]["high"]["completed"], 5);
  EXPECT_EQ(metrics["by_priority"]["normal"]["completed"], 45);
  EXPECT_EQ(metrics["by_priority"]["high"]["slo_attained"], 5);
  EXPECT_TRUE(metrics["by_priority"]["high"]["ttft_ms"].contains("p99"));
  EXPECT_TRUE(metrics["by_priority"]["high"]["e2e_ms"].contains("p90"));
  EXPECT_EQ(metrics["by_length"]["long"]["total_output_tokens"], 80);
  EXPECT_EQ(metrics["by_length"]["short"]["total_output_tokens"], 160);
  // Seed 0: the high-priority share of 50 is {17, 28, 30, 37, 40}; the long one (its own
  // stream) is {1, 6, 12, 15, 21, 22, 39, 42, 46, 49}.
  std::set<int> high, long_set;
  for (const auto& q : r.result["requests"]) {
    if (q["priority_class"] == "high") {
      high.insert(q["index"].get<int>());
      EXPECT_EQ(q["priority"], -1);
    } else {
      EXPECT_EQ(q["priority_class"], "normal");
      EXPECT_FALSE(q.contains("priority"));
    }
    if (q["long"].get<bool>()) {
      long_set.insert(q["index"].get<int>());
      EXPECT_EQ(q["max_tokens"], 8);
    }
  }
  EXPECT_EQ(high, (std::set<int>{17, 28, 30, 37, 40}));
  EXPECT_EQ(long_set, (std::set<int>{1, 6, 12, 15, 21, 22, 39, 42, 46, 49}));
}

TEST_F(BenchClassesCli, WithoutTheFlagsNothingChanges) {
  BenchRun r = bench({});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("Class "), std::string::npos) << r.out;
  for (const auto& b : server_->bodies()) EXPECT_EQ(b.find("priority"), std::string::npos) << b;
  ASSERT_TRUE(r.result.is_object());
  EXPECT_FALSE(r.result["metrics"].contains("by_priority"));
  EXPECT_FALSE(r.result["metrics"].contains("by_length"));
  EXPECT_EQ(r.result["config"]["num_high_priority"], 0);
  EXPECT_EQ(r.result["config"]["long_input_len"], nullptr);
  for (const auto& q : r.result["requests"]) {
    EXPECT_EQ(q["priority_class"], "normal");
    EXPECT_EQ(q["long"], false);
  }
}

TEST_F(BenchClassesCli, BadClassFlagsExitOneBeforeSendingAnything) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"--high-priority-fraction", "1.5"}, "ecoserve bench: --high-priority-fraction must be in [0, 1], got 1.5\n"},
      {{"--high-priority-fraction", "-0.1"}, "ecoserve bench: --high-priority-fraction must be in [0, 1], got -0.1\n"},
      {{"--long-fraction", "2", "--long-input-len", "64"}, "ecoserve bench: --long-fraction must be in [0, 1], got 2\n"},
      {{"--long-fraction", "0.1"},
       "ecoserve bench: --long-fraction needs --long-input-len and/or --long-output-len\n"},
      {{"--long-input-len", "64"}, "ecoserve bench: --long-input-len and --long-output-len need --long-fraction\n"},
      {{"--long-fraction", "0.1", "--long-output-len", "banana"},
       "ecoserve bench: --long-output-len: length distribution 'banana'"},
      {{"--high-priority-fraction", "0.1", "--high-priority-value", "3000000000"},
       "ecoserve bench: --high-priority-value must be a 32-bit integer, got 3000000000\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args[0] + " " + c.args[1]);
    BenchRun r = bench(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(r.err.rfind(c.message, 0), 0u) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(r.result.is_null());
  }
  // Not a number: CLI11 rejects it (its own non-zero exit code), as for every numeric flag.
  BenchRun nan = bench({"--high-priority-fraction", "lots"});
  EXPECT_NE(nan.exit_code, 0);
  EXPECT_NE(nan.err.find("--high-priority-fraction"), std::string::npos) << nan.err;
  EXPECT_EQ(server_->requests_received(), 0);
}

}  // namespace
}  // namespace ecoserve::loadgen
