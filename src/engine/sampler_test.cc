#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace ecoserve::engine {
namespace {

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

SampleResult sample(std::vector<float> logits, const SamplingParams& p, uint64_t seed = 0,
                    std::vector<int32_t> prompt = {}, std::vector<int32_t> output = {}) {
  return sample_token(logits, p, prompt, output, seed);
}

// Logits whose softmax is exactly `probs` (up to float rounding).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// Tokens drawn over `n` seeds.
std::vector<int> histogram(const std::vector<float>& logits, const SamplingParams& p, int n) {
  std::vector<int> h(logits.size(), 0);
  for (int s = 0; s < n; ++s) ++h[sample(logits, p, static_cast<uint64_t>(s)).token];
  return h;
}

TEST(SamplerTest, GreedyTakesArgmaxLowestIdOnTies) {
  EXPECT_EQ(sample({1.0f, 3.0f, 2.0f, 3.0f}, greedy_params()).token, 1);
  EXPECT_EQ(sample({-5.0f, -1.0f, -2.0f}, greedy_params()).token, 1);
  EXPECT_EQ(sample({0.0f, 0.0f, 0.0f}, greedy_params()).token, 0);
  EXPECT_EQ(sample({1.0f, 2.0f, 7.5f}, greedy_params(), 1234).token, 2);
}

// Greedy's vector argmax against the scalar rule (the first logit greater than every one
// before it; NaN never wins; rows of only -inf and NaN give the first non-NaN, else 0), on
// rows whose maxima, ties, NaNs and infinities fall in the vector body and in the tail.
TEST(SamplerTest, GreedyArgmaxMatchesTheScalarRuleEverywhere) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  auto scalar = [](const std::vector<float>& l) {
    int32_t best = -1;
    float best_v = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < l.size(); ++i)
      if (l[i] > best_v) best_v = l[i], best = static_cast<int32_t>(i);
    if (best >= 0) return best;
    for (size_t i = 0; i < l.size(); ++i)
      if (!std::isnan(l[i])) return static_cast<int32_t>(i);
    return 0;
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (const size_t n : {1u, 7u, 8u, 9u, 23u, 64u, 70u, 32000u}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> l(n);
      for (float& x : l) x = std::round(u(rng) * 2.0f) / 2.0f;  // coarse values: many ties
      const int kind = trial % 5;
      auto at = [&] { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
      if (kind == 1) for (int k = 0; k < 3; ++k) l[at()] = nan;
      if (kind == 2) l[at()] = inf, l[at()] = inf;
      if (kind == 3) for (float& x : l) x = (rng() % 3 == 0) ? nan : -inf;
      if (kind == 4) for (float& x : l) x = (rng() % 2 == 0) ? -0.0f : 0.0f;
      ASSERT_EQ(sample(l, greedy_params()).token, scalar(l)) << "n " << n << " trial " << trial;
    }
  }
  EXPECT_EQ(sample(std::vector<float>(20, nan), greedy_params()).token, 0);
}

TEST(SamplerTest, GreedyIgnoresSeedAndIndex) {
  const std::vector<float> l = {0.1f, 0.4f, 0.39f, -1.0f};
  for (uint64_t seed = 0; seed < 50; ++seed)
    EXPECT_EQ(sample(l, greedy_params(), seed, {}, std::vector<int32_t>(seed % 5, 0)).token, 1);
}

TEST(SamplerTest, TemperatureOneMatchesDistribution) {
  const std::vector<double> probs = {0.2, 0.5, 0.3};
  SamplingParams p;  // temperature 1, no truncation
  const int n = 20000;
  const auto h = histogram(logits_of(probs), p, n);
  for (size_t i = 0; i < probs.size(); ++i)
    EXPECT_NEAR(static_cast<double>(h[i]) / n, probs[i], 0.015) << "token " << i;
}

TEST(SamplerTest, LowTemperatureSharpensHighFlattens) {
  const auto l = logits_of({0.2, 0.5, 0.3});
  SamplingParams cold;
  cold.temperature = 0.1f;  // p ~ (0.2^10, 0.5^10, 0.3^10): token 1 > 99%
  const auto hc = histogram(l, cold, 2000);
  EXPECT_GT(hc[1], 1970);
  SamplingParams hot;
  hot.temperature = 100.0f;  // nearly uniform
  const auto hh = histogram(l, hot, 6000);
  for (int c : hh) EXPECT_NEAR(c / 6000.0, 1.0 / 3.0, 0.03);
}

