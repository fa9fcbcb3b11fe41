// BenchmarkRunner against the in-test fake OpenAI server (real sockets on 127.0.0.1).
// Latencies here are wall-clock; assertions use margins far larger than scheduling noise.
// The integration against `ecoserve serve` is bench_server_integration_test.cc.
#include "loadgen/bench_runner.h"

#include <cmath>
#include <set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "loadgen/arrival_process.h"
#include "loadgen/dataset.h"
#include "loadgen/fake_openai_server.h"
#include "loadgen/goodput_search.h"
#include "loadgen/metrics.h"
#include "loadgen/report.h"

namespace ecoserve::loadgen {
namespace {

using testing::FakeOpenAiServer;
using testing::FakeServerOptions;

std::vector<BenchRequest> workload(int n, int max_tokens) {
  std::vector<BenchRequest> w;
  for (int i = 0; i < n; ++i) {
    BenchRequest r;
    r.index = i;
    r.prompt = "hello world";
    r.input_tokens = 2;
    r.output_tokens = max_tokens;
    w.push_back(r);
  }
  return w;
}

RunnerOptions options_for(int port, Endpoint e = Endpoint::kCompletions) {
  RunnerOptions o;
  o.url = *ServerUrl::parse("http://127.0.0.1:" + std::to_string(port));
  o.endpoint = e;
  o.model = "fake";
  o.request_timeout_s = 10;
  return o;
}

class RunnerTest : public ::testing::Test {
 protected:
  SteadyClock clock_;
  PromptBuilder builder_;
};

TEST_F(RunnerTest, StreamsAndRecordsEveryChunk) {
  auto server = FakeOpenAiServer::start({.base_ttft_ms = 20, .per_load_ms = 0, .tpot_ms = 3});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  for (Endpoint e : {Endpoint::kCompletions, Endpoint::kChat}) {
    BenchmarkRunner runner(options_for((*server)->port(), e), clock_, builder_);
    auto w = workload(8, 5);
    std::vector<double> times(8, 0.0);
    auto res = runner.run(w, times);
    ASSERT_TRUE(res.ok()) << res.status().to_string();
    ASSERT_EQ(res->records.size(), 8u);
    for (const auto& r : res->records) {
      ASSERT_TRUE(r.success) << error_key(r) << " " << r.error_message;
      EXPECT_EQ(r.http_status, 200);
      EXPECT_EQ(r.output_tokens, 5);
      EXPECT_TRUE(r.output_tokens_from_usage);
      EXPECT_EQ(r.chunk_s.size(), 5u);
      EXPECT_GE(r.ttft_s(), 0.019);
      EXPECT_GE(r.end_s, r.chunk_s.back());
      for (std::size_t i = 1; i < r.chunk_s.size(); ++i) EXPECT_GE(r.chunk_s[i], r.chunk_s[i - 1]);
    }
    EXPECT_GT(res->duration_s, 0.019);
  }
  EXPECT_EQ((*server)->requests_received(), 16);
}

TEST_F(RunnerTest, CountsChunksWithoutUsageAndHonoursMaxConcurrency) {
  // busy window 1 s: every request sees the load of all earlier ones; with
  // max_concurrency 1 they are sent one after another.
  auto server = FakeOpenAiServer::start({.base_ttft_ms = 1, .per_load_ms = 0, .tpot_ms = 1, .send_usage = false});
  ASSERT_TRUE(server.ok());
  auto o = options_for((*server)->port());
  o.max_concurrency = 1;
  BenchmarkRunner runner(o, clock_, builder_);
  auto w = workload(4, 3);
  auto res = runner.run(w, std::vector<double>(4, 0.0));
  ASSERT_TRUE(res.ok());
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& r = res->records[i];
    ASSERT_TRUE(r.success);
    EXPECT_EQ(r.output_tokens, 3);
    EXPECT_FALSE(r.output_tokens_from_usage);
    EXPECT_EQ(r.input_tokens, 2);  // from the workload
    if (i > 0) {
      EXPECT_GE(r.sent_s, res->records[i - 1].end_s);  // serialized
    }
  }
}

TEST_F(RunnerTest, ErrorsAreClassifiedAndNeverAbort) {
  // A closed port: bind, read the port, close.
  int closed_port = 0;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    closed_port = a.local_endpoint().port();
  }
  auto w = workload(3, 4);
  std::vector<double> times(3, 0.0);
  {
    BenchmarkRunner runner(options_for(closed_port), clock_, builder_);
    auto res = runner.run(w, times);
    ASSERT_TRUE(res.ok());
    auto m = compute_metrics(res->records, res->duration_s, {});
    EXPECT_EQ(m.failed, 3);
    EXPECT_EQ(m.errors.at("connection_refused"), 3);
  }
  for (int status : {429, 500}) {
    auto server = FakeOpenAiServer::start({.fail_status = status});
    ASSERT_TRUE(server.ok());
    BenchmarkRunner runner(options_for((*server)->port()), clock_, builder_);
    auto res = runner.run(w, times);
    ASSERT_TRUE(res.ok());
    auto m = compute_metrics(res->records, res->duration_s, {});
    EXPECT_EQ(m.completed, 0);
    EXPECT_EQ(m.errors.at("http_" + std::to_string(status)), 3) << status;
    EXPECT_EQ(res->records[0].error_message, "fake failure");
  }
  {
    auto server = FakeOpenAiServer::start({.reset_connections = true});
    ASSERT_TRUE(server.ok());
    BenchmarkRunner runner(options_for((*server)->port()), clock_, builder_);
    auto res = runner.run(w, times);
    ASSERT_TRUE(res.ok());
    auto m = compute_metrics(res->records, res->duration_s, {});
    EXPECT_EQ(m.errors.at("connection_reset"), 3);
  }
  {
    auto server = FakeOpenAiServer::start({.base_ttft_ms = 5000});
    ASSERT_TRUE(server.ok());
    auto o = options_for((*server)->port());
    o.request_timeout_s = 0.2;
    BenchmarkRunner runner(o, clock_, builder_);
    auto res = runner.run(w, times);
    ASSERT_TRUE(res.ok());
    auto m = compute_metrics(res->records, res->duration_s, {});
    EXPECT_EQ(m.errors.at("timeout"), 3);
    EXPECT_LT(res->duration_s, 2.0);
  }
}

