// Regression tests against the real binary for what a hostile or careless
// client once did to `ecoserve serve` (issue 8): numbers beyond a double,
// SIGTERM in the middle of streams, slow and idle connections, connection
// floods, huge prompts, Expect: 100-continue.
#include <utility>  // before Boost.Asio (1.74 awaitable.hpp needs std::exchange)

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "server/server_test_client.h"

namespace ecoserve::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

using namespace ::ecoserve::server::testing;  // NOLINT: the test client helpers

// A raw connection for requests the Beast client would not send.
struct RawConnection {
  net::io_context ioc;
  tcp::socket socket{ioc};

  bool connect(uint16_t port) {
    beast::error_code ec;
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
    if (!ec) set_timeouts(socket, 20);
    return !ec;
  }
  bool send(std::string_view bytes) {
    beast::error_code ec;
    net::write(socket, net::buffer(bytes), ec);
    return !ec;
  }
  // Reads until `needle` appears or the peer closes; `closed` tells which.
  std::string read_until(std::string_view needle, bool* closed = nullptr) {
    std::string got;
    char buf[16384];
    for (;;) {
      beast::error_code ec;
      size_t n = socket.read_some(net::buffer(buf), ec);
      const size_t from = got.size() > needle.size() ? got.size() - needle.size() : 0;  // search only what is new
      got.append(buf, n);
      if (ec) {
        if (closed) *closed = true;
        return got;
      }
      if (!needle.empty() && got.find(needle, from) != std::string::npos) {
        if (closed) *closed = false;
        return got;
      }
    }
  }
};

std::string post_head(const std::string& target, size_t content_length, const std::string& extra = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(content_length) + "\r\n\r\n";
}

