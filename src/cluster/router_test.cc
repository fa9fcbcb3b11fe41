#include "cluster/router.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <thread>
#include <map>
#include <mutex>
#include <set>

#include "base/test_data.h"
#include "cluster/cluster_test_util.h"
#include "cluster/fake_backend.h"
#include "cluster/instance_backend.h"
#include "engine/generator.h"

namespace ecoserve::cluster {
namespace {

using testing::ConstantPrefillCost;
using testing::FakeBackend;

instance::GenerationRequest request(uint64_t id, int32_t prompt_len, int32_t max_tokens = 4) {
  instance::GenerationRequest r;
  r.id = RequestId(id);
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(1 + i);
  r.sampling.max_tokens = max_tokens;
  return r;
}

struct Fakes {
  std::vector<FakeBackend*> fakes;
  std::unique_ptr<Router> router;
};

Fakes make(int n, const std::string& policy, ManualClock* clock) {
  Fakes f;
  std::vector<std::unique_ptr<GenerationBackend>> members;
  for (int i = 0; i < n; ++i) {
    auto b = std::make_unique<FakeBackend>();
    f.fakes.push_back(b.get());
    members.push_back(std::move(b));
  }
  RouterOptions o;
  o.router = policy;
  auto r = Router::create(std::move(members), o, clock);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  f.router = std::move(r).value();
  return f;
}

instance::EventSink ignore() {
  return [](const instance::TokenEvent&) {};
}

TEST(RouterTest, LeastLoadedUsesTheRoutersOwnCurrentAccounting) {
  ManualClock clock;
  Fakes f = make(2, "least-loaded", &clock);
  // Snapshots say nothing (as right after start): the router's own accounting decides.
  ASSERT_TRUE(f.router->submit(request(1, 100), ignore()).ok());
  ASSERT_TRUE(f.router->submit(request(2, 10), ignore()).ok());
  ASSERT_TRUE(f.router->submit(request(3, 10), ignore()).ok());
  // 1 -> instance 0 (tie, first); 2 -> instance 1 (0 has 100 tokens); 3 -> 1 (10 < 100).
  EXPECT_EQ(f.fakes[0]->submitted(), (std::vector<RequestId>{RequestId(1)}));
  EXPECT_EQ(f.fakes[1]->submitted(), (std::vector<RequestId>{RequestId(2), RequestId(3)}));
  // Request 1 finishes: instance 0 is empty again and takes the next.
  f.fakes[0]->emit(1, 7, "length");
  ASSERT_TRUE(f.router->submit(request(4, 10), ignore()).ok());
  EXPECT_EQ(f.fakes[0]->submitted().back(), RequestId(4));
  EXPECT_EQ(f.router->cluster_stats().routed, 4);
}

TEST(RouterTest, EventsReachTheClientAndCancelGoesToTheRightInstance) {
  ManualClock clock;
  Fakes f = make(2, "round-robin", &clock);
  std::vector<instance::TokenEvent> got;
  auto sink = [&](const instance::TokenEvent& ev) { got.push_back(ev); };
  ASSERT_TRUE(f.router->submit(request(1, 5), sink).ok());
  ASSERT_TRUE(f.router->submit(request(2, 5), sink).ok());
  ASSERT_EQ(f.fakes[1]->submitted(), (std::vector<RequestId>{RequestId(2)}));
  f.router->cancel(RequestId(2));
  EXPECT_EQ(f.fakes[1]->cancelled(), (std::vector<RequestId>{RequestId(2)}));
  EXPECT_TRUE(f.fakes[0]->cancelled().empty());
  f.fakes[1]->emit(2, -1, "abort");
  f.fakes[0]->emit(1, 42);
  f.fakes[0]->emit(1, 43, "length");
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].finish_reason, "abort");
  EXPECT_EQ(got[1].token, 42);
  EXPECT_TRUE(got[3].finished);
  // Finished requests are forgotten: a late cancel goes nowhere.
  f.router->cancel(RequestId(1));
  EXPECT_TRUE(f.fakes[0]->cancelled().empty());
  EXPECT_TRUE(f.router->idle());
}