TEST_F(RunnerTest, SendsTheApiKeyOnEveryRequestAndModelDiscovery) {
  auto server = FakeOpenAiServer::start({.base_ttft_ms = 1, .per_load_ms = 0, .tpot_ms = 1, .api_key = "secret"});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  auto o = options_for((*server)->port());
  auto model = discover_model(o.url, "secret");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(*model, "fake-model");
  o.api_key = "secret";
  for (Endpoint e : {Endpoint::kCompletions, Endpoint::kChat}) {
    o.endpoint = e;
    BenchmarkRunner runner(o, clock_, builder_);
    auto res = runner.run(workload(4, 2), std::vector<double>(4, 0.0));
    ASSERT_TRUE(res.ok()) << res.status().to_string();
    for (const auto& r : res->records) EXPECT_TRUE(r.success) << error_key(r) << " " << r.error_message;
  }
  const auto seen = (*server)->authorizations();
  ASSERT_EQ(seen.size(), 9u);
  EXPECT_EQ(seen[0], "GET /v1/models -> Bearer secret");
  for (std::size_t i = 1; i < 5; ++i) EXPECT_EQ(seen[i], "POST /v1/completions -> Bearer secret") << i;
  for (std::size_t i = 5; i < 9; ++i) EXPECT_EQ(seen[i], "POST /v1/chat/completions -> Bearer secret") << i;
}

