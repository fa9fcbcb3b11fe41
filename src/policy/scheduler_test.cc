#include "policy/scheduler.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>

#include "policy/chunked_prefill_policy.h"
#include "policy/decode_only_policy.h"
#include "policy/policy_test_util.h"
#include "policy/prefill_first_policy.h"
#include "policy/prefill_only_policy.h"

namespace ecoserve::policy {
namespace {

using testing::at_ms;
using testing::policy_options;
constexpr int32_t kBs = 4;

// A fake engine with a simulated KV cache: each slot holds the token id whose KV it
// is. Executing a plan applies the swaps, checks that every sequence's cached
// positions hold exactly its tokens, writes the new tokens, and samples.
class FakeEngine {
 public:
  using TokenFn = std::function<int32_t(RequestId, int32_t /*output index*/)>;
  FakeEngine(int32_t num_blocks, int32_t num_host_blocks)
      : device_(size_t(num_blocks) * kBs, -1), host_(size_t(std::max(1, num_host_blocks)) * kBs, -1) {}

  std::vector<SampledToken> execute(const StepPlan& plan, const TokenFn& next) {
    for (const BlockCopy& c : plan.swap_out) copy(device_, c.src, host_, c.dst);
    for (const BlockCopy& c : plan.swap_in) copy(host_, c.src, device_, c.dst);
    std::vector<SampledToken> out;
    for (const SeqStep& s : plan.seqs) {
      std::vector<int32_t> all(s.prompt_tokens.begin(), s.prompt_tokens.end());
      all.insert(all.end(), s.output_tokens.begin(), s.output_tokens.end());
      const int32_t end = s.num_computed + static_cast<int32_t>(s.tokens.size());
      EXPECT_LE(end, static_cast<int32_t>(all.size()));
      EXPECT_GE(static_cast<int32_t>(s.block_table.size()) * kBs, end) << "block table too short";
      for (int32_t pos = 0; pos < s.num_computed; ++pos) {
        EXPECT_EQ(slot(s.block_table, pos), all[pos]) << "request " << s.id.value << " KV at " << pos;
      }
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        EXPECT_EQ(s.tokens[i], all[s.num_computed + i]);
        slot(s.block_table, s.num_computed + static_cast<int32_t>(i)) = s.tokens[i];
      }
      EXPECT_EQ(s.sample, end == static_cast<int32_t>(all.size()));
      if (s.sample) {
        EXPECT_NE(s.sampling, nullptr);
        out.push_back(SampledToken{s.id, next(s.id, static_cast<int32_t>(s.output_tokens.size()))});
      }
    }
    return out;
  }

