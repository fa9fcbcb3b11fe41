// Multi-process faults with real processes over real sockets: `ecoserve
// instance` processes behind `ecoserve router`, one of them SIGKILLed while
// streams run. No request may be lost silently: each ends with its full
// completion or a clear error, the router stops routing to the dead instance
// within its heartbeat timeout, the survivors keep serving, and a prefill
// instance whose decode partner died holds no KV blocks afterwards.
#include <utility>  // before Boost.Asio (1.74 awaitable.hpp needs std::exchange)

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/eventually.h"
#include "base/subprocess.h"
#include "base/test_data.h"
#include "server/server_test_client.h"

namespace ecoserve::server {
namespace {

using namespace ::ecoserve::server::testing;  // NOLINT: the test client helpers
using nlohmann::json;

constexpr const char* kVocab = "vocab/ggml-vocab-llama-spm.gguf";

struct Instance {
  std::unique_ptr<Subprocess> process;
  std::string address;
};

class ClusterProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!shared_data_path(kVocab) || !std::filesystem::exists(ecoserve_binary())) return;
    // A 15M-parameter random-weight model: one decode step takes milliseconds on
    // one thread, so 200-token streams are still running when an instance dies.
    dir_ = std::filesystem::temp_directory_path() / ("ecoserve_cluster_process_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = (dir_ / "synth-15m-q8_0.gguf").string();
    const std::string cmd = ecoserve_binary() + " model synth --preset 15m --type q8_0 --vocab '" +
                            *shared_data_path(kVocab) + "' -o '" + model_ + "' > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (!shared_data_path(kVocab)) GTEST_SKIP() << missing_data_message(kVocab);
    if (!std::filesystem::exists(ecoserve_binary())) GTEST_SKIP() << "no ecoserve binary at " << ecoserve_binary();
    ASSERT_TRUE(std::filesystem::exists(model_));
  }
  // A failed test shows the ends of its processes' logs (the temporary directory
  // goes with the suite): a router's "no message for 0.7 s" explains a 503.
  void TearDown() override {
    if (!HasFailure()) return;
    for (const std::string& path : logs_) {
      std::ifstream in(path);
      std::vector<std::string> lines;
      for (std::string line; std::getline(in, line);) lines.push_back(line);
      const size_t from = lines.size() > 40 ? lines.size() - 40 : 0;
      std::fprintf(stderr, "--- %s (last %zu of %zu lines)\n", path.c_str(), lines.size() - from, lines.size());
      for (size_t i = from; i < lines.size(); ++i) std::fprintf(stderr, "%s\n", lines[i].c_str());
    }
  }

  Instance start_instance(const std::string& role, const std::string& policy = "chunked") {
    Instance in;
    in.process = std::make_unique<Subprocess>();
    logs_.push_back((dir_ / ("instance." + std::to_string(++seq_) + ".log")).string());
    Status s = in.process->start({ecoserve_binary(), "instance", "-m", model_, "--listen", "tcp://127.0.0.1:0", "--role",
                                  role, "-t", "1", "--kv-cache-mb", "16", "--policy", policy},
                                 {.stderr_path = logs_.back()});
    EXPECT_TRUE(s.ok()) << s.to_string();
    StatusOr<std::string> line = in.process->wait_for_line("ecoserve instance listening on ", std::chrono::seconds(60));
    EXPECT_TRUE(line.ok()) << line.status().to_string();
    if (line.ok()) in.address = line->substr(0, line->find(' '));
    return in;
  }

