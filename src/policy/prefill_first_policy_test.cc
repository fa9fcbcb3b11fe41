#include "policy/prefill_first_policy.h"

#include <gtest/gtest.h>

#include "policy/policy_test_util.h"

namespace ecoserve::policy {
namespace {

using namespace ecoserve::policy::testing;
using R = std::vector<RunDecision>;
constexpr int32_t kBs = 4;

PolicyOptions opts(int32_t seqs = 4, int32_t tokens = 16) { return policy_options(seqs, tokens); }

TEST(PrefillFirstPolicyTest, AdmitsWholePromptsFcfsWithinTokenBudget) {
  PrefillFirstPolicy p(opts());
  InstanceView v = make_view(100, 100, kBs);
  v.running = {decoding(9, 4, 1, kBs)};
  v.waiting = {waiting(1, 5), waiting(2, 6), waiting(3, 7), waiting(4, 1)};
  auto d = p.plan(v, at_ms(0));
  // 5 + 6 = 11; 7 does not fit the remaining 5 and no overtaking (4 would fit).
  EXPECT_EQ(d.runs, (R{run(1, 5), run(2, 6)})) << "prefill step: the decode of 9 waits";
  EXPECT_TRUE(d.preempt.empty());
}

TEST(PrefillFirstPolicyTest, LongPromptIsChunkedOnlyWhenItOpensTheBatch) {
  PrefillFirstPolicy p(opts());
  InstanceView v = make_view(100, 100, kBs);
  v.waiting = {waiting(1, 40), waiting(2, 3)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 16)}));

  // Next steps: the partial prompt continues first.
  v.waiting = {waiting(2, 3)};
  v.running = {running(1, 40, 0, 16, kBs)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 16)}));
  v.running = {running(1, 40, 0, 32, kBs)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 8), run(2, 3)}));

  // A long prompt behind a short one waits for the next step.
  v.running.clear();
  v.waiting = {waiting(2, 3), waiting(1, 40)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(2, 3)}));
}

TEST(PrefillFirstPolicyTest, DecodesAllRunningWhenNothingWaits) {
  PrefillFirstPolicy p(opts());
  InstanceView v = make_view(100, 100, kBs);
  v.running = {decoding(1, 4, 1, kBs), decoding(2, 7, 3, kBs), decoding(3, 2, 2, kBs)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 1), run(2, 1), run(3, 1)}));
}

TEST(PrefillFirstPolicyTest, MaxNumSeqsLimitsAdmission) {
  PrefillFirstPolicy p(opts(/*seqs=*/4));
  InstanceView v = make_view(100, 100, kBs);
  v.running = {decoding(1, 4, 1, kBs), decoding(2, 4, 1, kBs), decoding(3, 4, 1, kBs)};
  v.waiting = {waiting(4, 2), waiting(5, 2)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(4, 2)}));
}

TEST(PrefillFirstPolicyTest, PromptThatDoesNotFitTheBlocksFallsBackToDecode) {
  PrefillFirstPolicy p(opts());
  // Decode of 1 has room in its block (5 computed of 8 slots).
  InstanceView v = make_view(2, 10, kBs);
  v.running = {decoding(1, 4, 2, kBs)};
  v.waiting = {waiting(2, 9)};  // needs 3 blocks
  auto d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.runs, (R{run(1, 1)}));
  EXPECT_TRUE(d.preempt.empty()) << "same priority: no preemption for admission";
  v.num_free_blocks = 3;
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(2, 9)}));
}

TEST(PrefillFirstPolicyTest, WatermarkKeepsBlocksForDecodes) {
  PolicyOptions o = opts();
  o.watermark_blocks = 1;
  PrefillFirstPolicy p(o);
  InstanceView v = make_view(3, 10, kBs);
  v.waiting = {waiting(2, 9)};
  EXPECT_TRUE(p.plan(v, at_ms(0)).runs.empty());
  v.num_free_blocks = 4;
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(2, 9)}));
}