TEST(RouterTest, UnhealthyInstancesGetNothingAndNoneHealthyIsUnavailable) {
  ManualClock clock;
  Fakes f = make(3, "round-robin", &clock);
  instance::InstanceStatus stale;
  stale.running = true;
  stale.block_size = 16;
  stale.last_heartbeat = clock.now();
  f.fakes[0]->set_status(stale);  // will be 6 s old
  instance::InstanceStatus down;
  down.running = false;
  f.fakes[2]->set_status(down);
  clock.advance(from_ms(6000));
  instance::InstanceStatus fresh;
  fresh.running = true;
  fresh.block_size = 16;
  fresh.last_heartbeat = clock.now();
  f.fakes[1]->set_status(fresh);
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(f.router->submit(request(id, 5), ignore()).ok());
  EXPECT_TRUE(f.fakes[0]->submitted().empty());
  EXPECT_EQ(f.fakes[1]->submitted().size(), 3u);
  EXPECT_TRUE(f.fakes[2]->submitted().empty());
  EXPECT_EQ(f.router->cluster_stats().unhealthy_instances, 2);
  f.fakes[1]->set_status(down);
  Status s = f.router->submit(request(9, 5), ignore());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "no healthy instance can take the request (3 of 3 unhealthy)");
  EXPECT_EQ(f.router->cluster_stats().rejected, 1);
  EXPECT_FALSE(f.router->status().running);
}

// The loop beats between steps only: an instance in one long step (a big prefill
// chunk on a CPU) has an old heartbeat but is working, until the step has run
// longer than step_timeout (a hung engine).
TEST(RouterTest, AnInstanceInALongStepIsHealthyUntilTheStepTimeout) {
  ManualClock clock;
  Fakes f = make(2, "round-robin", &clock);
  instance::InstanceStatus busy;
  busy.running = true;
  busy.block_size = 16;
  busy.last_heartbeat = clock.now();
  busy.in_step = true;
  busy.step_started = clock.now();
  f.fakes[0]->set_status(busy);
  auto fresh = [&] {
    instance::InstanceStatus st;
    st.running = true;
    st.block_size = 16;
    st.last_heartbeat = clock.now();
    f.fakes[1]->set_status(st);
  };
  clock.advance(std::chrono::seconds(60));  // 12 heartbeat timeouts, a fifth of the step timeout
  fresh();
  for (uint64_t id = 1; id <= 2; ++id) ASSERT_TRUE(f.router->submit(request(id, 5), ignore()).ok());
  EXPECT_EQ(f.fakes[0]->submitted().size(), 1u);
  EXPECT_EQ(f.fakes[1]->submitted().size(), 1u);
  EXPECT_TRUE(f.router->instances()[0].healthy);
  // Alone in its step, the router's own status is live as of now (what /health reads).
  f.fakes[1]->set_status(instance::InstanceStatus{});
  EXPECT_TRUE(f.router->status().running);
  EXPECT_EQ(f.router->status().last_heartbeat, clock.now());
  // The same step past step_timeout: hung.
  clock.advance(std::chrono::seconds(241));
  fresh();
  for (uint64_t id = 3; id <= 4; ++id) ASSERT_TRUE(f.router->submit(request(id, 5), ignore()).ok());
  EXPECT_EQ(f.fakes[0]->submitted().size(), 1u);
  EXPECT_EQ(f.fakes[1]->submitted().size(), 3u);
  EXPECT_FALSE(f.router->instances()[0].healthy);
  // Between steps again, the heartbeat rule holds: a beat 5 s old is fresh, 6 s is not.
  busy.in_step = false;
  busy.last_heartbeat = clock.now() - std::chrono::seconds(5);
  f.fakes[0]->set_status(busy);
  EXPECT_TRUE(f.router->instances()[0].healthy);
  busy.last_heartbeat = clock.now() - std::chrono::seconds(6);
  f.fakes[0]->set_status(busy);
  EXPECT_FALSE(f.router->instances()[0].healthy);
}

TEST(RouterTest, RefusalsPassThroughAndAreNotCounted) {
  ManualClock clock;
  Fakes f = make(1, "least-loaded", &clock);
  f.fakes[0]->refuse = resource_exhausted_error("the waiting queue is full (1 requests); retry later");
  Status s = f.router->submit(request(1, 5), ignore());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(f.router->cluster_stats().routed, 0);
  EXPECT_TRUE(f.router->idle());
  // Over the context: refused before routing.
  EXPECT_EQ(f.router->submit(request(2, 500, 100), ignore()).code(), StatusCode::kInvalidArgument);
  f.router->begin_drain();
  EXPECT_TRUE(f.fakes[0]->draining);
  f.fakes[0]->refuse = Status();
  EXPECT_EQ(f.router->submit(request(3, 5), ignore()).code(), StatusCode::kUnavailable);
}

TEST(RouterTest, StopEndsEveryRequestWithAbort) {
  ManualClock clock;
  Fakes f = make(2, "round-robin", &clock);
  int aborted = 0;
  auto sink = [&](const instance::TokenEvent& ev) { aborted += ev.finished && ev.finish_reason == "abort"; };
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(f.router->submit(request(id, 5), sink).ok());
  f.router->stop();
  EXPECT_EQ(aborted, 4);
  EXPECT_TRUE(f.fakes[0]->stopped && f.fakes[1]->stopped);
}