// A client with a 4 KB receive buffer (set before connecting, so the stream backs
// up into the server) that starts a stream far larger than the socket buffers
// hold: 32 choices of 490 tokens, ~2 KB per chunk with 20 top logprobs. Returns
// once the first token chunk arrived; `got` holds what was read.
void start_big_stream(uint16_t port, RawConnection& c, std::string& got) {
  c.socket.open(tcp::v4());
  int small = 4096;
  ::setsockopt(c.socket.native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(c.connect(port));
  const std::string body = json{{"prompt", kPrompt}, {"max_tokens", 490}, {"ignore_eos", true}, {"stream", true},
                                {"n", 32}, {"logprobs", 20}}.dump();
  ASSERT_TRUE(c.send(post_head("/v1/completions", body.size()) + body));
  got = c.read_until("\"text\"");
  ASSERT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got.substr(0, 300);
}

class ServerHardening : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_F(ServerHardening, NumbersBeyondADoubleAre400AndTheServerKeepsServing) {
  ServerProcess server;
  ASSERT_EQ(server.start({}), "");
  struct Case { const char* target; const char* body; const char* param; };
  for (const Case& c : {Case{"/v1/completions", R"({"prompt":"hi","temperature":1e400})", "temperature"},
                        Case{"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":-1e400})",
                             "max_tokens"},
                        Case{"/v1/completions", R"({"prompt":"hi","top_p":1e999})", "top_p"},
                        Case{"/v1/completions", "1e400", ""}}) {
    Reply r = request(server.port(), http::verb::post, c.target, c.body);
    ASSERT_EQ(r.status, 400) << c.body << " -> " << r.body;
    json e = r.j()["error"];
    EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
    if (*c.param) {
      EXPECT_EQ(e["param"], c.param) << r.body;
    } else {
      EXPECT_TRUE(e["param"].is_null()) << r.body;
    }
    EXPECT_NE(e["message"].get<std::string>().find("out of range"), std::string::npos) << r.body;
  }
  EXPECT_EQ(::kill(server.pid(), 0), 0) << "the server process is gone";
  EXPECT_EQ(request(server.port(), http::verb::get, "/health").status, 200);
  Reply ok = post(server.port(), "/v1/completions", json{{"prompt", kPrompt}, {"max_tokens", 4}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(server.stop(), 0);
}

// Issue 8, defect 2: with a 0.1 s drain and SIGTERM 50 ms after 10 streams
// start, one stream in 130 once ended without `data: [DONE]`. Every stream
// the server answered 200 must end with its final chunk and [DONE].
TEST_F(ServerHardening, SigtermDuringStreamsNeverLosesTheTerminator) {
  constexpr int kRounds = 50;
  constexpr int kStreams = 10;
  int started = 0, refused = 0;
  for (int round = 0; round < kRounds; ++round) {
    ServerProcess server;
    ASSERT_EQ(server.start({"--drain-timeout", "0.1", "--max-num-seqs", "16"}), "") << "round " << round;
    std::vector<Reply> replies(kStreams);
    std::atomic<int> sent{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kStreams; ++i) {
      threads.emplace_back([&, i] {
        const json req = {{"prompt", kPrompt}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true},
                          {"seed", i}};
        ++sent;
        replies[i] = post(server.port(), "/v1/completions", req);
      });
    }
    while (sent.load() < kStreams) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(server.stop(), 0) << "round " << round;  // SIGTERM, then wait for the exit
    for (auto& t : threads) t.join();
    for (int i = 0; i < kStreams; ++i) {
      const Reply& r = replies[i];
      if (r.status != 200) {
        // Not started: refused while draining (503) or never connected; never a broken 200.
        EXPECT_TRUE(r.status == 503 || r.status == -1) << "round " << round << ": " << r.status << " " << r.body;
        ++refused;
        continue;
      }
      ++started;
      auto events = sse_payloads(r.body);
      ASSERT_GE(events.size(), 2u) << "round " << round << " stream " << i << ": " << r.body;
      EXPECT_EQ(events.back(), "[DONE]") << "round " << round << " stream " << i << " ends with: "
                                         << r.body.substr(r.body.size() > 300 ? r.body.size() - 300 : 0);
      json last = json::parse(events[events.size() - 2], nullptr, false);
      ASSERT_TRUE(last.is_object()) << events[events.size() - 2];
      const auto& reason = last["choices"][0]["finish_reason"];
      EXPECT_TRUE(reason == "abort" || reason == "length") << last.dump();
    }
  }
  RecordProperty("streams_started", started);
  RecordProperty("streams_refused", refused);
  EXPECT_GT(started, kRounds * kStreams / 2) << "too few streams started to test anything";
}

// The mechanism behind defect 2, made deterministic: a client that reads slowly
// holds the end of its stream in the server's write queue when the drain timeout
// aborts it. The request must count as running until `data: [DONE]` is written,
// so the server waits for it (up to 2 s after the abort) instead of exiting first.
TEST_F(ServerHardening, SigtermWaitsForASlowReaderToGetItsTerminator) {
  ServerProcess server;
  // A short drain: the stream (32 choices up to the context) must still be running
  // when it ends, even on a fast machine.
  ASSERT_EQ(server.start({"--drain-timeout", "0.2"}), "");
  RawConnection c;
  std::string got;
  ASSERT_NO_FATAL_FAILURE(start_big_stream(server.port(), c, got));
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  // The drain times out with ~10 MB of the stream unread (more than the kernel's buffers hold).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  bool closed = false;
  got += c.read_until("data: [DONE]", &closed);
  EXPECT_FALSE(closed) << "the stream was cut off; it ends with: " << got.substr(got.size() > 400 ? got.size() - 400 : 0);
  auto events = sse_payloads(got);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  json last = json::parse(events[events.size() - 2], nullptr, false);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "abort") << events[events.size() - 2].substr(0, 300);
  EXPECT_EQ(server.stop(), 0);
}

