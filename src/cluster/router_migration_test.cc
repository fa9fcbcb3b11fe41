// Llumnix live migration through the router with real engines (TinyStories):
// tokens equal an unmigrated run (once, and there and back), and every fault
// leaves the request finishing somewhere with nothing leaked.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "base/test_data.h"
#include "cluster/cluster_test_util.h"
#include "cluster/fake_backend.h"
#include "cluster/instance_backend.h"
#include "cluster/router.h"

namespace ecoserve::cluster {
namespace {

using testing::Collector;
using testing::Outcome;

class LlumnixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
    if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
    auto m = model::LlamaModel::load(*path);
    ASSERT_TRUE(m.ok());
    model_ = *m;
  }

  // `paced`: each step also sleeps 1 ms, so that a request of this tiny model
  // (0.1 ms a token) runs long enough for a migration to reach it.
  std::unique_ptr<InstanceBackend> engine(engine::KvCacheType kv, int32_t num_blocks = 128, bool paced = false) {
    engine::EngineOptions eo;
    eo.num_threads = 1;
    eo.num_kv_blocks = num_blocks;
    eo.kv_cache_type = kv;
    instance::InstanceOptions io;
    if (paced) io.on_step = [](const instance::StepStats&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); };
    auto b = InstanceBackend::create(model_, eo, io, &clock_);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    return std::move(*b);
  }

  // Two instances ("0", "1") under llumnix, no planner (migrations are started by
  // hand) unless `interval` is set; `backends` gets raw pointers to them.
  std::unique_ptr<Router> llumnix(engine::KvCacheType kv, std::vector<InstanceBackend*>* backends,
                                  RouterOptions ro = {}, int32_t dst_blocks = 128) {
    std::vector<std::unique_ptr<GenerationBackend>> members;
    for (int i = 0; i < 2; ++i) {
      auto b = engine(kv, i == 1 ? dst_blocks : 128, /*paced=*/true);
      if (backends) backends->push_back(b.get());
      members.push_back(std::move(b));
    }
    ro.strategy = "llumnix";
    ro.router = "freeness";
    auto r = Router::create(std::move(members), ro, &clock_);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    (*r)->start();
    return std::move(*r);
  }

  instance::GenerationRequest request(uint64_t id, const char* text, float temperature, int32_t max_tokens) {
    return testing::seeded_request(*model_, id, text, temperature, max_tokens);
  }

  // What one plain instance produces for the request.
  std::vector<int32_t> reference(engine::KvCacheType kv, instance::GenerationRequest r) {
    auto single = engine(kv);
    single->start();
    Collector c;
    EXPECT_TRUE(single->submit(std::move(r), c.sink()).ok());
    auto got = c.wait(1);
    single->stop();
    return got.begin()->second.tokens;
  }

  // Waits until the router's stats satisfy `pred` (the last step's events and
  // snapshots arrive a moment after the final event).
  ClusterStats wait_stats(Router& router, const std::function<bool(const ClusterStats&)>& pred) {
    ClusterStats st;
    for (int i = 0; i < 2000; ++i) {
      st = router.cluster_stats();
      if (pred(st)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return st;
  }

  // Both instances' KV usage back at zero (nothing reserved, suspended or held).
  void expect_no_blocks_in_use(const std::vector<InstanceBackend*>& backends) {
    for (size_t i = 0; i < backends.size(); ++i) {
      double usage = 1.0;
      for (int k = 0; k < 1000 && usage != 0.0; ++k) {
        usage = backends[i]->status().kv_usage;
        if (usage != 0.0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      EXPECT_EQ(usage, 0.0) << "instance " << i;
    }
  }

  int64_t aborted(const ClusterStats& st, const std::string& reason) {
    for (const auto& [r, n] : st.migrations_aborted) {
      if (r == reason) return n;
    }
    return 0;
  }

  std::shared_ptr<const model::LlamaModel> model_;
  SteadyClock clock_;
};

constexpr const char* kPrompt = "Once upon a time, there was a little girl named Lily. She";

TEST_F(LlumnixTest, MigratedOnceOrThereAndBackTheTokensEqualAnUnmigratedRun) {
  for (engine::KvCacheType kv : {engine::KvCacheType::kF32, engine::KvCacheType::kF16}) {
    for (float temperature : {0.0f, 0.9f}) {
      for (int hops : {1, 2}) {
        const std::vector<int32_t> want = reference(kv, request(1, kPrompt, temperature, 64));
        ASSERT_EQ(want.size(), 64u);
        std::vector<InstanceBackend*> backends;
        auto router = llumnix(kv, &backends);
        Collector c;
        Router* r = router.get();
        // Each hop starts after a few more tokens, from the event sink (an instance
        // thread; the router is not locked there). A hop that finds the previous
        // one still under way tries again at the next token.
        std::atomic<int> started{0};
        auto on_event = [&, r, hops](const instance::TokenEvent& ev) {
          if (ev.finished || started.load() >= hops) return;
          const int32_t k = static_cast<int32_t>(started.load());
          if (static_cast<int32_t>(ev.token >= 0) && r->cluster_stats().migrations_completed == k &&
              r->cluster_stats().migrations_started == k) {
            const Status s = r->migrate(RequestId(1), k % 2 == 0 ? "1" : "0");
            if (s.ok()) started.fetch_add(1);
            if (!s.ok()) ADD_FAILURE() << s.to_string();
          }
        };
        ASSERT_TRUE(router->submit(request(1, kPrompt, temperature, 64), c.sink(on_event)).ok());
        auto got = c.wait(1);
        const std::string label = std::string(engine::kv_cache_type_name(kv)) + " T=" + std::to_string(temperature) +
                                  " hops=" + std::to_string(hops);
        EXPECT_EQ(got[1].tokens, want) << label;
        EXPECT_EQ(got[1].reason, "length") << label;
        EXPECT_EQ(got[1].finals, 1) << label;
        const ClusterStats st = wait_stats(*router, [&](const ClusterStats& s) { return s.migrations_completed == hops; });
        EXPECT_EQ(st.migrations_started, hops) << label;
        for (const MigrationRecord& m : st.recent_migrations) {
          std::printf("%s: %s -> %s ctx %d stages %d bytes %lld downtime %.3f ms, started %.3f finished %.3f\n",
                      label.c_str(), m.from.c_str(), m.to.c_str(), m.context_tokens, m.stages,
                      static_cast<long long>(m.bytes), m.downtime_seconds * 1e3,
                      to_seconds(m.started.time_since_epoch()), to_seconds(m.finished.time_since_epoch()));
        }
        EXPECT_EQ(st.migrations_completed, hops) << label;
        EXPECT_TRUE(st.migrations_aborted.empty()) << label;
        EXPECT_GT(st.migrated_bytes, 0) << label;
        ASSERT_EQ(st.recent_migrations.size(), static_cast<size_t>(hops));
        const MigrationRecord& m = st.recent_migrations[0];
        EXPECT_EQ(m.from, "0");
        EXPECT_EQ(m.to, "1");
        EXPECT_EQ(m.reason, "manual");
        EXPECT_EQ(m.outcome, "completed");
        EXPECT_GE(m.stages, 1);
        EXPECT_GT(m.context_tokens, 0);
        EXPECT_GE(m.downtime_seconds, 0.0);
        expect_no_blocks_in_use(backends);
        router->stop();
      }
    }
  }
}

// The destination is killed (its loop stopped) while the KV is being copied: the
// request finishes on the source with exactly its tokens, nothing leaks there.
TEST_F(LlumnixTest, DestinationKilledMidCopyTheRequestFinishesOnTheSource) {
  const std::vector<int32_t> want = reference(engine::KvCacheType::kF32, request(1, kPrompt, 0.0f, 48));
  for (int run = 0; run < 20; ++run) {
    std::vector<InstanceBackend*> backends;
    RouterOptions ro;
    ro.migrate_max_stages = 3;
    ro.migrate_last_stage_tokens = 1;  // the first stage is a copy while it decodes
    ro.on_migration_stage = [&](RequestId, std::string_view stage) {
      // The source copied a stage; the destination dies before it loads it.
      // (Called on the source's thread.)
      if (stage == "load") backends[1]->stop();
    };
    auto router = llumnix(engine::KvCacheType::kF32, &backends, ro);
    Collector c;
    Router* r = router.get();
    std::atomic<bool> asked{false};
    auto on_event = [&, r](const instance::TokenEvent& ev) {
      if (ev.token >= 0 && !asked.exchange(true)) {
        EXPECT_TRUE(r->migrate(RequestId(1), "1").ok());
      }
    };
    ASSERT_TRUE(router->submit(request(1, kPrompt, 0.0f, 48), c.sink(on_event)).ok());
    auto got = c.wait(1);
    EXPECT_EQ(got[1].tokens, want) << "run " << run;
    EXPECT_EQ(got[1].reason, "length") << "run " << run << ": " << got[1].error;
    EXPECT_EQ(got[1].finals, 1);
    const ClusterStats st = wait_stats(*router, [](const ClusterStats& s) { return !s.migrations_aborted.empty(); });
    EXPECT_EQ(st.migrations_completed, 0);
    EXPECT_EQ(aborted(st, "destination_failed"), 1) << "run " << run;
    expect_no_blocks_in_use({backends[0]});
    router->stop();
  }
}

// The source is killed right after the commit: the destination already runs it.
TEST_F(LlumnixTest, SourceKilledAfterCommitTheRequestContinuesOnTheDestination) {
  const std::vector<int32_t> want = reference(engine::KvCacheType::kF32, request(1, kPrompt, 0.0f, 64));
  for (int run = 0; run < 20; ++run) {
    std::vector<InstanceBackend*> backends;
    auto router = llumnix(engine::KvCacheType::kF32, &backends);
    Collector c;
    Router* r = router.get();
    std::atomic<bool> asked{false};
    auto on_event = [&, r](const instance::TokenEvent& ev) {
      if (ev.token >= 0 && !asked.exchange(true)) {
        EXPECT_TRUE(r->migrate(RequestId(1), "1").ok());
      }
    };
    ASSERT_TRUE(router->submit(request(1, kPrompt, 0.0f, 64), c.sink(on_event)).ok());
    wait_stats(*router, [](const ClusterStats& s) { return s.migrations_completed + !s.migrations_aborted.empty() > 0; });
    backends[0]->stop();
    auto got = c.wait(1);
    const ClusterStats st = router->cluster_stats();
    ASSERT_EQ(st.migrations_completed, 1) << "run " << run;
    EXPECT_EQ(got[1].tokens, want) << "run " << run;
    EXPECT_EQ(got[1].reason, "length") << got[1].error;
    EXPECT_EQ(got[1].finals, 1);
    expect_no_blocks_in_use({backends[1]});
    router->stop();
  }
}

// The destination has too few blocks for the request's context: the migration
// aborts at once and the request never notices.
TEST_F(LlumnixTest, DestinationWithoutRoomAbortsCleanly) {
  const std::vector<int32_t> want = reference(engine::KvCacheType::kF32, request(1, kPrompt, 0.0f, 64));
  for (int run = 0; run < 20; ++run) {
    std::vector<InstanceBackend*> backends;
    auto router = llumnix(engine::KvCacheType::kF32, &backends, RouterOptions{}, /*dst_blocks=*/2);
    Collector c;
    Router* r = router.get();
    std::atomic<bool> asked{false};
    // 2 blocks of 16 hold 32 positions; by token 24 the request has more.
    auto on_event = [&, r](const instance::TokenEvent& ev) {
      if (ev.token >= 0 && r->cluster_stats().routed == 1 && !asked.load()) {
        static thread_local int seen = 0;
        if (++seen >= 24) {
          seen = 0;
          asked = true;
          EXPECT_TRUE(r->migrate(RequestId(1), "1").ok());
        }
      }
    };
    ASSERT_TRUE(router->submit(request(1, kPrompt, 0.0f, 64), c.sink(on_event)).ok());
    auto got = c.wait(1);
    EXPECT_EQ(got[1].tokens, want);
    EXPECT_EQ(got[1].reason, "length");
    const ClusterStats st = wait_stats(*router, [](const ClusterStats& s) { return !s.migrations_aborted.empty(); });
    EXPECT_EQ(aborted(st, "destination_full"), 1) << "run " << run;
    EXPECT_EQ(st.migrations_completed, 0);
    expect_no_blocks_in_use(backends);
    router->stop();
  }
}

// Cancelled during the stop-and-copy: one final "abort", nothing left anywhere.
TEST_F(LlumnixTest, CancelDuringStopAndCopyEndsOnceAndLeaksNothing) {
  for (int run = 0; run < 20; ++run) {
    std::vector<InstanceBackend*> backends;
    Router* r = nullptr;
    RouterOptions ro;
    ro.on_migration_stage = [&](RequestId id, std::string_view stage) {
      if (stage == (run % 2 ? "stop" : "commit")) r->cancel(id);
    };
    auto router = llumnix(engine::KvCacheType::kF32, &backends, ro);
    r = router.get();
    Collector c;
    std::atomic<bool> asked{false};
    auto on_event = [&](const instance::TokenEvent& ev) {
      if (ev.token >= 0 && !asked.exchange(true)) {
        EXPECT_TRUE(r->migrate(RequestId(1), "1").ok());
      }
    };
    ASSERT_TRUE(router->submit(request(1, kPrompt, 0.0f, 200), c.sink(on_event)).ok());
    auto got = c.wait(1);
    EXPECT_EQ(got[1].reason, "abort") << "run " << run;
    EXPECT_EQ(got[1].finals, 1);
    EXPECT_LT(got[1].tokens.size(), 200u);
    wait_stats(*router, [](const ClusterStats& s) { return s.migrations_completed + !s.migrations_aborted.empty() > 0; });
    expect_no_blocks_in_use(backends);
    EXPECT_TRUE(router->idle());
    router->stop();
  }
}

// remove_instance under llumnix drains by migration: the planner moves the
// running requests of the instance being removed, which then stops, while every
// request keeps its exact tokens.
TEST_F(LlumnixTest, RemovingAnInstanceMigratesItsRequestsAway) {
  std::vector<instance::GenerationRequest> reqs;
  const char* prompts[] = {"Once upon a time", "The little dog ran to the park and", "One day", "Lily and Ben"};
  std::map<uint64_t, std::vector<int32_t>> want;
  for (uint64_t id = 1; id <= 4; ++id) {
    want[id] = reference(engine::KvCacheType::kF32, request(id, prompts[id - 1], 0.0f, 300));
  }
  std::vector<InstanceBackend*> backends;
  RouterOptions ro;
  ro.migrate_interval = from_ms(20);
  ro.watchdog_interval = from_ms(20);
  ro.probe_interval = Duration::zero();
  ro.migration.max_migrations = 2;
  auto router = llumnix(engine::KvCacheType::kF32, &backends, ro);
  Collector c;
  for (uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(router->submit(request(id, prompts[id - 1], 0.0f, 300), c.sink()).ok());
  }
  // Freeness routing spread them: two on each instance.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_TRUE(router->remove_instance("1").ok());
  auto got = c.wait(4);
  for (uint64_t id = 1; id <= 4; ++id) {
    EXPECT_EQ(got[id].tokens, want[id]) << id;
    EXPECT_EQ(got[id].reason, "length") << got[id].error;
  }
  const ClusterStats st = wait_stats(*router, [](const ClusterStats& s) { return s.instances_removed == 1; });
  EXPECT_GE(st.migrations_completed, 1);
  for (const MigrationRecord& m : st.recent_migrations) {
    if (m.outcome == "completed") {
      EXPECT_EQ(m.reason, "drain");
    }
  }
  EXPECT_EQ(st.instances_removed, 1);
  router->stop();
}

// Freeness routing from the router's own accounting (no request lists): a
// high-priority request's headroom makes its instance look busy, where
// least-loaded (tokens) would pick it.
TEST(LlumnixRoutingTest, HighPriorityHeadroomSteersNewRequestsAway) {
  ManualClock clock;
  for (const char* router : {"freeness", "least-loaded"}) {
    std::vector<testing::FakeBackend*> fakes;
    std::vector<std::unique_ptr<GenerationBackend>> members;
    for (int i = 0; i < 2; ++i) {
      auto b = std::make_unique<testing::FakeBackend>(/*max_context=*/2048);
      instance::InstanceStatus st;
      st.running = true;
      st.block_size = 16;
      st.num_total_blocks = 64;
      st.num_free_blocks = 64;
      st.last_heartbeat = clock.now();
      b->set_status(st);
      fakes.push_back(b.get());
      members.push_back(std::move(b));
    }
    RouterOptions ro;
    ro.strategy = "llumnix";
    ro.router = router;
    ro.probe_interval = Duration::zero();
    auto r = Router::create(std::move(members), ro, &clock);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto req = [](uint64_t id, int32_t prompt_len, int32_t priority) {
      instance::GenerationRequest g;
      g.id = RequestId(id);
      g.prompt.assign(static_cast<size_t>(prompt_len), 5);
      g.sampling.max_tokens = 1000;
      g.priority = priority;
      return g;
    };
    auto ignore = [](const instance::TokenEvent&) {};
    // 1 (high, 10 tokens) -> instance 0 (tie). 2 (100 tokens) -> instance 1 under both.
    ASSERT_TRUE((*r)->submit(req(1, 10, 1), ignore).ok());
    ASSERT_TRUE((*r)->submit(req(2, 100, 0), ignore).ok());
    fakes[0]->emit(1, 7);  // both running now
    fakes[1]->emit(2, 7);
    // 3 (10 tokens): instance 0 holds 11 tokens but 1 + 63 blocks of virtual usage
    // (headroom min(999, 1024) tokens = 63 blocks): F = (64 - 64) / 1 = 0; instance 1
    // holds 101 tokens = 7 blocks: F = 57. Least-loaded sees 11 against 101 tokens.
    ASSERT_TRUE((*r)->submit(req(3, 10, 0), ignore).ok());
    if (std::string(router) == "freeness") {
      EXPECT_EQ(fakes[1]->submitted().back(), RequestId(3));
    } else {
      EXPECT_EQ(fakes[0]->submitted().back(), RequestId(3));
    }
    // When request 1 ends, its headroom goes with it.
    fakes[0]->emit(1, -1, "stop");
    ASSERT_TRUE((*r)->submit(req(4, 10, 0), ignore).ok());
    EXPECT_EQ(fakes[0]->submitted().back(), RequestId(4)) << router;
    (*r)->stop();
  }
}

// Scaling by freeness: idle instances (F = 64 > 32 for a whole window) lose one,
// drained and removed; a prompt that fills the last one (F = 4 < 8) brings a new one.
TEST(LlumnixRoutingTest, ScalesByFreenessDownThenUp) {
  ManualClock clock;
  std::mutex made_mu;
  std::vector<testing::FakeBackend*> made;
  auto fake = [&]() {
    auto b = std::make_unique<testing::FakeBackend>(/*max_context=*/2048);
    instance::InstanceStatus st;
    st.running = true;
    st.block_size = 16;
    st.num_total_blocks = 64;
    st.num_free_blocks = 64;
    b->set_status(st);
    std::lock_guard<std::mutex> lock(made_mu);
    made.push_back(b.get());
    return b;
  };
  std::vector<std::unique_ptr<GenerationBackend>> members;
  members.push_back(fake());
  members.push_back(fake());
  RouterOptions ro;
  ro.strategy = "llumnix";
  ro.router = "freeness";
  ro.probe_interval = Duration::zero();
  ro.heartbeat_timeout = std::chrono::hours(1000);
  ro.watchdog_interval = from_ms(5);
  ro.make_instance = [&](const std::string&) -> StatusOr<std::unique_ptr<GenerationBackend>> {
    return std::unique_ptr<GenerationBackend>(fake());
  };
  ro.scale_by_freeness = true;
  ro.freeness_scaling.scale_up_freeness = 8;
  ro.freeness_scaling.scale_down_freeness = 32;
  ro.freeness_scaling.window = std::chrono::seconds(1);
  ro.freeness_scaling.cooldown = std::chrono::seconds(1);
  ro.freeness_scaling.min_instances = 1;
  ro.freeness_scaling.max_instances = 2;
  auto r = Router::create(std::move(members), ro, &clock);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  (*r)->start();
  // Moves the manual clock in 100 ms steps, giving the watchdog real time to sample.
  auto run_until = [&](const std::function<bool(const ClusterStats&)>& pred) {
    for (int i = 0; i < 100 && !pred((*r)->cluster_stats()); ++i) {
      clock.advance(from_ms(100));
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
    return (*r)->cluster_stats();
  };
  ClusterStats st = run_until([](const ClusterStats& s) { return s.instances_removed == 1; });
  EXPECT_EQ(st.freeness_scale_downs, 1);
  EXPECT_EQ(st.instances_removed, 1);
  ASSERT_EQ((*r)->instances().size(), 1u);
  EXPECT_EQ((*r)->instances()[0].name, "0");  // the newest of two idle ones went
  // A 950-token prompt wants 60 of instance 0's 64 blocks: F = 4.
  instance::GenerationRequest g;
  g.id = RequestId(1);
  g.prompt.assign(950, 5);
  g.sampling.max_tokens = 10;
  ASSERT_TRUE((*r)->submit(std::move(g), [](const instance::TokenEvent&) {}).ok());
  st = run_until([](const ClusterStats& s) { return s.instances_added == 1; });
  EXPECT_EQ(st.freeness_scale_ups, 1);
  EXPECT_EQ(st.instances_added, 1);
  EXPECT_EQ((*r)->instances().size(), 2u);
  // At max_instances: a still-full cluster does not grow further.
  st = run_until([](const ClusterStats&) { return false; });
  EXPECT_EQ(st.instances_added, 1);
  (*r)->stop();
}

}  // namespace
}  // namespace ecoserve::cluster