 private:
  int32_t& slot(const std::vector<BlockId>& table, int32_t pos) {
    return device_[size_t(table[pos / kBs].value) * kBs + pos % kBs];
  }
  static void copy(std::vector<int32_t>& from, BlockId src, std::vector<int32_t>& to, BlockId dst) {
    for (int32_t i = 0; i < kBs; ++i) to[size_t(dst.value) * kBs + i] = from[size_t(src.value) * kBs + i];
  }
  std::vector<int32_t> device_, host_;
};

int32_t default_token(RequestId id, int32_t k) { return 1000 + static_cast<int32_t>((id.value * 31 + k) % 97); }

std::vector<int32_t> prompt_of(int32_t n, int32_t start = 1) {
  std::vector<int32_t> p(n);
  for (int32_t i = 0; i < n; ++i) p[i] = start + i;
  return p;
}

RequestSpec spec(uint64_t id, std::vector<int32_t> prompt, int32_t max_tokens, int32_t priority = 0,
                 int64_t arrival_ms = 0) {
  RequestSpec s;
  s.id = RequestId(id);
  s.prompt = std::move(prompt);
  s.sampling.max_tokens = max_tokens;
  s.priority = priority;
  s.arrival = at_ms(arrival_ms);
  s.seed = 42 + id;
  return s;
}

Scheduler::Options sched_opts(int32_t num_blocks, PreemptionMode mode = PreemptionMode::kRecompute,
                              int32_t host_blocks = 0, bool prefix = true) {
  Scheduler::Options o;
  o.block_size = kBs;
  o.num_blocks = num_blocks;
  o.num_host_blocks = host_blocks;
  o.preemption_mode = mode;
  o.enable_prefix_caching = prefix;
  o.eog_token_ids = {2};
  return o;
}

PolicyOptions pol(int32_t seqs = 8, int32_t tokens = 64, int32_t chunk = 0) {
  return policy_options(seqs, tokens, chunk);
}

struct Harness {
  Harness(Scheduler::Options o, std::unique_ptr<InstancePolicy> p)
      : engine(o.num_blocks, o.num_host_blocks), sched(o, std::move(p)) {}
  // One step; returns the plan (spans inside are stale after the step) and collects finished.
  StepPlan step(const FakeEngine::TokenFn& next = default_token) {
    StepPlan plan = sched.schedule(at_ms(now_ms++));
    auto outs = engine.execute(plan, next);
    swapped_out += static_cast<int64_t>(plan.swap_out.size());
    swapped_in += static_cast<int64_t>(plan.swap_in.size());
    for (const auto& o : outs) outputs[o.id.value].push_back(o.token);
    for (auto& f : sched.on_step_done(outs)) finished[f.id.value] = f;
    return plan;
  }
  FakeEngine engine;
  Scheduler sched;
  int64_t now_ms = 0;
  int64_t swapped_out = 0, swapped_in = 0;
  std::map<uint64_t, std::vector<int32_t>> outputs;
  std::map<uint64_t, FinishedInfo> finished;
};

// Requests decoding side by side keep their KV in runs of consecutive blocks (what
// decode attention streams fastest): the second request starts halfway into the free
// blocks after the first, and every block either takes comes right after its last one.
TEST(SchedulerTest, RequestsDecodingSideBySideGrowInConsecutiveBlocks) {
  Harness h(sched_opts(64), std::make_unique<PrefillFirstPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(6, 1), 20)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(6, 100), 20)).ok());
  std::map<uint64_t, std::vector<int32_t>> tables;
  for (int i = 0; i < 40 && h.finished.size() < 2; ++i) {
    for (const auto& s : h.step().seqs) {
      std::vector<int32_t>& t = tables[s.id.value];
      t.clear();
      for (BlockId b : s.block_table) t.push_back(b.value);
    }
  }
  ASSERT_EQ(h.finished.size(), 2u);
  // 6 + 20 tokens, the last one sampled and never computed: 25 slots, 7 blocks of 4.
  EXPECT_EQ(tables[1], (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tables[2], (std::vector<int32_t>{32, 33, 34, 35, 36, 37, 38}));
}

TEST(SchedulerTest, PrefillDecodeAndFinishByLength) {
  Harness h(sched_opts(16), std::make_unique<PrefillFirstPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(6), 3)).ok());
  EXPECT_EQ(h.sched.num_waiting(), 1);

  StepPlan p1 = h.step();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].num_computed, 0);
  EXPECT_EQ(p1.seqs[0].tokens, prompt_of(6));
  EXPECT_EQ(p1.seqs[0].block_table.size(), 2u);
  EXPECT_TRUE(p1.seqs[0].sample);
  EXPECT_EQ(p1.seqs[0].seed, 43u);
  EXPECT_EQ(h.sched.num_running(), 1);
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 2.0 / 16);

  StepPlan p2 = h.step();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].num_computed, 6);
  EXPECT_EQ(p2.seqs[0].tokens, std::vector<int32_t>{default_token(RequestId(1), 0)});
  EXPECT_EQ(p2.seqs[0].block_table.size(), 2u);
  StepPlan p3 = h.step();
  EXPECT_EQ(p3.seqs[0].num_computed, 7);
  EXPECT_EQ(p3.seqs[0].block_table.size(), 2u) << "8 slots hold tokens 0..7";

  ASSERT_EQ(h.finished.count(1), 1u);
  EXPECT_EQ(h.finished[1].reason, FinishReason::kLength);
  EXPECT_EQ(finish_reason_name(h.finished[1].reason), "length");
  EXPECT_EQ(h.finished[1].num_prompt_tokens, 6);
  EXPECT_EQ(h.finished[1].num_output_tokens, 3);
  EXPECT_EQ(h.outputs[1].size(), 3u);
  EXPECT_EQ(h.sched.num_running(), 0);
  EXPECT_FALSE(h.sched.has_unfinished());
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
  EXPECT_TRUE(h.sched.schedule(at_ms(99)).empty());
}