// A client that stops reading a stream is dropped after --send-timeout (its
// generation, if still running, cancelled) instead of the server queueing its
// output without bound.
TEST_F(ServerHardening, ClientThatStopsReadingIsDroppedAfterTheSendTimeout) {
  ServerProcess server;
  ASSERT_EQ(server.start({"--send-timeout", "1"}), "");
  RawConnection c;
  std::string got;
  ASSERT_NO_FATAL_FAILURE(start_big_stream(server.port(), c, got));
  // Stop reading. Once every token is generated (however fast this build is), ~13 MB
  // wait in the server for a reader whose buffers hold a few: no byte moves for the
  // send timeout, and the server drops us.
  double running = -1;
  for (int i = 0; i < 600 && running != 0.0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    running = metric_value(request(server.port(), http::verb::get, "/metrics").body, "ecoserve:num_requests_running");
  }
  ASSERT_EQ(running, 0.0);
  // Generated is not yet written: the connection's strand may still be turning the last
  // token events into chunks (slow under the sanitizers: ~13 MB of JSON), and the send
  // timer it then sees expire must be handled before we start reading, or our reads
  // re-arm it (it passed every run but one under ASan with 2.5 s here, failing there with
  // the whole stream delivered). 6 s leaves the strand time to catch up.
  std::this_thread::sleep_for(std::chrono::milliseconds(6000));
  bool closed = false;
  got += c.read_until("data: [DONE]", &closed);
  EXPECT_TRUE(closed) << "the server kept the connection";
  EXPECT_EQ(got.find("data: [DONE]"), std::string::npos);
  // (The tiny model finishes all 32 sequences within about a second, so whether the
  // drop cancels a running generation is checked by DisconnectMidStreamFreesKvCache,
  // which takes the same client_gone() path.)
  EXPECT_EQ(request(server.port(), http::verb::get, "/health").status, 200);
  EXPECT_EQ(server.stop(), 0);
}

// Issue 8, defect 7: the drain log printed "up to 0 s" for --drain-timeout 0.1.
TEST_F(ServerHardening, DrainLogShowsTheRealTimeout) {
  const std::string log = ::testing::TempDir() + "/ecoserve_drain_log.txt";
  ServerProcess server;
  ASSERT_EQ(server.start({"--drain-timeout", "0.1"}, log), "");
  EXPECT_EQ(server.stop(), 0);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("SIGTERM: draining (up to 0.1 s)"), std::string::npos) << text;
  std::remove(log.c_str());
}