  // Starts the router; returns its HTTP port (0 on failure).
  uint16_t start_router(const std::vector<Instance>& instances, std::vector<std::string> extra) {
    std::vector<std::string> argv = {ecoserve_binary(), "router", "--port", "0", "--heartbeat-timeout", "1"};
    for (const Instance& in : instances) {
      argv.push_back("--instance");
      argv.push_back(in.address);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    logs_.push_back((dir_ / ("router." + std::to_string(++seq_) + ".log")).string());
    Status s = router_.start(argv, {.stderr_path = logs_.back()});
    EXPECT_TRUE(s.ok()) << s.to_string();
    StatusOr<std::string> line = router_.wait_for_line("ecoserve listening on http://127.0.0.1:", std::chrono::seconds(60));
    EXPECT_TRUE(line.ok()) << line.status().to_string();
    return line.ok() ? static_cast<uint16_t>(std::stoi(*line)) : 0;
  }

  static json cluster(uint16_t port) { return request(port, boost::beast::http::verb::get, "/admin/cluster").j(); }
  static json instance_report(uint16_t port, const std::string& name) {
    const json c = cluster(port);  // named: a range-for over a temporary's member would dangle
    for (const json& i : c["instances"]) {
      if (i["name"] == name) return i;
    }
    return json();
  }

  // Polls every 20 ms: each check is an HTTP round trip to the processes.
  static bool eventually(const std::function<bool()>& pred, double seconds) {
    return ecoserve::eventually(pred, seconds, std::chrono::milliseconds(20));
  }

  // Runs `n` 200-token streams in threads (joined on scope exit, also when an
  // assertion returns early); the replies land in `out` as they end.
  static std::vector<std::jthread> streams(uint16_t port, int n, std::vector<Reply>& out) {
    out.assign(static_cast<size_t>(n), Reply{});
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([port, i, &out] {
        out[static_cast<size_t>(i)] =
            post(port, "/v1/completions",
                 {{"prompt", "Once upon a time " + std::to_string(i)}, {"max_tokens", 200}, {"stream", true},
                  {"ignore_eos", true}, {"temperature", 0}});
      });
    }
    return threads;
  }

  // Each reply is a whole completion or a clear error, never a silent cut.
  static void expect_complete_or_clear_error(const std::vector<Reply>& replies, int* completed, int* failed) {
    for (const Reply& r : replies) {
      if (r.status != 200) {
        EXPECT_GE(r.status, 400) << r.body;
        EXPECT_TRUE(r.j().contains("error")) << r.body;
        ++*failed;
        continue;
      }
      const std::vector<std::string> payloads = sse_payloads(r.body);
      ASSERT_FALSE(payloads.empty()) << r.body;
      EXPECT_EQ(payloads.back(), "[DONE]") << "a stream ended without its terminator: " << r.body.substr(0, 400);
      std::string finish;
      int text_chunks = 0;
      for (const std::string& p : payloads) {
        const json c = json::parse(p, nullptr, false);
        if (c.is_discarded() || !c.contains("choices") || c["choices"].empty()) continue;
        const json& ch = c["choices"][0];
        if (ch.contains("text") && ch["text"].is_string() && !ch["text"].get<std::string>().empty()) ++text_chunks;
        if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) finish = ch["finish_reason"];
      }
      EXPECT_TRUE(finish == "length" || finish == "error") << "finish_reason '" << finish << "'";
      if (finish == "length") {
        EXPECT_GE(text_chunks, 150) << "a 'length' finish with too few tokens";
        ++*completed;
      } else {
        ++*failed;
      }
    }
  }

  static inline std::filesystem::path dir_;
  static inline std::string model_;
  static inline int seq_ = 0;
  std::vector<std::string> logs_;  // this test's processes' stderr
  Subprocess router_;
};

