#include "loadgen/seeded_share.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ecoserve::loadgen {
namespace {

std::vector<std::size_t> indices(const std::vector<bool>& chosen) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i]) out.push_back(i);
  return out;
}

TEST(SeededShare, CountIsRoundedFractionOfN) {
  EXPECT_EQ(share_count(50, 0.1), 5u);
  EXPECT_EQ(share_count(50, 0.0), 0u);
  EXPECT_EQ(share_count(50, 1.0), 50u);
  EXPECT_EQ(share_count(10, 0.25), 3u);  // 2.5 rounds up
  EXPECT_EQ(share_count(10, 0.24), 2u);
  EXPECT_EQ(share_count(3, 0.1), 0u);    // 0.3 rounds to none
  EXPECT_EQ(share_count(0, 0.5), 0u);
  EXPECT_EQ(share_count(200, 0.1), 20u);
  for (std::size_t n : {1u, 7u, 50u, 333u})
    for (double f : {0.0, 0.1, 0.33, 0.5, 0.9, 1.0})
      EXPECT_EQ(indices(choose_seeded_share(n, f, 3, kHighPriorityStream)).size(), share_count(n, f)) << n << " " << f;
}

TEST(SeededShare, TheSetIsAFunctionOfSeedNAndFractionOnly) {
  // Fraction 0.1 of 50 with seed 0: these 5 requests, on every platform (splitmix64 keys).
  const std::vector<std::size_t> expected = {17, 28, 30, 37, 40};
  EXPECT_EQ(indices(choose_seeded_share(50, 0.1, 0, kHighPriorityStream)), expected);
  EXPECT_EQ(choose_seeded_share(50, 0.1, 0, kHighPriorityStream), choose_seeded_share(50, 0.1, 0, kHighPriorityStream));
  // Another seed or another stream chooses another set.
  EXPECT_NE(choose_seeded_share(50, 0.1, 1, kHighPriorityStream), choose_seeded_share(50, 0.1, 0, kHighPriorityStream));
  EXPECT_NE(choose_seeded_share(50, 0.1, 0, kLongRequestStream), choose_seeded_share(50, 0.1, 0, kHighPriorityStream));
}

TEST(SeededShare, ALargerFractionChoosesASuperset) {
  auto small = choose_seeded_share(100, 0.1, 42, kLongRequestStream);
  auto large = choose_seeded_share(100, 0.3, 42, kLongRequestStream);
  for (std::size_t i = 0; i < 100; ++i)
    EXPECT_TRUE(!small[i] || large[i]) << i;
}

TEST(SeededShare, ChoicesSpreadOverTheWorkload) {
  // 10% of 10,000: each tenth of the indices holds roughly a tenth of the chosen ones.
  auto chosen = choose_seeded_share(10000, 0.1, 7, kHighPriorityStream);
  for (int part = 0; part < 10; ++part) {
    int n = 0;
    for (int i = part * 1000; i < (part + 1) * 1000; ++i) n += chosen[static_cast<std::size_t>(i)];
    EXPECT_GT(n, 60) << part;
    EXPECT_LT(n, 140) << part;
  }
}

TEST(SeededShare, FractionsOutsideZeroOneAreRejected) {
  EXPECT_TRUE(validate_share(0.0, "--x").ok());
  EXPECT_TRUE(validate_share(1.0, "--x").ok());
  for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    Status s = validate_share(bad, "--high-priority-fraction");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("--high-priority-fraction must be in [0, 1], got ", 0), 0u) << s.message();
  }
  EXPECT_EQ(validate_share(1.5, "--long-fraction").message(), "--long-fraction must be in [0, 1], got 1.5");
}

}  // namespace
}  // namespace ecoserve::loadgen
