// PadgRouter (EcoServe Algorithms 1 and 2, overall scheduler) on hand-built views,
// the numbers worked by hand.
#include "policy/padg_router.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "policy/policy_test_util.h"

namespace ecoserve::policy {
namespace {

using namespace testing;  // NOLINT

// Prefill costs 1 ms per token (any chunking); decode steps are not needed here.
class PerTokenCost final : public CostModel {
 public:
  double step_seconds(const StepShape& s) const override { return 0.001 * s.prefill_tokens; }
  std::string_view name() const override { return "per-token"; }
};

InstanceLoad idle(int32_t id) {
  InstanceLoad l;
  l.id = InstanceId(id);
  l.num_free_blocks = 100;
  l.num_total_blocks = 100;
  l.block_size = 16;
  return l;
}

RouteRequest prompt(int32_t len) {
  RouteRequest r;
  r.prompt_len = len;
  r.max_tokens = 16;
  return r;
}

PadgRouterOptions options(int64_t slo_ttft_ms) {
  PadgRouterOptions o;
  o.default_slo_ttft = std::chrono::milliseconds(slo_ttft_ms);
  o.chunk_size = 64;
  return o;
}

TEST(PadgRouterTest, CheckConstraintsFailsOnEachConstraintAlone) {
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  const RouteRequest req = prompt(300);  // 300 ms predicted
  EXPECT_DOUBLE_EQ(r.predict_prefill_seconds(req), 0.300);
  // Passes: 600 ms pending + 300 = 900 <= 1000; decodes saved 950 ms >= 900; 19 blocks fit 100 - 0.
  InstanceLoad ok = idle(1);
  ok.pending_prefill_seconds = 0.600;
  ok.num_slo_decoding = 3;
  ok.mean_saved_tpot_seconds = 0.950;
  EXPECT_EQ(r.check_constraints(ok, req, 0.300), PadgCheck::kNone);
  // TTFT alone: 750 + 300 = 1050 > 1000 (saved TPOT raised so it would pass).
  InstanceLoad ttft = ok;
  ttft.pending_prefill_seconds = 0.750;
  ttft.mean_saved_tpot_seconds = 5.0;
  EXPECT_EQ(r.check_constraints(ttft, req, 0.300), PadgCheck::kTtft);
  // TPOT alone: saved 850 ms < 900 ms of prefill ahead.
  InstanceLoad tpot = ok;
  tpot.mean_saved_tpot_seconds = 0.850;
  EXPECT_EQ(r.check_constraints(tpot, req, 0.300), PadgCheck::kTpot);
  // ...but decodes without a TPOT SLO do not constrain.
  tpot.num_slo_decoding = 0;
  EXPECT_EQ(r.check_constraints(tpot, req, 0.300), PadgCheck::kNone);
  // KV alone: 301 tokens need 19 blocks; 40 free minus 22 reserved for 350 queued tokens = 18.
  InstanceLoad kv = ok;
  kv.num_free_blocks = 40;
  kv.num_waiting_tokens = 350;
  EXPECT_EQ(r.check_constraints(kv, req, 0.300), PadgCheck::kKv);
  kv.num_free_blocks = 41;  // 41 - 22 = 19: fits exactly
  EXPECT_EQ(r.check_constraints(kv, req, 0.300), PadgCheck::kNone);
  // A per-request TTFT SLO overrides the default: 900 > 800.
  RouteRequest strict = req;
  strict.slo_ttft = std::chrono::milliseconds(800);
  EXPECT_EQ(r.check_constraints(ok, strict, 0.300), PadgCheck::kTtft);
  // Unhealthy, or not a mixed instance.
  InstanceLoad sick = ok;
  sick.healthy = false;
  EXPECT_EQ(r.check_constraints(sick, req, 0.300), PadgCheck::kUnavailable);
}

// Prefill 1 ms per token; a decode step 2 ms per sequence plus 1 ms per 1,000 context tokens.
class CpuLikeCost final : public CostModel {
 public:
  double step_seconds(const StepShape& s) const override {
    return 0.001 * s.prefill_tokens + 0.002 * s.decode_seqs + 1e-6 * static_cast<double>(s.decode_context_tokens);
  }
  std::string_view name() const override { return "cpu-like"; }
};

TEST(PadgRouterTest, TheDecodeStepCheckKeepsABatchWithinTheTpotSlo) {
  PadgRouterOptions o = options(10000);
  o.default_slo_tpot = std::chrono::milliseconds(25);
  PadgRouter r(o, std::make_shared<CpuLikeCost>());
  const RouteRequest req = prompt(100);
  // 9 decoding requests holding 1,900 tokens, plus this one: 10 x 2 ms + 2,000 x 1 us
  // = 22 ms <= 25. Queued prompts do not count (decodes finish while they prefill).
  InstanceLoad l = idle(1);
  l.num_running = 9;
  l.num_running_tokens = 1900;
  l.num_waiting = 5;
  l.num_waiting_tokens = 500;
  EXPECT_EQ(r.check_constraints(l, req, 0.100), PadgCheck::kNone);
  // 11 of them with 2,900 tokens: 12 x 2 + 3.0 = 27 ms > 25: decode_step alone.
  l.num_running = 11;
  l.num_running_tokens = 2900;
  EXPECT_EQ(r.check_constraints(l, req, 0.100), PadgCheck::kDecodeStep);
  EXPECT_STREQ(padg_check_name(PadgCheck::kDecodeStep), "decode_step");
  // The paper's three checks only.
  EXPECT_EQ(r.check_constraints(l, req, 0.100, /*decode_step=*/false), PadgCheck::kNone);
  o.check_decode_step = false;
  EXPECT_EQ(PadgRouter(o, std::make_shared<CpuLikeCost>()).check_constraints(l, req, 0.100), PadgCheck::kNone);

  // In Algorithm 1 it is a preference. "last" (instance 1) has a full decode batch,
  // instance 2 room: the request moves on to 2.
  PadgRouterOptions strict = options(10000);
  strict.default_slo_tpot = std::chrono::milliseconds(25);
  PadgRouter pref(strict, std::make_shared<CpuLikeCost>());
  ClusterView v;
  v.instances = {l, idle(2)};
  pref.set_layout({{InstanceId(1), InstanceId(2)}});
  EXPECT_EQ(pref.decide(v, req).instance, InstanceId(2));
  // Both full: the paper's checks decide, and "last" (now 2) keeps it.
  v.instances[1] = l;
  v.instances[1].id = InstanceId(2);
  const PadgDecision both = pref.decide(v, req);
  EXPECT_EQ(both.instance, InstanceId(2));
  EXPECT_TRUE(both.constraints_met);
}

TEST(PadgRouterTest, AlgorithmOneStaysWhileConstraintsHoldThenAdvancesAndWraps) {
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  ClusterView v;
  v.instances = {idle(10), idle(11), idle(12)};
  // The first request goes to the ring's first member and it stays there while
  // the prefills gathering on it fit the 1000 ms TTFT SLO.
  EXPECT_EQ(r.route(v, prompt(400)), InstanceId(10));
  v.instances[0].pending_prefill_seconds = 0.400;
  v.instances[0].num_waiting_tokens = 400;
  EXPECT_EQ(r.route(v, prompt(400)), InstanceId(10));  // 800 <= 1000
  v.instances[0].pending_prefill_seconds = 0.800;
  v.instances[0].num_waiting_tokens = 800;
  // 800 + 400 > 1000: advance to the next member, which becomes "last".
  PadgDecision d = r.decide(v, prompt(400));
  EXPECT_EQ(d.instance, InstanceId(11));
  EXPECT_TRUE(d.constraints_met);
  EXPECT_DOUBLE_EQ(d.predicted_ttft_seconds, 0.400);
  v.instances[1].pending_prefill_seconds = 0.400;
  // Member 10 finished its prefills (its phase is over), but "last" is now 11: stay.
  v.instances[0].pending_prefill_seconds = 0.0;
  v.instances[0].num_waiting_tokens = 0;
  EXPECT_EQ(r.route(v, prompt(100)), InstanceId(11));
  // 11 and 12 full: wraps around to 10.
  v.instances[1].pending_prefill_seconds = 0.950;
  v.instances[2].pending_prefill_seconds = 0.950;
  EXPECT_EQ(r.route(v, prompt(100)), InstanceId(10));
}

TEST(PadgRouterTest, AdvancingSkipsMembersThatFailAndUnhealthyOnes) {
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  ClusterView v;
  v.instances = {idle(1), idle(2), idle(3)};
  v.instances[0].pending_prefill_seconds = 0.9;  // TTFT fails
  v.instances[1].healthy = false;
  EXPECT_EQ(r.route(v, prompt(200)), InstanceId(3));
}

TEST(PadgRouterTest, WhenNoMemberPassesTheLeastPredictedTtftWinsOrTheRequestIsRejected) {
  ClusterView v;
  v.instances = {idle(1), idle(2)};
  v.instances[0].pending_prefill_seconds = 1.5;
  v.instances[1].pending_prefill_seconds = 0.9;
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  PadgDecision d = r.decide(v, prompt(300));  // 1.8 and 1.2 s > 1 s
  EXPECT_EQ(d.instance, InstanceId(2));
  EXPECT_FALSE(d.constraints_met);
  EXPECT_DOUBLE_EQ(d.predicted_ttft_seconds, 1.2);
  PadgRouterOptions o = options(1000);
  o.reject_unmeetable = true;
  PadgRouter strict(o, std::make_shared<PerTokenCost>());
  d = strict.decide(v, prompt(300));
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "predicted time to first token 1200 ms exceeds the TTFT SLO of 1000 ms on every instance");
  // A member without KV room is chosen only when none has room.
  v.instances[1].num_free_blocks = 5;
  EXPECT_EQ(r.route(v, prompt(300)), InstanceId(1));
}

TEST(PadgRouterTest, TheOverallSchedulerPicksTheLeastLoadedMacroInstance) {
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  r.set_layout({{InstanceId(1), InstanceId(2)}, {InstanceId(3), InstanceId(4)}});
  ClusterView v;
  v.instances = {idle(1), idle(2), idle(3), idle(4)};
  v.instances[0].num_running_tokens = 300;  // macro 0: mean 150 tokens
  v.instances[2].num_running_tokens = 100;  // macro 1: mean 50 tokens
  PadgDecision d = r.decide(v, prompt(50));
  EXPECT_EQ(d.macro_index, 1);
  EXPECT_EQ(d.instance, InstanceId(3));
  // Unhealthy members do not count: macro 1 with only member 3 healthy has mean 100 < 150.
  v.instances[3].healthy = false;
  EXPECT_EQ(r.decide(v, prompt(50)).macro_index, 1);
  v.instances[2].num_running_tokens = 200;  // now 200 > 150
  EXPECT_EQ(r.decide(v, prompt(50)).macro_index, 0);
}

TEST(PadgRouterTest, LayoutChangesKeepLastWhereTheMemberStayed) {
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  r.set_layout({{InstanceId(1), InstanceId(2), InstanceId(3)}});
  ClusterView v;
  v.instances = {idle(1), idle(2), idle(3)};
  v.instances[0].pending_prefill_seconds = 0.95;
  EXPECT_EQ(r.route(v, prompt(100)), InstanceId(2));  // last = position 1
  r.remove_instance(InstanceId(3));
  EXPECT_EQ(r.layout(), (std::vector<std::vector<InstanceId>>{{InstanceId(1), InstanceId(2)}}));
  v.instances[0].pending_prefill_seconds = 0.0;
  EXPECT_EQ(r.route(v, prompt(100)), InstanceId(2));  // still last
  r.remove_instance(InstanceId(2));
  EXPECT_EQ(r.route(v, prompt(100)), InstanceId(1));
}

TEST(PadgRouterTest, NoCandidateGivesNoInstance) {
  PadgRouter r(options(1000), nullptr);
  ClusterView v;
  v.instances = {idle(1)};
  v.instances[0].healthy = false;
  PadgDecision d = r.decide(v, prompt(10));
  EXPECT_FALSE(d.instance.has_value());
  EXPECT_EQ(d.reason, "no healthy instance");
}

TEST(PadgRouterTest, SparseAndNegativeIdsAreFoundLikeDenseOnes) {
  // Ids far apart (and a negative one) take the map path; a layout member missing
  // from the view is skipped.
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  r.set_layout({{InstanceId(7), InstanceId(900000), InstanceId(-3)}});
  ClusterView v;
  v.instances = {idle(900000), idle(-3)};
  v.instances[0].pending_prefill_seconds = 0.9;  // 0.9 + 0.2 > 1: fails TTFT
  EXPECT_EQ(r.decide(v, prompt(200)).instance, InstanceId(-3));
  // Dense ids with a gap behave the same.
  PadgRouter dense(options(1000), std::make_shared<PerTokenCost>());
  dense.set_layout({{InstanceId(7), InstanceId(2), InstanceId(5)}});
  v.instances = {idle(2), idle(5)};
  v.instances[0].pending_prefill_seconds = 0.9;
  EXPECT_EQ(dense.decide(v, prompt(200)).instance, InstanceId(5));
}

// A recorded sequence of views and requests gives the same decisions on every
// run: the router reads no clock and keeps no state beyond its layout and "last".
TEST(PadgRouterTest, ARecordedSequenceGivesTheSameDecisions) {
  std::mt19937 rng(7);
  std::vector<std::pair<ClusterView, RouteRequest>> recorded;
  for (int k = 0; k < 200; ++k) {
    ClusterView v;
    for (uint64_t i = 0; i < 6; ++i) {
      InstanceLoad l = idle(i);
      l.pending_prefill_seconds = std::uniform_real_distribution<double>(0.0, 1.5)(rng);
      l.num_slo_decoding = static_cast<int32_t>(rng() % 4);
      l.mean_saved_tpot_seconds = std::uniform_real_distribution<double>(-0.2, 2.0)(rng);
      l.num_free_blocks = static_cast<int32_t>(rng() % 100);
      l.num_waiting_tokens = static_cast<int64_t>(rng() % 2000);
      l.healthy = rng() % 10 != 0;
      v.instances.push_back(l);
    }
    RouteRequest q = prompt(1 + static_cast<int32_t>(rng() % 600));
    q.now = at_ms(1000 + 10 * k);
    recorded.emplace_back(std::move(v), q);
  }
  auto replay = [&] {
    PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
    r.set_layout({{InstanceId(0), InstanceId(1), InstanceId(2)}, {InstanceId(3), InstanceId(4), InstanceId(5)}});
    std::vector<std::pair<std::optional<InstanceId>, std::string>> out;
    for (const auto& [v, q] : recorded) {
      const PadgDecision d = r.decide(v, q);
      out.emplace_back(d.instance, d.reason);
    }
    return out;
  };
  const auto first = replay();
  EXPECT_EQ(first, replay());
  // And the sequence exercises more than one answer.
  std::set<int64_t> chosen;
  for (const auto& [i, reason] : first) chosen.insert(i ? i->value : -1);
  EXPECT_GE(chosen.size(), 4u);
}

}  // namespace
}  // namespace ecoserve::policy