TEST_F(RunnerTest, AMissingOrWrongKeyIsReportedAs401) {
  auto server = FakeOpenAiServer::start({.api_key = "secret"});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  auto o = options_for((*server)->port());

  // Model discovery: UNAUTHENTICATED, naming the status and the server's message.
  auto none = discover_model(o.url, "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(none.status().message().find("/v1/models: HTTP 401 Unauthorized: missing API key"), std::string::npos)
      << none.status().message();
  auto wrong = discover_model(o.url, "nope");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(wrong.status().message().find("HTTP 401 Unauthorized: incorrect API key provided"), std::string::npos)
      << wrong.status().message();

  // Requests: each one fails as http_401 with the server's message, and the report shows it.
  for (const char* key : {"", "nope"}) {
    SCOPED_TRACE(key);
    o.api_key = key;
    BenchmarkRunner runner(o, clock_, builder_);
    auto res = runner.run(workload(3, 2), std::vector<double>(3, 0.0));
    ASSERT_TRUE(res.ok());
    auto m = compute_metrics(res->records, res->duration_s, {});
    EXPECT_EQ(m.completed, 0);
    EXPECT_EQ(m.errors.at("http_401"), 3);
    const std::string message = *key ? "incorrect API key provided" : "missing API key";
    EXPECT_EQ(res->records[0].http_status, 401);
    EXPECT_EQ(res->records[0].error_message, message);
    EXPECT_EQ(m.error_examples.at("http_401"), message);
    const std::string report = format_report(m, {});
    EXPECT_NE(report.find(fmt::format("{:<40} 3\n", "Failed requests:")), std::string::npos) << report;
    EXPECT_NE(report.find(fmt::format("{:<40} 3 ({})\n", "http_401:", message)), std::string::npos) << report;
  }
  const auto seen = (*server)->authorizations();
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(seen[0], "GET /v1/models -> ");  // no key: no header at all
  EXPECT_EQ(seen[1], "GET /v1/models -> Bearer nope");
  for (std::size_t i = 2; i < 5; ++i) EXPECT_EQ(seen[i], "POST /v1/completions -> ") << i;
  for (std::size_t i = 5; i < 8; ++i) EXPECT_EQ(seen[i], "POST /v1/completions -> Bearer nope") << i;
}

TEST(ChooseApiKey, TheFlagWinsOverTheEnvironment) {
  auto from_flag = choose_api_key(std::string("k1"), "k2");
  ASSERT_TRUE(from_flag.ok());
  EXPECT_EQ(from_flag->key, "k1");
  EXPECT_EQ(from_flag->source, "--api-key");
  auto from_env = choose_api_key(std::nullopt, "k2");
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->key, "k2");
  EXPECT_EQ(from_env->source, "OPENAI_API_KEY");
  for (const char* env : {static_cast<const char*>(nullptr), ""}) {
    auto none = choose_api_key(std::nullopt, env);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none->key, "");
    EXPECT_EQ(none->source, "");
  }
  auto off = choose_api_key(std::string(""), "k2");  // an empty --api-key sends none
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->key, "");
  auto bad = choose_api_key(std::nullopt, "sk-abc\r\nX-Injected: 1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("OPENAI_API_KEY"), std::string::npos);
  EXPECT_EQ(bad.status().message().find("sk-abc"), std::string::npos) << "the key must not be echoed";
  EXPECT_FALSE(choose_api_key(std::string("caf\xc3\xa9"), nullptr).ok());
}

TEST_F(RunnerTest, UnresolvableHostCannotStart) {
  RunnerOptions o;
  o.url = *ServerUrl::parse("http://no-such-host.invalid:80");
  BenchmarkRunner runner(o, clock_, builder_);
  auto w = workload(1, 1);
  EXPECT_FALSE(runner.run(w, std::vector<double>{0.0}).ok());
  EXPECT_FALSE(runner.run(w, std::vector<double>{}).ok());
}

