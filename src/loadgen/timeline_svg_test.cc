#include "loadgen/timeline_svg.h"

#include <gtest/gtest.h>

namespace ecoserve::loadgen {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(TimelineSvg, OneLanePerInstanceAndStepsSplitByWork) {
  const nlohmann::json t = {
      {"seconds", 10},
      {"instances",
       {{{"name", "0"}, {"role", "prefill"}, {"steps", {{-9.0, 0.5, 512, 0, 1, 0}, {-5.0, 0.5, 256, 0, 1, 0}}}},
        {{"name", "1"}, {"role", "decode"}, {"steps", {{-8.0, 0.1, 0, 32, 0, 32}, {-4.0, 0.2, 100, 100, 1, 20}}}}}}};
  auto svg = render_timeline_svg(t, "fudg <1P1D>");
  ASSERT_TRUE(svg.ok()) << svg.status().to_string();
  EXPECT_NE(svg->find("fudg &lt;1P1D&gt;"), std::string::npos);
  EXPECT_NE(svg->find("instance 0"), std::string::npos);
  EXPECT_NE(svg->find(">decode</text>"), std::string::npos);
  // 3 prefill-coloured rectangles (two prefill steps, the mixed one) + the legend's.
  EXPECT_EQ(count(*svg, "fill=\"#e4572e\""), 3u + 1u);
  // 2 decode-coloured (the decode step, the mixed one) + the legend's.
  EXPECT_EQ(count(*svg, "fill=\"#4c78a8\""), 2u + 1u);
  EXPECT_NE(svg->find("<!-- 4 steps, 0 migrations -->"), std::string::npos);
  // The mixed step is split in half: 18 px of a 36 px lane each.
  EXPECT_NE(svg->find("height=\"18.00\" fill=\"#e4572e\""), std::string::npos) << *svg;
}

TEST(TimelineSvg, PhasesAreDrawnAsBandsUnderTheLanes) {
  // padg: instance 0 prefills while instance 1 decodes, then the other way round.
  const nlohmann::json t = {
      {"seconds", 10},
      {"instances",
       {{{"name", "0"}, {"steps", {{-9.0, 0.5, 512, 0, 1, 0, 1}, {-5.0, 0.5, 0, 8, 0, 8, 2}}}},
        {{"name", "1"}, {"steps", {{-9.0, 0.1, 0, 4, 0, 4, 2}, {-5.0, 0.2, 300, 0, 1, 0, 1}, {-4.0, 0.2, 0, 5, 0, 5, 0}}}}}}};
  auto svg = render_timeline_svg(t, "padg");
  ASSERT_TRUE(svg.ok()) << svg.status().to_string();
  EXPECT_EQ(count(*svg, "fill=\"#f4a582\""), 2u + 1u);  // two prefill-phase steps + the legend
  EXPECT_EQ(count(*svg, "fill=\"#92c5de\""), 2u + 1u);  // two decode-phase steps (phase 0 draws none) + the legend
  // Without phases (nodg, fudg) there is no band and no phase legend.
  const nlohmann::json plain = {{"seconds", 10}, {"instances", {{{"name", "0"}, {"steps", {{-9.0, 0.5, 512, 0, 1, 0}}}}}}};
  EXPECT_EQ(render_timeline_svg(plain, "nodg")->find("phase"), std::string::npos);
}

TEST(TimelineSvg, StepsOutsideTheWindowAreClippedAndBadInputIsAnError) {
  const nlohmann::json t = {{"seconds", 2}, {"instances", {{{"name", "0"}, {"steps", {{-5.0, 1.0, 10, 0}}}}}}};
  auto svg = render_timeline_svg(t, "x");
  ASSERT_TRUE(svg.ok());
  EXPECT_NE(svg->find("<!-- 0 steps, 0 migrations -->"), std::string::npos);
  EXPECT_EQ(render_timeline_svg(nlohmann::json::array(), "x").status().code(), StatusCode::kInvalidArgument);
  const nlohmann::json bad = {{"seconds", 2}, {"instances", {{{"name", "0"}, {"steps", {{"a", 1}}}}}}};
  EXPECT_EQ(render_timeline_svg(bad, "x").status().code(), StatusCode::kInvalidArgument);
}

TEST(TimelineSvg, MigrationsAreLinesBetweenTheirLanes) {
  const nlohmann::json t = {
      {"seconds", 2},
      {"instances", {{{"name", "0"}, {"steps", {{-1.5, 0.1, 0, 4}}}}, {{"name", "1"}, {"steps", nlohmann::json::array()}}}},
      {"migrations",
       {{{"request", 7}, {"from", "0"}, {"to", "1"}, {"reason", "drain"}, {"outcome", "completed"}, {"start_s", -1.0},
         {"end_s", -0.5}},
        {{"request", 8}, {"from", "1"}, {"to", "0"}, {"reason", "load_balance"}, {"outcome", "timeout"},
         {"start_s", -0.4}, {"end_s", -0.2}},
        {{"request", 9}, {"from", "0"}, {"to", "5"}, {"start_s", -0.4}, {"end_s", -0.2}}}}};  // lane 5: not drawn
  auto svg = render_timeline_svg(t, "x", 1000);
  ASSERT_TRUE(svg.ok()) << svg.status().to_string();
  EXPECT_NE(svg->find("<!-- 1 steps, 2 migrations -->"), std::string::npos);
  // Plot x from 120 to 980 over [-2, 0]: -1 s -> 550, -0.5 s -> 765; lanes' middles at 58 and 104.
  EXPECT_NE(svg->find("<line x1=\"550.00\" y1=\"58.0\" x2=\"765.00\" y2=\"104.0\" stroke=\"#2ca02c\""),
            std::string::npos);
  EXPECT_NE(svg->find("stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg->find("request 7 0 -&gt; 1 (drain, completed)"), std::string::npos);
  const nlohmann::json bad = {{"seconds", 2}, {"instances", nlohmann::json::array()}, {"migrations", {{{"from", 1}}}}};
  EXPECT_EQ(render_timeline_svg(bad, "x").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ecoserve::loadgen