TEST(SchedulerTest, StopTokenEogAndIgnoreEos) {
  Harness h(sched_opts(32), std::make_unique<ChunkedPrefillPolicy>(pol()));
  auto a = spec(1, prompt_of(3), 10);
  a.sampling.stop_token_ids = {7};
  auto b = spec(2, prompt_of(3), 10);  // EOG (2) stops it
  auto c = spec(3, prompt_of(3), 3);
  c.sampling.ignore_eos = true;
  ASSERT_TRUE(h.sched.add_request(a).ok());
  ASSERT_TRUE(h.sched.add_request(b).ok());
  ASSERT_TRUE(h.sched.add_request(c).ok());
  auto next = [](RequestId id, int32_t k) -> int32_t {
    if (id.value == 1) return k == 1 ? 7 : 50;
    return k == 0 ? 2 : 60;  // EOG first
  };
  h.step(next);
  EXPECT_EQ(h.finished.count(2), 1u);
  EXPECT_EQ(h.finished[2].reason, FinishReason::kStop);
  EXPECT_EQ(h.finished[2].num_output_tokens, 1);
  h.step(next);
  EXPECT_EQ(h.finished[1].reason, FinishReason::kStop);
  EXPECT_EQ(h.outputs[1], (std::vector<int32_t>{50, 7})) << "the stop token is the last output";
  h.step(next);
  EXPECT_EQ(h.finished[3].reason, FinishReason::kLength);
  EXPECT_EQ(h.outputs[3], (std::vector<int32_t>{2, 60, 60}));
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
}

TEST(SchedulerTest, AbortFreesBlocks) {
  Harness h(sched_opts(16), std::make_unique<ChunkedPrefillPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(9), 100)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(5, 50), 100)).ok());
  h.step();
  h.step();
  EXPECT_GT(h.sched.kv_usage(), 0.0);

  // Abort while a step is in flight: blocks are freed when the step is done.
  StepPlan plan = h.sched.schedule(at_ms(10));
  EXPECT_TRUE(h.sched.abort(RequestId(1)));
  EXPECT_EQ(h.sched.num_running(), 2);
  auto outs = h.engine.execute(plan, default_token);
  auto fin = h.sched.on_step_done(outs);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].id, RequestId(1));
  EXPECT_EQ(fin[0].reason, FinishReason::kAbort);
  EXPECT_EQ(h.sched.num_running(), 1);
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 2.0 / 16) << "request 2: 5 + 3 tokens in 2 blocks";

  // Abort between steps: freed at once, reported by the next on_step_done.
  EXPECT_TRUE(h.sched.abort(RequestId(2)));
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
  EXPECT_FALSE(h.sched.abort(RequestId(2)));
  fin = h.sched.on_step_done({});
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(fin[0].reason, FinishReason::kAbort);
  EXPECT_FALSE(h.sched.has_unfinished());

  // A waiting request can be aborted too.
  ASSERT_TRUE(h.sched.add_request(spec(3, prompt_of(5), 4)).ok());
  EXPECT_TRUE(h.sched.abort(RequestId(3)));
  EXPECT_EQ(h.sched.num_waiting(), 0);
}

