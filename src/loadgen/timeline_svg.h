// Timeline SVG: one lane per instance, one rectangle per engine step along time,
// split by the step's tokens: prefill work (prompt tokens) on top in orange,
// decode work below in blue, so a reader sees how a strategy uses each instance
// over time (mixed batches under nodg, prefill-only and decode-only lanes under
// fudg, alternating phases under padg). When steps carry a phase (7th column,
// padg), a thin band under each lane shows the prefill and decode phases, so
// rolling activation across a macro instance is visible. Live migrations
// (llumnix, "migrations") are lines from the source lane to the destination lane:
// green when completed, dashed red when aborted. Input: the JSON of GET
// /admin/timeline.
// Pure: render_timeline_svg() only formats.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace ecoserve::loadgen {

// INVALID_ARGUMENT when `timeline` lacks "seconds" or "instances" of the expected shape.
StatusOr<std::string> render_timeline_svg(const nlohmann::json& timeline, const std::string& title, int width = 1000);

}  // namespace ecoserve::loadgen
