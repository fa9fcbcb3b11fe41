// SvgPlot: a small hand-written SVG line chart (axes, ticks, labels, legend).
// Used by `ecoserve bench --plot DIR`. Value type; render() is pure.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ecoserve::loadgen {

struct SvgSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  bool step = false;     // draw as a step function (CDFs)
  bool markers = false;  // draw a dot at each point
  bool dashed = false;
};

class SvgPlot {
 public:
  SvgPlot(std::string title, std::string x_label, std::string y_label)
      : title_(std::move(title)), x_label_(std::move(x_label)), y_label_(std::move(y_label)) {}

  void add(SvgSeries s) { series_.push_back(std::move(s)); }
  void set_y_range(double lo, double hi) { y_range_ = {lo, hi}; }
  void set_x_range(double lo, double hi) { x_range_ = {lo, hi}; }
  std::string render(int width = 720, int height = 440) const;

 private:
  std::string title_, x_label_, y_label_;
  std::vector<SvgSeries> series_;
  std::optional<std::pair<double, double>> x_range_, y_range_;
};

// "Nice" tick values covering [lo, hi] (about `target` ticks of 1/2/5 x 10^k).
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

// Text escaped for SVG/XML text and attribute values (< > & ").
std::string svg_escape(const std::string& s);

// Points of an empirical CDF: (sorted value, (i+1)/n).
std::vector<std::pair<double, double>> cdf_points(std::vector<double> values);

}  // namespace ecoserve::loadgen