TEST(SamplerTest, TemperatureScalesLogitsInPlace) {
  std::vector<float> l = {1.0f, 2.0f, -4.0f};
  SamplingParams p;
  p.temperature = 0.5f;
  sample_token(l, p, {}, {}, 7);
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  EXPECT_FLOAT_EQ(l[1], 4.0f);
  EXPECT_FLOAT_EQ(l[2], -8.0f);
}

TEST(SamplerTest, TopKKeepsOnlyKLargest) {
  const std::vector<float> l = {0.0f, 4.0f, 1.0f, 3.9f, 2.0f, 3.8f};
  SamplingParams p;
  p.top_k = 2;
  const auto h = histogram(l, p, 3000);
  EXPECT_EQ(h[0] + h[2] + h[4] + h[5], 0);
  // exp(4) : exp(3.9) = 0.525 : 0.475
  EXPECT_NEAR(h[1] / 3000.0, 0.525, 0.03);
  EXPECT_NEAR(h[3] / 3000.0, 0.475, 0.03);
}

TEST(SamplerTest, TopKOneEqualsGreedy) {
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int row = 0; row < 50; ++row) {
    std::vector<float> l(1000);
    for (float& x : l) x = nd(rng);
    if (row % 10 == 0) l[17] = l[3] = 100.0f;  // a tie: lowest id wins
    SamplingParams p;
    p.temperature = 0.8f;
    p.top_k = 1;
    EXPECT_EQ(sample(l, p, row).token, sample(l, greedy_params()).token);
  }
}

TEST(SamplerTest, TopKLargerThanVocabIsOff) {
  const auto l = logits_of({0.2, 0.5, 0.3});
  SamplingParams a;
  SamplingParams b;
  b.top_k = 100;
  for (uint64_t s = 0; s < 200; ++s) EXPECT_EQ(sample(l, a, s).token, sample(l, b, s).token);
}

TEST(SamplerTest, TopPKeepsSmallestNucleus) {
  const auto l = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplingParams p;
  p.top_p = 0.75f;  // 0.5 + 0.3 >= 0.75
  auto h = histogram(l, p, 4000);
  EXPECT_EQ(h[0] + h[2], 0);
  EXPECT_NEAR(h[1] / 4000.0, 0.5 / 0.8, 0.03);
  p.top_p = 0.4f;  // the top token alone
  h = histogram(l, p, 500);
  EXPECT_EQ(h[1], 500);
  p.top_p = 0.0f;  // always at least one token
  h = histogram(l, p, 500);
  EXPECT_EQ(h[1], 500);
  p.top_p = 0.9f;  // 0.5 + 0.3 + 0.15
  h = histogram(l, p, 4000);
  EXPECT_EQ(h[0], 0);
  EXPECT_GT(h[2], 0);
}

TEST(SamplerTest, TopPOnLargeVocabMatchesFullSortReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  const size_t vocab = 32000;
  std::vector<float> l(vocab);
  for (float& x : l) x = nd(rng);
  SamplingParams p;
  p.top_p = 0.9f;
  p.temperature = 0.7f;
  // Reference nucleus: full sort in double.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  double z = 0.0;
  for (float x : l) z += std::exp((x - l[order[0]]) / 0.7);
  double cum = 0.0;
  std::set<int32_t> nucleus;
  for (int32_t t : order) {
    nucleus.insert(t);
    cum += std::exp((l[t] - l[order[0]]) / 0.7) / z;
    if (cum >= 0.9 + 1e-4) break;  // a little slack for float rounding at the edge
  }
  ASSERT_GT(nucleus.size(), 64u);  // the partial sort had to grow
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 300; ++s) {
    const int32_t t = sample(l, p, s).token;
    EXPECT_TRUE(nucleus.count(t)) << "token " << t << " outside the nucleus";
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 20u);
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfMax) {
  const auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.min_p = 0.35f;  // threshold 0.175: keeps tokens 0 and 1
  const auto h = histogram(l, p, 4000);
  EXPECT_EQ(h[2] + h[3], 0);
  EXPECT_NEAR(h[0] / 4000.0, 0.5 / 0.8, 0.03);
  p.min_p = 1.0f;  // only the max
  EXPECT_EQ(histogram(l, p, 300)[0], 300);
}