TEST(PrefillFirstPolicyTest, DecodePreemptsLastRunningFirst) {
  PrefillFirstPolicy p(opts());
  // Each decode has 8 computed tokens in 2 full blocks: the next token needs a new block.
  InstanceView v = make_view(1, 10, kBs);
  v.running = {decoding(1, 8, 1, kBs, 0, 10), decoding(2, 8, 1, kBs, 0, 20), decoding(3, 8, 1, kBs, 0, 30)};
  auto d = p.plan(v, at_ms(0));
  // 1 takes the free block; 2 needs one: 3 (latest arrival) is preempted (frees 2).
  EXPECT_EQ(d.runs, (R{run(1, 1), run(2, 1)}));
  EXPECT_EQ(d.preempt, ids({3}));
}

TEST(PrefillFirstPolicyTest, RequestPreemptsItselfWhenNothingBehindIt) {
  PrefillFirstPolicy p(opts());
  InstanceView v = make_view(0, 10, kBs);
  RequestView a = decoding(1, 8, 1, kBs);
  a.num_exclusive_blocks = 0;  // shares its blocks: preempting others frees nothing
  RequestView b = decoding(2, 8, 1, kBs);
  b.num_exclusive_blocks = 0;
  v.running = {a, b};
  auto d = p.plan(v, at_ms(0));
  EXPECT_TRUE(d.runs.empty());
  EXPECT_EQ(d.preempt, ids({2, 1}));
}

TEST(PrefillFirstPolicyTest, PriorityPreemptionOrderIsLowestPriorityLatestArrival) {
  PrefillFirstPolicy p(opts(/*seqs=*/4, /*tokens=*/32));
  InstanceView v = make_view(0, 10, kBs);
  // Schedule order: priority 2, then priority 0 by arrival.
  v.running = {decoding(1, 4, 2, kBs, 2, 30), decoding(2, 4, 2, kBs, 0, 10), decoding(3, 4, 2, kBs, 0, 20)};
  v.waiting = {waiting(4, 8, /*priority=*/1, 40)};  // needs 2 blocks; each running frees 2
  auto d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.preempt, ids({3}));
  EXPECT_EQ(d.runs, (R{run(4, 8)}));

  // Equal priority (FCFS): no preemption, the prompt waits and the decodes run.
  v.waiting = {waiting(4, 8, 0, 40)};
  d = p.plan(v, at_ms(0));
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(d.runs, (R{run(1, 1), run(2, 1), run(3, 1)}));

  // Needing more than all lower-priority requests free: nobody is preempted in vain.
  v.waiting = {waiting(4, 20, 1, 40)};  // 5 blocks; 2 and 3 free 4
  d = p.plan(v, at_ms(0));
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(d.runs, (R{run(1, 1), run(2, 1), run(3, 1)}));

  // Priority 3 may preempt all three (4 blocks from priority 0 are not enough; 6 are).
  v.waiting = {waiting(4, 20, 3, 40)};
  d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.preempt, ids({3, 2, 1}));
  EXPECT_EQ(d.runs, (R{run(4, 20)}));
}

TEST(PrefillFirstPolicyTest, SwappedBlockAdmissionAndResumeAfterDecodes) {
  PrefillFirstPolicy p(opts());
  InstanceView v = make_view(10, 10, kBs);
  v.running = {decoding(1, 4, 2, kBs)};
  v.swapped = {swapped(2, 8, 1, kBs)};  // 8 computed; resume needs 3 device blocks
  v.waiting = {waiting(3, 4)};
  auto d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.runs, (R{run(1, 1), run(2, 1)})) << "no admission while a request is swapped out";
  v.num_free_blocks = 2;
  d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.runs, (R{run(1, 1)}));
}

TEST(PrefillFirstPolicyTest, PrefixHitReducesTokensAndBlocks) {
  PrefillFirstPolicy p(opts());
  InstanceView v = make_view(2, 10, kBs);
  RequestView w = waiting(1, 10);
  w.num_cached_tokens = 8;  // 2 blocks hit, 1 of them evictable
  w.num_cached_evictable_blocks = 1;
  v.waiting = {w};
  // needs blocks_for(10) - 2 + 1 = 2 blocks, runs the last 2 tokens.
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 2)}));
  v.num_free_blocks = 1;
  EXPECT_TRUE(p.plan(v, at_ms(0)).runs.empty());
}

}  // namespace
}  // namespace ecoserve::policy