TEST_F(ClusterProcessTest, NodgInstanceKilledUnderLoad) {
  std::vector<Instance> instances;
  instances.push_back(start_instance("mixed"));
  instances.push_back(start_instance("mixed"));
  const uint16_t port = start_router(instances, {"--strategy", "nodg", "--router", "round-robin"});
  ASSERT_NE(port, 0);
  std::vector<Reply> replies;
  std::vector<std::jthread> threads = streams(port, 8, replies);
  // Both instances are generating.
  ASSERT_TRUE(eventually(
      [&] {
        const json c = cluster(port);
        return c["instances"].size() == 2 && c["instances"][0]["num_running"].get<int>() > 0 &&
               c["instances"][1]["num_running"].get<int>() > 0;
      },
      20));
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(instances[0].process->pid(), SIGKILL), 0);
  // The router stops routing to it within the heartbeat timeout (1 s; it acts at 0.6 s).
  ASSERT_TRUE(eventually([&] { return instance_report(port, instances[0].address)["healthy"] == false; }, 3))
      << cluster(port).dump() << " (looking for " << instances[0].address << ")";
  const double detected = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(detected, 1.5);
  for (auto& t : threads) t.join();
  int completed = 0, failed = 0;
  expect_complete_or_clear_error(replies, &completed, &failed);
  EXPECT_EQ(completed + failed, 8);
  EXPECT_GE(failed, 1) << "the killed instance's streams cannot have completed";
  EXPECT_GE(completed, 1) << "the surviving instance's streams complete";
  // The survivor serves every new request.
  for (int i = 0; i < 5; ++i) {
    const Reply r = post(port, "/v1/completions", {{"prompt", "One day"}, {"max_tokens", 8}});
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(instance_report(port, instances[1].address)["healthy"], true);
  EXPECT_EQ(router_.stop(SIGTERM), 0);
  EXPECT_EQ(instances[1].process->stop(SIGTERM), 0);
}