TEST_F(RunnerTest, HighPriorityRequestsSendTheirPriorityAndRecordTheirClass) {
  auto server = FakeOpenAiServer::start({.base_ttft_ms = 1, .per_load_ms = 0, .tpot_ms = 1});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  WorkloadOptions wo;
  wo.num_prompts = 50;
  wo.input_len = LengthDistribution::constant(4);
  wo.output_len = LengthDistribution::constant(2);
  wo.high_priority_fraction = 0.1;  // seed 0: requests 17, 28, 30, 37 and 40
  auto w = build_workload(wo, builder_);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (auto& r : *w) r.prompt = fmt::format("request {}", r.index);  // to find each body
  BenchmarkRunner runner(options_for((*server)->port()), clock_, builder_);
  auto res = runner.run(*w, std::vector<double>(w->size(), 0.0));
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  const std::set<std::int64_t> expected = {17, 28, 30, 37, 40};
  std::set<std::int64_t> sent_high;
  const auto bodies = (*server)->bodies();
  ASSERT_EQ(bodies.size(), 50u);
  for (const auto& b : bodies) {
    auto j = nlohmann::json::parse(b);
    const auto index = std::stoll(j["prompt"].get<std::string>().substr(8));
    if (j.contains("priority")) {
      EXPECT_EQ(j["priority"], -1) << b;
      sent_high.insert(index);
    }
  }
  EXPECT_EQ(sent_high, expected);
  for (const auto& r : res->records) {
    ASSERT_TRUE(r.success) << error_key(r);
    const bool high = expected.contains(r.index);
    EXPECT_EQ(r.priority_class, high ? PriorityClass::kHigh : PriorityClass::kNormal) << r.index;
    EXPECT_EQ(r.priority, high ? std::optional<std::int64_t>(-1) : std::nullopt) << r.index;
  }
}

TEST_F(RunnerTest, RequestBodyIsOpenAiCompatible) {
  auto o = options_for(1);
  BenchmarkRunner runner(o, clock_, builder_);
  BenchRequest r;
  r.prompt = "hi";
  r.output_tokens = 7;
  EXPECT_EQ(runner.request_body(r),
            R"({"ignore_eos":true,"max_tokens":7,"model":"fake","prompt":"hi","stream":true,)"
            R"("stream_options":{"include_usage":true},"temperature":0.0})");
  o.endpoint = Endpoint::kChat;
  o.ignore_eos = false;
  BenchmarkRunner chat(o, clock_, builder_);
  EXPECT_EQ(chat.request_body(r),
            R"({"max_tokens":7,"messages":[{"content":"hi","role":"user"}],"model":"fake","stream":true,)"
            R"("stream_options":{"include_usage":true},"temperature":0.0})");
  // A high-priority request adds its "priority"; a normal one sends none (above).
  r.priority = -1;
  EXPECT_EQ(chat.request_body(r),
            R"({"max_tokens":7,"messages":[{"content":"hi","role":"user"}],"model":"fake","priority":-1,)"
            R"("stream":true,"stream_options":{"include_usage":true},"temperature":0.0})");
}

