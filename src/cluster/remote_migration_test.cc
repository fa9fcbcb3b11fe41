// Llumnix live migration in multi-process mode: a cluster::Router over
// RemoteBackends, each talking to an InstanceService over real ZeroMQ sockets.
//  - In this process (InstanceServices on loopback, TinyStories engines paced at
//    1 ms a step): tokens equal an unmigrated run (once and there and back, f32
//    and f16 KV), draining by migration, every migration call failing exactly once
//    when its instance dies or its answer is late (and what a late answer would
//    leave behind undone), and a silent router's suspended request and
//    reservations cleaned up by the instance.
//  - Real `ecoserve instance` processes (a random-weight 15M model, about 1 ms a
//    token on one thread): the destination SIGKILLed mid-copy, the source
//    SIGKILLed after the commit.
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "base/eventually.h"
#include "base/subprocess.h"
#include "base/test_data.h"
#include "cluster/cluster_test_util.h"
#include "cluster/instance_backend.h"
#include "cluster/instance_service.h"
#include "cluster/remote_backend.h"
#include "cluster/router.h"

namespace ecoserve::cluster {
namespace {

constexpr const char* kModel = "models/tinystories-656k-q8_0.gguf";
constexpr const char* kVocab = "vocab/ggml-vocab-llama-spm.gguf";
constexpr const char* kPrompt = "Once upon a time, there was a little girl named Lily. She";

using testing::Collector;
using testing::Outcome;

int64_t aborted(const ClusterStats& st, const std::string& reason) {
  for (const auto& [r, n] : st.migrations_aborted) {
    if (r == reason) return n;
  }
  return 0;
}

ClusterStats wait_stats(Router& router, const std::function<bool(const ClusterStats&)>& pred) {
  ClusterStats st;
  eventually([&] { return pred(st = router.cluster_stats()); });
  return st;
}

// What tests share: the model, requests, an unmigrated reference, remote backends
// and an llumnix router over them.
class MigrationFixture : public ::testing::Test {
 protected:
  instance::GenerationRequest request(uint64_t id, const std::string& text, float temperature, int32_t max_tokens) {
    return testing::seeded_request(*model_, id, text, temperature, max_tokens);
  }

  engine::EngineOptions engine_options(engine::KvCacheType kv) const {
    engine::EngineOptions eo;
    eo.num_threads = 1;
    eo.num_kv_blocks = 128;
    eo.kv_cache_type = kv;
    return eo;
  }

  // What one plain embedded instance produces for the request.
  std::vector<int32_t> reference(engine::KvCacheType kv, instance::GenerationRequest r) {
    auto single = InstanceBackend::create(model_, engine_options(kv), {}, &clock_);
    EXPECT_TRUE(single.ok()) << single.status().to_string();
    if (!single.ok()) return {};
    (*single)->start();
    Collector c;
    EXPECT_TRUE((*single)->submit(std::move(r), c.sink()).ok());
    auto got = c.wait(1);
    (*single)->stop();
    return got.begin()->second.tokens;
  }

  std::unique_ptr<RemoteBackend> connect(const std::string& address, Duration peer_timeout = from_ms(3000),
                                         Duration call_timeout = from_ms(5000)) {
    RemoteBackendOptions o;
    o.address = address;
    o.peer_timeout = peer_timeout;
    o.call_timeout = call_timeout;
    o.status_interval = from_ms(50);
    auto r = RemoteBackend::connect(o, &clock_);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return nullptr;
    (*r)->set_model(model_);
    return std::move(*r);
  }

  // `route`: "round-robin" sends a fresh router's first request to the first member.
  std::unique_ptr<Router> llumnix(std::vector<std::unique_ptr<GenerationBackend>> members, RouterOptions ro = {},
                                  const std::string& route = "freeness") {
    ro.strategy = "llumnix";
    ro.router = route;
    ro.probe_interval = Duration::zero();
    auto r = Router::create(std::move(members), ro, &clock_);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return nullptr;
    (*r)->start();
    return std::move(*r);
  }

  std::shared_ptr<const model::LlamaModel> model_;
  SteadyClock clock_;
};

// ---------------------------------------------------------------------------
// InstanceServices in this process.

struct Served {
  std::unique_ptr<InstanceBackend> backend;
  std::unique_ptr<InstanceService> service;
  ~Served() {
    if (backend) backend->stop();
    if (service) service->stop();
  }
  const std::string& address() const { return service->endpoint(); }
  void kill() {  // as SIGKILL looks from outside: no more answers, nothing said
    service->stop();
    backend->stop();
  }
};

class RemoteMigrationTest : public MigrationFixture {
 protected:
  void SetUp() override {
    auto path = shared_data_path(kModel);
    if (!path) GTEST_SKIP() << missing_data_message(kModel);
    auto m = model::LlamaModel::load(*path);
    ASSERT_TRUE(m.ok());
    model_ = *m;
  }

