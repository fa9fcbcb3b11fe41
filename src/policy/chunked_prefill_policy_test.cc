#include "policy/chunked_prefill_policy.h"

#include <gtest/gtest.h>

#include "policy/decode_only_policy.h"
#include "policy/policy_test_util.h"
#include "policy/prefill_only_policy.h"

namespace ecoserve::policy {
namespace {

using namespace ecoserve::policy::testing;
using R = std::vector<RunDecision>;
constexpr int32_t kBs = 4;

PolicyOptions opts(int32_t chunk = 8, int32_t tokens = 16, int32_t seqs = 8) {
  return policy_options(seqs, tokens, chunk);
}

TEST(ChunkedPrefillPolicyTest, DecodesFirstThenPartialThenNewChunks) {
  ChunkedPrefillPolicy p(opts());
  InstanceView v = make_view(100, 100, kBs);
  // Schedule order mixes a partial prefill between decodes.
  v.running = {decoding(1, 4, 1, kBs), running(2, 20, 0, 8, kBs), decoding(3, 5, 2, kBs)};
  v.waiting = {waiting(4, 10), waiting(5, 3)};
  auto d = p.plan(v, at_ms(0));
  // 2 decodes; partial 2 gets a chunk of 8; 4 gets the 6 tokens left; 5 none.
  EXPECT_EQ(d.runs, (R{run(1, 1), run(3, 1), run(2, 8), run(4, 6)}));
  EXPECT_TRUE(d.preempt.empty());
}

TEST(ChunkedPrefillPolicyTest, WithoutChunkSizeOnlyTheBudgetLimits) {
  ChunkedPrefillPolicy p(opts(/*chunk=*/0));
  InstanceView v = make_view(100, 100, kBs);
  v.running = {decoding(1, 4, 1, kBs), running(2, 40, 0, 8, kBs)};
  v.waiting = {waiting(4, 10)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 1), run(2, 15)}));
  v.running = {decoding(1, 4, 1, kBs)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 1), run(4, 10)}));
}

TEST(ChunkedPrefillPolicyTest, ManyNewPromptsShareTheBudgetInChunks) {
  ChunkedPrefillPolicy p(opts(/*chunk=*/4, /*tokens=*/10));
  InstanceView v = make_view(100, 100, kBs);
  v.waiting = {waiting(1, 9), waiting(2, 3), waiting(3, 9)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 4), run(2, 3), run(3, 3)}));
}

TEST(ChunkedPrefillPolicyTest, PrefillChunkShrinksToFreeBlocksBeforePreempting) {
  ChunkedPrefillPolicy p(opts());
  InstanceView v = make_view(1, 10, kBs);
  v.running = {running(1, 20, 0, 8, kBs), decoding(2, 5, 1, kBs)};  // 2 has room in its block
  auto d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.runs, (R{run(2, 1), run(1, 4)}));
  EXPECT_TRUE(d.preempt.empty());
}

TEST(ChunkedPrefillPolicyTest, HigherPriorityPrefillPreemptsAScheduledDecode) {
  ChunkedPrefillPolicy p(opts());
  InstanceView v = make_view(0, 10, kBs);
  v.running = {running(1, 20, 0, 8, kBs, /*priority=*/5), decoding(2, 5, 1, kBs, 0)};
  auto d = p.plan(v, at_ms(0));
  // 2 was scheduled (room in its block) but is the only victim: unscheduled, frees 2 blocks.
  EXPECT_EQ(d.preempt, ids({2}));
  EXPECT_EQ(d.runs, (R{run(1, 8)}));
}

TEST(ChunkedPrefillPolicyTest, DecodePreemptionAndSwappedResume) {
  ChunkedPrefillPolicy p(opts());
  InstanceView v = make_view(1, 10, kBs);
  v.running = {decoding(1, 8, 1, kBs, 0, 1), decoding(2, 8, 1, kBs, 0, 2), decoding(3, 8, 1, kBs, 0, 3)};
  v.swapped = {swapped(4, 2, 1, kBs)};
  v.waiting = {waiting(5, 2)};
  auto d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.preempt, ids({3}));
  EXPECT_EQ(d.runs, (R{run(1, 1), run(2, 1)})) << "no resume, no admission after a preemption";

  // Enough blocks: the swapped request resumes (1 block), then new prompts are admitted.
  v.num_free_blocks = 5;
  d = p.plan(v, at_ms(0));
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(d.runs, (R{run(1, 1), run(2, 1), run(3, 1), run(4, 1), run(5, 2)}));

  // The swapped request does not fit: new prompts must wait behind it.
  v.swapped = {swapped(4, 12, 1, kBs)};  // 12 computed + 1: 4 blocks
  v.num_free_blocks = 6;
  d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.runs, (R{run(1, 1), run(2, 1), run(3, 1)}));
}

TEST(ChunkedPrefillPolicyTest, MaxNumSeqsCapsTheBatchAndAdmissions) {
  ChunkedPrefillPolicy p(opts(8, 16, /*seqs=*/2));
  InstanceView v = make_view(100, 100, kBs);
  v.running = {decoding(1, 4, 1, kBs)};
  v.waiting = {waiting(2, 3), waiting(3, 3)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 1), run(2, 3)}));
}

TEST(ChunkedPrefillPolicyTest, PriorityAdmissionPreemptsLowerPriorityRunning) {
  ChunkedPrefillPolicy p(opts());
  InstanceView v = make_view(0, 10, kBs);
  v.running = {decoding(1, 5, 1, kBs, 1, 1), decoding(2, 5, 1, kBs, 0, 2)};
  v.waiting = {waiting(3, 6, 2, 3)};  // 2 blocks; each running request frees 2
  auto d = p.plan(v, at_ms(0));
  EXPECT_EQ(d.preempt, ids({2}));
  EXPECT_EQ(d.runs, (R{run(1, 1), run(3, 6)}));
}

TEST(PrefillOnlyPolicyTest, OnlyPrefillChunks) {
  PrefillOnlyPolicy p(opts(/*chunk=*/6, /*tokens=*/16));
  EXPECT_EQ(p.role(), InstanceRole::kPrefill);
  InstanceView v = make_view(100, 100, kBs);
  v.running = {decoding(9, 4, 1, kBs), running(1, 20, 0, 12, kBs)};
  v.waiting = {waiting(2, 5), waiting(3, 30)};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 6), run(2, 5), run(3, 5)}));
}

TEST(DecodeOnlyPolicyTest, DecodesAndRecomputesButNeverFreshPrompts) {
  DecodeOnlyPolicy p(opts(8, 16));
  EXPECT_EQ(p.role(), InstanceRole::kDecode);
  InstanceView v = make_view(100, 100, kBs);
  v.running = {decoding(1, 4, 1, kBs), decoding(2, 4, 3, kBs)};
  RequestView preempted = waiting(3, 6);
  preempted.num_generated = 2;  // preempted by recompute: prompt + 2 tokens to re-run
  v.waiting = {waiting(4, 5), preempted};
  EXPECT_EQ(p.plan(v, at_ms(0)).runs, (R{run(1, 1), run(2, 1), run(3, 8)}));
}

}  // namespace
}  // namespace ecoserve::policy