// Knee by hand. The fake server's TTFT is 5 ms + 15 ms x load, load = the earlier
// arrivals within the last 975 ms. With evenly spaced arrivals at rate r the steady load
// is floor(0.975 r), and the SLO (TTFT <= 5 + 15 x 38.5 = 582.5 ms) holds iff load <= 38
// iff r < 39 / 0.975 = 40 req/s: the knee is 40 req/s.
// Bisection over [5, 85] in 3 steps probes 45 (fail), 25 (pass), 35 (pass): best 35, within
// one step (10) of the knee. Every probe is 12.5% or more away from the knee, so the margins
// are large against scheduling noise on a loaded machine:
//  - at 35 req/s the load is 34 (arrival 35 is 25 ms outside the window); failing needs
//    load 39, i.e. arrival 39 (at -1114 ms) pulled 139 ms into the window, and the TTFT of
//    load 34-35 (515-530 ms) is 52+ ms under the SLO;
//  - at 45 req/s the load is 43; passing needs 5 arrivals (108 ms) out of the window, and
//    noise only makes TTFT longer. Only the first 39 of 60 requests see load <= 38, so the
//    attainment is at most 65% < 90%.
// Each probe gets a fresh fake server, so one probe's arrivals never load the next.
TEST_F(RunnerTest, GoodputSearchFindsTheKnee) {
  const FakeServerOptions fake{.base_ttft_ms = 5, .per_load_ms = 15, .busy_ms = 975, .tpot_ms = 2};
  auto w = workload(60, 4);
  MetricsOptions mo;
  mo.slo.ttft_ms = 5 + 15 * 38.5;
  GoodputSearchOptions so{.min_rate = 5, .max_rate = 85, .steps = 3, .target_attainment = 0.9};
  auto probe = [&](double rate) -> StatusOr<GoodputProbe> {
    ECO_ASSIGN_OR_RETURN(auto server, FakeOpenAiServer::start(fake));
    BenchmarkRunner runner(options_for(server->port()), clock_, builder_);
    ECO_ASSIGN_OR_RETURN(auto arrivals, ArrivalProcess::create({.rate = rate, .burstiness = INFINITY}));
    auto times = arrivals.times(w.size());
    ECO_ASSIGN_OR_RETURN(auto res, runner.run(w, times));
    auto m = compute_metrics(res.records, res.duration_s, mo);
    return GoodputProbe{.rate = rate, .attainment = m.attainment, .goodput = m.goodput};
  };
  auto result = goodput_search(so, probe);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_EQ(result->probes.size(), 3u);
  EXPECT_DOUBLE_EQ(result->probes[0].rate, 45);
  EXPECT_FALSE(result->probes[0].pass) << "attainment " << result->probes[0].attainment;
  EXPECT_LE(result->probes[0].attainment, 0.66);
  EXPECT_DOUBLE_EQ(result->probes[1].rate, 25);
  EXPECT_TRUE(result->probes[1].pass) << "attainment " << result->probes[1].attainment;
  EXPECT_DOUBLE_EQ(result->probes[2].rate, 35);
  EXPECT_TRUE(result->probes[2].pass) << "attainment " << result->probes[2].attainment;
  EXPECT_DOUBLE_EQ(result->resolution, 10.0);
  ASSERT_TRUE(result->best_rate.has_value());
  EXPECT_DOUBLE_EQ(*result->best_rate, 35);
  EXPECT_LE(std::abs(*result->best_rate - 40.0), result->resolution);
}

TEST(GoodputSearch, BisectsAgainstAPureModel) {
  // Attainment 1 below 10 req/s, 0 above: answer within (100-1)/2^7 of 10.
  auto probe = [](double rate) -> StatusOr<GoodputProbe> {
    return GoodputProbe{.attainment = rate <= 10 ? 1.0 : 0.0, .goodput = rate <= 10 ? rate : 0.0};
  };
  std::vector<double> seen;
  auto r = goodput_search({.min_rate = 1, .max_rate = 100, .steps = 7}, probe,
                          [&](const GoodputProbe& p) { seen.push_back(p.rate); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_DOUBLE_EQ(seen[0], 50.5);
  ASSERT_TRUE(r->best_rate);
  EXPECT_LE(*r->best_rate, 10);
  EXPECT_GE(*r->best_rate, 10 - 99.0 / 128);
  // Everything fails: the minimum is probed and there is no answer.
  auto none = goodput_search({.min_rate = 1, .max_rate = 2, .steps = 2},
                             [](double) -> StatusOr<GoodputProbe> { return GoodputProbe{}; });
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->best_rate);
  EXPECT_EQ(none->probes.size(), 3u);
  EXPECT_FALSE(goodput_search({.min_rate = 5, .max_rate = 2}, probe).ok());
}

}  // namespace
}  // namespace ecoserve::loadgen
