// The exit-code rule of `ecoserve bench` (run_verdict.h), case by case.
#include "loadgen/run_verdict.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ecoserve::loadgen {
namespace {

TEST(RunVerdict, NoSuccessAlwaysFails) {
  EXPECT_EQ(bench_exit_code(0, 4, 1.0), 1);  // the default threshold: only "nothing succeeded" fails
  EXPECT_EQ(bench_exit_code(0, 1, 1.0), 1);
  EXPECT_EQ(bench_exit_code(0, 0, 1.0), 1);  // nothing sent is not a success either
  EXPECT_EQ(bench_exit_code(0, 0, 0.0), 1);
  EXPECT_EQ(judge_run(0, 4, 1.0).reason, "no request succeeded (4 of 4 failed)");
  EXPECT_EQ(judge_run(0, 0, 1.0).reason, "no request succeeded (none was sent)");
}

TEST(RunVerdict, DefaultThresholdPassesAnyPartialSuccess) {
  EXPECT_EQ(bench_exit_code(1, 999, 1.0), 0);
  EXPECT_EQ(bench_exit_code(4, 0, 1.0), 0);
  EXPECT_EQ(judge_run(1, 999, 1.0).reason, "");
}

TEST(RunVerdict, ShareAboveTheThresholdFailsAndEqualPasses) {
  EXPECT_EQ(bench_exit_code(3, 1, 0.25), 0);  // exactly 25%
  EXPECT_EQ(bench_exit_code(2, 2, 0.25), 1);  // 50% > 25%
  EXPECT_EQ(bench_exit_code(7, 3, 0.3), 0);   // 3/10 == 0.3 as doubles: equal passes
  EXPECT_EQ(bench_exit_code(6, 4, 0.3), 1);
  EXPECT_EQ(bench_exit_code(9, 1, 0.1), 0);
  EXPECT_EQ(bench_exit_code(99, 1, 0.0099), 1);  // 1% > 0.99%
  EXPECT_EQ(bench_exit_code(1, 1, 0.5), 0);
  EXPECT_EQ(bench_exit_code(1, 2, 0.5), 1);
  EXPECT_EQ(judge_run(2, 2, 0.25).reason, "2 of 4 requests failed (50.0%), more than --max-failure-rate 0.25");
}

TEST(RunVerdict, ZeroThresholdFailsOnAnyFailure) {
  EXPECT_EQ(bench_exit_code(4, 0, 0.0), 0);
  EXPECT_EQ(bench_exit_code(1000, 1, 0.0), 1);
}

TEST(RunVerdict, ThresholdMustBeAShare) {
  EXPECT_TRUE(validate_max_failure_rate(0).ok());
  EXPECT_TRUE(validate_max_failure_rate(0.5).ok());
  EXPECT_TRUE(validate_max_failure_rate(1).ok());
  EXPECT_FALSE(validate_max_failure_rate(-0.01).ok());
  EXPECT_FALSE(validate_max_failure_rate(1.01).ok());
  EXPECT_FALSE(validate_max_failure_rate(50).ok());  // a percentage is not a share
  EXPECT_FALSE(validate_max_failure_rate(std::nan("")).ok());
  EXPECT_FALSE(validate_max_failure_rate(std::numeric_limits<double>::infinity()).ok());
  EXPECT_NE(validate_max_failure_rate(2).message().find("--max-failure-rate"), std::string::npos);
}

TEST(RunVerdict, ErrorSummaryListsTheMostFrequentFirstWithAMessage) {
  std::map<std::string, std::int64_t> counts = {{"http_401", 4}, {"timeout", 1}, {"connection_reset", 2}};
  std::map<std::string, std::string> examples = {{"http_401", "incorrect API key\nprovided"}, {"timeout", ""}};
  EXPECT_EQ(summarize_errors(counts, examples),
            "http_401 x4 (incorrect API key provided), connection_reset x2, timeout x1");
  EXPECT_EQ(summarize_errors({}, {}), "");
  std::string long_msg(200, 'x');
  EXPECT_EQ(summarize_errors({{"http_500", 1}}, {{"http_500", long_msg}}),
            "http_500 x1 (" + std::string(120, 'x') + "...)");
}

}  // namespace
}  // namespace ecoserve::loadgen
