#include "loadgen/timeline_summary.h"

#include <gtest/gtest.h>

namespace ecoserve::loadgen {
namespace {

TEST(TimelineSummary, SharesOverlapAndTheIndependentBaselineWorkedByHand) {
  // Instance 0 prefills in [0, 1) and [2, 3); instance 1 prefills in [0.5, 1.5) and
  // decodes in [2, 3). Span 3 s; prompt work on at least one: [0, 1.5) + [2, 3) =
  // 2.5 s; on both: [0.5, 1) = 0.5 s. Shares 2/3 and 1/3, so independent
  // instances would overlap 3 x 2/3 x 1/3 = 2/3 s.
  const nlohmann::json t = {
      {"instances",
       {{{"name", "a"}, {"steps", {{0.0, 1.0, 100, 0}, {2.0, 1.0, 50, 3}}}},
        {{"name", "b"}, {"steps", {{0.5, 1.0, 30, 0, 1, 0, 1}, {2.0, 1.0, 0, 8, 0, 8, 2}}}}}}};
  auto s = summarize_timeline(t);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_DOUBLE_EQ(s->span_seconds, 3.0);
  ASSERT_EQ(s->instances.size(), 2u);
  EXPECT_EQ(s->instances[0].name, "a");
  EXPECT_DOUBLE_EQ(s->instances[0].prefill_seconds, 2.0);
  EXPECT_EQ(s->instances[0].prefill_steps, 2);
  EXPECT_DOUBLE_EQ(s->instances[1].busy_seconds, 2.0);
  EXPECT_DOUBLE_EQ(s->instances[1].prefill_seconds, 1.0);
  EXPECT_EQ(s->instances[1].steps, 2);
  EXPECT_DOUBLE_EQ(s->any_prefill_seconds, 2.5);
  EXPECT_DOUBLE_EQ(s->overlap_prefill_seconds, 0.5);
  EXPECT_NEAR(s->independent_overlap_seconds, 2.0 / 3.0, 1e-12);
  const std::string text = format_timeline_summary(*s);
  EXPECT_NE(text.find("instance a: busy 67%, prompt work 67% (2 of 2 steps)"), std::string::npos) << text;
  EXPECT_NE(text.find("at once: 16.7% of the time (22.2% if they were independent)"), std::string::npos) << text;
}

TEST(TimelineSummary, BackToBackStepsOnOneInstanceAreNotAnOverlapAndBadInputIsAnError) {
  const nlohmann::json t = {{"instances", {{{"steps", {{0.0, 1.0, 10, 0}, {1.0, 1.0, 10, 0}}}}}}};
  auto s = summarize_timeline(t);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->instances[0].name, "0");
  EXPECT_DOUBLE_EQ(s->any_prefill_seconds, 2.0);
  EXPECT_DOUBLE_EQ(s->overlap_prefill_seconds, 0.0);
  EXPECT_DOUBLE_EQ(s->independent_overlap_seconds, 0.0);  // one instance cannot overlap itself
  EXPECT_DOUBLE_EQ(summarize_timeline(nlohmann::json{{"instances", nlohmann::json::array()}})->span_seconds, 0.0);
  EXPECT_EQ(summarize_timeline(nlohmann::json::array()).status().code(), StatusCode::kInvalidArgument);
  const nlohmann::json bad = {{"instances", {{{"steps", {{"x", 1, 2}}}}}}};
  EXPECT_EQ(summarize_timeline(bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ecoserve::loadgen