// Holds the instances' loop threads (after a step) until opened.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

struct GateOpener {
  Gate* gate;
  ~GateOpener() { gate->open(); }
};

// Two real instances (tiny model, 1 thread each) behind the router: greedy tokens
// equal single-instance generation for every routing policy and for padg.
TEST(RouterTest, RealInstancesGiveTheSameGreedyTokensUnderEveryRouter) {
  constexpr const char* kModel = "models/tinystories-656k-q8_0.gguf";
  auto path = shared_data_path(kModel);
  if (!path) GTEST_SKIP() << missing_data_message(kModel);
  auto model = model::LlamaModel::load(*path);
  ASSERT_TRUE(model.ok());
  engine::EngineOptions eo;
  eo.num_threads = 1;
  eo.num_kv_blocks = 128;
  // Tokens compared bitwise across batchings: the int8 levels' guarantee, not the bf16
  // tiles' (which, with their weights made at load, take Q8_0 batches from 16 tokens).
  eo.amx_bf16 = false;
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Tom and Sue went to the park",
                                            "One day", "Once upon a time, there was"};
  std::vector<std::vector<int32_t>> ids, want;
  for (const auto& p : prompts) {
    ids.push_back((*model)->tokenizer().encode(p, true));
    auto runner = engine::ModelRunner::create(*model, eo);
    ASSERT_TRUE(runner.ok());
    engine::Generator gen(**runner);
    engine::GenerateOptions go;
    go.sampling.temperature = 0;
    go.sampling.max_tokens = 20;
    auto res = gen.generate(ids.back(), go);
    ASSERT_TRUE(res.ok());
    want.push_back(res->tokens);
  }
  SteadyClock clock;
  // padg: a prefill is predicted at 0.4 s and the TTFT SLO is 1 s, so two prompts
  // fit an instance and the rest go round the ring (some prompts must reach
  // instance 1); the instances alternate prefill and decode phases.
  // What a router sees depends on how far the instances got while the prompts were
  // submitted: a loaded host can deschedule this thread for longer than a whole
  // request takes, and then every prompt finds instance 0 idle (and padg's
  // calibration, learning that a real prefill takes milliseconds, not 0.4 s, lets
  // any number of prompts fit it). So every instance stops after its first step
  // until all prompts are in (the gate), and padg routes by the cost model alone:
  // then each router's choices are the same on every run.
  auto cost = std::make_shared<ConstantPrefillCost>();
  const TimePoint t0 = clock.now();
  for (const char* policy : {"round-robin", "least-loaded", "cache-aware", "padg"}) {
    const bool padg = std::string(policy) == "padg";
    auto gate = std::make_shared<Gate>();
    std::vector<std::unique_ptr<GenerationBackend>> members;
    for (int i = 0; i < 2; ++i) {
      instance::InstanceOptions io;
      io.on_step = [gate](const instance::StepStats&) { gate->wait(); };
      if (padg) {
        io.policy = "temporal";
        io.cost_model = cost;
      }
      auto b = InstanceBackend::create(*model, eo, io, &clock);
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      members.push_back(std::move(*b));
    }
    RouterOptions ro;
    ro.router = policy;
    if (padg) {
      ro.strategy = "padg";
      ro.cost_model = cost;
      ro.padg.default_slo_ttft = std::chrono::seconds(1);
      ro.padg.calibrate = false;
    }
    auto router = Router::create(std::move(members), ro, &clock);
    ASSERT_TRUE(router.ok());
    const GateOpener opener{gate.get()};  // also when an assertion returns early
    (*router)->start();
    std::mutex mu;
    std::condition_variable cv;
    std::map<uint64_t, std::vector<int32_t>> got;
    int finished = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      instance::GenerationRequest r;
      r.id = RequestId(i + 1);
      r.prompt = ids[i];
      r.sampling.temperature = 0;
      r.sampling.max_tokens = 20;
      ASSERT_TRUE((*router)
                      ->submit(std::move(r),
                               [&](const instance::TokenEvent& ev) {
                                 std::lock_guard<std::mutex> lock(mu);
                                 if (ev.token >= 0) got[ev.id.value].push_back(ev.token);
                                 if (ev.finished) {
                                   ++finished;
                                   cv.notify_all();
                                 }
                               })
                      .ok());
    }
    gate->open();
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return finished == static_cast<int>(prompts.size()); });
    }
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i + 1], want[i]) << policy << ": " << prompts[i];
    const auto reports = (*router)->instances();
    ASSERT_EQ(reports.size(), 2u);
    EXPECT_GT(reports[0].status.generation_tokens_total, 0) << policy << ": instance 0 got nothing";
    EXPECT_GT(reports[1].status.generation_tokens_total, 0) << policy << ": instance 1 got nothing";
    if (padg) {
      // Every step of a temporal instance is all prefill or all decode, and both
      // phases were recorded.
      for (const InstanceTimeline& t : (*router)->timeline(t0)) {
        std::set<int32_t> phases;
        for (const instance::StepRecord& st : t.steps) {
          EXPECT_FALSE(st.num_prefill_seqs > 0 && st.num_decode_seqs > 0) << "instance " << t.name << " mixed a step";
          phases.insert(st.phase);
        }
        EXPECT_EQ(phases, (std::set<int32_t>{1, 2})) << "instance " << t.name;
        EXPECT_GE(reports[0].status.phase_switches, 2);
      }
    }
    (*router)->stop();
  }
}

}  // namespace
}  // namespace ecoserve::cluster