TEST_F(ServerHardening, SlowHeadersAreCutOffWhileOthersAreServed) {
  ServerProcess server;
  ASSERT_EQ(server.start({"--header-timeout", "1", "--keep-alive-timeout", "1"}), "");
  constexpr int kSlow = 40;
  std::vector<std::unique_ptr<RawConnection>> slow;
  const std::string head = post_head("/v1/completions", 20);
  for (int i = 0; i < kSlow; ++i) {
    auto c = std::make_unique<RawConnection>();
    ASSERT_TRUE(c->connect(server.port())) << i;
    ASSERT_TRUE(c->send(head.substr(0, 1)));
    slow.push_back(std::move(c));
  }
  // Slowloris: one more byte per connection every 200 ms; the head never completes in time.
  const auto start = Clock::now();
  std::vector<bool> cut(kSlow, false);
  int served = 0;
  for (size_t k = 1; k < head.size() && Clock::now() - start < std::chrono::seconds(8); ++k) {
    for (int i = 0; i < kSlow; ++i) {
      if (!cut[i] && !slow[i]->send(head.substr(k, 1))) cut[i] = true;  // reset by the server
    }
    // Normal clients are served meanwhile.
    if (request(server.port(), http::verb::get, "/health").status == 200) ++served;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (std::count(cut.begin(), cut.end(), true) == kSlow) break;
  }
  for (int i = 0; i < kSlow; ++i) {
    bool closed = false;
    const std::string got = slow[i]->read_until("", &closed);
    EXPECT_TRUE(closed) << i;
    if (!got.empty()) {
      EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
    }
  }
  EXPECT_GE(served, 3);
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(elapsed, 15.0) << "slow connections stayed open";
  // The 408 names the limit.
  RawConnection one;
  ASSERT_TRUE(one.connect(server.port()));
  ASSERT_TRUE(one.send("GET /health HTTP/1.1\r\nHo"));
  bool closed = false;
  const std::string got = one.read_until("", &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  EXPECT_NE(got.find("the request head did not arrive within 1 s"), std::string::npos) << got;
  // An idle keep-alive connection is closed after --keep-alive-timeout.
  RawConnection idle;
  ASSERT_TRUE(idle.connect(server.port()));
  ASSERT_TRUE(idle.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string first = idle.read_until("\r\n\r\n");
  EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  const auto idle_start = Clock::now();
  bool idle_closed = false;
  idle.read_until("", &idle_closed);
  EXPECT_TRUE(idle_closed);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - idle_start).count(), 10.0);
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServerHardening, ConnectionCapAnswers503AndFreesSlots) {
  ServerProcess server;
  ASSERT_EQ(server.start({"--max-connections", "4", "--header-timeout", "30"}), "");
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 4; ++i) {
    auto c = std::make_unique<RawConnection>();
    ASSERT_TRUE(c->connect(server.port()));
    held.push_back(std::move(c));
  }
  // The accept loop may not have counted the last one yet: retry briefly until the cap shows.
  Reply over;
  for (int i = 0; i < 50; ++i) {
    over = request(server.port(), http::verb::get, "/health");
    if (over.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(over.status, 503) << over.body;
  EXPECT_EQ(over.j()["error"]["code"], "too_many_connections") << over.body;
  held.pop_back();  // closing one frees its slot
  Reply ok;
  for (int i = 0; i < 100; ++i) {
    ok = request(server.port(), http::verb::get, "/health");
    if (ok.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ok.status, 200) << ok.body;
  held.clear();
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServerHardening, HugePromptIsRejectedByItsBytesWhileHealthAnswers) {
  ServerProcess server;
  ASSERT_EQ(server.start({"--threads", "1"}), "");
  const std::string body = json{{"prompt", std::string(4'000'000, 'a')}}.dump();
  std::atomic<bool> done{false};
  std::vector<std::thread> posters;
  std::vector<Reply> replies(4);
  for (int i = 0; i < 4; ++i) {
    posters.emplace_back([&, i] { replies[i] = request(server.port(), http::verb::post, "/v1/completions", body); });
  }
  int health_ok = 0;
  for (int i = 0; i < 10; ++i) {
    if (request(server.port(), http::verb::get, "/health").status == 200) ++health_ok;
  }
  for (auto& t : posters) t.join();
  EXPECT_EQ(health_ok, 10);
  for (const Reply& r : replies) {
    ASSERT_EQ(r.status, 400) << r.body.substr(0, 300);
    json e = r.j()["error"];
    EXPECT_EQ(e["param"], "prompt");
    EXPECT_NE(e["message"].get<std::string>().find("the prompt is 4000000 bytes long"), std::string::npos) << r.body;
  }
  // The same size in chat messages.
  const json chat = {{"messages", json::array({{{"role", "user"}, {"content", std::string(4'000'000, 'b')}}})}};
  Reply c = post(server.port(), "/v1/chat/completions", chat);
  ASSERT_EQ(c.status, 400) << c.body.substr(0, 300);
  EXPECT_EQ(c.j()["error"]["param"], "messages");
  EXPECT_EQ(server.stop(), 0);
}

TEST_F(ServerHardening, ExpectContinueGetsAnInterimResponse) {
  ServerProcess server;
  ASSERT_EQ(server.start({}), "");
  const std::string body = json{{"prompt", kPrompt}, {"max_tokens", 3}, {"temperature", 0}}.dump();
  RawConnection c;
  ASSERT_TRUE(c.connect(server.port()));
  ASSERT_TRUE(c.send(post_head("/v1/completions", body.size(), "Expect: 100-continue\r\n")));
  const std::string interim = c.read_until("\r\n\r\n");
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.send(body));
  const std::string reply = c.read_until("\"usage\"");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("\"text_completion\""), std::string::npos) << reply;
  EXPECT_EQ(server.stop(), 0);
}

