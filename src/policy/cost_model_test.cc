#include "policy/cost_model.h"

#include <gtest/gtest.h>

namespace ecoserve::policy {
namespace {

// 1 ms per prefill token plus 4 ms per prefill step; a decode step 5 ms + 1 us
// per context token.
class LinearCost final : public CostModel {
 public:
  double step_seconds(const StepShape& s) const override {
    double t = 0.0;
    if (s.prefill_seqs > 0) t += 0.004 + 0.001 * s.prefill_tokens;
    if (s.decode_seqs > 0) t += 0.005 * s.decode_seqs + 1e-6 * static_cast<double>(s.decode_context_tokens);
    return t;
  }
  std::string_view name() const override { return "linear"; }
};

TEST(CostModelTest, PrefillSecondsRunsTheChunksInTurnAfterTheCachedPrefix) {
  const LinearCost m;
  // 1,000 tokens in chunks of 512: 4 + 512 and 4 + 488 ms.
  EXPECT_NEAR(m.prefill_seconds(1000, 0, 512), 1.008, 1e-12);
  // 600 of them cached: one chunk of 400.
  EXPECT_NEAR(m.prefill_seconds(1000, 600, 512), 0.404, 1e-12);
  // All cached: the last token still runs.
  EXPECT_NEAR(m.prefill_seconds(1000, 1000, 512), 0.005, 1e-12);
}

TEST(CostModelTest, DerivedSlosAreMultiplesOfAMeanPromptsPrefillAndABatchOneDecode) {
  const LinearCost m;
  SloRule rule;
  rule.mean_prompt_tokens = 103.1;  // sharegpt's 343.76 x 0.3
  rule.mean_output_tokens = 71.2;
  // TTFT: 5 x (4 + 103) ms = 535 ms. TPOT: 5 x (5 ms + 139 us), at context
  // round(103.1 + 35.6) = 139.
  SloTargets t = derive_slos(m, rule);
  EXPECT_NEAR(t.ttft_seconds, 0.535, 1e-12);
  EXPECT_NEAR(t.tpot_seconds, 5 * (0.005 + 139e-6), 1e-12);
  // Other factors, and a prompt longer than a chunk.
  rule.mean_prompt_tokens = 700;
  rule.ttft_factor = 2;
  rule.tpot_factor = 3;
  t = derive_slos(m, rule);
  EXPECT_NEAR(t.ttft_seconds, 2 * (0.004 + 0.512 + 0.004 + 0.188), 1e-12);
  EXPECT_NEAR(t.tpot_seconds, 3 * (0.005 + 736e-6), 1e-12);
}

TEST(CostModelTest, PadgDefaultSlosFollowTheContext) {
  const LinearCost m;
  // Context 4096: TPOT 5 x (5 ms + 1024 us); TTFT 5 x the prefill of 2048 tokens in
  // chunks of 512 (4 x (4 + 512) ms) = 10.32 s.
  SloTargets t = padg_default_slos(m, 4096, 512);
  EXPECT_NEAR(t.tpot_seconds, 5 * (0.005 + 1024e-6), 1e-12);
  EXPECT_NEAR(t.ttft_seconds, 5 * 4 * 0.516, 1e-12);
  // A short context: TTFT is at least 1 s (5 x (4 + 64) ms = 0.34 s).
  t = padg_default_slos(m, 128, 512);
  EXPECT_NEAR(t.ttft_seconds, 1.0, 1e-12);
  EXPECT_NEAR(t.tpot_seconds, 5 * (0.005 + 32e-6), 1e-12);
}

}  // namespace
}  // namespace ecoserve::policy