namespace ecoserve::cluster {
namespace {

// FuDG with real engines: 1 prefill + 1 decode instance. The first token comes
// from the prefill instance, the KV moves, the decode instance continues: the
// tokens equal a single instance's, greedy and seeded sampling, f32 and f16 KV,
// and with conditional (local) prefill.
class FudgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
    if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
    auto m = model::LlamaModel::load(*path);
    ASSERT_TRUE(m.ok());
    model_ = *m;
  }

  std::unique_ptr<Router> fudg(engine::KvCacheType kv, int32_t remote_min = 0) {
    engine::EngineOptions eo;
    eo.num_threads = 1;
    eo.num_kv_blocks = 128;
    eo.kv_cache_type = kv;
    // Outputs from moved KV and from KV computed on the decode instance (a cached prefix,
    // then a short chunk) compared bitwise: the int8 levels' guarantee, not the bf16 tiles'.
    eo.amx_bf16 = false;
    eo.attention_bf16 = false;
    eo.matmul_bf16 = false;
    std::vector<std::unique_ptr<GenerationBackend>> members;
    for (const char* policy : {"prefill-only", "chunked"}) {
      instance::InstanceOptions io;
      io.policy = policy;
      auto b = InstanceBackend::create(model_, eo, io, &clock_);
      EXPECT_TRUE(b.ok()) << b.status().to_string();
      members.push_back(std::move(*b));
    }
    RouterOptions ro;
    ro.strategy = "fudg";
    ro.num_prefill_instances = 1;
    ro.dispatch.remote_prefill_min_tokens = remote_min;
    auto r = Router::create(std::move(members), ro, &clock_);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    (*r)->start();
    return std::move(*r);
  }

  // Runs the requests through `backend`, returns each one's tokens and final reason.
  std::map<uint64_t, std::pair<std::vector<int32_t>, std::string>> run(GenerationBackend& backend,
                                                                      std::vector<instance::GenerationRequest> reqs) {
    std::mutex mu;
    std::condition_variable cv;
    std::map<uint64_t, std::pair<std::vector<int32_t>, std::string>> got;
    size_t finished = 0;
    const size_t n = reqs.size();
    for (auto& r : reqs) {
      Status s = backend.submit(std::move(r), [&](const instance::TokenEvent& ev) {
        std::lock_guard<std::mutex> lock(mu);
        if (ev.token >= 0) got[ev.id.value].first.push_back(ev.token);
        if (ev.finished) {
          got[ev.id.value].second = ev.finish_reason;
          if (!ev.error.empty()) ADD_FAILURE() << "request " << ev.id.value << ": " << ev.error;
          ++finished;
          cv.notify_all();
        }
      });
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished == n; });
    return got;
  }

  std::vector<instance::GenerationRequest> requests(float temperature) {
    std::vector<instance::GenerationRequest> out;
    const char* prompts[] = {"Once upon a time", "The little dog ran to the park and", "One day",
                             "Once upon a time"};  // the last repeats the first: a prefix-cache hit
    for (size_t i = 0; i < 4; ++i) {
      instance::GenerationRequest r;
      r.id = RequestId(i + 1);
      r.prompt = model_->tokenizer().encode(prompts[i], true);
      r.sampling.temperature = temperature;
      r.sampling.max_tokens = 24;
      r.sampling.ignore_eos = true;
      r.sampling.has_seed = true;
      r.sampling.seed = 100 + i;
      out.push_back(std::move(r));
    }
    return out;
  }

  std::shared_ptr<const model::LlamaModel> model_;
  SteadyClock clock_;
};

