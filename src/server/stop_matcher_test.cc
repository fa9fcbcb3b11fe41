#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace ecoserve::server {
namespace {

TEST(StopStringMatcher, PassesThroughWithoutStops) {
  StopStringMatcher m({});
  EXPECT_EQ(m.push("abc").text, "abc");
  EXPECT_FALSE(m.push("def").stopped);
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcher, HoldsBackPossibleStartAndNeverEmitsStop) {
  StopStringMatcher m({"The end"});
  auto r = m.push("once. Th");
  EXPECT_EQ(r.text, "once. ");  // "Th" may start "The end"
  EXPECT_FALSE(r.stopped);
  r = m.push("e e");
  EXPECT_EQ(r.text, "");
  r = m.push("nd. more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("x").text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcher, ReleasesHeldTextWhenDisambiguated) {
  StopStringMatcher m({"\n\n"});
  EXPECT_EQ(m.push("a\n").text, "a");
  auto r = m.push("b");
  EXPECT_EQ(r.text, "\nb");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.push("c\n").text, "c");
  EXPECT_EQ(m.flush(), "\n");
}

TEST(StopStringMatcher, EarliestOfSeveralStopsWinsInsideOnePiece) {
  StopStringMatcher m({"dog", "cat"});
  auto r = m.push("a cat and a dog");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a ");
}

TEST(StopStringMatcher, SpansManyPieces) {
  StopStringMatcher m({"abcd"});
  std::string out;
  for (const char* p : {"x", "a", "b", "c", "y", "a", "b", "c", "d", "z"}) {
    auto r = m.push(p);
    out += r.text;
    if (r.stopped) break;
  }
  EXPECT_EQ(out, "xabcy");
  EXPECT_TRUE(m.stopped());
}

}  // namespace
}  // namespace ecoserve::server
