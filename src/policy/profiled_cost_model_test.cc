// ProfiledCostModel on a hand-made profile whose predictions are worked out by
// hand in the comments.
#include "policy/profiled_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace ecoserve::policy {
namespace {

constexpr double kEps = 1e-12;

// prefill, context 0:   tokens 10 -> 0.6 s, 20 -> 1.1, 40 -> 2.1   (0.05 s/token, intercept 0.1)
// prefill, context 100: tokens 10 -> 1.6,   20 -> 2.6              (0.1 s/token)
// decode, context 10:   batch 1 -> 0.2, 2 -> 0.25, 4 -> 0.35
// decode, context 110:  batch 1 -> 0.4, 4 -> 0.7                  (0.1 s/sequence)
CostProfile table() {
  CostProfile p;
  p.model_id = "test.gguf:1";
  p.prefill = {{10, 0, 0.6}, {20, 0, 1.1}, {40, 0, 2.1}, {10, 100, 1.6}, {20, 100, 2.6}};
  p.decode = {{1, 10, 0.2}, {2, 10, 0.25}, {4, 10, 0.35}, {1, 110, 0.4}, {4, 110, 0.7}};
  return p;
}

std::unique_ptr<ProfiledCostModel> model(CostProfile p = table()) {
  auto m = ProfiledCostModel::create(std::move(p));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

StepShape prefill(int32_t tokens, int64_t context, int32_t seqs = 1) {
  return StepShape{.prefill_seqs = seqs, .prefill_tokens = tokens, .prefill_context_tokens = context};
}
StepShape decode(int32_t seqs, int64_t context_sum) {
  return StepShape{.decode_seqs = seqs, .decode_context_tokens = context_sum};
}

TEST(ProfiledCostModelTest, ReturnsMeasuredPointsExactly) {
  auto m = model();
  EXPECT_NEAR(m->step_seconds(prefill(10, 0)), 0.6, kEps);
  EXPECT_NEAR(m->step_seconds(prefill(20, 0)), 1.1, kEps);
  EXPECT_NEAR(m->step_seconds(prefill(40, 0)), 2.1, kEps);
  EXPECT_NEAR(m->step_seconds(prefill(20, 100)), 2.6, kEps);
  EXPECT_NEAR(m->step_seconds(decode(1, 10)), 0.2, kEps);
  EXPECT_NEAR(m->step_seconds(decode(2, 20)), 0.25, kEps);    // mean context 10
  EXPECT_NEAR(m->step_seconds(decode(4, 440)), 0.7, kEps);    // mean context 110
  EXPECT_EQ(m->step_seconds(StepShape{}), 0.0);
  EXPECT_EQ(m->name(), "profiled");
}

TEST(ProfiledCostModelTest, InterpolatesBetweenPoints) {
  auto m = model();
  // Tokens 15 at context 0: halfway 0.6 .. 1.1 = 0.85; tokens 30: halfway 1.1 .. 2.1 = 1.6.
  EXPECT_NEAR(m->step_seconds(prefill(15, 0)), 0.85, kEps);
  EXPECT_NEAR(m->step_seconds(prefill(30, 0)), 1.6, kEps);
  // Tokens 15 at context 50: context 0 gives 0.85, context 100 gives 2.1; halfway 1.475.
  EXPECT_NEAR(m->step_seconds(prefill(15, 50)), 1.475, kEps);
  // Decode batch 3, mean context 60: context 10 gives 0.30 (between 2 and 4),
  // context 110 gives 0.4 + 2 * 0.1 = 0.6; halfway 0.45.
  EXPECT_NEAR(m->step_seconds(decode(3, 180)), 0.45, kEps);
  // Fractional mean context: 3 sequences with 40 context tokens in all: mean 13.33..
  // Context 10 gives 0.30, 110 gives 0.6; 0.30 + (10/3)/100 * 0.3 = 0.31.
  EXPECT_NEAR(m->step_seconds(decode(3, 40)), 0.31, kEps);
}

TEST(ProfiledCostModelTest, ExtrapolatesAlongTheEndSegment) {
  auto m = model();
  // 80 tokens at context 0: 2.1 + 40 * 0.05 = 4.1.
  EXPECT_NEAR(m->step_seconds(prefill(80, 0)), 4.1, kEps);
  // 5 tokens at context 0: 0.6 - 5 * 0.05 = 0.35.
  EXPECT_NEAR(m->step_seconds(prefill(5, 0)), 0.35, kEps);
  // 10 tokens at context 200: 1.0 s more per 100 context (0.6 -> 1.6): 0.6 + 2 * 1.0 = 2.6.
  EXPECT_NEAR(m->step_seconds(prefill(10, 200)), 2.6, kEps);
  // 40 tokens at context 100 (that row stops at 20): 2.6 + 20 * 0.1 = 4.6.
  EXPECT_NEAR(m->step_seconds(prefill(40, 100)), 4.6, kEps);
  // Decode batch 8 at context 10: 0.35 + 4 * 0.05 = 0.55.
  EXPECT_NEAR(m->step_seconds(decode(8, 80)), 0.55, kEps);
  // Batch 1 at mean context 0 (below the first row, 10): 0.2 - 10 * (0.2 / 100) = 0.18.
  EXPECT_NEAR(m->step_seconds(decode(1, 0)), 0.18, kEps);
}

TEST(ProfiledCostModelTest, ExtrapolationNeverDecreasesPastTheTableNorGoesNegative) {
  CostProfile p;
  // A noisy row: 20 tokens measured faster than 10. Past 20 the slope is clamped
  // to 0 (stays 0.8); below 10 as well (stays 1.0).
  p.prefill = {{10, 0, 1.0}, {20, 0, 0.8}};
  // A steep decode row: 1 -> 0.1, 2 -> 1.1. Batch 0.5 would be 0.1 - 0.5 = -0.4: clamped to 0.
  p.decode = {{1, 5, 0.1}, {2, 5, 1.1}};
  auto m = model(p);
  EXPECT_NEAR(m->step_seconds(prefill(40, 0)), 0.8, kEps);
  EXPECT_NEAR(m->step_seconds(prefill(5, 0)), 1.0, kEps);
  EXPECT_EQ(m->decode_part_seconds(0.5, 5), 0.0);
  // One row, one point: constant in both coordinates.
  CostProfile q;
  q.prefill = {{16, 0, 0.5}};
  q.decode = {{1, 64, 0.25}};
  auto c = model(q);
  EXPECT_NEAR(c->step_seconds(prefill(512, 1000)), 0.5, kEps);
  EXPECT_NEAR(c->step_seconds(decode(32, 32 * 7)), 0.25, kEps);
  EXPECT_EQ(c->step_overhead_seconds(), 0.0);  // one prefill point: no intercept to estimate
}

TEST(ProfiledCostModelTest, AnyPromptCostsAtLeastTheSmallestChunkScaledDown) {
  CostProfile p;
  // Noisy small end: 16 tokens 0.01 s, 32 tokens 0.06 s. Extrapolated, 8 tokens
  // would take 0.01 - 8 x 0.003125 < 0; the floor is 0.01 x 8 / 16 = 0.005.
  p.prefill = {{16, 0, 0.01}, {32, 0, 0.06}};
  p.decode = {{1, 5, 0.1}};
  auto m = model(p);
  EXPECT_NEAR(m->prefill_part_seconds(8, 0), 0.005, kEps);
  EXPECT_NEAR(m->step_seconds(prefill(8, 0)), 0.005, kEps);
  EXPECT_GT(m->prefill_part_seconds(1, 0), 0.0);
  EXPECT_NEAR(m->prefill_part_seconds(24, 0), 0.035, kEps);  // inside the table: interpolated
  EXPECT_EQ(m->prefill_part_seconds(0, 0), 0.0);
}

TEST(ProfiledCostModelTest, MixedStepPaysTheStepOverheadOnce) {
  auto m = model();
  // Overhead: the smaller intercept. Prefill context 0 lies on 0.1 + 0.05 t: 0.1;
  // decode context 10 on 0.15 + 0.05 b: 0.15. min = 0.1.
  EXPECT_NEAR(m->step_overhead_seconds(), 0.1, kEps);
  // 20 prefill tokens at context 0 (1.1) + 2 decodes at mean context 10 (0.25) - 0.1 = 1.25.
  StepShape s = prefill(20, 0);
  s.decode_seqs = 2;
  s.decode_context_tokens = 20;
  EXPECT_NEAR(m->step_seconds(s), 1.25, kEps);
  // Two prefill chunks of 20 tokens in all with 100 context tokens in all: one chunk
  // of 20 at mean context 50 (1.1 .. 2.6 halfway: 1.85); 3 decodes at mean 60 (0.45);
  // 1.85 + 0.45 - 0.1 = 2.2.
  StepShape t = prefill(20, 100, 2);
  t.decode_seqs = 3;
  t.decode_context_tokens = 180;
  EXPECT_NEAR(m->step_seconds(t), 2.2, kEps);
}

TEST(ProfiledCostModelTest, OverheadIsALeastSquaresInterceptOfTheSmallEnd) {
  // Prefill context 0: 0.5 + 0.04 t plus noise (+0.1, -0.2, +0.1) at t = 10, 20, 30,
  // which a least-squares line through x = 10, 20, 30 cancels exactly (the noise is
  // orthogonal to 1 and to x - 20); t = 90 > 8 x 10 is left out. Intercept 0.5 (the
  // first segment alone would say 1.0 - 10 * 0.01 = 0.9).
  CostProfile p;
  p.prefill = {{10, 0, 1.0}, {20, 0, 1.1}, {30, 0, 1.8}, {90, 0, 9.0}};
  // Decode context 0: 1.9 + 0.1 b: intercept 1.9, larger, so the overhead is 0.5.
  p.decode = {{1, 0, 2.0}, {2, 0, 2.1}};
  EXPECT_NEAR(model(p)->step_overhead_seconds(), 0.5, 1e-12);
  // When the decode intercept is smaller it wins: decode on 0.04 + 0.01 b.
  p.decode = {{1, 0, 0.05}, {2, 0, 0.06}, {4, 0, 0.08}};
  EXPECT_NEAR(model(p)->step_overhead_seconds(), 0.04, 1e-12);
}

TEST(ProfiledCostModelTest, MixedStepNeverCheaperThanEitherPart) {
  // Prefill intercept 1.0 - 10 * 0.01 = 0.9; decode context 10 on 0.4 + 0.1 b:
  // intercept 0.4; overhead 0.4. At mean context 110 the (noisy) decode row is
  // cheaper: batch 1 costs 0.1 < 0.4, so only 0.1 is subtracted: 1.0 + 0.1 - 0.1 = 1.0.
  CostProfile p;
  p.prefill = {{10, 0, 1.0}, {20, 0, 1.1}};
  p.decode = {{1, 10, 0.5}, {2, 10, 0.6}, {1, 110, 0.1}, {2, 110, 0.2}};
  auto m = model(p);
  EXPECT_NEAR(m->step_overhead_seconds(), 0.4, kEps);
  StepShape s = prefill(10, 0);
  s.decode_seqs = 1;
  s.decode_context_tokens = 110;
  EXPECT_NEAR(m->step_seconds(s), 1.0, kEps);
  // At context 10 the full overlap: 1.0 + 0.5 - 0.4 = 1.1.
  s.decode_context_tokens = 10;
  EXPECT_NEAR(m->step_seconds(s), 1.1, kEps);
}

TEST(ProfiledCostModelTest, PrefillSecondsChunksAndSkipsTheCachedPrefix) {
  auto m = model();
  // One chunk of 40 at context 0.
  EXPECT_NEAR(m->prefill_seconds(40, 0), 2.1, kEps);
  // Chunks of 20: (20 at context 0) 1.1 + (20 at context 20) 1.1 + 0.2 * (2.6 - 1.1) = 1.4; 2.5 in all.
  EXPECT_NEAR(m->prefill_seconds(40, 0, 20), 2.5, kEps);
  // 20 of 40 cached: one chunk of 20 at context 20 = 1.4.
  EXPECT_NEAR(m->prefill_seconds(40, 20), 1.4, kEps);
  // 25 cached, chunks of 10: 10 at 25 then 5 at 35.
  //   10 at 25: 0.6 + 0.25 * (1.6 - 0.6) = 0.85.
  //   5 at 35: context 0 gives 0.6 - 5 * 0.05 = 0.35, context 100 gives 1.6 - 5 * 0.1 = 1.1;
  //            0.35 + 0.35 * 0.75 = 0.6125.  Sum 1.4625.
  EXPECT_NEAR(m->prefill_seconds(40, 25, 10), 1.4625, kEps);
  // Fully cached: the last token still runs: 1 token at context 39.
  //   context 0: 0.6 - 9 * 0.05 = 0.15; context 100: 1.6 - 9 * 0.1 = 0.7; 0.15 + 0.39 * 0.55 = 0.3645.
  EXPECT_NEAR(m->prefill_seconds(40, 40), 0.3645, kEps);
}

void expect_rejected(CostProfile p, const std::string& needle) {
  auto m = ProfiledCostModel::create(std::move(p));
  ASSERT_FALSE(m.ok()) << "expected rejection mentioning " << needle;
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().message();
}

TEST(ProfiledCostModelTest, RejectsBadTables) {
  {
    CostProfile p = table();
    p.prefill.clear();
    expect_rejected(p, "prefill table is empty");
  }
  {
    CostProfile p = table();
    p.decode.clear();
    expect_rejected(p, "decode table is empty");
  }
  {
    CostProfile p = table();
    std::swap(p.prefill[0], p.prefill[1]);
    expect_rejected(p, "prefill table not strictly sorted by (context, tokens): prefill[1]");
  }
  {
    CostProfile p = table();
    std::swap(p.decode[2], p.decode[3]);  // context 110 before context 10
    expect_rejected(p, "decode table not strictly sorted by (context, batch): decode[3]");
  }
  {
    CostProfile p = table();
    p.decode[1].batch = 1;  // duplicate (batch 1, context 10)
    expect_rejected(p, "decode[1]");
  }
  {
    CostProfile p = table();
    p.prefill[2].seconds = 0.0;
    expect_rejected(p, "prefill[2].seconds is 0");
  }
  {
    CostProfile p = table();
    p.decode[0].seconds = -1.0;
    expect_rejected(p, "decode[0].seconds");
  }
  {
    CostProfile p = table();
    p.decode[4].seconds = std::numeric_limits<double>::quiet_NaN();
    expect_rejected(p, "decode[4].seconds");
  }
  {
    CostProfile p = table();
    p.prefill[0].tokens = 0;
    expect_rejected(p, "prefill[0].tokens is 0");
  }
  {
    CostProfile p = table();
    p.prefill[0].context = -1;
    expect_rejected(p, "prefill[0].context is -1");
  }
  {
    CostProfile p = table();
    p.decode[0].batch = -2;
    expect_rejected(p, "decode[0].batch is -2");
  }
}

}  // namespace
}  // namespace ecoserve::policy