TEST(SchedulerTest, RecomputePreemptionRerunsPromptAndGeneratedTokens) {
  // 5 blocks of 4: two requests of 8-token prompts (2 blocks each) grow until one must go.
  Harness h(sched_opts(5, PreemptionMode::kRecompute, 0, /*prefix=*/false),
            std::make_unique<ChunkedPrefillPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(8), 6, 0, 1)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(8, 100), 6, 0, 2)).ok());
  h.step();  // both prefill: 4 blocks
  StepPlan p = h.step();  // both decode the 9th token: need 2 new blocks, 1 free -> 2 preempted
  EXPECT_EQ(p.preempted, std::vector<RequestId>{RequestId(2)});
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].id, RequestId(1));
  EXPECT_EQ(h.sched.num_preemptions(), 1);
  EXPECT_EQ(h.sched.num_waiting(), 1);
  EXPECT_EQ(h.outputs[2].size(), 1u);

  // Request 1 runs to completion (6 tokens), then 2 re-runs prompt + its generated token.
  while (!h.finished.count(1)) h.step();
  StepPlan re = h.step();
  ASSERT_EQ(re.seqs.size(), 1u);
  EXPECT_EQ(re.seqs[0].id, RequestId(2));
  EXPECT_EQ(re.seqs[0].num_computed, 0);
  std::vector<int32_t> expect = prompt_of(8, 100);
  expect.push_back(default_token(RequestId(2), 0));
  EXPECT_EQ(re.seqs[0].tokens, expect);
  EXPECT_TRUE(re.seqs[0].sample);
  while (!h.finished.count(2)) h.step();
  EXPECT_EQ(h.outputs[2].size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(h.outputs[2][k], default_token(RequestId(2), k));
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
}

TEST(SchedulerTest, RecomputeReusesItsOwnCachedPrefix) {
  Harness h(sched_opts(5), std::make_unique<ChunkedPrefillPolicy>(pol()));
  // Request 1 grows to 3 blocks only, so 2's evictable prompt blocks survive.
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(8), 4, 0, 1)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(8, 100), 6, 0, 2)).ok());
  h.step();
  h.step();  // 2 preempted; its 2 full prompt blocks stay cached (evictable)
  while (!h.finished.count(1)) h.step();
  StepPlan re = h.step();
  ASSERT_EQ(re.seqs.size(), 1u);
  EXPECT_EQ(re.seqs[0].num_computed, 8) << "the prompt's blocks were still cached";
  EXPECT_EQ(re.seqs[0].tokens, std::vector<int32_t>{default_token(RequestId(2), 0)});
  while (!h.finished.count(2)) h.step();
  for (int k = 0; k < 6; ++k) EXPECT_EQ(h.outputs[2][k], default_token(RequestId(2), k));
}

TEST(SchedulerTest, EvictionUnderPressureTakesTheChainTailFirst) {
  Harness h(sched_opts(5), std::make_unique<ChunkedPrefillPolicy>(pol()));
  // Request 1 grows to 4 blocks: it evicts one of 2's cached prompt blocks, the tail one.
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(8), 6, 0, 1)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(8, 100), 6, 0, 2)).ok());
  h.step();
  h.step();
  while (!h.finished.count(1)) h.step();
  StepPlan re = h.step();
  ASSERT_EQ(re.seqs.size(), 1u);
  EXPECT_EQ(re.seqs[0].num_computed, 4) << "the first prompt block survived";
  EXPECT_EQ(re.seqs[0].tokens, (std::vector<int32_t>{104, 105, 106, 107, default_token(RequestId(2), 0)}));
}