TEST_F(ClusterProcessTest, FudgDecodeInstanceKilledLeavesNoBlocksOnThePrefillSide) {
  std::vector<Instance> instances;
  instances.push_back(start_instance("prefill"));
  instances.push_back(start_instance("decode"));
  const uint16_t port = start_router(instances, {"--strategy", "fudg", "--prefill-instances", "1"});
  ASSERT_NE(port, 0);
  std::vector<Reply> replies;
  std::vector<std::jthread> threads = streams(port, 6, replies);
  ASSERT_TRUE(eventually([&] { return instance_report(port, instances[1].address)["num_running"].get<int>() > 0; }, 20));
  ASSERT_EQ(::kill(instances[1].process->pid(), SIGKILL), 0);
  for (auto& t : threads) t.join();
  int completed = 0, failed = 0;
  expect_complete_or_clear_error(replies, &completed, &failed);
  EXPECT_EQ(completed + failed, 6);
  EXPECT_GE(failed, 1);
  // Nothing is held for a transfer that cannot happen.
  EXPECT_TRUE(eventually(
      [&] {
        const json p = instance_report(port, instances[0].address);
        return p["kv_cache_usage"] == 0.0 && p["num_running"] == 0 && p["num_waiting"] == 0;
      },
      5))
      << cluster(port).dump();
  // With no decode instance left the router refuses clearly.
  const Reply r = post(port, "/v1/completions", {{"prompt", "One day"}, {"max_tokens", 8}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_TRUE(r.j().contains("error")) << r.body;
  EXPECT_EQ(router_.stop(SIGTERM), 0);
  EXPECT_EQ(instances[0].process->stop(SIGTERM), 0);
}

// "tcp://127.0.0.1:5555" -> "tcp%3A%2F%2F127.0.0.1%3A5555" (a path segment).
std::string escaped(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == ':') {
      out += "%3A";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

// padg over ZeroMQ: an instance started by hand is attached while streams run and
// another is drained out. Every stream completes, the drained instance gets no
// new request and leaves once empty, and the instance that stays is the same
// process throughout (nothing restarts).
TEST_F(ClusterProcessTest, PadgRouterAttachesAndDrainsInstancesUnderLoad) {
  // One cost profile beside the model for the router and the three temporal instances (without it
  // each measures its own at start-up, all at once: minutes of CPU under ASan).
  const std::string profile = ecoserve_binary() + " profile cost -m '" + model_ +
                              "' -t 1 --max-prefill 256 --max-batch 8 --repeats 1 > /dev/null";
  ASSERT_EQ(std::system(profile.c_str()), 0) << profile;
  std::vector<Instance> instances;
  instances.push_back(start_instance("mixed", "temporal"));
  instances.push_back(start_instance("mixed", "temporal"));
  Instance extra = start_instance("mixed", "temporal");
  const uint16_t port = start_router(instances, {"--strategy", "padg"});
  ASSERT_NE(port, 0);
  // An instance that does not alternate phases cannot join a padg cluster.
  Instance plain = start_instance("mixed");
  const Reply refused = request(port, boost::beast::http::verb::post, "/admin/instances",
                                json{{"address", plain.address}}.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("--policy temporal"), std::string::npos) << refused.body;
  EXPECT_EQ(plain.process->stop(SIGTERM), 0);
  std::vector<Reply> replies;
  std::vector<std::jthread> threads = streams(port, 8, replies);
  ASSERT_TRUE(eventually([&] { return cluster(port)["instances"][0]["num_running"].get<int>() > 0; }, 20));

  const Reply added = request(port, boost::beast::http::verb::post, "/admin/instances",
                              json{{"address", extra.address}}.dump());
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.j()["name"], extra.address);
  const Reply removing =
      request(port, boost::beast::http::verb::delete_, "/admin/instances/" + escaped(instances[0].address));
  ASSERT_EQ(removing.status, 202) << removing.body;
  EXPECT_EQ(instance_report(port, instances[0].address)["state"], "removing");
  // New streams after the removal go to the other two.
  std::vector<Reply> later;
  std::vector<std::jthread> later_threads = streams(port, 4, later);
  for (auto& t : threads) t.join();
  for (auto& t : later_threads) t.join();
  int completed = 0, failed = 0;
  expect_complete_or_clear_error(replies, &completed, &failed);
  expect_complete_or_clear_error(later, &completed, &failed);
  EXPECT_EQ(completed, 12) << "no stream may be lost while instances come and go";
  // Drained, it leaves the cluster; the macro instance holds the other two.
  ASSERT_TRUE(eventually([&] { return cluster(port)["router"]["instances_removed"] == 1; }, 10)) << cluster(port).dump();
  const json c = cluster(port);
  ASSERT_EQ(c["instances"].size(), 2u) << c.dump();
  EXPECT_EQ(c["macro_instances"][0]["members"], json::array({instances[1].address, extra.address})) << c.dump();
  EXPECT_EQ(c["router"]["instances_added"], 1);
  // padg keeps a macro instance's prompts on its last instance while the checks
  // pass; with that one drained too, the attached instance serves.
  ASSERT_EQ(request(port, boost::beast::http::verb::delete_, "/admin/instances/" + escaped(instances[1].address)).status,
            202);
  ASSERT_TRUE(eventually([&] { return cluster(port)["router"]["instances_removed"] == 2; }, 10)) << cluster(port).dump();
  const Reply r = post(port, "/v1/completions", {{"prompt", "One day"}, {"max_tokens", 8}});
  EXPECT_EQ(r.status, 200) << r.body;
  // (Remote counters arrive with the next status poll.)
  EXPECT_TRUE(eventually([&] { return instance_report(port, extra.address)["prompt_tokens_total"].get<int64_t>() > 0; }, 5))
      << cluster(port).dump();
  // Nothing restarted: the drained instances are the same live processes (an
  // operator stops them), the attached one kept serving.
  EXPECT_EQ(::kill(instances[0].process->pid(), 0), 0);
  EXPECT_EQ(::kill(instances[1].process->pid(), 0), 0);
  const Reply bad = request(port, boost::beast::http::verb::post, "/admin/instances", "{}");
  EXPECT_EQ(bad.status, 400) << "a router attaches instances by address: " << bad.body;
  EXPECT_EQ(router_.stop(SIGTERM), 0);
  for (Instance* in : {&instances[0], &instances[1], &extra}) EXPECT_EQ(in->process->stop(SIGTERM), 0);
}

TEST_F(ClusterProcessTest, RouterWithNoInstanceListeningExitsWithTheAddress) {
  const std::string log = (dir_ / "router.unreachable.log").string();
  Subprocess router;
  ASSERT_TRUE(router.start({ecoserve_binary(), "router", "--port", "0", "--instance", "tcp://127.0.0.1:1"},
                           {.stderr_path = log})
                  .ok());
  const auto t0 = std::chrono::steady_clock::now();
  const int status = router.wait();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  EXPECT_NE(status, 0);
  std::ifstream f(log);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("tcp://127.0.0.1:1"), std::string::npos) << text;
}

}  // namespace
}  // namespace ecoserve::server
