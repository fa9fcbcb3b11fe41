// Timeline summary: from the JSON of GET /admin/timeline, how much of the time
// each instance spent running prompt work, and how often several instances ran
// prompt work at once. Under padg the instances of a macro instance take turns
// (rolling activation), so "at once" should fall well below what independent
// instances with the same shares would give; under nodg it need not.
// Pure: summarize_timeline() only reads its argument.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ecoserve::loadgen {

struct InstanceActivity {
  std::string name;
  double busy_seconds = 0.0;     // inside any step
  double prefill_seconds = 0.0;  // inside steps that computed prompt tokens
  int64_t steps = 0;
  int64_t prefill_steps = 0;
};

struct TimelineSummary {
  double span_seconds = 0.0;  // first step's start to last step's end, over all instances
  std::vector<InstanceActivity> instances;
  double any_prefill_seconds = 0.0;      // time with at least one instance on prompt work
  double overlap_prefill_seconds = 0.0;  // time with two or more instances on prompt work
  // The overlap independent instances with the same prefill shares would show:
  // span x P(two or more of them), each on prompt work with probability its share.
  double independent_overlap_seconds = 0.0;
};

// INVALID_ARGUMENT when `timeline` is not {"instances": [{"steps": [[start_s,
// duration_s, prefill_tokens, ...], ...]}, ...]}.
StatusOr<TimelineSummary> summarize_timeline(const nlohmann::json& timeline);

// Human-readable lines ("instance 0: busy 80%, prompt work 31% ...").
std::string format_timeline_summary(const TimelineSummary& s);

}  // namespace ecoserve::loadgen