TEST(SchedulerTest, SwapPreemptionSwapsOutThenIn) {
  Harness h(sched_opts(5, PreemptionMode::kSwap, /*host_blocks=*/8, /*prefix=*/false),
            std::make_unique<ChunkedPrefillPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(8), 6, 0, 1)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(8, 100), 6, 0, 2)).ok());
  StepPlan p1 = h.step();
  std::vector<BlockId> table2 = p1.seqs[1].block_table;
  StepPlan p = h.step();
  EXPECT_EQ(p.preempted, std::vector<RequestId>{RequestId(2)});
  ASSERT_EQ(p.swap_out.size(), 2u);
  EXPECT_EQ(p.swap_out[0].src, table2[0]);
  EXPECT_EQ(p.swap_out[1].src, table2[1]);
  EXPECT_EQ(h.sched.num_swapped(), 1);
  EXPECT_EQ(h.sched.num_free_host_blocks(), 6);

  while (!h.finished.count(1)) h.step();
  StepPlan in = h.step();
  ASSERT_EQ(in.swap_in.size(), 2u);
  EXPECT_EQ(in.swap_in[0].src, p.swap_out[0].dst);
  EXPECT_EQ(in.swap_in[1].src, p.swap_out[1].dst);
  ASSERT_EQ(in.seqs.size(), 1u);
  EXPECT_EQ(in.seqs[0].num_computed, 8) << "the KV came back: decode continues";
  EXPECT_EQ(in.seqs[0].tokens, std::vector<int32_t>{default_token(RequestId(2), 0)});
  EXPECT_EQ(in.seqs[0].block_table[0], in.swap_in[0].dst);
  EXPECT_EQ(in.seqs[0].block_table[1], in.swap_in[1].dst);
  // The two blocks coming back and the step's third are one run.
  std::vector<int32_t> table;
  for (BlockId b : in.seqs[0].block_table) table.push_back(b.value);
  EXPECT_EQ(table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(h.sched.num_free_host_blocks(), 8);
  while (!h.finished.count(2)) h.step();
  for (int k = 0; k < 6; ++k) EXPECT_EQ(h.outputs[2][k], default_token(RequestId(2), k));
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
}

TEST(SchedulerTest, SwapFallsBackToRecomputeWhenHostPoolIsFull) {
  Harness h(sched_opts(5, PreemptionMode::kSwap, /*host_blocks=*/1, false),
            std::make_unique<ChunkedPrefillPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(8), 6, 0, 1)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(8, 100), 6, 0, 2)).ok());
  h.step();
  StepPlan p = h.step();
  EXPECT_EQ(p.preempted.size(), 1u);
  EXPECT_TRUE(p.swap_out.empty());
  EXPECT_EQ(h.sched.num_waiting(), 1);
}

TEST(SchedulerTest, PrefixHitSkipsCachedBlocksButComputesTheLastToken) {
  Harness h(sched_opts(16), std::make_unique<ChunkedPrefillPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(10), 1)).ok());
  StepPlan p1 = h.step();
  ASSERT_TRUE(h.finished.count(1));
  EXPECT_EQ(h.sched.prefix_cache_query_tokens(), 10);
  EXPECT_EQ(h.sched.prefix_cache_hit_tokens(), 0);

  // Shares the first 8 tokens, then differs.
  std::vector<int32_t> p2 = prompt_of(8);
  p2.insert(p2.end(), {77, 78, 79});
  ASSERT_TRUE(h.sched.add_request(spec(2, p2, 1)).ok());
  StepPlan s2 = h.step();
  ASSERT_EQ(s2.seqs.size(), 1u);
  EXPECT_EQ(s2.seqs[0].num_computed, 8);
  EXPECT_EQ(s2.seqs[0].tokens, (std::vector<int32_t>{77, 78, 79}));
  EXPECT_EQ(s2.seqs[0].block_table[0], p1.seqs[0].block_table[0]);
  EXPECT_EQ(s2.seqs[0].block_table[1], p1.seqs[0].block_table[1]);
  EXPECT_EQ(h.finished[2].num_cached_prompt_tokens, 8);
  EXPECT_EQ(h.sched.prefix_cache_query_tokens(), 21);
  EXPECT_EQ(h.sched.prefix_cache_hit_tokens(), 8);

  // The exact same 8-token prompt: only the first block is reused, the last token always runs.
  ASSERT_TRUE(h.sched.add_request(spec(3, prompt_of(8), 1)).ok());
  StepPlan s3 = h.step();
  EXPECT_EQ(s3.seqs[0].num_computed, 4);
  EXPECT_EQ(s3.seqs[0].tokens, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_TRUE(s3.seqs[0].sample);
  EXPECT_EQ(h.sched.prefix_cache_hit_tokens(), 12);
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
}