TEST_F(FudgTest, TokensEqualOneInstanceAndTheKvMoves) {
  for (engine::KvCacheType kv : {engine::KvCacheType::kF32, engine::KvCacheType::kF16}) {
    for (float temperature : {0.0f, 0.9f}) {
      engine::EngineOptions eo;
      eo.num_threads = 1;
      eo.num_kv_blocks = 128;
      eo.kv_cache_type = kv;
      // Tokens compared bitwise across batchings: the int8 levels' guarantee, not the bf16
      // tiles' (which, with their weights made at load, take Q8_0 batches from 16 tokens).
      eo.amx_bf16 = false;
      auto single = InstanceBackend::create(model_, eo, instance::InstanceOptions{}, &clock_);
      ASSERT_TRUE(single.ok());
      (*single)->start();
      auto want = run(**single, requests(temperature));
      (*single)->stop();
      auto router = fudg(kv);
      auto got = run(*router, requests(temperature));
      for (uint64_t id = 1; id <= 4; ++id) {
        EXPECT_EQ(got[id].first, want[id].first) << engine::kv_cache_type_name(kv) << " T=" << temperature << " #" << id;
        EXPECT_EQ(got[id].second, "length");
        EXPECT_EQ(got[id].first.size(), 24u);
      }
      const ClusterStats st = router->cluster_stats();
      EXPECT_EQ(st.kv_transfers, 4);
      EXPECT_GT(st.kv_transfer_bytes, 0);
      EXPECT_EQ(st.kv_transfer_failures, 0);
      // The prefill instance ran only prefills (one token each), the decode instance
      // the rest; nothing is left held or loaded. (Snapshots are published after each
      // step's events: wait for the last one.)
      std::vector<InstanceReport> reports;
      for (int i = 0; i < 400; ++i) {
        reports = router->instances();
        if (reports[1].status.generation_tokens_total == 4 * 23 && reports[0].status.kv_usage == 0 &&
            reports[1].status.kv_usage == 0) {
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ASSERT_EQ(reports.size(), 2u);
      EXPECT_EQ(reports[0].role, "prefill");
      EXPECT_EQ(reports[1].role, "decode");
      EXPECT_EQ(reports[0].status.generation_tokens_total, 4);
      EXPECT_EQ(reports[1].status.generation_tokens_total, 4 * 23);
      EXPECT_EQ(reports[0].status.kv_usage, 0.0);
      EXPECT_EQ(reports[1].status.kv_usage, 0.0);
      EXPECT_TRUE(router->idle());
      router->stop();
    }
  }
}

TEST_F(FudgTest, ShortPromptsPrefillOnTheDecodeInstance) {
  auto router = fudg(engine::KvCacheType::kF32, /*remote_min=*/8);
  auto reqs = requests(0.0f);  // prompts of 5, 10, 3 and 5 tokens
  auto got = run(*router, std::move(reqs));
  const ClusterStats st = router->cluster_stats();
  EXPECT_EQ(st.kv_transfers, 1);   // only the 10-token prompt moved
  EXPECT_EQ(st.local_prefills, 3);
  for (uint64_t id = 1; id <= 4; ++id) EXPECT_EQ(got[id].first.size(), 24u);
  EXPECT_EQ(got[1].first, got[4].first);  // same prompt, greedy
  router->stop();
}

TEST_F(FudgTest, APromptTheDecodeInstanceCachesPrefillsThereAndAgrees) {
  auto router = fudg(engine::KvCacheType::kF32);
  // Three full blocks of 16 tokens: the first request moves its KV to the decode
  // instance, which then caches them; the same prompt again prefills locally.
  auto reqs = requests(0.0f);
  instance::GenerationRequest first = reqs[0];
  std::string text;
  for (int i = 0; i < 3; ++i) {
    text += "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with her "
            "friends and her big red ball. ";
  }
  first.prompt = model_->tokenizer().encode(text, true);
  ASSERT_GE(first.prompt.size(), 48u);
  instance::GenerationRequest again = first;
  again.id = RequestId(2);
  auto got1 = run(*router, {first});
  EXPECT_EQ(router->cluster_stats().kv_transfers, 1);
  EXPECT_EQ(router->cluster_stats().local_prefills, 0);
  auto got2 = run(*router, {again});
  EXPECT_EQ(router->cluster_stats().kv_transfers, 1);
  EXPECT_EQ(router->cluster_stats().local_prefills, 1);
  EXPECT_EQ(got1[1].first, got2[2].first);
  EXPECT_EQ(got1[1].first.size(), 24u);
  // The decode instance served the prompt from its prefix cache.
  EXPECT_GE(router->instances().at(1).status.prefix_cache_hits, 32);
  router->stop();
}

TEST_F(FudgTest, CancelDuringEachPhaseEndsWithAbortAndFreesBlocks) {
  auto router = fudg(engine::KvCacheType::kF32);
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::string> reason;
  std::map<uint64_t, int> tokens;
  for (uint64_t id = 1; id <= 6; ++id) {
    instance::GenerationRequest r;
    r.id = RequestId(id);
    r.prompt = model_->tokenizer().encode("Once upon a time there was a girl", true);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 400;
    r.sampling.ignore_eos = true;
    ASSERT_TRUE(router
                    ->submit(std::move(r),
                             [&](const instance::TokenEvent& ev) {
                               std::lock_guard<std::mutex> lock(mu);
                               if (ev.token >= 0) tokens[ev.id.value]++;
                               if (ev.finished) reason[ev.id.value] = ev.finish_reason;
                               cv.notify_all();
                             })
                    .ok());
    // Cancel at once (prefill phase), after the first token (transfer) or later (decode).
    if (id % 3 == 1) router->cancel(RequestId(id));
    if (id % 3 == 2) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return tokens[id] >= 1 || reason.count(id); });
      lock.unlock();
      router->cancel(RequestId(id));
    }
    if (id % 3 == 0) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return tokens[id] >= 5 || reason.count(id); });
      lock.unlock();
      router->cancel(RequestId(id));
    }
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return reason.size() == 6; });
  }
  for (uint64_t id = 1; id <= 6; ++id) {
    EXPECT_EQ(reason[id], "abort") << id;
    EXPECT_LT(tokens[id], 400) << id;
  }
  for (int i = 0; i < 400 && (router->instances()[0].status.kv_usage > 0 || router->instances()[1].status.kv_usage > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(router->instances()[0].status.kv_usage, 0.0);
  EXPECT_EQ(router->instances()[1].status.kv_usage, 0.0);
  EXPECT_TRUE(router->idle());
  router->stop();
}

}  // namespace
}  // namespace ecoserve::cluster

