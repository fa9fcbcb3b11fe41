#include "instance/instance_loop.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "base/test_data.h"
#include "engine/generator.h"
#include "instance/fake_executor.h"

namespace ecoserve::instance {
namespace {

constexpr const char* kModel = "models/tinystories-656k-q8_0.gguf";

// Collects the events of many requests; waits for final events.
class Collector {
 public:
  EventSink sink() {
    return [this](const TokenEvent& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      events_[ev.id.value].push_back(ev);
      if (ev.finished) {
        finished_++;
        cv_.notify_all();
      }
    };
  }
  void wait_finished(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_ >= n; });
  }
  std::vector<TokenEvent> events(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return events_[id];
  }
  std::vector<int32_t> tokens(uint64_t id) {
    std::vector<int32_t> out;
    for (const auto& e : events(id)) {
      if (e.token >= 0) out.push_back(e.token);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::vector<TokenEvent>> events_;
  int finished_ = 0;
};

class InstanceLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = shared_data_path(kModel);
    if (!path) GTEST_SKIP() << missing_data_message(kModel);
    auto m = model::LlamaModel::load(*path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = *m;
  }

  // InstanceOptions with the model's vocabulary and end-of-generation tokens.
  InstanceOptions options() const {
    InstanceOptions o;
    o.vocab_size = model_->tokenizer().vocab_size();
    o.eog_token_ids = model_->tokenizer().eog_token_ids();
    return o;
  }

  std::unique_ptr<engine::ModelRunner> runner(int32_t blocks = 256, int32_t host_blocks = 0) {
    engine::EngineOptions eo;
    eo.num_threads = 1;
    eo.num_kv_blocks = blocks;
    eo.num_host_blocks = host_blocks;
    eo.amx_bf16 = false;  // outputs compared bitwise across batchings and preemptions
    eo.attention_bf16 = false;
    eo.matmul_bf16 = false;
    auto r = engine::ModelRunner::create(model_, eo);
    EXPECT_TRUE(r.ok());
    return std::move(r).value();
  }

  std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int32_t n) {
    auto r = runner();
    engine::Generator gen(*r);
    engine::GenerateOptions go;
    go.sampling.temperature = 0;
    go.sampling.max_tokens = n;
    auto res = gen.generate(prompt, go);
    EXPECT_TRUE(res.ok());
    return res->tokens;
  }

  GenerationRequest request(uint64_t id, const std::string& text, int32_t max_tokens) {
    GenerationRequest req;
    req.id = RequestId(id);
    req.prompt = model_->tokenizer().encode(text, true);
    req.sampling.temperature = 0;
    req.sampling.max_tokens = max_tokens;
    return req;
  }

  std::shared_ptr<const model::LlamaModel> model_;
  SteadyClock clock_;
};

TEST_F(InstanceLoopTest, ConcurrentGreedyRequestsMatchSingleSequenceGeneration) {
  for (const char* policy : {"chunked", "prefill-first"}) {
    InstanceOptions opt = options();
    opt.policy = policy;
    auto loop = InstanceLoop::create(runner(), opt, &clock_);
    ASSERT_TRUE(loop.ok()) << loop.status().to_string();
    (*loop)->start();
    Collector c;
    const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Tom and Sue went to the park",
                                              "One day"};
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE((*loop)->submit(request(i + 1, prompts[i], 24), c.sink()).ok());
    }
    c.wait_finished(static_cast<int>(prompts.size()));
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto req = request(i + 1, prompts[i], 24);
      auto want = reference(req.prompt, 24);
      EXPECT_EQ(c.tokens(i + 1), want) << policy << ": prompt '" << prompts[i] << "'";
      auto evs = c.events(i + 1);
      ASSERT_FALSE(evs.empty());
      EXPECT_TRUE(evs.back().finished);
      EXPECT_EQ(evs.back().prompt_tokens, static_cast<int32_t>(req.prompt.size()));
      EXPECT_EQ(evs.back().finish_reason, want.size() == 24 ? "length" : "stop");
    }
    (*loop)->stop();
    EXPECT_DOUBLE_EQ((*loop)->status().kv_usage, 0.0);
  }
}

