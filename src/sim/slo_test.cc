#include "sim/slo.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ecoserve::sim {
namespace {

SimRequestResult done(double arrival, double first, double end, int32_t tokens, bool success = true) {
  SimRequestResult r;
  r.arrival_s = arrival;
  r.first_token_s = first;
  r.end_s = end;
  r.output_tokens = tokens;
  r.success = success;
  r.finish_reason = success ? "length" : "error";
  return r;
}

TEST(SloAttainment, CountsRequestsMeetingBothLimitsExactly) {
  // Times in binary fractions, so the limits compare exactly.
  const SloSpec slo{.ttft_s = 0.5, .tpot_s = 0.125};
  SimResult run;
  run.requests = {
      done(0.0, 0.5, 1.625, 10),      // TTFT 0.5 (== limit), TPOT 1.125 / 9 = 0.125 (== limit): met
      done(1.0, 1.75, 1.875, 2),      // TTFT 0.75: missed
      done(2.0, 2.25, 3.5, 10),       // TPOT 1.25 / 9: missed
      done(3.0, 3.25, 3.25, 1),       // one token: only the TTFT counts: met
      done(4.0, 4.125, 9.0, 1),       // one token, a late "end" does not matter: met
      done(5.0, 5.125, 5.25, 2, false),  // failed: missed
      done(6.0, 6.25, 6.375, 2),      // TPOT 0.125: met
  };
  SimRequestResult rejected;
  rejected.arrival_s = 7.0;
  rejected.finish_reason = "rejected";
  run.requests.push_back(rejected);
  EXPECT_DOUBLE_EQ(slo_attainment(run, slo), 4.0 / 8.0);
  EXPECT_TRUE(meets_slo(run.requests[0], slo));
  EXPECT_FALSE(meets_slo(run.requests[1], slo));
  EXPECT_FALSE(meets_slo(run.requests[2], slo));
  EXPECT_FALSE(meets_slo(run.requests[7], slo));
  EXPECT_DOUBLE_EQ(ttft_seconds(run.requests[1]), 0.75);
  EXPECT_DOUBLE_EQ(tpot_seconds(run.requests[2]), 1.25 / 9);
  EXPECT_DOUBLE_EQ(tpot_seconds(run.requests[3]), 0.0);
  // No TPOT limit: the TTFT decides (requests 0, 2, 3, 4, 6).
  EXPECT_DOUBLE_EQ(slo_attainment(run, SloSpec{.ttft_s = 0.5, .tpot_s = 0}), 5.0 / 8.0);
  // No TTFT limit: 0, 1, 3, 4, 6.
  EXPECT_DOUBLE_EQ(slo_attainment(run, SloSpec{.ttft_s = 0, .tpot_s = 0.125}), 5.0 / 8.0);
  EXPECT_DOUBLE_EQ(slo_attainment(SimResult{}, slo), 1.0);
}

TEST(SloAttainment, ValidatesTheSpec) {
  EXPECT_TRUE(validate_slo(SloSpec{.ttft_s = 1, .tpot_s = 0}).ok());
  EXPECT_FALSE(validate_slo(SloSpec{.ttft_s = 0, .tpot_s = 0}).ok());
  EXPECT_FALSE(validate_slo(SloSpec{.ttft_s = 1, .tpot_s = 1, .attainment = 0}).ok());
  EXPECT_FALSE(validate_slo(SloSpec{.ttft_s = 1, .tpot_s = 1, .attainment = 1.5}).ok());
}

// A fake "simulation" whose attainment is 1 up to `knee` req/s and 0.5 beyond.
std::function<StatusOr<SimResult>(double)> step_at(double knee, std::vector<double>* probed) {
  return [knee, probed](double rate) -> StatusOr<SimResult> {
    probed->push_back(rate);
    SimResult r;
    r.requests.push_back(done(0, 0.1, 0.1, 1));
    r.requests.push_back(rate <= knee ? done(0, 0.1, 0.1, 1) : done(0, 9, 9, 1));
    return r;
  };
}

TEST(GoodputSearch, BisectsToTheExactBracket) {
  const SloSpec slo{.ttft_s = 1.0, .tpot_s = 0, .attainment = 0.9};
  std::vector<double> probed;
  auto s = search_goodput(step_at(3.7, &probed), slo, 1.0, 8.0, 3);
  ASSERT_TRUE(s.ok()) << s.status().message();
  // lo 1 passes, hi 8 fails; 4.5 fails, 2.75 passes, 3.625 passes.
  EXPECT_EQ(probed, (std::vector<double>{1.0, 8.0, 4.5, 2.75, 3.625}));
  EXPECT_DOUBLE_EQ(s->goodput, 3.625);
  EXPECT_DOUBLE_EQ(s->first_failing_rate, 4.5);
  ASSERT_EQ(s->probes.size(), 5u);
  EXPECT_DOUBLE_EQ(s->probes[1].attainment, 0.5);
  EXPECT_FALSE(s->probes[1].pass);
  EXPECT_TRUE(s->probes[4].pass);
  probed.clear();
  auto g = max_goodput(step_at(3.7, &probed), slo, 1.0, 8.0, 6);
  ASSERT_TRUE(g.ok());
  EXPECT_LE(*g, 3.7);
  EXPECT_GT(*g, 3.7 - 7.0 / 64);
}

TEST(GoodputSearch, ZeroWhenEvenLoFailsAndGrowsThePassingBracket) {
  const SloSpec slo{.ttft_s = 1.0, .tpot_s = 0};
  std::vector<double> probed;
  auto none = max_goodput(step_at(0.5, &probed), slo, 1.0, 8.0, 4);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0.0);
  EXPECT_EQ(probed, std::vector<double>{1.0});
  // hi passes: 8 -> 16 -> 32 (fails), then bisect [16, 32]: 24 fails, 20 passes.
  probed.clear();
  auto grown = max_goodput(step_at(21, &probed), slo, 1.0, 8.0, 2);
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(probed, (std::vector<double>{1.0, 8.0, 16.0, 32.0, 24.0, 20.0}));
  EXPECT_DOUBLE_EQ(*grown, 20.0);
  // Never failing: the last doubling is the answer.
  probed.clear();
  auto always = max_goodput(step_at(1e9, &probed), slo, 1.0, 2.0, 3);
  ASSERT_TRUE(always.ok());
  EXPECT_DOUBLE_EQ(*always, 2.0 * std::pow(2.0, kMaxBracketDoublings));
}

TEST(GoodputSearch, RejectsBadArgumentsAndPassesErrorsOn) {
  const SloSpec slo{.ttft_s = 1.0, .tpot_s = 0};
  std::vector<double> probed;
  EXPECT_FALSE(max_goodput(step_at(1, &probed), slo, 2.0, 1.0, 3).ok());
  EXPECT_FALSE(max_goodput(step_at(1, &probed), slo, 0.0, 1.0, 3).ok());
  EXPECT_FALSE(max_goodput(step_at(1, &probed), slo, 1.0, 2.0, -1).ok());
  EXPECT_FALSE(max_goodput(step_at(1, &probed), SloSpec{}, 1.0, 2.0, 3).ok());
  EXPECT_TRUE(probed.empty());
  auto failing = [](double) -> StatusOr<SimResult> { return internal_error("boom"); };
  auto r = max_goodput(failing, slo, 1.0, 2.0, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "boom");
}

}  // namespace
}  // namespace ecoserve::sim