namespace ecoserve::cluster {
namespace {

TEST(RouterFailureTest, ErrorBeforeTheFirstTokenIsRetriedOnceElsewhere) {
  ManualClock clock;
  Fakes f = make(2, "round-robin", &clock);
  std::vector<instance::TokenEvent> got;
  auto sink = [&](const instance::TokenEvent& ev) { got.push_back(ev); };
  ASSERT_TRUE(f.router->submit(request(1, 5), sink).ok());
  ASSERT_EQ(f.fakes[0]->submitted().size(), 1u);
  // Instance 0 fails it before any token: the client sees nothing, instance 1 gets it.
  f.fakes[0]->emit(1, -1, "error");
  EXPECT_TRUE(got.empty());
  ASSERT_EQ(f.fakes[1]->submitted(), (std::vector<RequestId>{RequestId(1)}));
  f.fakes[1]->emit(1, 7);
  f.fakes[1]->emit(1, 8, "length");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].token, 7);
  EXPECT_EQ(got[2].finish_reason, "length");
  EXPECT_EQ(f.router->cluster_stats().retries, 1);
  // A second failure before the first token is not retried again; one after a token is never.
  ASSERT_TRUE(f.router->submit(request(2, 5), sink).ok());  // round-robin: instance 0
  f.fakes[0]->emit(2, -1, "error");                          // retried on 1
  f.fakes[1]->emit(2, -1, "error");                          // forwarded
  EXPECT_EQ(got.back().finish_reason, "error");
  ASSERT_TRUE(f.router->submit(request(3, 5), sink).ok());
  const size_t n = got.size();
  FakeBackend* holder = f.fakes[0]->submitted().back() == RequestId(3) ? f.fakes[0] : f.fakes[1];
  holder->emit(3, 9);
  holder->emit(3, -1, "error");
  ASSERT_EQ(got.size(), n + 2);
  EXPECT_EQ(got.back().finish_reason, "error");
  EXPECT_EQ(f.router->cluster_stats().retries, 2);
  EXPECT_TRUE(f.router->idle());
}

