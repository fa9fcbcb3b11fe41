#include "loadgen/timeline_summary.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <fmt/format.h>

namespace ecoserve::loadgen {

StatusOr<TimelineSummary> summarize_timeline(const nlohmann::json& t) {
  if (!t.is_object() || !t.contains("instances") || !t["instances"].is_array()) {
    return invalid_argument_error("timeline: expected {{\"instances\": [...]}} (GET /admin/timeline)");
  }
  TimelineSummary out;
  // (time, +1 start / -1 end, instance) for the steps with prompt work.
  std::vector<std::tuple<double, int, size_t>> events;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto& inst : t["instances"]) {
    const size_t index = out.instances.size();
    if (!inst.is_object() || !inst.contains("steps") || !inst["steps"].is_array()) {
      return invalid_argument_error("timeline: instance {} has no \"steps\" array", index);
    }
    InstanceActivity a;
    a.name = inst.contains("name") && inst["name"].is_string() ? inst["name"].get<std::string>() : std::to_string(index);
    for (const auto& s : inst["steps"]) {
      if (!s.is_array() || s.size() < 3 || !s[0].is_number() || !s[1].is_number() || !s[2].is_number()) {
        return invalid_argument_error("timeline: a step of instance {} is not [start_s, duration_s, prefill_tokens, ...]",
                                      a.name);
      }
      const double start = s[0].get<double>(), duration = std::max(0.0, s[1].get<double>());
      first = std::min(first, start);
      last = std::max(last, start + duration);
      ++a.steps;
      a.busy_seconds += duration;
      if (s[2].get<double>() > 0) {
        ++a.prefill_steps;
        a.prefill_seconds += duration;
        if (duration > 0) {
          events.emplace_back(start, 1, index);
          events.emplace_back(start + duration, -1, index);
        }
      }
    }
    out.instances.push_back(std::move(a));
  }
  if (events.empty() && first > last) return out;
  out.span_seconds = std::max(0.0, last - first);
  // Sweep: ends before starts at the same time, so back-to-back steps do not overlap.
  std::sort(events.begin(), events.end(), [](const auto& x, const auto& y) {
    return std::get<0>(x) != std::get<0>(y) ? std::get<0>(x) < std::get<0>(y) : std::get<1>(x) < std::get<1>(y);
  });
  std::vector<int> open(out.instances.size(), 0);
  int active = 0;  // instances with an open prompt step
  double prev = events.empty() ? 0.0 : std::get<0>(events.front());
  for (const auto& [time, delta, index] : events) {
    if (active >= 1) out.any_prefill_seconds += time - prev;
    if (active >= 2) out.overlap_prefill_seconds += time - prev;
    prev = time;
    const int before = open[index];
    open[index] += delta;
    if (before == 0 && open[index] > 0) ++active;
    if (before > 0 && open[index] == 0) --active;
  }
  // P(two or more) = 1 - P(none) - P(exactly one), with independent shares.
  if (out.span_seconds > 0) {
    double none = 1.0, one = 0.0;
    for (const InstanceActivity& a : out.instances) {
      const double p = std::clamp(a.prefill_seconds / out.span_seconds, 0.0, 1.0);
      one = one * (1.0 - p) + none * p;
      none *= 1.0 - p;
    }
    out.independent_overlap_seconds = out.span_seconds * std::max(0.0, 1.0 - none - one);
  }
  return out;
}

std::string format_timeline_summary(const TimelineSummary& s) {
  auto share = [&](double x) { return s.span_seconds > 0 ? 100.0 * x / s.span_seconds : 0.0; };
  std::string text = fmt::format("over {:.1f} s:\n", s.span_seconds);
  for (const InstanceActivity& a : s.instances) {
    text += fmt::format("  instance {}: busy {:.0f}%, prompt work {:.0f}% ({} of {} steps)\n", a.name,
                        share(a.busy_seconds), share(a.prefill_seconds), a.prefill_steps, a.steps);
  }
  text += fmt::format(
      "  prompt work on two or more instances at once: {:.1f}% of the time ({:.1f}% if they were independent); "
      "on at least one: {:.0f}%\n",
      share(s.overlap_prefill_seconds), share(s.independent_overlap_seconds), share(s.any_prefill_seconds));
  return text;
}

}  // namespace ecoserve::loadgen