TEST(SamplerTest, TopKTopPMinPCombine) {
  const auto l = logits_of({0.3, 0.25, 0.2, 0.15, 0.1});
  SamplingParams p;
  p.top_k = 4;       // drops token 4; renormalised: .333 .278 .222 .167
  p.top_p = 0.8f;    // .333 + .278 + .222 = .833 >= .8: drops token 3
  p.min_p = 0.7f;    // threshold .7 * .3 = .21: drops token 2
  const auto h = histogram(l, p, 4000);
  EXPECT_EQ(h[2] + h[3] + h[4], 0);
  EXPECT_NEAR(h[0] / 4000.0, 0.3 / 0.55, 0.03);
}

TEST(SamplerTest, RepetitionPenaltyIsCtrlStyle) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> prompt = {0, 1, 0};
  const std::vector<int32_t> output = {2, 2};
  sample_token(l, p, prompt, output, 0);
  EXPECT_EQ(l[0], 1.0f);   // positive: divided once despite two occurrences
  EXPECT_EQ(l[1], -4.0f);  // negative: multiplied
  EXPECT_EQ(l[2], 0.5f);   // output token
  EXPECT_EQ(l[3], 0.5f);   // untouched
  EXPECT_EQ(l[4], 3.0f);
}

TEST(SamplerTest, RepetitionPenaltyChangesTheChoice) {
  SamplingParams p = greedy_params();
  p.repetition_penalty = 1.5f;
  // Token 0 (3.0) was generated: 3.0 / 1.5 = 2.0 < 2.5.
  EXPECT_EQ(sample({3.0f, 2.5f, 1.0f}, p, 0, {}, {0}).token, 1);
  EXPECT_EQ(sample({3.0f, 2.5f, 1.0f}, p, 0, {}, {}).token, 0);
}

TEST(SamplerTest, FrequencyAndPresencePenaltiesOverOutputOnly) {
  const std::vector<float> orig = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  std::vector<float> l = orig;
  SamplingParams p = greedy_params();
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  const std::vector<int32_t> prompt = {0, 3};
  const std::vector<int32_t> output = {1, 2, 2, 4, 2};
  const auto r = sample_token(l, p, prompt, output, 0);
  EXPECT_EQ(l[0], orig[0]);  // prompt only
  EXPECT_EQ(l[3], orig[3]);
  EXPECT_EQ(l[1], orig[1] - 0.5f * 1 - 0.25f);
  EXPECT_EQ(l[2], orig[2] - 0.5f * 3 - 0.25f);
  EXPECT_EQ(l[4], orig[4] - 0.5f * 1 - 0.25f);
  EXPECT_EQ(r.token, 4);  // 2.25 > 2.0
}

TEST(SamplerTest, AllPenaltiesApplyInOrder) {
  std::vector<float> l = {4.0f, -1.0f, 0.0f};
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  const std::vector<int32_t> output = {0, 0, 1};
  const auto r = sample_token(l, p, {}, output, 0);
  EXPECT_EQ(l[0], 4.0f / 2.0f - 2.0f - 0.5f);
  EXPECT_EQ(l[1], -1.0f * 2.0f - 1.0f - 0.5f);
  EXPECT_EQ(l[2], 0.0f);
  EXPECT_EQ(r.token, 2);
}

TEST(SamplerTest, OutOfRangePenaltyTokensAreIgnored) {
  std::vector<float> l = {1.0f, 2.0f};
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  const std::vector<int32_t> toks = {-1, 7, 1};
  EXPECT_EQ(sample_token(l, p, toks, toks, 0).token, 0);
  EXPECT_EQ(l[1], 2.0f / 2.0f - 1.0f - 0.0f);
}

TEST(SamplerTest, SameSeedAndIndexSameToken) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> l(500);
  for (float& x : l) x = nd(rng);
  SamplingParams p;
  p.temperature = 1.3f;
  p.top_p = 0.95f;
  std::set<int32_t> across_seeds;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const std::vector<int32_t> out(seed % 7, 3);
    const int32_t a = sample(l, p, seed, {}, out).token;
    const int32_t b = sample(l, p, seed, {9, 9}, out).token;  // prompt is irrelevant without penalty
    EXPECT_EQ(a, b);
    across_seeds.insert(a);
  }
  EXPECT_GT(across_seeds.size(), 40u);  // different seeds spread over the vocab
  std::set<int32_t> across_index;
  std::vector<int32_t> out;
  for (int i = 0; i < 100; ++i) {
    across_index.insert(sample(l, p, 77, {}, out).token);
    out.push_back(3);
  }
  EXPECT_GT(across_index.size(), 40u);
}