TEST(SchedulerTest, ConcurrentSharersHoldTheSameBlocks) {
  Harness h(sched_opts(16), std::make_unique<ChunkedPrefillPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(9), 4)).ok());
  StepPlan p1 = h.step();
  // Two more requests with the same prompt while 1 is still decoding (n > 1 style).
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(9), 4)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(3, prompt_of(9), 4)).ok());
  StepPlan p2 = h.step();
  ASSERT_EQ(p2.seqs.size(), 3u);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(p2.seqs[i].num_computed, 8);
    EXPECT_EQ(p2.seqs[i].block_table[0], p1.seqs[0].block_table[0]);
    EXPECT_EQ(p2.seqs[i].block_table[1], p1.seqs[0].block_table[1]);
    EXPECT_NE(p2.seqs[i].block_table[2], p1.seqs[0].block_table[2]);
  }
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 5.0 / 16) << "2 shared + 3 private blocks";
  while (h.sched.has_unfinished()) h.step();
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
}

TEST(SchedulerTest, SiblingsAdmittedTogetherShareAfterOneStep) {
  Harness h(sched_opts(16), std::make_unique<ChunkedPrefillPolicy>(pol()));
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(h.sched.add_request(spec(id, prompt_of(9), 2)).ok());
  StepPlan p1 = h.step();
  ASSERT_EQ(p1.seqs.size(), 1u) << "2 and 3 wait for 1's blocks";
  EXPECT_EQ(h.sched.num_deferred_admissions(), 2);
  StepPlan p2 = h.step();
  ASSERT_EQ(p2.seqs.size(), 3u);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(p2.seqs[i].num_computed, 8);
    EXPECT_EQ(p2.seqs[i].block_table[0], p1.seqs[0].block_table[0]);
    EXPECT_EQ(p2.seqs[i].block_table[1], p1.seqs[0].block_table[1]);
  }
  // Different prompts are not put off.
  ASSERT_TRUE(h.sched.add_request(spec(4, prompt_of(9, 40), 2)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(5, prompt_of(9, 60), 2)).ok());
  while (h.sched.has_unfinished()) h.step();
  EXPECT_EQ(h.sched.num_deferred_admissions(), 2);
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
}

TEST(SchedulerTest, HigherPriorityArrivalPreemptsUnderKvPressure) {
  Harness h(sched_opts(4, PreemptionMode::kRecompute, 0, false), std::make_unique<PrefillFirstPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(6), 20, /*priority=*/0, 1)).ok());
  ASSERT_TRUE(h.sched.add_request(spec(2, prompt_of(6, 50), 20, 0, 2)).ok());
  h.step();  // both prefilled: 4 blocks, cache full
  ASSERT_TRUE(h.sched.add_request(spec(3, prompt_of(3, 90), 2, /*priority=*/1, 3)).ok());
  StepPlan p = h.step();
  EXPECT_EQ(p.preempted, std::vector<RequestId>{RequestId(2)}) << "lowest priority, latest arrival";
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].id, RequestId(3));

  // A same-priority arrival does not preempt.
  Harness g(sched_opts(4, PreemptionMode::kRecompute, 0, false), std::make_unique<PrefillFirstPolicy>(pol()));
  ASSERT_TRUE(g.sched.add_request(spec(1, prompt_of(6), 20, 0, 1)).ok());
  ASSERT_TRUE(g.sched.add_request(spec(2, prompt_of(6, 50), 20, 0, 2)).ok());
  g.step();
  ASSERT_TRUE(g.sched.add_request(spec(3, prompt_of(3, 90), 2, 0, 3)).ok());
  StepPlan q = g.step();
  EXPECT_TRUE(q.preempted.empty());
  EXPECT_EQ(q.seqs.size(), 2u);
}