// Too few KV blocks for all requests at once: the scheduler preempts (recompute, or
// swap to the host pool and back) and every request still gets exactly the tokens it
// gets alone.
TEST_F(InstanceLoopTest, PreemptionByRecomputeAndSwapKeepsOutputsExact) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Tom and Sue went to the park",
                                            "One day", "The sun was hot", "Mia had a red ball"};
  const int32_t n = 60;
  for (const char* mode : {"recompute", "swap"}) {
    InstanceOptions opt = options();
    opt.preemption_mode = mode;
    opt.enable_prefix_caching = false;
    // 6 requests x up to ~70 tokens need ~30 blocks of 16; give 12.
    auto loop = InstanceLoop::create(runner(12, 64), opt, &clock_);
    ASSERT_TRUE(loop.ok()) << loop.status().to_string();
    (*loop)->start();
    Collector c;
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto req = request(i + 1, prompts[i], n);
      req.sampling.ignore_eos = true;
      ASSERT_TRUE((*loop)->submit(std::move(req), c.sink()).ok());
    }
    c.wait_finished(static_cast<int>(prompts.size()));
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto req = request(i + 1, prompts[i], n);
      auto r = runner();
      engine::Generator gen(*r);
      engine::GenerateOptions go;
      go.sampling = req.sampling;
      go.sampling.ignore_eos = true;
      auto want = gen.generate(req.prompt, go);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(c.tokens(i + 1), want->tokens) << mode << ": prompt '" << prompts[i] << "'";
      EXPECT_EQ(c.events(i + 1).back().finish_reason, "length");
    }
    EXPECT_GT((*loop)->status().preemptions, 0) << mode;
    (*loop)->stop();
  }
}

// The status carries the core's real block counts from creation on, also in the
// window after start() and before the loop thread's first publish (here held open by a
// frozen first task): a router reading zero total and free blocks there took a
// healthy idle instance for a full one and migrated its first request away.
TEST_F(InstanceLoopTest, StatusHasTheRealBlockCountsBeforeTheFirstStep) {
  auto loop = InstanceLoop::create(runner(/*blocks=*/256), options(), &clock_);
  ASSERT_TRUE(loop.ok());
  const InstanceStatus created = (*loop)->status();
  EXPECT_FALSE(created.running);
  EXPECT_EQ(created.num_total_blocks, 256);
  EXPECT_EQ(created.num_free_blocks, 256);
  (*loop)->freeze_for_testing(std::chrono::milliseconds(300));
  (*loop)->start();
  const InstanceStatus started = (*loop)->status();
  EXPECT_TRUE(started.running);
  EXPECT_EQ(started.steps, 0);
  EXPECT_EQ(started.num_total_blocks, 256);
  EXPECT_EQ(started.num_free_blocks, 256);
  EXPECT_EQ(started.block_size, created.block_size);
  EXPECT_GT(started.block_size, 0);
}

TEST_F(InstanceLoopTest, RejectsOverContextAndFullQueue) {
  InstanceOptions opt = options();
  opt.max_waiting = 1;
  auto loop = InstanceLoop::create(runner(), opt, &clock_);
  ASSERT_TRUE(loop.ok());
  Collector c;
  auto big = request(1, "Once upon a time", 100000);
  Status s = (*loop)->submit(big, c.sink());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("maximum context length"), std::string::npos) << s.message();
  // Not started: the first request waits, the second finds the queue full.
  ASSERT_TRUE((*loop)->submit(request(2, "One day", 4), c.sink()).ok());
  Status full = (*loop)->submit(request(3, "One day", 4), c.sink());
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  (*loop)->start();
  c.wait_finished(1);
  EXPECT_EQ(c.tokens(2).size(), 4u);
  (*loop)->begin_drain();
  EXPECT_EQ((*loop)->submit(request(4, "One day", 4), c.sink()).code(), StatusCode::kUnavailable);
}

TEST_F(InstanceLoopTest, CancelFreesBlocksAndEndsWithAbort) {
  InstanceOptions opt = options();
  auto loop = InstanceLoop::create(runner(), opt, &clock_);
  ASSERT_TRUE(loop.ok());
  Collector c;
  auto req = request(7, "Once upon a time", 400);
  req.sampling.ignore_eos = true;
  std::mutex mu;
  std::condition_variable cv;
  int seen = 0;
  EventSink inner = c.sink();
  auto sink = [&](const TokenEvent& ev) {
    inner(ev);
    std::lock_guard<std::mutex> lock(mu);
    seen++;
    cv.notify_all();
  };
  (*loop)->start();
  ASSERT_TRUE((*loop)->submit(std::move(req), sink).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return seen >= 3; });
  }
  (*loop)->cancel(RequestId(7));
  c.wait_finished(1);
  auto evs = c.events(7);
  EXPECT_EQ(evs.back().finish_reason, "abort");
  EXPECT_LT(c.tokens(7).size(), 400u);
  // The loop publishes its status after the abort is processed.
  for (int i = 0; i < 1000 && (*loop)->status().kv_usage > 0.0; ++i) std::this_thread::yield();
  EXPECT_DOUBLE_EQ((*loop)->status().kv_usage, 0.0);
  (*loop)->stop();
}