TEST(SamplerTest, UniformFromIsDeterministicAndUniform) {
  EXPECT_EQ(uniform_from(1, 2), uniform_from(1, 2));
  EXPECT_NE(uniform_from(1, 2), uniform_from(2, 1));
  EXPECT_NE(uniform_from(0, 0), uniform_from(0, 1));
  double sum = 0.0;
  std::vector<int> bins(10, 0);
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = uniform_from(static_cast<uint64_t>(i / 100), static_cast<uint64_t>(i % 100));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++bins[static_cast<int>(u * 10)];
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  for (int b : bins) EXPECT_NEAR(b, n / 10, 500);
}

TEST(SamplerTest, LogprobsAreLogSoftmaxBeforeTemperature) {
  const std::vector<float> orig = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -3.0f, 0.25f, 1.0f, -0.5f, 0.75f};
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 3;
  p.logprobs = true;
  p.top_logprobs = 10;
  std::vector<float> l = orig;
  const auto r = sample_token(l, p, {}, {}, 3);
  double z = 0.0;
  for (float x : orig) z += std::exp(static_cast<double>(x));
  EXPECT_NEAR(r.logprob, orig[r.token] - std::log(z), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 10u);
  double total = 0.0;
  for (size_t i = 0; i < r.top_logprobs.size(); ++i) {
    const auto& t = r.top_logprobs[i];
    EXPECT_NEAR(t.logprob, orig[t.token] - std::log(z), 1e-5);
    if (i > 0) {
      EXPECT_GE(r.top_logprobs[i - 1].logprob, t.logprob);
    }
    total += std::exp(static_cast<double>(t.logprob));
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
  EXPECT_EQ(r.top_logprobs[0].token, 2);
  EXPECT_EQ(r.top_logprobs[1].token, 4);
  EXPECT_EQ(r.top_logprobs[9].token, 5);
}

TEST(SamplerTest, LogprobsIncludePenalties) {
  SamplingParams p = greedy_params();
  p.presence_penalty = 1.0f;
  p.top_logprobs = 2;
  const auto r = sample({1.0f, 0.5f}, p, 0, {}, {0});  // token 0 -> 0.0
  EXPECT_EQ(r.token, 1);
  const double lse = std::log(std::exp(0.0) + std::exp(0.5));
  EXPECT_NEAR(r.logprob, 0.5 - lse, 1e-6);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 1);
  EXPECT_EQ(r.top_logprobs[1].token, 0);
  EXPECT_NEAR(r.top_logprobs[1].logprob, 0.0 - lse, 1e-6);
}

TEST(SamplerTest, TopLogprobsOnLargeVocabSortedAndCapped) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> l(32000);
  for (float& x : l) x = nd(rng);
  std::vector<float> sorted = l;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  SamplingParams p;
  p.top_logprobs = 50;  // capped at 20
  const auto r = sample(l, p, 1);
  ASSERT_EQ(r.top_logprobs.size(), 20u);
  const float shift = l[r.top_logprobs[0].token] - r.top_logprobs[0].logprob;
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(l[r.top_logprobs[i].token], sorted[i]);
    EXPECT_NEAR(r.top_logprobs[i].logprob + shift, sorted[i], 1e-4);
  }
}

TEST(SamplerTest, NoLogprobsRequestedGivesNone) {
  SamplingParams p;
  const auto r = sample({1.0f, 2.0f}, p, 0);
  EXPECT_TRUE(r.top_logprobs.empty());
}

TEST(SamplerTest, DegenerateRowsDoNotCrash) {
  EXPECT_EQ(sample({}, SamplingParams{}).token, -1);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(sample({-inf, -inf, 1.0f}, SamplingParams{}).token, 2);
  SamplingParams p;
  p.logprobs = true;
  const auto r = sample({-inf, -inf, -inf}, p);
  EXPECT_GE(r.token, 0);
  EXPECT_LT(r.token, 3);
  EXPECT_EQ(sample({std::nanf(""), 1.0f}, greedy_params()).token, 1);
}

}  // namespace
}  // namespace ecoserve::engine