  // An engine paced at 1 ms a step (this tiny model takes 0.1 ms a token), so a
  // request runs long enough for a migration to reach it.
  std::unique_ptr<Served> serve(engine::KvCacheType kv = engine::KvCacheType::kF32,
                                Duration router_timeout = from_ms(10000), bool hooks = false) {
    instance::InstanceOptions io;
    io.on_step = [](const instance::StepStats&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
    auto s = std::make_unique<Served>();
    auto b = InstanceBackend::create(model_, engine_options(kv), io, &clock_);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    if (!b.ok()) return nullptr;
    s->backend = std::move(*b);
    s->backend->start();
    InstanceServiceOptions so;
    so.model_id = "tinystories";
    so.block_size = 16;
    so.router_timeout = router_timeout;
    InstanceBackend* raw = s->backend.get();
    if (hooks) so.freeze_for_testing = [raw](Duration d) { raw->freeze_for_testing(d); };
    auto svc = InstanceService::create(s->backend.get(), so, &clock_);
    EXPECT_TRUE(svc.ok()) << svc.status().to_string();
    if (!svc.ok()) return nullptr;
    s->service = std::move(*svc);
    s->service->start();
    return s;
  }

  static void expect_no_blocks_in_use(const Served& s, const std::string& label) {
    EXPECT_TRUE(eventually([&] { return s.backend->status().kv_usage == 0.0; }))
        << label << ": " << s.address() << " still uses " << s.backend->status().kv_usage << " of its KV";
  }
};

TEST_F(RemoteMigrationTest, MigratedOnceOrThereAndBackTheTokensEqualAnUnmigratedRun) {
  for (engine::KvCacheType kv : {engine::KvCacheType::kF32, engine::KvCacheType::kF16}) {
    for (float temperature : {0.0f, 0.9f}) {
      for (int hops : {1, 2}) {
        const std::string label = std::string(engine::kv_cache_type_name(kv)) + " T=" + std::to_string(temperature) +
                                  " hops=" + std::to_string(hops);
        const std::vector<int32_t> want = reference(kv, request(1, kPrompt, temperature, 64));
        ASSERT_EQ(want.size(), 64u);
        auto a = serve(kv);
        auto b = serve(kv);
        ASSERT_TRUE(a && b);
        std::vector<std::unique_ptr<GenerationBackend>> members;
        members.push_back(connect(a->address()));
        members.push_back(connect(b->address()));
        ASSERT_TRUE(members[0] && members[1]);
        std::vector<RemoteBackend*> remotes = {static_cast<RemoteBackend*>(members[0].get()),
                                               static_cast<RemoteBackend*>(members[1].get())};
        auto router = llumnix(std::move(members));
        ASSERT_TRUE(router);
        // The members are named by their addresses. Each hop goes to the other
        // instance after a few more tokens, started from the event sink (a socket
        // thread; the router is not locked there); a hop that finds the previous one
        // still under way tries again at the next token.
        const std::vector<std::string> names = {a->address(), b->address()};
        Router* r = router.get();
        std::atomic<int> started{0};
        std::mutex where_mu;
        int where = -1;  // index of the instance running it, once known
        std::vector<std::string> errors;
        auto on_event = [&, r, hops](const instance::TokenEvent& ev) {
          if (ev.finished || ev.token < 0 || started.load() >= hops) return;
          const int k = started.load();
          const ClusterStats st = r->cluster_stats();
          if (st.migrations_completed != k || st.migrations_started != k) return;
          std::lock_guard<std::mutex> lock(where_mu);
          for (int to : where < 0 ? std::vector<int>{1, 0} : std::vector<int>{1 - where}) {
            const Status s = r->migrate(RequestId(1), names[to]);
            if (s.ok()) {
              where = to;
              started.fetch_add(1);
              return;
            }
            if (where >= 0 || s.message().find("already runs there") == std::string::npos) {
              errors.push_back(s.to_string());
            }
          }
        };
        Collector c;
        ASSERT_TRUE(router->submit(request(1, kPrompt, temperature, 64), c.sink(on_event)).ok());
        auto got = c.wait(1);
        EXPECT_EQ(got[1].tokens, want) << label;
        EXPECT_EQ(got[1].reason, "length") << label << ": " << got[1].error;
        EXPECT_EQ(got[1].finals, 1) << label;
        {
          std::lock_guard<std::mutex> lock(where_mu);
          EXPECT_TRUE(errors.empty()) << label << ": " << errors.front();
        }
        const ClusterStats st = wait_stats(*router, [&](const ClusterStats& s) { return s.migrations_completed == hops; });
        EXPECT_EQ(st.migrations_started, hops) << label;
        EXPECT_EQ(st.migrations_completed, hops) << label;
        EXPECT_TRUE(st.migrations_aborted.empty()) << label << ": " << st.migrations_aborted.front().first;
        EXPECT_GT(st.migrated_bytes, 0) << label;
        ASSERT_EQ(st.recent_migrations.size(), static_cast<size_t>(hops)) << label;
        for (int h = 0; h < hops; ++h) {
          const MigrationRecord& m = st.recent_migrations[static_cast<size_t>(h)];
          EXPECT_EQ(m.outcome, "completed") << label;
          EXPECT_EQ(m.reason, "manual") << label;
          EXPECT_NE(m.from, m.to) << label;
          EXPECT_GE(m.stages, 1) << label;
          EXPECT_GT(m.context_tokens, 0) << label;
          if (h > 0) {
            EXPECT_EQ(m.from, st.recent_migrations[static_cast<size_t>(h - 1)].to) << label;
          }
        }
        // Nothing reserved, suspended or held anywhere; no request left on either
        // side of the wire (the source forgot the request it handed over).
        expect_no_blocks_in_use(*a, label);
        expect_no_blocks_in_use(*b, label);
        EXPECT_TRUE(eventually([&] { return remotes[0]->idle() && remotes[1]->idle(); })) << label;
        EXPECT_TRUE(a->backend->idle() && b->backend->idle()) << label;
        router->stop();
      }
    }
  }
}

// remove_instance under llumnix drains by migration over the wire: the planner
// moves the requests of the instance being removed, whose RemoteBackend then holds
// nothing (committed migrations forget their source's requests) and is removed;
// every request keeps its exact tokens.
TEST_F(RemoteMigrationTest, RemovingAnInstanceMigratesItsRequestsAway) {
  const char* prompts[] = {"Once upon a time", "The little dog ran to the park and", "One day", "Lily and Ben"};
  std::map<uint64_t, std::vector<int32_t>> want;
  for (uint64_t id = 1; id <= 4; ++id) {
    want[id] = reference(engine::KvCacheType::kF32, request(id, prompts[id - 1], 0.0f, 300));
  }
  auto a = serve();
  auto b = serve();
  ASSERT_TRUE(a && b);
  std::vector<std::unique_ptr<GenerationBackend>> members;
  members.push_back(connect(a->address()));
  members.push_back(connect(b->address()));
  ASSERT_TRUE(members[0] && members[1]);
  RouterOptions ro;
  ro.migrate_interval = from_ms(20);
  ro.watchdog_interval = from_ms(20);
  ro.migration.max_migrations = 2;
  auto router = llumnix(std::move(members), ro);
  ASSERT_TRUE(router);
  Collector c;
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(router->submit(request(id, prompts[id - 1], 0.0f, 300), c.sink()).ok());
  }
  // Let them all start (freeness routing spreads them over both).
  ASSERT_TRUE(eventually([&] {
    for (uint64_t id = 1; id <= 4; ++id) {
      if (c.tokens_of(id) == 0) return false;
    }
    return true;
  }));
  ASSERT_TRUE(router->remove_instance(b->address()).ok());
  auto got = c.wait(4);
  for (uint64_t id = 1; id <= 4; ++id) {
    EXPECT_EQ(got[id].tokens, want[id]) << id;
    EXPECT_EQ(got[id].reason, "length") << got[id].error;
    EXPECT_EQ(got[id].finals, 1);
  }
  const ClusterStats st = wait_stats(*router, [](const ClusterStats& s) { return s.instances_removed == 1; });
  EXPECT_EQ(st.instances_removed, 1);
  for (const MigrationRecord& m : st.recent_migrations) {
    if (m.outcome == "completed") {
      EXPECT_EQ(m.reason, "drain");
      EXPECT_EQ(m.from, b->address());
    }
  }
  expect_no_blocks_in_use(*a, "a");
  expect_no_blocks_in_use(*b, "b");
  router->stop();
}

// A stop-and-copy stage of a hypothetical request 7 (2 prompt tokens, 1 generated):
// valid on the wire, refused by no check before it reaches an instance.
instance::MigrationChunk fake_last_stage() {
  instance::MigrationChunk c;
  c.begin = 0;
  c.end = 2;
  c.num_tokens = 3;
  c.last = true;
  c.kv = {1, 2, 3};
  c.handover.request.id = RequestId(7);
  c.handover.request.prompt = {1, 2};
  c.handover.request.sampling.max_tokens = 4;
  c.handover.output_tokens = {3};
  return c;
}

// Counts the answers each call gets.
struct Answers {
  std::mutex mu;
  std::map<std::string, std::vector<StatusCode>> got;
  void add(const std::string& call, StatusCode code) {
    std::lock_guard<std::mutex> lock(mu);
    got[call].push_back(code);
  }
  size_t total() {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& [k, v] : got) n += v.size();
    return n;
  }
  // Issues the five calls with a callback (migrate_in_cancel has none).
  void issue(RemoteBackend& r, std::atomic<int>* sink_calls) {
    r.migrate_out(RequestId(7), 0, true,
                  [this](StatusOr<instance::MigrationChunk> c) { add("migrate_out", c.status().code()); });
    r.migrate_out_finish(RequestId(7), false, [this](Status s) { add("migrate_out_finish", s.code()); });
    r.migrate_in_reserve(RequestId(7), 2, [this](Status s) { add("migrate_in_reserve", s.code()); });
    instance::MigrationChunk stage = fake_last_stage();
    stage.last = false;
    r.migrate_in_load(RequestId(7), stage, [this](Status s) { add("migrate_in_load", s.code()); });
    r.migrate_in_commit(
        fake_last_stage(), [sink_calls](const instance::TokenEvent&) { sink_calls->fetch_add(1); },
        [this](Status s) { add("migrate_in_commit", s.code()); });
    r.migrate_in_cancel(RequestId(7));
  }
};

// Every migration call to an instance that dies gets exactly one answer, an error,
// once death is noticed (peer_timeout); later calls fail at once; a commit's sink
// is never called for a commit that failed.
TEST_F(RemoteMigrationTest, EveryMigrationCallToADeadInstanceFailsExactlyOnce) {
  auto s = serve();
  ASSERT_TRUE(s);
  auto r = connect(s->address(), /*peer_timeout=*/from_ms(400), /*call_timeout=*/from_ms(20000));
  ASSERT_TRUE(r);
  s->kill();
  Answers answers;
  std::atomic<int> sink_calls{0};
  answers.issue(*r, &sink_calls);
  ASSERT_TRUE(eventually([&] { return answers.total() >= 5; }, 5.0));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // nothing answers twice
  EXPECT_EQ(answers.total(), 5u);
  for (const auto& [call, codes] : answers.got) {
    ASSERT_EQ(codes.size(), 1u) << call;
    EXPECT_EQ(codes[0], StatusCode::kUnavailable) << call;
  }
  EXPECT_EQ(sink_calls.load(), 0);
  EXPECT_TRUE(r->idle());
  // Known dead: every call is answered before it returns.
  Answers now;
  now.issue(*r, &sink_calls);
  EXPECT_EQ(now.total(), 5u);
  for (const auto& [call, codes] : now.got) EXPECT_EQ(codes, std::vector<StatusCode>{StatusCode::kUnavailable}) << call;
  EXPECT_EQ(sink_calls.load(), 0);
  // A stopped backend answers at once too.
  auto s2 = serve();
  ASSERT_TRUE(s2);
  auto r2 = connect(s2->address());
  ASSERT_TRUE(r2);
  r2->stop();
  Answers stopped;
  stopped.issue(*r2, &sink_calls);
  EXPECT_EQ(stopped.total(), 5u);
  EXPECT_EQ(sink_calls.load(), 0);
}

// An instance that answers nothing within call_timeout (its engine frozen):
// DEADLINE_EXCEEDED, once; the instance's late answer is dropped.
TEST_F(RemoteMigrationTest, AMigrationCallPastItsTimeoutFailsOnceWithDeadlineExceeded) {
  auto s = serve(engine::KvCacheType::kF32, from_ms(10000), /*hooks=*/true);
  ASSERT_TRUE(s);
  auto r = connect(s->address(), from_ms(3000), /*call_timeout=*/from_ms(200));
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->freeze_for_testing(from_ms(800)).ok());
  std::vector<StatusCode> got;
  std::mutex mu;
  r->migrate_in_reserve(RequestId(5), 32, [&](Status st) {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(st.code());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past the freeze: the late answer arrived
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(got, std::vector<StatusCode>{StatusCode::kDeadlineExceeded});
  }
  // The reservation the late call made is freed by the router's cancel.
  EXPECT_TRUE(eventually([&] { return s->backend->status().kv_usage > 0.0; }, 2.0));
  r->migrate_in_cancel(RequestId(5));
  expect_no_blocks_in_use(*s, "after cancel");
  EXPECT_TRUE(r->status().running);  // the instance itself is alive
}

// A stop-and-copy whose answer comes too late: the router takes it as failed (the
// request never left), so the backend resumes the request the instance suspended
// meanwhile. The request finishes there with its exact tokens.
TEST_F(RemoteMigrationTest, AStopAndCopyAnsweredTooLateIsResumedAtTheSource) {
  const std::vector<int32_t> want = reference(engine::KvCacheType::kF32, request(1, kPrompt, 0.0f, 120));
  auto s = serve(engine::KvCacheType::kF32, from_ms(10000), /*hooks=*/true);
  ASSERT_TRUE(s);
  auto r = connect(s->address(), from_ms(3000), /*call_timeout=*/from_ms(200));
  ASSERT_TRUE(r);
  Collector c;
  ASSERT_TRUE(r->submit(request(1, kPrompt, 0.0f, 120), c.sink()).ok());
  ASSERT_TRUE(eventually([&] { return c.tokens_of(1) >= 3; }));
  ASSERT_TRUE(r->freeze_for_testing(from_ms(600)).ok());
  std::atomic<int> answers{0};
  std::atomic<int> code{-1};
  r->migrate_out(RequestId(1), 0, /*stop=*/true, [&](StatusOr<instance::MigrationChunk> chunk) {
    code = static_cast<int>(chunk.status().code());
    answers.fetch_add(1);
  });
  auto got = c.wait(1);
  EXPECT_EQ(answers.load(), 1);
  EXPECT_EQ(code.load(), static_cast<int>(StatusCode::kDeadlineExceeded));
  EXPECT_EQ(got[1].tokens, want);
  EXPECT_EQ(got[1].reason, "length") << got[1].error;
  EXPECT_EQ(got[1].finals, 1);
  expect_no_blocks_in_use(*s, "source");
}

// A commit whose answer comes too late: the router resumes the request at the
// source, so the backend cancels it at the destination, where it may have been
// committed meanwhile. The commit's sink hears nothing; nothing stays anywhere.
TEST_F(RemoteMigrationTest, ACommitAnsweredTooLateIsCancelledAtTheDestination) {
  const std::vector<int32_t> want = reference(engine::KvCacheType::kF32, request(1, kPrompt, 0.0f, 120));
  auto src = serve();
  auto dst = serve(engine::KvCacheType::kF32, from_ms(10000), /*hooks=*/true);
  ASSERT_TRUE(src && dst);
  auto rs = connect(src->address());
  auto rd = connect(dst->address(), from_ms(3000), /*call_timeout=*/from_ms(200));
  ASSERT_TRUE(rs && rd);
  Collector c;
  ASSERT_TRUE(rs->submit(request(1, kPrompt, 0.0f, 120), c.sink()).ok());
  ASSERT_TRUE(eventually([&] { return c.tokens_of(1) >= 3; }));
  // Stop-and-copy at the source, by hand.
  std::promise<StatusOr<instance::MigrationChunk>> stopped;
  rs->migrate_out(RequestId(1), 0, true, [&](StatusOr<instance::MigrationChunk> ch) { stopped.set_value(std::move(ch)); });
  StatusOr<instance::MigrationChunk> chunk = stopped.get_future().get();
  ASSERT_TRUE(chunk.ok()) << chunk.status().to_string();
  ASSERT_TRUE(chunk->last);
  EXPECT_EQ(chunk->handover.request.id, RequestId(1));
  EXPECT_EQ(chunk->handover.output_tokens.size() + chunk->handover.request.prompt.size(),
            static_cast<size_t>(chunk->num_tokens));
  std::promise<Status> reserved;
  rd->migrate_in_reserve(RequestId(1), chunk->end, [&](Status st) { reserved.set_value(st); });
  ASSERT_TRUE(reserved.get_future().get().ok());
  // The destination freezes; the commit is late.
  ASSERT_TRUE(rd->freeze_for_testing(from_ms(600)).ok());
  std::atomic<int> sink_calls{0};
  std::promise<Status> committed;
  rd->migrate_in_commit(
      std::move(*chunk), [&](const instance::TokenEvent&) { sink_calls.fetch_add(1); },
      [&](Status st) { committed.set_value(st); });
  EXPECT_EQ(committed.get_future().get().code(), StatusCode::kDeadlineExceeded);
  // As the router does: free the reservation, resume at the source.
  rd->migrate_in_cancel(RequestId(1));
  std::promise<Status> resumed;
  rs->migrate_out_finish(RequestId(1), false, [&](Status st) { resumed.set_value(st); });
  EXPECT_TRUE(resumed.get_future().get().ok());
  auto got = c.wait(1);
  EXPECT_EQ(got[1].tokens, want);
  EXPECT_EQ(got[1].reason, "length") << got[1].error;
  EXPECT_EQ(got[1].finals, 1);
  // Once the destination thaws, its late commit is cancelled: nothing runs or stays there.
  EXPECT_TRUE(eventually([&] { return dst->backend->idle() && dst->backend->status().kv_usage == 0.0; }));
  expect_no_blocks_in_use(*src, "source");
  EXPECT_EQ(sink_calls.load(), 0);
  EXPECT_TRUE(rd->idle());
}

// A router that suspended a request (stop-and-copy) at one instance and reserved
// blocks at another, then fell silent (SIGKILLed), leaves nothing behind: the
// suspended request is aborted like its other requests, the reservation freed.
TEST_F(RemoteMigrationTest, ASilentRoutersSuspendedRequestAndReservationsAreCleanedUp) {
  // A 2 s router timeout: long enough that a loaded machine (ctest -j2) never
  // declares the router silent while the test is still talking to it (300 ms
  // once did), short enough for the cleanup to come well within eventually()'s 10 s.
  auto src = serve(engine::KvCacheType::kF32, from_ms(2000));
  auto dst = serve(engine::KvCacheType::kF32, from_ms(2000));
  ASSERT_TRUE(src && dst);
  {
    zmq::context_t ctx;
    // Sends `m` and reads until the reply to it (events of the request may come first).
    auto call = [&](zmq::socket_t& sock, transport::Message m) -> StatusOr<transport::Message> {
      const uint64_t id = m.call;
      const std::vector<uint8_t> bytes = transport::encode(m, clock_.now());
      sock.send(zmq::buffer(bytes));
      for (;;) {
        zmq::message_t reply;
        if (!sock.recv(reply)) return deadline_exceeded_error("no reply");
        auto d = transport::decode({static_cast<const uint8_t*>(reply.data()), reply.size()}, clock_.now());
        if (!d.ok()) return d.status();
        if (d->kind != transport::Kind::kEvent && d->call == id) return d;
      }
    };
    auto open = [&](const Served& s) {
      zmq::socket_t sock(ctx, zmq::socket_type::dealer);
      sock.set(zmq::sockopt::linger, 0);
      sock.set(zmq::sockopt::rcvtimeo, 10000);
      sock.connect(s.address());
      return sock;
    };
    zmq::socket_t to_src = open(*src), to_dst = open(*dst);
    transport::Message submit;
    submit.kind = transport::Kind::kSubmit;
    submit.call = 1;
    submit.request = request(1, kPrompt, 0.0f, 400);
    auto ack = call(to_src, submit);
    ASSERT_TRUE(ack.ok() && ack->code == StatusCode::kOk);
    // Wait for a few tokens, then stop-and-copy it.
    int tokens = 0;
    while (tokens < 3) {
      zmq::message_t ev;
      ASSERT_TRUE(to_src.recv(ev));
      auto d = transport::decode({static_cast<const uint8_t*>(ev.data()), ev.size()}, clock_.now());
      ASSERT_TRUE(d.ok());
      if (d->kind == transport::Kind::kEvent && d->event.token >= 0) ++tokens;
    }
    transport::Message stop;
    stop.kind = transport::Kind::kMigrateOut;
    stop.call = 2;
    stop.id = RequestId(1);
    stop.stop = true;
    auto chunk = call(to_src, stop);
    ASSERT_TRUE(chunk.ok()) << chunk.status().to_string();
    ASSERT_EQ(chunk->kind, transport::Kind::kMigrateChunk);
    ASSERT_EQ(chunk->code, StatusCode::kOk) << chunk->error;
    ASSERT_TRUE(chunk->chunk.last);
    transport::Message reserve;
    reserve.kind = transport::Kind::kMigrateInReserve;
    reserve.call = 3;
    reserve.id = RequestId(1);
    reserve.num_tokens = chunk->chunk.end;
    auto reserved = call(to_dst, reserve);
    ASSERT_TRUE(reserved.ok() && reserved->code == StatusCode::kOk);
    // Suspended there (holding its blocks, not stepping), reserved here. status() is the
    // loop's snapshot, refreshed after the reply is sent: poll for it.
    EXPECT_TRUE(eventually([&] { return src->backend->status().kv_usage > 0.0; }));
    EXPECT_TRUE(eventually([&] { return dst->backend->status().kv_usage > 0.0; }));
    // The router vanishes without a word.
  }
  EXPECT_TRUE(eventually([&] { return src->backend->idle() && src->backend->status().kv_usage == 0.0; }));
  expect_no_blocks_in_use(*dst, "destination");
  EXPECT_TRUE(eventually([&] { return src->service->num_routers() == 0 && dst->service->num_routers() == 0; }));
}

// ---------------------------------------------------------------------------
// Real `ecoserve instance` processes.

struct Process {
  std::unique_ptr<Subprocess> process;
  std::string address;
};

class ProcessMigrationTest : public MigrationFixture {
 protected:
  static std::string binary() { return std::string(ECOSERVE_BINARY_DIR) + "/ecoserve"; }

