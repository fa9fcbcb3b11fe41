#include "loadgen/svg_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include <fmt/format.h>

namespace ecoserve::loadgen {

std::string svg_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

std::string esc(const std::string& s) { return svg_escape(s); }

constexpr std::array<const char*, 6> kColors = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string tick_label(double v) {
  if (v == 0) return "0";
  double a = std::abs(v);
  if (a >= 1e5 || a < 1e-3) return fmt::format("{:.1e}", v);
  std::string s = fmt::format("{:.4f}", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// Approximate width of `s` in pixels at font-size 12 sans-serif (about 0.6 em per
// character; wide enough for digits and lower case, so the legend box never clips).
double text_width(const std::string& s) { return 7.0 * static_cast<double>(s.size()); }

// The legend: a white, framed box inside the plot area, in whichever corner covers the
// fewest data (points and sampled segments), so it never hides the curves' interesting part.
std::string render_legend(const std::vector<SvgSeries>& series, const std::function<double(double)>& X,
                          const std::function<double(double)>& Y, double left, double top, double pw, double ph) {
  if (series.empty()) return "";
  constexpr double kPad = 8, kRow = 18, kSample = 24, kGap = 6, kInset = 8;
  double text_w = 0;
  for (const auto& s : series) text_w = std::max(text_w, text_width(s.name));
  const double w = std::min(pw - 2 * kInset, kPad + kSample + kGap + text_w + kPad);
  const double h = kPad + kRow * static_cast<double>(series.size()) + kPad - 6;
  // Candidate corners: top-right, bottom-right, top-left, bottom-left.
  const double xs[2] = {left + pw - kInset - w, left + kInset};
  const double ys[2] = {top + kInset, top + ph - kInset - h};
  std::vector<std::pair<double, double>> px;  // data in pixels, segments sampled
  for (const auto& s : series) {
    bool have_prev = false;
    double prev_x = 0, prev_y = 0;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      const double cx = X(x), cy = Y(y);
      if (have_prev) {
        for (int k = 1; k < 16; ++k) {
          const double f = k / 16.0;
          // A step series goes horizontally first, then vertically.
          if (s.step && f < 0.5)
            px.emplace_back(prev_x + 2 * f * (cx - prev_x), prev_y);
          else if (s.step)
            px.emplace_back(cx, prev_y + (2 * f - 1) * (cy - prev_y));
          else
            px.emplace_back(prev_x + f * (cx - prev_x), prev_y + f * (cy - prev_y));
        }
      }
      px.emplace_back(cx, cy);
      prev_x = cx;
      prev_y = cy;
      have_prev = true;
    }
  }
  double bx = xs[0], by = ys[0];
  size_t best = SIZE_MAX;
  for (double cy : ys) {
    for (double cx : xs) {
      size_t n = 0;
      for (auto [x, y] : px) n += x >= cx - 4 && x <= cx + w + 4 && y >= cy - 4 && y <= cy + h + 4;
      if (n < best) {
        best = n;
        bx = cx;
        by = cy;
      }
    }
  }
  std::string o = fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"white\" fill-opacity=\"0.9\" "
      "stroke=\"#bbb\"/>\n",
      bx, by, w, h);
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* color = kColors[i % kColors.size()];
    const double ly = by + kPad + kRow * static_cast<double>(i) + 6;  // middle of the row
    o += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"{}/>\n",
        bx + kPad, ly, bx + kPad + kSample, ly, color, s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    if (s.markers)
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", bx + kPad + kSample / 2, ly,
                       color);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", bx + kPad + kSample + kGap, ly + 4, esc(s.name));
  }
  return o;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) {
    ticks.push_back(lo);
    return ticks;
  }
  double raw = (hi - lo) / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  // From the last multiple of step <= lo to the first one >= hi.
  double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  for (double k = first; k <= last; k += 1) ticks.push_back(std::abs(k) < 1e-9 ? 0.0 : k * step);
  return ticks;
}

std::vector<std::pair<double, double>> cdf_points(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::vector<std::pair<double, double>> pts;
  double n = static_cast<double>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) pts.emplace_back(values[i], static_cast<double>(i + 1) / n);
  return pts;
}

std::string SvgPlot::render(int width, int height) const {
  const double left = 80, right = 24, top = 44, bottom = 60;
  double pw = width - left - right, ph = height - top - bottom;
  double xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  bool any = false;
  for (const auto& s : series_)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (!any) { xmin = xmax = x; ymin = ymax = y; any = true; }
      xmin = std::min(xmin, x); xmax = std::max(xmax, x);
      ymin = std::min(ymin, y); ymax = std::max(ymax, y);
    }
  if (any) { ymin = std::min(ymin, 0.0); xmin = std::min(xmin, 0.0); }
  if (x_range_) std::tie(xmin, xmax) = *x_range_;
  if (y_range_) std::tie(ymin, ymax) = *y_range_;
  if (xmax <= xmin) xmax = xmin + 1;
  if (ymax <= ymin) ymax = ymin + 1;
  auto xt = nice_ticks(xmin, xmax), yt = nice_ticks(ymin, ymax);
  if (!x_range_ && !xt.empty()) { xmin = std::min(xmin, xt.front()); xmax = std::max(xmax, xt.back()); }
  if (!y_range_ && !yt.empty()) { ymin = std::min(ymin, yt.front()); ymax = std::max(ymax, yt.back()); }
  auto X = [&](double x) { return left + (x - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double y) { return top + ph - (y - ymin) / (ymax - ymin) * ph; };

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      width, height);
  o += fmt::format("<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">{}</text>\n", width / 2.0,
                   esc(title_));
  // Grid and ticks.
  for (double t : xt) {
    if (t < xmin - 1e-12 || t > xmax + 1e-12) continue;
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#e5e5e5\"/>\n",
                     X(t), top, top + ph);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", X(t), top + ph + 16,
                     tick_label(t));
  }
  for (double t : yt) {
    if (t < ymin - 1e-12 || t > ymax + 1e-12) continue;
    o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#e5e5e5\"/>\n",
                     left, Y(t), left + pw);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6, Y(t) + 4,
                     tick_label(t));
  }
  // Axes and labels.
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", left,
                   top, pw, ph);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                   height - 16.0, esc(x_label_));
  o += fmt::format(
      "<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0:.1f})\">{1}</text>\n",
      top + ph / 2, esc(y_label_));
  // Series.
  o += fmt::format("<clipPath id=\"plot\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath>\n", left,
                   top, pw, ph);
  for (std::size_t i = 0; i < series_.size(); ++i) {
    const auto& s = series_[i];
    const char* color = kColors[i % kColors.size()];
    std::string d;
    bool first = true;
    double prev_y = 0;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (first) {
        d += fmt::format("M{:.1f},{:.1f}", X(x), Y(s.step ? 0.0 : y));
        if (s.step) d += fmt::format(" L{:.1f},{:.1f}", X(x), Y(y));
        first = false;
      } else if (s.step) {
        d += fmt::format(" L{:.1f},{:.1f} L{:.1f},{:.1f}", X(x), Y(prev_y), X(x), Y(y));
      } else {
        d += fmt::format(" L{:.1f},{:.1f}", X(x), Y(y));
      }
      prev_y = y;
    }
    if (!d.empty())
      o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} clip-path=\"url(#plot)\"/>\n",
                       d, color, s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    if (s.markers)
      for (auto [x, y] : s.points)
        if (std::isfinite(x) && std::isfinite(y))
          o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", X(x), Y(y), color);
  }
  o += render_legend(series_, X, Y, left, top, pw, ph);
  o += "</svg>\n";
  return o;
}

}  // namespace ecoserve::loadgen