TEST_F(InstanceLoopTest, StopAbortsEverythingPending) {
  InstanceOptions opt = options();
  auto loop = InstanceLoop::create(runner(), opt, &clock_);
  ASSERT_TRUE(loop.ok());
  Collector c;
  ASSERT_TRUE((*loop)->submit(request(1, "One day", 8), c.sink()).ok());
  ASSERT_TRUE((*loop)->submit(request(2, "One day", 8), c.sink()).ok());
  (*loop)->stop();  // never started: both still get a final event
  c.wait_finished(2);
  EXPECT_EQ(c.events(1).back().finish_reason, "abort");
  EXPECT_EQ(c.events(2).back().finish_reason, "abort");
}

// A FakeExecutor whose steps wait at a gate: the test looks at the loop mid-step.
class GatedExecutor final : public Executor {
 public:
  StatusOr<StepOutput> execute(const StepPlan& plan) override {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    return inner_.execute(plan);
  }
  int32_t block_size() const override { return inner_.block_size(); }
  int32_t num_kv_blocks() const override { return inner_.num_kv_blocks(); }
  int32_t num_host_blocks() const override { return inner_.num_host_blocks(); }
  int32_t max_context() const override { return inner_.max_context(); }
  void wait_entered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  testing::FakeExecutor inner_{16, 16, 256};
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool open_ = false;
};

// The loop beats between steps only, so its status shows a step in progress and
// when it began: a step older than any heartbeat timeout is work (loop_alive)
// until it outlives the step timeout.
TEST(InstanceLoopStepTest, StatusShowsTheStepInProgress) {
  ManualClock clock(TimePoint(std::chrono::seconds(10)));
  auto owned = std::make_unique<GatedExecutor>();
  GatedExecutor* gate = owned.get();
  auto loop = InstanceLoop::create(std::move(owned), InstanceOptions{}, &clock);
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  (*loop)->start();
  EXPECT_FALSE((*loop)->status().in_step);
  Collector c;
  GenerationRequest r;
  r.id = RequestId(1);
  r.prompt = {1, 2, 3};
  r.sampling.max_tokens = 1;
  ASSERT_TRUE((*loop)->submit(r, c.sink()).ok());
  gate->wait_entered();
  clock.advance(std::chrono::seconds(60));
  const InstanceStatus mid = (*loop)->status();
  EXPECT_TRUE(mid.in_step);
  EXPECT_EQ(mid.step_started, TimePoint(std::chrono::seconds(10)));
  EXPECT_EQ(mid.last_heartbeat, TimePoint(std::chrono::seconds(10)));  // no beat for a minute
  EXPECT_TRUE(loop_alive(mid, clock.now(), std::chrono::seconds(5), std::chrono::seconds(300)));
  EXPECT_FALSE(loop_alive(mid, clock.now(), std::chrono::seconds(5), std::chrono::seconds(30)));
  gate->open();
  c.wait_finished(1);
  InstanceStatus after = (*loop)->status();
  for (int i = 0; i < 2000 && (after.steps == 0 || after.in_step); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    after = (*loop)->status();
  }
  EXPECT_EQ(after.steps, 1);
  EXPECT_FALSE(after.in_step);
  EXPECT_EQ(after.last_heartbeat, clock.now());
  // Between steps the heartbeat decides: fresh now, stale 6 s on (5 s timeout).
  EXPECT_TRUE(loop_alive(after, clock.now(), std::chrono::seconds(5), std::chrono::seconds(30)));
  EXPECT_FALSE(loop_alive(after, clock.now() + std::chrono::seconds(6), std::chrono::seconds(5),
                          std::chrono::seconds(300)));
  (*loop)->stop();
}

}  // namespace
}  // namespace ecoserve::instance