  static void SetUpTestSuite() {
    if (!shared_data_path(kVocab) || !std::filesystem::exists(binary())) return;
    // A 15M-parameter random-weight model: about 1 ms a token on one thread, so a
    // request is still decoding while its migration runs, with no pacing hook.
    dir_ = std::filesystem::temp_directory_path() / ("ecoserve_remote_migration_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_path_ = (dir_ / "synth-15m-q8_0.gguf").string();
    const std::string cmd = binary() + " model synth --preset 15m --type q8_0 --vocab '" + *shared_data_path(kVocab) +
                            "' -o '" + model_path_ + "' > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (!shared_data_path(kVocab)) GTEST_SKIP() << missing_data_message(kVocab);
    if (!std::filesystem::exists(binary())) GTEST_SKIP() << "no ecoserve binary at " << binary();
    ASSERT_TRUE(std::filesystem::exists(model_path_));
    auto m = model::LlamaModel::load(model_path_);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = *m;
  }

  Process start_instance() {
    Process p;
    p.process = std::make_unique<Subprocess>();
    const std::string log = (dir_ / ("instance." + std::to_string(++seq_) + ".log")).string();
    Status s = p.process->start({binary(), "instance", "-m", model_path_, "--listen", "tcp://127.0.0.1:0", "-t", "1",
                                 "--kv-cache-mb", "16", "--policy", "chunked"},
                                {.stderr_path = log});
    EXPECT_TRUE(s.ok()) << s.to_string();
    StatusOr<std::string> line = p.process->wait_for_line("ecoserve instance listening on ", std::chrono::seconds(60));
    if (!line.ok()) {
      std::ifstream f(log);
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      ADD_FAILURE() << "instance did not start: " << line.status().to_string() << "; its log:\n" << text;
    }
    if (line.ok()) p.address = line->substr(0, line->find(' '));
    return p;
  }

  // Remote backends that notice a dead peer within half a second.
  std::unique_ptr<RemoteBackend> connect_process(const Process& p) {
    return connect(p.address, /*peer_timeout=*/from_ms(500), /*call_timeout=*/from_ms(5000));
  }

  static inline std::filesystem::path dir_;
  static inline std::string model_path_;
  static inline int seq_ = 0;
};

constexpr const char* kShortPrompt = "Once upon a time";  // under one block: no prefix-cache hit between runs
// Long enough (about half a second of decoding on one thread) that the migration,
// asked for at the first token, reaches its stages before the request finishes,
// even with the other tests' processes on the same two cores: at 200 tokens a CI
// run once saw the request finish first. 500 tokens of KV fit both instances'
// 16 MB caches.
constexpr int32_t kProcessRunTokens = 500;

// The destination process is SIGKILLed while the KV is copied (just before a copied
// stage is sent to it): the request finishes on the source with exactly its
// tokens, the migration aborts as "destination_failed", and the source holds no KV
// afterwards. 20 times, each with a fresh destination, the source kept.
TEST_F(ProcessMigrationTest, DestinationSigkilledMidCopyTheRequestFinishesOnTheSource) {
  const std::map<float, std::vector<int32_t>> want = {
      {0.0f, reference(engine::KvCacheType::kF32, request(1, kShortPrompt, 0.0f, kProcessRunTokens))},
      {0.9f, reference(engine::KvCacheType::kF32, request(1, kShortPrompt, 0.9f, kProcessRunTokens))}};
  Process source = start_instance();
  ASSERT_FALSE(source.address.empty());
  for (int run = 0; run < 20; ++run) {
    const float temperature = run % 2 ? 0.9f : 0.0f;
    Process destination = start_instance();
    ASSERT_FALSE(destination.address.empty());
    std::vector<std::unique_ptr<GenerationBackend>> members;
    members.push_back(connect_process(source));
    members.push_back(connect_process(destination));
    ASSERT_TRUE(members[0] && members[1]);
    RemoteBackend* src = static_cast<RemoteBackend*>(members[0].get());
    std::atomic<int> kills{0};
    RouterOptions ro;
    ro.migrate_max_stages = 3;
    ro.migrate_last_stage_tokens = 1;  // the first stage is a copy while it decodes
    ro.on_migration_stage = [&](RequestId, std::string_view stage) {
      // The source copied a stage; the destination dies before it loads it.
      // Called on the source backend's socket thread.
      if (stage == "load" && kills.fetch_add(1) == 0) destination.process->stop(SIGKILL);
    };
    auto router = llumnix(std::move(members), ro, "round-robin");  // it starts on the source
    ASSERT_TRUE(router);
    Router* r = router.get();
    std::atomic<bool> asked{false};
    Status migrate_status = ok_status();
    auto on_event = [&, r](const instance::TokenEvent& ev) {
      if (ev.token >= 0 && !asked.exchange(true)) migrate_status = r->migrate(RequestId(1), destination.address);
    };
    Collector c;
    ASSERT_TRUE(router->submit(request(1, kShortPrompt, temperature, kProcessRunTokens), c.sink(on_event)).ok());
    auto got = c.wait(1);
    const std::string label = "run " + std::to_string(run);
    EXPECT_TRUE(migrate_status.ok()) << label << ": " << migrate_status.to_string();
    EXPECT_EQ(got[1].tokens, want.at(temperature)) << label;
    EXPECT_EQ(got[1].reason, "length") << label << ": " << got[1].error;
    EXPECT_EQ(got[1].finals, 1) << label;
    const ClusterStats st = wait_stats(*r, [](const ClusterStats& s) { return !s.migrations_aborted.empty(); });
    EXPECT_EQ(kills.load(), 1) << label;
    EXPECT_EQ(st.migrations_completed, 0) << label;
    EXPECT_EQ(aborted(st, "destination_failed"), 1) << label;
    // The source's own report (polled over the wire): no KV in use, nothing running.
    EXPECT_TRUE(eventually([&] {
      const instance::InstanceStatus s = src->status();
      return s.running && s.kv_usage == 0.0 && s.num_running == 0;
    })) << label << ": the source still uses " << src->status().kv_usage << " of its KV";
    router->stop();
  }
}

// The source process is SIGKILLed right after the commit: the destination already
// runs the request, which finishes there with exactly its tokens and one final event.
TEST_F(ProcessMigrationTest, SourceSigkilledAfterCommitTheRequestContinuesOnTheDestination) {
  const std::vector<int32_t> want =
      reference(engine::KvCacheType::kF32, request(1, kShortPrompt, 0.9f, kProcessRunTokens));
  Process destination = start_instance();
  ASSERT_FALSE(destination.address.empty());
  for (int run = 0; run < 20; ++run) {
    Process source = start_instance();
    ASSERT_FALSE(source.address.empty());
    std::vector<std::unique_ptr<GenerationBackend>> members;
    members.push_back(connect_process(source));
    members.push_back(connect_process(destination));
    ASSERT_TRUE(members[0] && members[1]);
    RemoteBackend* dst = static_cast<RemoteBackend*>(members[1].get());
    auto router = llumnix(std::move(members), {}, "round-robin");  // it starts on the source
    ASSERT_TRUE(router);
    Router* r = router.get();
    std::atomic<bool> asked{false};
    Status migrate_status = ok_status();
    auto on_event = [&, r](const instance::TokenEvent& ev) {
      if (ev.token >= 0 && !asked.exchange(true)) migrate_status = r->migrate(RequestId(1), destination.address);
    };
    Collector c;
    ASSERT_TRUE(router->submit(request(1, kShortPrompt, 0.9f, kProcessRunTokens), c.sink(on_event)).ok());
    const ClusterStats st = wait_stats(
        *r, [](const ClusterStats& s) { return s.migrations_completed + static_cast<int64_t>(s.migrations_aborted.size()) > 0; });
    source.process->stop(SIGKILL);
    const std::string label = "run " + std::to_string(run);
    ASSERT_EQ(st.migrations_completed, 1) << label << ": migrate() " << migrate_status.to_string() << ", "
                                          << (st.migrations_aborted.empty() ? "" : st.migrations_aborted[0].first);
    auto got = c.wait(1);
    EXPECT_TRUE(migrate_status.ok()) << label << ": " << migrate_status.to_string();
    EXPECT_EQ(got[1].tokens, want) << label;
    EXPECT_EQ(got[1].reason, "length") << label << ": " << got[1].error;
    EXPECT_EQ(got[1].finals, 1) << label;
    // The source's death is noticed and ends nothing that moved away.
    EXPECT_TRUE(eventually([&] { return !r->instances().at(0).healthy; })) << label;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(c.wait(1)[1].finals, 1) << label;
    EXPECT_TRUE(eventually([&] {
      const instance::InstanceStatus s = dst->status();
      return s.running && s.kv_usage == 0.0 && s.num_running == 0;
    })) << label << ": the destination still uses " << dst->status().kv_usage << " of its KV";
    EXPECT_TRUE(dst->idle()) << label;
    router->stop();
  }
}

}  // namespace
}  // namespace ecoserve::cluster