// A hung engine behind a live process: instance 0's loop is frozen (test hook).
// The router notices the stale heartbeat, sends the requests it held (none had a
// token yet) to instance 1, and routes nothing new to instance 0.
TEST(RouterFailureTest, FrozenEngineIsDetectedAndItsRequestsMove) {
  auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
  if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
  auto model = model::LlamaModel::load(*path);
  ASSERT_TRUE(model.ok());
  SteadyClock clock;
  engine::EngineOptions eo;
  eo.num_threads = 1;
  eo.num_kv_blocks = 128;
  std::vector<std::unique_ptr<GenerationBackend>> members;
  std::vector<InstanceBackend*> raw;
  for (int i = 0; i < 2; ++i) {
    instance::InstanceOptions io;
    io.idle_heartbeat = from_ms(20);
    auto b = InstanceBackend::create(*model, eo, io, &clock);
    ASSERT_TRUE(b.ok());
    raw.push_back(b->get());
    members.push_back(std::move(*b));
  }
  RouterOptions ro;
  ro.router = "round-robin";
  ro.heartbeat_timeout = from_ms(300);
  ro.watchdog_interval = from_ms(50);
  auto router = Router::create(std::move(members), ro, &clock);
  ASSERT_TRUE(router.ok());
  (*router)->start();
  raw[0]->freeze_for_testing(from_ms(1500));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the freeze has begun

  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::string> reason;
  std::map<uint64_t, int> tokens;
  for (uint64_t id = 1; id <= 4; ++id) {
    instance::GenerationRequest r;
    r.id = RequestId(id);
    r.prompt = (*model)->tokenizer().encode("Once upon a time", true);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 8;
    ASSERT_TRUE((*router)
                    ->submit(std::move(r),
                             [&](const instance::TokenEvent& ev) {
                               std::lock_guard<std::mutex> lock(mu);
                               if (ev.token >= 0) tokens[ev.id.value]++;
                               if (ev.finished) reason[ev.id.value] = ev.finish_reason;
                               cv.notify_all();
                             })
                    .ok());
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::milliseconds(1400), [&] { return reason.size() == 4; }))
        << "requests on the frozen instance were not moved";
  }
  for (uint64_t id = 1; id <= 4; ++id) {
    EXPECT_EQ(reason[id], "length") << id;
    EXPECT_EQ(tokens[id], 8) << id;
  }
  const ClusterStats st = (*router)->cluster_stats();
  EXPECT_EQ(st.retries, 2);  // round-robin put 1 and 3 on the frozen instance
  const auto reports = (*router)->instances();
  EXPECT_FALSE(reports[0].healthy);
  EXPECT_TRUE(reports[1].healthy);
  (*router)->stop();
}

}  // namespace
}  // namespace ecoserve::cluster