TEST(SchedulerTest, PrefillOnlyFinishesAfterPrefillAndHoldsBlocks) {
  Harness h(sched_opts(16), std::make_unique<PrefillOnlyPolicy>(pol(8, 64, /*chunk=*/4)));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(6), 50)).ok());
  StepPlan p1 = h.step();
  EXPECT_EQ(p1.seqs[0].tokens.size(), 4u);
  EXPECT_FALSE(p1.seqs[0].sample);
  StepPlan p2 = h.step();
  EXPECT_EQ(p2.seqs[0].num_computed, 4);
  EXPECT_TRUE(p2.seqs[0].sample);
  ASSERT_TRUE(h.finished.count(1));
  EXPECT_EQ(h.finished[1].reason, FinishReason::kPrefillDone);
  EXPECT_EQ(finish_reason_name(FinishReason::kPrefillDone), "prefill_done");
  EXPECT_EQ(h.finished[1].num_output_tokens, 1);
  EXPECT_EQ(h.finished[1].held_blocks, p2.seqs[0].block_table);
  EXPECT_EQ(h.sched.num_held(), 1);
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 2.0 / 16);
  EXPECT_TRUE(h.sched.release_held(RequestId(1)).ok());
  EXPECT_EQ(h.sched.release_held(RequestId(1)).code(), StatusCode::kNotFound);
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
}

TEST(SchedulerTest, DecodeOnlyTakesComputedRequests) {
  Harness h(sched_opts(16), std::make_unique<DecodeOnlyPolicy>(pol()));
  EXPECT_EQ(h.sched.add_request(spec(1, prompt_of(6), 5)).code(), StatusCode::kFailedPrecondition);
  std::vector<int32_t> first = {default_token(RequestId(1), 0)};
  auto table = h.sched.add_computed_request(spec(1, prompt_of(6), 3), first);
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  EXPECT_EQ(table->size(), 2u);
  EXPECT_EQ(h.sched.num_running(), 1);
  // The "transport" fills the prompt's KV: simulate it by running a throwaway plan on the engine.
  StepPlan fill;
  SeqStep s;
  s.id = RequestId(1);
  s.tokens = prompt_of(6);
  s.block_table = *table;
  std::vector<int32_t> prompt = prompt_of(6);
  s.prompt_tokens = prompt;
  s.sample = true;
  SamplingParams sp;
  s.sampling = &sp;
  fill.seqs.push_back(s);
  h.engine.execute(fill, default_token);

  StepPlan p = h.step();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].num_computed, 6);
  EXPECT_EQ(p.seqs[0].tokens, first);
  while (!h.finished.count(1)) h.step();
  EXPECT_EQ(h.finished[1].reason, FinishReason::kLength);
  EXPECT_EQ(h.finished[1].num_output_tokens, 3);
  EXPECT_EQ(h.outputs[1].size(), 2u);

  auto full = h.sched.add_computed_request(spec(2, prompt_of(70), 3), first);
  EXPECT_EQ(full.status().code(), StatusCode::kInvalidArgument);
}