namespace ecoserve::policy {
namespace {

TEST(PadgRouterTest, CalibrationScalesAnInstancesPredictionsByItsObservedTtft) {
  PadgRouter r(options(1000), std::make_shared<PerTokenCost>());
  const RouteRequest req = prompt(300);  // 300 ms predicted
  InstanceLoad l = idle(1);
  l.pending_prefill_seconds = 0.300;  // 600 ms in all: passes uncalibrated
  EXPECT_DOUBLE_EQ(r.calibration(InstanceId(1)), 1.0);
  EXPECT_EQ(r.check_constraints(l, req, 0.300), PadgCheck::kNone);
  // Instance 1 took 0.6 s where 0.3 s was predicted: c = 0.06 / 0.03 = 2, so 1.2 s > 1 s.
  r.observe_ttft(InstanceId(1), 0.300, 0.600);
  EXPECT_DOUBLE_EQ(r.calibration(InstanceId(1)), 2.0);
  EXPECT_EQ(r.check_constraints(l, req, 0.300), PadgCheck::kTtft);
  // The TPOT check uses it too: saved 1.0 s covers 0.6 s, not 1.2 s (TTFT SLO 2 s).
  PadgRouter r2(options(2000), std::make_shared<PerTokenCost>());
  r2.observe_ttft(InstanceId(1), 0.300, 0.600);
  InstanceLoad tpot = l;
  tpot.num_slo_decoding = 2;
  tpot.mean_saved_tpot_seconds = 1.0;
  EXPECT_EQ(r2.check_constraints(tpot, req, 0.300), PadgCheck::kTpot);
  // Decayed sums weigh by size: a short prefill on time moves c little.
  // observed 0.9 x 0.06 + 0.1 x 0.1 = 0.064, predicted 0.9 x 0.03 + 0.1 x 0.1 = 0.037.
  r.observe_ttft(InstanceId(1), 0.100, 0.100);
  EXPECT_NEAR(r.calibration(InstanceId(1)), 0.064 / 0.037, 1e-12);
  // Clamped to [0.5, 4]; other instances keep 1; nonsense is ignored.
  for (int i = 0; i < 200; ++i) r.observe_ttft(InstanceId(1), 0.1, 10.0);
  EXPECT_DOUBLE_EQ(r.calibration(InstanceId(1)), 4.0);
  for (int i = 0; i < 200; ++i) r.observe_ttft(InstanceId(2), 0.1, 0.001);
  EXPECT_DOUBLE_EQ(r.calibration(InstanceId(2)), 0.5);
  r.observe_ttft(InstanceId(3), 0.0, 1.0);
  r.observe_ttft(InstanceId(3), 0.1, -1.0);
  EXPECT_DOUBLE_EQ(r.calibration(InstanceId(3)), 1.0);
  // Decisions check calibrated predictions and report both: instance 1 (c = 4,
  // 0.1 s pending) fails the TTFT check, instance 2 (c = 0.5, 0.5 s pending) passes.
  r.set_layout({{InstanceId(1), InstanceId(2)}});
  ClusterView v;
  v.instances = {idle(1), idle(2)};
  v.instances[0].pending_prefill_seconds = 0.1;
  v.instances[1].pending_prefill_seconds = 0.5;
  const PadgDecision d = r.decide(v, prompt(800));  // 0.8 s: 3.6 s on 1, 0.65 s on 2
  EXPECT_EQ(d.instance, InstanceId(2));
  EXPECT_TRUE(d.constraints_met);
  EXPECT_NEAR(d.uncalibrated_ttft_seconds, 1.3, 1e-12);
  EXPECT_NEAR(d.predicted_ttft_seconds, 0.65, 1e-12);
  // Off: predictions are the cost model's, and a removed instance forgets its c.
  PadgRouterOptions off = options(1000);
  off.calibrate = false;
  PadgRouter r3(off, std::make_shared<PerTokenCost>());
  r3.observe_ttft(InstanceId(1), 0.300, 0.600);
  EXPECT_DOUBLE_EQ(r3.calibration(InstanceId(1)), 1.0);
  r.remove_instance(InstanceId(1));
  EXPECT_DOUBLE_EQ(r.calibration(InstanceId(1)), 1.0);
}

}  // namespace
}  // namespace ecoserve::policy