// EngineOptions::bf16_weights through serve: the log says what auto decided (made where this
// CPU runs the bf16 tiles and they fit the share): in-process instances share one set made
// once, --multi-process children each get their part of the share and decide; --no-bf16-weights
// says nothing, and --bf16-weights makes them or stops the start with the engine's error.
TEST_F(ServerHardening, InstancesLogTheirBf16WeightsDecision) {
  const kernels::CpuFeatures cpu = kernels::detect_cpu_features();
  const bool tiles = kernels::default_isa() == kernels::Isa::kAvx512Amx && kernels::default_amx_bf16() &&
                     kernels::amx_bf16_supported(cpu);
  // The bf16 vectors (Zen 5) read made tiles of float and Q6_K weights only: none in this Q8_0 model.
  const bool vectors = kernels::default_isa() == kernels::Isa::kAvx512VnniZmm && kernels::default_matmul_bf16() &&
                       kernels::bf16_vectors_supported(cpu);
  const std::string log = (std::filesystem::temp_directory_path() / "ecoserve_bf16_weights_serve.log").string();
  auto start = [&](const std::vector<std::string>& args, std::string* text) {
    ServerProcess server;
    const std::string err = server.start(args, log);
    // Read once every process has exited: an instance process's lines can reach the file
    // after the server answers (the test failed once so under ctest -j2).
    if (err.empty()) {
      EXPECT_EQ(server.stop(), 0);
    }
    std::ifstream in(log);
    *text = std::string(std::istreambuf_iterator<char>(in), {});
    return err;
  };
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const std::string not_here =
      vectors ? "bf16 weights auto: not made (no matrix the bf16 vectors take)"
              : "bf16 weights auto: not made (neither the bf16 tiles nor the bf16 vectors run here)";
  std::string text;
  // In one process: one set for both instances, decided and made once.
  ASSERT_EQ(start({"--instances", "2", "--threads-per-instance", "1", "--bf16-weights=auto"}, &text), "") << text;
  EXPECT_EQ(count(text, tiles ? "bf16 weights auto: made at load: " : not_here), 1) << text;
  EXPECT_EQ(count(text, "MB, shared by the 2 instances"), tiles ? 1 : 0) << text;
  EXPECT_EQ(count(text, "bf16 weights shared: "), tiles ? 2 : 0) << text;
  // In processes of their own: each decides with half the share (here far too little).
  ASSERT_EQ(start({"--instances", "2", "--threads-per-instance", "1", "--multi-process", "--bf16-weights=auto",
                   "--bf16-weights-share", "0.000000001"},
                  &text),
            "")
      << text;
  EXPECT_EQ(count(text, tiles ? "bf16 weights auto: not made (" : not_here), 2) << text;
  if (tiles) {
    EXPECT_EQ(count(text, "MB available less"), 2) << text;
  }
  ASSERT_EQ(start({"--no-bf16-weights"}, &text), "") << text;
  EXPECT_EQ(count(text, "bf16 weights"), 0) << text;
  const std::string forced = start({"--bf16-weights"}, &text);
  if (tiles) {
    EXPECT_EQ(forced, "") << text;
    EXPECT_EQ(count(text, "bf16 weights made at load: "), 1) << text;
  } else if (vectors) {
    EXPECT_EQ(forced, "") << text;
    EXPECT_EQ(count(text, "bf16 weights not made (no matrix the bf16 vectors take)"), 1) << text;
  } else {
    EXPECT_NE(forced, "");
    EXPECT_NE(text.find("needs the bf16 tiles"), std::string::npos) << text;
  }
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace ecoserve::server