TEST(SchedulerTest, BadRequestsAreErrors) {
  Scheduler::Options o = sched_opts(4);
  o.max_model_len = 12;
  Scheduler s(o, std::make_unique<ChunkedPrefillPolicy>(pol()));
  EXPECT_EQ(s.add_request(spec(1, {}, 4)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(spec(1, prompt_of(3), 0)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.add_request(spec(1, prompt_of(12), 4)).code(), StatusCode::kInvalidArgument);
  Scheduler t(sched_opts(2), std::make_unique<ChunkedPrefillPolicy>(pol()));
  Status too_big = t.add_request(spec(1, prompt_of(8), 4));
  EXPECT_EQ(too_big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_big.message().find("KV blocks"), std::string::npos) << too_big.message();
  ASSERT_TRUE(s.add_request(spec(1, prompt_of(3), 4)).ok());
  EXPECT_EQ(s.add_request(spec(1, prompt_of(3), 4)).code(), StatusCode::kAlreadyExists);
}

TEST(SchedulerTest, MaxModelLenFinishesWithLength) {
  Scheduler::Options o = sched_opts(16);
  o.max_model_len = 8;
  Harness h(o, std::make_unique<ChunkedPrefillPolicy>(pol()));
  ASSERT_TRUE(h.sched.add_request(spec(1, prompt_of(5), 100)).ok());
  while (h.sched.has_unfinished()) h.step();
  EXPECT_EQ(h.finished[1].reason, FinishReason::kLength);
  EXPECT_EQ(h.finished[1].num_output_tokens, 3);
}

// Random arrivals, aborts and priorities on a small cache with every policy and both
// preemption modes: the fake engine checks every KV read; every request ends with
// exactly its expected tokens; the cache is empty at the end.
void stress(std::function<std::unique_ptr<InstancePolicy>()> make, PreemptionMode mode, uint32_t seed) {
  Harness h(sched_opts(12, mode, 6), make());
  std::mt19937 rng(seed);
  std::map<uint64_t, int32_t> max_tokens;
  std::set<uint64_t> aborted;
  uint64_t next_id = 1;
  for (int step = 0; step < 2000 && (step < 200 || h.sched.has_unfinished()); ++step) {
    if (step < 200 && rng() % 2 == 0) {
      const int32_t len = 1 + static_cast<int32_t>(rng() % 14);
      const int32_t family = static_cast<int32_t>(rng() % 3) * 100;
      auto prompt = prompt_of(len, 10 + family);
      const int32_t mt = 1 + static_cast<int32_t>(rng() % 16);
      const uint64_t id = next_id++;
      ASSERT_TRUE(h.sched.add_request(spec(id, prompt, mt, static_cast<int32_t>(rng() % 3), step)).ok());
      max_tokens[id] = mt;
    }
    if (rng() % 17 == 0 && next_id > 1) {
      const uint64_t id = 1 + rng() % (next_id - 1);
      if (!h.finished.count(id) && h.sched.abort(RequestId(id))) aborted.insert(id);
    }
    h.step();
    if (::testing::Test::HasFailure()) return;
    ASSERT_GE(h.sched.kv_usage(), 0.0);
    ASSERT_LE(h.sched.kv_usage(), 1.0);
  }
  EXPECT_FALSE(h.sched.has_unfinished());
  for (auto [id, mt] : max_tokens) {
    ASSERT_TRUE(h.finished.count(id)) << "request " << id;
    if (aborted.count(id)) {
      EXPECT_EQ(h.finished[id].reason, FinishReason::kAbort);
      continue;
    }
    EXPECT_EQ(h.finished[id].reason, FinishReason::kLength);
    ASSERT_EQ(h.outputs[id].size(), static_cast<size_t>(mt)) << "request " << id;
    for (int32_t k = 0; k < mt; ++k) EXPECT_EQ(h.outputs[id][k], default_token(RequestId(id), k));
  }
  EXPECT_GT(h.sched.num_preemptions(), 5) << "the workload should exercise preemption";
  if (mode == PreemptionMode::kSwap) {
    EXPECT_GT(h.swapped_out, 5);
    EXPECT_GT(h.swapped_in, 5);
  }

  EXPECT_GT(h.sched.prefix_cache_hit_tokens(), 0) << "the workload should exercise prefix hits";
  EXPECT_DOUBLE_EQ(h.sched.kv_usage(), 0.0);
  EXPECT_EQ(h.sched.num_free_blocks(), 12);
  EXPECT_EQ(h.sched.num_free_host_blocks(), 6);
}

TEST(SchedulerStressTest, ChunkedRecompute) {
  stress([] { return std::make_unique<ChunkedPrefillPolicy>(pol(6, 16, 6)); }, PreemptionMode::kRecompute, 1);
}
TEST(SchedulerStressTest, ChunkedSwap) {
  stress([] { return std::make_unique<ChunkedPrefillPolicy>(pol(6, 16, 6)); }, PreemptionMode::kSwap, 2);
}
TEST(SchedulerStressTest, PrefillFirstRecompute) {
  stress([] { return std::make_unique<PrefillFirstPolicy>(pol(6, 16)); }, PreemptionMode::kRecompute, 3);
}
TEST(SchedulerStressTest, PrefillFirstSwap) {
  stress([] { return std::make_unique<PrefillFirstPolicy>(pol(6, 16)); }, PreemptionMode::kSwap, 4);
}

}  // namespace
}  // namespace ecoserve::policy
