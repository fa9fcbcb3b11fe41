#include "loadgen/timeline_svg.h"

#include <algorithm>

#include <fmt/format.h>

#include "loadgen/svg_plot.h"

namespace ecoserve::loadgen {

StatusOr<std::string> render_timeline_svg(const nlohmann::json& t, const std::string& title, int width) {
  if (!t.is_object() || !t.contains("seconds") || !t["seconds"].is_number() || !t.contains("instances") ||
      !t["instances"].is_array()) {
    return invalid_argument_error("timeline: expected {{\"seconds\": N, \"instances\": [...]}} (GET /admin/timeline)");
  }
  const double span = std::max(1e-3, t["seconds"].get<double>());
  const int left = 120, right = 20, top = 40, lane_h = 36, gap = 10;
  const int lanes = static_cast<int>(t["instances"].size());
  const int height = top + lanes * (lane_h + gap) + 60;
  const double plot_w = width - left - right;
  auto x_of = [&](double s) { return left + (s + span) / span * plot_w; };  // s in [-span, 0]
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\">{}</text>\n",
      width, height, left, svg_escape(title));
  int lane = 0;
  int64_t steps_drawn = 0;
  bool any_phase = false;
  for (const auto& inst : t["instances"]) {
    if (!inst.is_object() || !inst.contains("steps") || !inst["steps"].is_array()) {
      return invalid_argument_error("timeline: instance {} has no \"steps\" array", lane);
    }
    const int y = top + lane * (lane_h + gap);
    const std::string name = inst.value("name", std::to_string(lane));
    const std::string role = inst.value("role", "mixed");
    svg += fmt::format("<text x=\"8\" y=\"{}\">instance {}</text>\n<text x=\"8\" y=\"{}\" fill=\"#666\">{}</text>\n",
                       y + 15, svg_escape(name), y + 30, svg_escape(role));
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"#f4f4f4\"/>\n", left, y, plot_w,
                       lane_h);
    for (const auto& s : inst["steps"]) {
      if (!s.is_array() || s.size() < 4 || !s[0].is_number() || !s[1].is_number() || !s[2].is_number() ||
          !s[3].is_number()) {
        return invalid_argument_error("timeline: a step of instance {} is not [start_s, duration_s, prefill, decode]",
                                      name);
      }
      const double start = std::max(-span, s[0].get<double>());
      const double end = std::min(0.0, s[0].get<double>() + s[1].get<double>());
      if (end <= start) continue;
      const double prefill = std::max(0.0, s[2].get<double>()), decode = std::max(0.0, s[3].get<double>());
      const double total = prefill + decode;
      if (total <= 0) continue;
      const double x = x_of(start), w = std::max(0.5, x_of(end) - x);
      const double ph = lane_h * prefill / total;
      if (prefill > 0) {
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#e4572e\"/>\n", x, y,
                           w, ph);
      }
      if (decode > 0) {
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#4c78a8\"/>\n",
                           x, y + ph, w, lane_h - ph);
      }
      // The phase after the step (padg: 1 prefill, 2 decode), as a band under the lane.
      if (s.size() >= 7 && s[6].is_number_integer() && (s[6].get<int64_t>() == 1 || s[6].get<int64_t>() == 2)) {
        svg += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"4\" fill=\"{}\"/>\n", x,
                           y + lane_h + 1, w, s[6].get<int64_t>() == 1 ? "#f4a582" : "#92c5de");
        any_phase = true;
      }
      ++steps_drawn;
    }
    ++lane;
  }
  // Migrations (llumnix): a line from the source lane at the start to the
  // destination lane at the end; green when completed, dashed red when aborted.
  int64_t migrations_drawn = 0;
  if (t.contains("migrations") && t["migrations"].is_array()) {
    auto lane_of = [&](const std::string& name) {
      int i = 0;
      for (const auto& inst : t["instances"]) {
        if (inst.value("name", std::to_string(i)) == name) return i;
        ++i;
      }
      return -1;
    };
    for (const auto& m : t["migrations"]) {
      if (!m.is_object() || !m.contains("start_s") || !m["start_s"].is_number() || !m.contains("end_s") ||
          !m["end_s"].is_number() || !m.contains("from") || !m["from"].is_string() || !m.contains("to") ||
          !m["to"].is_string()) {
        return invalid_argument_error("timeline: a migration is not {{from, to, start_s, end_s, ...}}");
      }
      const int from = lane_of(m["from"].get<std::string>()), to = lane_of(m["to"].get<std::string>());
      const double start = m["start_s"].get<double>(), end = m["end_s"].get<double>();
      if (from < 0 || to < 0 || end < -span || start > 0) continue;
      const bool ok = m.value("outcome", "") == "completed";
      const double y1 = top + from * (lane_h + gap) + lane_h / 2.0, y2 = top + to * (lane_h + gap) + lane_h / 2.0;
      svg += fmt::format(
          "<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\"{}>"
          "<title>request {} {} -&gt; {} ({}, {})</title></line><circle cx=\"{:.2f}\" cy=\"{:.1f}\" r=\"3\" "
          "fill=\"{}\"/>\n",
          x_of(std::max(-span, start)), y1, x_of(std::min(0.0, end)), y2, ok ? "#2ca02c" : "#d62728",
          ok ? "" : " stroke-dasharray=\"4 3\"", m.value("request", 0), svg_escape(m["from"].get<std::string>()),
          svg_escape(m["to"].get<std::string>()), svg_escape(m.value("reason", "")),
          svg_escape(m.value("outcome", "")), x_of(std::min(0.0, end)), y2, ok ? "#2ca02c" : "#d62728");
      ++migrations_drawn;
    }
  }
  // Time axis (seconds before the request).
  const int axis_y = top + lanes * (lane_h + gap);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"black\"/>\n", left, axis_y,
                     left + plot_w, axis_y);
  for (double v : nice_ticks(-span, 0.0, 8)) {
    if (v < -span - 1e-9 || v > 1e-9) continue;
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"black\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                       x_of(v), axis_y, axis_y + 5, axis_y + 18, v);
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">time (s, 0 = when fetched)</text>\n",
                     left + plot_w / 2, axis_y + 36);
  svg += fmt::format(
      "<rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"12\" fill=\"#e4572e\"/><text x=\"{2}\" y=\"{3}\">prefill "
      "tokens</text><rect x=\"{4}\" y=\"{1}\" width=\"12\" height=\"12\" fill=\"#4c78a8\"/><text x=\"{5}\" "
      "y=\"{3}\">decode tokens</text>\n",
      width - 260, 12, width - 244, 22, width - 140, width - 124);
  if (any_phase) {
    svg += fmt::format(
        "<rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"4\" fill=\"#f4a582\"/><text x=\"{2}\" y=\"{3}\">prefill "
        "phase</text><rect x=\"{4}\" y=\"{1}\" width=\"12\" height=\"4\" fill=\"#92c5de\"/><text x=\"{5}\" "
        "y=\"{3}\">decode phase</text>\n",
        width - 520, 16, width - 504, 22, width - 400, width - 384);
  }
  if (migrations_drawn > 0) {
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#2ca02c\" stroke-width=\"2\"/><text x=\"{3}\" "
        "y=\"{4}\">migration</text>\n",
        width - 640, 18, width - 628, width - 624, 22);
  }
  svg += fmt::format("<!-- {} steps, {} migrations -->\n</svg>\n", steps_drawn, migrations_drawn);
  return svg;
}

}  // namespace ecoserve::loadgen
