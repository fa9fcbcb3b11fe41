#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace ecoserve {
namespace {

StatusOr<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument_error("value {} is not positive", v);
  return v;
}

StatusOr<int> doubled(int v) {
  ECO_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_both(int a, int b) {
  ECO_RETURN_IF_ERROR(parse_positive(a).status());
  ECO_RETURN_IF_ERROR(parse_positive(b).status());
  return ok_status();
}

TEST(StatusTest, CodesAndMessages) {
  Status s = not_found_error("model '{}' not found", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "model 'x' not found");
  EXPECT_EQ(s.to_string(), "NOT_FOUND: model 'x' not found");
  EXPECT_EQ(s.with_prefix("load").message(), "load: model 'x' not found");
  EXPECT_EQ(ok_status().to_string(), "OK");
}

TEST(StatusTest, StatusOrPropagates) {
  EXPECT_EQ(*doubled(4), 8);
  StatusOr<int> bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "value -1 is not positive");
  EXPECT_TRUE(check_both(1, 2).ok());
  EXPECT_EQ(check_both(1, 0).message(), "value 0 is not positive");
}

TEST(StatusTest, MoveOnlyValue) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(5);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> q = std::move(p).value();
  EXPECT_EQ(*q, 5);
}

TEST(StatusDeathTest, ValueOnErrorAborts) {
  StatusOr<int> bad = internal_error("boom");
  EXPECT_DEATH((void)bad.value(), "boom");
}

}  // namespace
}  // namespace ecoserve