namespace ecoserve::cluster {
namespace {

// The readiness probe: a real one-token request per instance. An instance whose
// probe fails (its engine errors although its loop beats) or does not finish in
// time gets no requests until a probe succeeds again.
// Two fake instances behind a started round-robin router that probes every 1 s
// (timeout 3 s) and never judges by heartbeats.
StatusOr<std::unique_ptr<Router>> probing_router(ManualClock* clock, std::vector<FakeBackend*>* fakes) {
  std::vector<std::unique_ptr<GenerationBackend>> members;
  for (int i = 0; i < 2; ++i) {
    auto b = std::make_unique<FakeBackend>();
    fakes->push_back(b.get());
    members.push_back(std::move(b));
  }
  RouterOptions o;
  o.router = "round-robin";
  o.watchdog_interval = from_ms(5);
  o.probe_interval = from_ms(1000);
  o.probe_timeout = from_ms(3000);
  o.heartbeat_timeout = from_ms(1000000);
  auto router = Router::create(std::move(members), o, clock);
  if (router.ok()) (*router)->start();
  return router;
}

TEST(RouterFailureTest, FailedOrLateProbesMakeAnInstanceNotReady) {
  ManualClock clock;
  std::vector<FakeBackend*> fakes;
  auto router = probing_router(&clock, &fakes);
  ASSERT_TRUE(router.ok());
  auto probe_of = [](FakeBackend* f) -> std::optional<uint64_t> {
    for (RequestId id : f->submitted()) {
      if (id.value >= (uint64_t{1} << 62)) return id.value;
    }
    return std::nullopt;
  };
  auto wait_for_probes = [&] {
    for (int i = 0; i < 2000 && !(probe_of(fakes[0]) && probe_of(fakes[1])); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  EXPECT_FALSE(probe_of(fakes[0]));  // none before probe_interval
  clock.advance(from_ms(1000));
  wait_for_probes();
  const auto p0 = probe_of(fakes[0]), p1 = probe_of(fakes[1]);
  ASSERT_TRUE(p0 && p1);
  fakes[0]->emit(*p0, -1, "error");  // the engine fails
  fakes[1]->emit(*p1, 5, "length");
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE((*router)->submit(request(id, 5), ignore()).ok());
  auto count = [](FakeBackend* f) {
    const std::vector<RequestId> ids = f->submitted();
    return std::count_if(ids.begin(), ids.end(),
                         [](RequestId id) { return id.value < (uint64_t{1} << 62); });
  };
  EXPECT_EQ(count(fakes[0]), 0);
  EXPECT_EQ(count(fakes[1]), 4);
  EXPECT_FALSE((*router)->instances()[0].healthy);
  // The next probe succeeds: instance 0 takes requests again.
  fakes[0]->clear_submitted();
  fakes[1]->clear_submitted();
  clock.advance(from_ms(1000));
  wait_for_probes();
  fakes[0]->emit(*probe_of(fakes[0]), 5, "length");
  const auto late = probe_of(fakes[1]);  // instance 1 never answers this one
  ASSERT_TRUE(late);
  EXPECT_TRUE((*router)->instances()[0].healthy);
  clock.advance(from_ms(3500));  // past probe_timeout
  for (int i = 0; i < 2000 && (*router)->instances()[1].healthy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE((*router)->instances()[1].healthy);
  // Requests 1-4, still waiting for their first token on instance 1, moved to 0 (and
  // were cancelled on 1); new ones go to 0 too.
  for (int i = 0; i < 2000 && count(fakes[0]) < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (uint64_t id = 11; id <= 12; ++id) ASSERT_TRUE((*router)->submit(request(id, 5), ignore()).ok());
  EXPECT_EQ(count(fakes[0]), 6);
  EXPECT_EQ(count(fakes[1]), 0);
  EXPECT_EQ(fakes[1]->cancelled().size(), 4u);
  EXPECT_EQ((*router)->cluster_stats().retries, 4);
  (*router)->stop();
}

// An overloaded instance answers its probe late, but its engine keeps stepping:
// it stays ready (its requests are not failed); once its steps stop it is not.
TEST(RouterFailureTest, ALateProbeBehindALongQueueIsNotAHungEngine) {
  ManualClock clock;
  std::vector<FakeBackend*> fakes;
  auto router = probing_router(&clock, &fakes);
  ASSERT_TRUE(router.ok());
  instance::InstanceStatus st;
  st.running = true;
  st.block_size = 16;
  auto set_steps = [&](int64_t steps) {
    st.steps = steps;
    st.last_heartbeat = clock.now();
    fakes[0]->set_status(st);
    fakes[1]->set_status(st);
  };
  set_steps(10);
  clock.advance(from_ms(1000));  // the probes go out (never answered here)
  for (int i = 0; i < 2000 && fakes[0]->submitted().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_FALSE(fakes[0]->submitted().empty());
  // Three timeouts' worth of time, the engines stepping all along: still ready.
  for (int k = 0; k < 9; ++k) {
    set_steps(11 + k);
    clock.advance(from_ms(1000));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE((*router)->instances()[0].healthy);
  EXPECT_TRUE((*router)->instances()[1].healthy);
  // The engines stop stepping: a whole probe_timeout without progress (the first
  // late check still sees the steps made since the last one), not ready.
  clock.advance(from_ms(3500));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  clock.advance(from_ms(3500));
  for (int i = 0; i < 2000 && (*router)->instances()[0].healthy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE((*router)->instances()[0].healthy);
  (*router)->stop();
}

// A probe behind one long step (a big prefill chunk): no step ends for longer than
// probe_timeout, but the step is running, so the instance stays ready until the
// step outlives step_timeout.
TEST(RouterFailureTest, AProbeBehindOneLongStepIsNotAHungEngine) {
  ManualClock clock;
  std::vector<FakeBackend*> fakes;
  auto router = probing_router(&clock, &fakes);
  ASSERT_TRUE(router.ok());
  instance::InstanceStatus st;
  st.running = true;
  st.block_size = 16;
  st.steps = 10;
  st.last_heartbeat = clock.now();
  st.in_step = true;
  st.step_started = clock.now();
  fakes[0]->set_status(st);
  fakes[1]->set_status(st);
  clock.advance(from_ms(1000));  // the probes go out (never answered here)
  for (int i = 0; i < 2000 && fakes[0]->submitted().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_FALSE(fakes[0]->submitted().empty());
  for (int k = 0; k < 4; ++k) {  // four probe timeouts in the same step
    clock.advance(from_ms(3500));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  EXPECT_TRUE((*router)->instances()[0].healthy);
  // Instance 1's step ends and it goes quiet between steps (no step since): not ready.
  st.in_step = false;
  fakes[1]->set_status(st);
  clock.advance(from_ms(3500));
  for (int i = 0; i < 2000 && (*router)->instances()[1].healthy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE((*router)->instances()[1].healthy);
  EXPECT_TRUE((*router)->instances()[0].healthy);
  // Instance 0's step outlives step_timeout (300 s): hung.
  clock.advance(std::chrono::seconds(290));
  for (int i = 0; i < 2000 && (*router)->instances()[0].healthy; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE((*router)->instances()[0].healthy);
  (*router)->stop();
}

}  // namespace
}  // namespace ecoserve::cluster
