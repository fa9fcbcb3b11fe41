#include "loadgen/svg_plot.h"

#include <regex>

#include <gtest/gtest.h>

namespace ecoserve::loadgen {
namespace {

// The legend box: the only rect with fill-opacity. Returns {x, y, w, h}.
std::vector<double> legend_box(const std::string& svg) {
  std::smatch m;
  const std::regex re(R"re(<rect x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)" height="([0-9.]+)" fill="white" fill-opacity)re");
  if (!std::regex_search(svg, m, re)) return {};
  return {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4])};
}

TEST(SvgPlot, LegendGoesToTheCornerWithoutData) {
  // Default 720x440, plot area x in [80, 696], y in [44, 380].
  SvgPlot rising("CDF", "x", "y");
  rising.set_y_range(0, 1);
  rising.add({.name = "rising", .points = cdf_points({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), .step = true});
  auto box = legend_box(rising.render());
  ASSERT_EQ(box.size(), 4u);
  // A CDF fills the top-right corner (the default spot); top-left is empty here.
  EXPECT_LT(box[0], 100);
  EXPECT_LT(box[1], 100);
  SvgPlot filled("CDF", "x", "y");  // values from 0: the top-left is taken as well
  filled.set_y_range(0, 1);
  filled.add({.name = "rising", .points = cdf_points({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10}), .step = true});
  box = legend_box(filled.render());
  ASSERT_EQ(box.size(), 4u);
  EXPECT_GT(box[0], 400);  // bottom-right
  EXPECT_GT(box[1], 200);
  SvgPlot falling("attainment", "x", "y");
  falling.add({.name = "falling", .points = {{0, 10}, {5, 9}, {10, 1}}, .markers = true});
  box = legend_box(falling.render());
  ASSERT_EQ(box.size(), 4u);
  EXPECT_GT(box[0], 400);  // right half
  EXPECT_LT(box[1], 200);  // top: the curve ends low on the right
}

TEST(SvgPlot, LegendIsWideEnoughForTheLongestName) {
  SvgPlot p("t", "x", "y");
  const std::string name = "output tokens/s (1 s bins), a long legend entry";
  p.add({.name = name, .points = {{0, 1}, {1, 2}}});
  p.add({.name = "short", .points = {{0, 2}, {1, 1}}, .dashed = true});
  const std::string svg = p.render();
  auto box = legend_box(svg);
  ASSERT_EQ(box.size(), 4u);
  EXPECT_GE(box[2], 7.0 * name.size());
  EXPECT_LE(box[0] + box[2], 696.0);  // inside the plot frame
  EXPECT_GE(box[3], 2 * 18.0);        // two rows
  EXPECT_NE(svg.find("stroke-dasharray=\"6 4\"/>"), std::string::npos);  // dashed legend sample
}

}  // namespace
}  // namespace ecoserve::loadgen
