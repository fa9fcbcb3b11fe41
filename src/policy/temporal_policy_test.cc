// TemporalPolicy on hand-built views: prefill priority, the saved-TPOT bound on
// prefill phases with the numbers worked by hand, hysteresis, no empty steps
// while work exists, and recorded phase switches.
#include "policy/temporal_policy.h"

#include <gtest/gtest.h>

#include "policy/policy_test_util.h"

namespace ecoserve::policy {
namespace {

using namespace testing;  // NOLINT

// Times are ms after 10 s (the zero TimePoint means "no token yet").
TimePoint t(int64_t ms) { return at_ms(10000 + ms); }

// step time = 1 ms per prefill token + 10 ms per decode step (any batch).
class LinearCost final : public CostModel {
 public:
  double step_seconds(const StepShape& s) const override {
    return 0.001 * s.prefill_tokens + (s.decode_seqs > 0 ? 0.010 : 0.0);
  }
  std::string_view name() const override { return "linear"; }
};

// A decode that produced `generated` tokens, the first at `first_ms`, with a TPOT SLO.
RequestView slo_decoding(uint64_t id, int32_t generated, int64_t first_ms, int64_t slo_tpot_ms) {
  RequestView r = decoding(id, 32, generated, 16);
  r.first_token_time = t(first_ms);
  r.last_token_time = t(first_ms);
  r.slo_tpot = std::chrono::milliseconds(slo_tpot_ms);
  return r;
}

TEST(SavedTpotTest, IsTokensTimesSloMinusTimeSinceTheFirstToken) {
  // 5 tokens at SLO 50 ms: 250 ms of budget; 180 ms since the first token -> 70 ms saved.
  const RequestView r = slo_decoding(1, 5, 1000, 50);
  EXPECT_EQ(r.saved_tpot(t(1180)), std::chrono::milliseconds(70));
  // Behind the SLO: 300 ms since the first token -> -50 ms.
  EXPECT_EQ(r.saved_tpot(t(1300)), std::chrono::milliseconds(-50));
  // No TPOT SLO, or no first token: nothing saved, nothing owed.
  RequestView none = r;
  none.slo_tpot = Duration::zero();
  EXPECT_EQ(none.saved_tpot(t(5000)), Duration::zero());
  EXPECT_EQ(waiting(2, 10).saved_tpot(t(5000)), Duration::zero());
}

TEST(TemporalPolicyTest, MeanSavedTpotCountsOnlyDecodesWithAnSlo) {
  InstanceView v = make_view(100, 100, 16);
  v.running = {slo_decoding(1, 4, 0, 50), slo_decoding(2, 10, 0, 50), decoding(3, 8, 3, 16)};
  // At 300 ms: 4*50-300 = -100 and 10*50-300 = 200 -> mean 50 ms; request 3 has no SLO.
  EXPECT_EQ(TemporalPolicy::mean_saved_tpot(v, t(300)), std::chrono::milliseconds(50));
  v.running = {decoding(3, 8, 3, 16)};
  EXPECT_FALSE(TemporalPolicy::mean_saved_tpot(v, t(300)).has_value());
}

TEST(TemporalPolicyTest, PrefillPriorityRunsOnlyPrefillChunksWhileTheSlackLasts) {
  TemporalPolicy p(policy_options(8, 256, 64), std::make_shared<LinearCost>());
  InstanceView v = make_view(100, 100, 16);
  // Two decodes with 20 tokens each at SLO 50 ms, first token at 0: at 700 ms each
  // has 20*50-700 = 300 ms saved. A waiting 100-token prompt: chunk 64 -> 64 ms predicted.
  v.running = {slo_decoding(1, 20, 0, 50), slo_decoding(2, 20, 0, 50)};
  v.waiting = {waiting(3, 100)};
  PolicyDecision d = p.plan(v, t(700));
  EXPECT_EQ(d.runs, (std::vector<RunDecision>{run(3, 64)}));  // no decode token in a prefill phase
  EXPECT_EQ(p.phase(), InstancePhase::kPrefill);
  EXPECT_EQ(p.last_phase_switch(), t(700));
  EXPECT_EQ(p.num_phase_switches(), 1);
}

TEST(TemporalPolicyTest, APrefillStepThatWouldOverrunTheMeanSavedTpotDecodesInstead) {
  TemporalPolicy p(policy_options(8, 256, 64), std::make_shared<LinearCost>());
  InstanceView v = make_view(100, 100, 16);
  // 20 tokens at 50 ms, first at 0; at 940 ms: 1000-940 = 60 ms saved each; the
  // 64-token chunk needs 64 ms > 60 -> decode phase: one token for each decode.
  v.running = {slo_decoding(1, 20, 0, 50), slo_decoding(2, 20, 0, 50)};
  v.waiting = {waiting(3, 100)};
  PolicyDecision d = p.plan(v, t(940));
  EXPECT_EQ(d.runs, (std::vector<RunDecision>{run(1, 1), run(2, 1)}));
  EXPECT_EQ(p.phase(), InstancePhase::kDecode);
  // At 936 ms there are 64 ms saved: exactly enough -> prefill.
  TemporalPolicy q(policy_options(8, 256, 64), std::make_shared<LinearCost>());
  EXPECT_EQ(q.plan(v, t(936)).runs, (std::vector<RunDecision>{run(3, 64)}));
  EXPECT_EQ(q.phase(), InstancePhase::kPrefill);
}

TEST(TemporalPolicyTest, ShrinkToSlackHalvesThePrefillStepUntilItFits) {
  // Two decodes with 20 tokens at SLO 50 ms, first token at 0: at time T each has
  // 1000 - T ms saved. A waiting 100-token prompt; budget 256, chunk 64.
  auto view = [] {
    InstanceView v = make_view(100, 100, 16);
    v.running = {slo_decoding(1, 20, 0, 50), slo_decoding(2, 20, 0, 50)};
    v.waiting = {waiting(3, 100)};
    return v;
  };
  auto policy = [] {
    return TemporalPolicy(policy_options(8, 256, 64), std::make_shared<LinearCost>(),
                          TemporalPolicy::Options{.shrink_to_slack = true});
  };
  // 940 ms: 60 ms saved: 64 tokens overrun it; budget 128 (chunk still 64), then 64
  // (the same step), then 32 tokens (32 ms) fit.
  TemporalPolicy b = policy();
  EXPECT_EQ(b.plan(view(), t(940)).runs, (std::vector<RunDecision>{run(3, 32)}));
  EXPECT_EQ(b.phase(), InstancePhase::kPrefill);
  // 990 ms: 10 ms saved: not even 16 tokens (16 ms) fit: a decode phase, one token each.
  TemporalPolicy c = policy();
  EXPECT_EQ(c.plan(view(), t(990)).runs, (std::vector<RunDecision>{run(1, 1), run(2, 1)}));
  EXPECT_EQ(c.phase(), InstancePhase::kDecode);
  // The TTFT guard still runs the whole step: a prompt due by 990 + 64 + 10 ms.
  InstanceView due = view();
  due.waiting[0].arrival = t(900);
  due.waiting[0].slo_ttft = std::chrono::milliseconds(164);
  TemporalPolicy d = policy();
  EXPECT_EQ(d.plan(due, t(990)).runs, (std::vector<RunDecision>{run(3, 64)}));
}

TEST(TemporalPolicyTest, APromptAboutToMissItsTtftPrefillsDespiteTheSlack) {
  // As above at 940 ms (60 ms saved < 64 ms needed), but the prompt arrived at 900
  // ms. The horizon is the prefill step (64 ms) plus a decode step (10 ms): 1014 ms.
  auto view = [](int64_t slo_ttft_ms) {
    InstanceView v = make_view(100, 100, 16);
    v.running = {slo_decoding(1, 20, 0, 50), slo_decoding(2, 20, 0, 50)};
    v.waiting = {waiting(3, 100, 0, 10900)};
    v.waiting[0].slo_ttft = std::chrono::milliseconds(slo_ttft_ms);
    return v;
  };
  // Deadline 900 + 114 = 1014 ms <= 1014: prefill now.
  TemporalPolicy p(policy_options(8, 256, 64), std::make_shared<LinearCost>());
  EXPECT_EQ(p.plan(view(114), t(940)).runs, (std::vector<RunDecision>{run(3, 64)}));
  EXPECT_EQ(p.phase(), InstancePhase::kPrefill);
  // Deadline 1015 ms: one more decode step first.
  TemporalPolicy q(policy_options(8, 256, 64), std::make_shared<LinearCost>());
  EXPECT_EQ(q.plan(view(115), t(940)).runs, (std::vector<RunDecision>{run(1, 1), run(2, 1)}));
  EXPECT_EQ(q.phase(), InstancePhase::kDecode);
}

TEST(TemporalPolicyTest, ResumeSlackKeepsTheDecodePhaseUntilTheSlackIsRebuilt) {
  TemporalPolicy p(policy_options(8, 256, 64), std::make_shared<LinearCost>(),
                   TemporalPolicy::Options{.resume_slack = std::chrono::milliseconds(20)});
  InstanceView v = make_view(100, 100, 16);
  v.waiting = {waiting(3, 100)};
  v.running = {slo_decoding(1, 20, 0, 50)};
  // 1000 - 950 = 50 ms < 64: decode.
  EXPECT_EQ(p.plan(v, t(950)).runs, (std::vector<RunDecision>{run(1, 1)}));
  // One token later (21 tokens, 1050 budget) at 970 ms: 80 ms saved >= 64 but < 64 + 20: still decode.
  v.running = {slo_decoding(1, 21, 0, 50)};
  EXPECT_EQ(p.plan(v, t(970)).runs, (std::vector<RunDecision>{run(1, 1)}));
  EXPECT_EQ(p.num_phase_switches(), 0);  // an instance starts in the decode phase
  // 22 tokens (1100) at 990 ms: 110 ms >= 84 -> prefill again.
  v.running = {slo_decoding(1, 22, 0, 50)};
  EXPECT_EQ(p.plan(v, t(990)).runs, (std::vector<RunDecision>{run(3, 64)}));
  EXPECT_EQ(p.phase(), InstancePhase::kPrefill);
  EXPECT_EQ(p.last_phase_switch(), t(990));
  EXPECT_EQ(p.num_phase_switches(), 1);
}

TEST(TemporalPolicyTest, WithoutPromptsEveryDecodeRunsAndPartialPrefillsFinishFirst) {
  TemporalPolicy p(policy_options(8, 256, 64), nullptr);
  InstanceView v = make_view(100, 100, 16);
  v.running = {decoding(1, 10, 2, 16), decoding(2, 12, 5, 16)};
  EXPECT_EQ(p.plan(v, t(10)).runs, (std::vector<RunDecision>{run(1, 1), run(2, 1)}));
  EXPECT_EQ(p.phase(), InstancePhase::kDecode);
  // A partially prefilled request (40 of 100 computed) is prefill work: it runs
  // alone (no SLO on the decodes, so no limit), chunked to 60 -> min(60, 64).
  v.running.push_back(running(4, 100, 0, 40, 16));
  EXPECT_EQ(p.plan(v, t(20)).runs, (std::vector<RunDecision>{run(4, 60)}));
  EXPECT_EQ(p.phase(), InstancePhase::kPrefill);
}

TEST(TemporalPolicyTest, APrefillThatCannotBePlacedDoesNotStallTheDecodes) {
  TemporalPolicy p(policy_options(8, 256, 64), nullptr);
  // No free block: the waiting prompt cannot be admitted; the decode (whose next
  // token fits its last block) still runs.
  InstanceView v = make_view(0, 10, 16);
  v.running = {decoding(1, 10, 2, 16)};
  v.waiting = {waiting(2, 100)};
  EXPECT_EQ(p.plan(v, t(5)).runs, (std::vector<RunDecision>{run(1, 1)}));
  EXPECT_EQ(p.phase(), InstancePhase::kDecode);
}

TEST(TemporalPolicyTest, IdleStepsKeepThePhase) {
  TemporalPolicy p(policy_options(8, 256, 64), nullptr);
  InstanceView v = make_view(100, 100, 16);
  v.waiting = {waiting(1, 20)};
  EXPECT_EQ(p.plan(v, t(1)).runs, (std::vector<RunDecision>{run(1, 20)}));
  EXPECT_TRUE(p.plan(make_view(100, 100, 16), t(2)).runs.empty());
  EXPECT_EQ(p.phase(), InstancePhase::kPrefill);
  EXPECT_EQ(p.last_phase_switch(), t(1));
}

TEST(TemporalPolicyTest, TheSameViewsGiveTheSameDecisions) {
  auto run_sequence = [] {
    TemporalPolicy p(policy_options(4, 128, 32), std::make_shared<LinearCost>());
    std::vector<PolicyDecision> out;
    for (int step = 0; step < 40; ++step) {
      InstanceView v = make_view(50, 50, 16);
      v.running = {slo_decoding(1, 10 + step, 0, 30 + step % 7)};
      if (step % 5 != 4) v.waiting = {waiting(2 + step, 40 + step)};
      out.push_back(p.plan(v, t(200 + 23 * step)));
    }
    return out;
  };
  const auto a = run_sequence();
  const auto b = run_sequence();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].runs, b[i].runs) << "step " << i;
}

}  // namespace
}  // namespace ecoserve::policy
