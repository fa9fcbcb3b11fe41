#include "policy/freeness_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ecoserve::policy {

namespace {

bool active(const InstanceLoad& l) { return l.healthy && !l.draining && l.role == InstanceRole::kMixed; }

}  // namespace

Status validate(const FreenessScalingOptions& options) {
  if (!std::isfinite(options.scale_up_freeness)) {
    return invalid_argument_error("freeness scaling: scale_up_freeness must be finite, got {}",
                                  options.scale_up_freeness);
  }
  if (!std::isfinite(options.scale_down_freeness) || !(options.scale_up_freeness < options.scale_down_freeness)) {
    return invalid_argument_error(
        "freeness scaling: scale_down_freeness must be finite and > scale_up_freeness = {}, got {}",
        options.scale_up_freeness, options.scale_down_freeness);
  }
  if (options.window <= Duration::zero()) {
    return invalid_argument_error("freeness scaling: window must be > 0, got {} ns", options.window.count());
  }
  if (options.cooldown < Duration::zero()) {
    return invalid_argument_error("freeness scaling: cooldown must be >= 0, got {} ns", options.cooldown.count());
  }
  if (options.min_instances < 1) {
    return invalid_argument_error("freeness scaling: min_instances must be >= 1, got {}", options.min_instances);
  }
  if (options.max_instances < options.min_instances) {
    return invalid_argument_error("freeness scaling: max_instances must be >= min_instances = {}, got {}",
                                  options.min_instances, options.max_instances);
  }
  return ok_status();
}

StatusOr<FreenessScaler> FreenessScaler::create(const FreenessScalingOptions& options) {
  ECO_RETURN_IF_ERROR(validate(options));
  return FreenessScaler(options);
}

FreenessScaler::FreenessScaler(const FreenessScalingOptions& options) : options_(options) {
  const Status s = validate(options);
  ECO_CHECK_MSG(s.ok(), "{}", s.message());
}

void FreenessScaler::observe(TimePoint now, double mean_freeness) {
  if (!samples_.empty() && now < samples_.back().first) return;
  if (!window_start_) window_start_ = now;
  samples_.emplace_back(now, mean_freeness);
  prune(now);
}

void FreenessScaler::prune(TimePoint now) {
  while (!samples_.empty() && samples_.front().first < now - options_.window) samples_.pop_front();
}

ScaleSignal FreenessScaler::decide(TimePoint now, int32_t active_instances) {
  if (last_decision_ && now - *last_decision_ < options_.cooldown) return ScaleSignal::kHold;
  if (!window_start_ || now - *window_start_ < options_.window) return ScaleSignal::kHold;
  prune(now);
  if (samples_.empty()) return ScaleSignal::kHold;
  const bool all_below = std::all_of(samples_.begin(), samples_.end(),
                                     [&](const auto& s) { return s.second < options_.scale_up_freeness; });
  const bool all_above = std::all_of(samples_.begin(), samples_.end(),
                                     [&](const auto& s) { return s.second > options_.scale_down_freeness; });
  ScaleSignal signal = ScaleSignal::kHold;
  if (all_below && active_instances < options_.max_instances) {
    signal = ScaleSignal::kScaleUp;
  } else if (all_above && active_instances > options_.min_instances) {
    signal = ScaleSignal::kScaleDown;
  }
  if (signal != ScaleSignal::kHold) {
    last_decision_ = now;
    samples_.clear();
    window_start_.reset();
  }
  return signal;
}

double mean_freeness(const ClusterView& view, const FreenessOptions& options) {
  double sum = 0.0;
  int32_t n = 0;
  for (const InstanceLoad& l : view.instances) {
    if (!active(l)) continue;
    sum += std::clamp(freeness(l, view.with_requests, options), -1e6, 1e6);
    ++n;
  }
  return n == 0 ? 0.0 : sum / n;
}

std::optional<InstanceId> pick_instance_to_drain(const ClusterView& view, const FreenessOptions&) {
  int64_t best = -1;
  int64_t best_running = 0;
  int32_t num_active = 0;
  for (size_t i = 0; i < view.instances.size(); ++i) {
    const InstanceLoad& l = view.instances[i];
    if (!active(l)) continue;
    ++num_active;
    int64_t running = 0;
    if (view.with_requests) {
      running = std::count_if(l.requests.begin(), l.requests.end(), [](const RequestLoad& r) { return r.running; });
    } else {
      running = l.num_running;
    }
    if (best < 0 || running <= best_running) {  // <=: ties go to the later position
      best = static_cast<int64_t>(i);
      best_running = running;
    }
  }
  if (num_active < 2) return std::nullopt;
  return view.instances[static_cast<size_t>(best)].id;
}

double freeness_without(const ClusterView& view, InstanceId victim, const FreenessOptions& options) {
  int64_t total = 0, used = 0, running = 0;
  bool any = false;
  for (const InstanceLoad& l : view.instances) {
    const bool active = l.healthy && !l.draining && l.role == InstanceRole::kMixed;
    if (!active) continue;
    const InstanceUsage u = instance_usage(l, view.with_requests, options);
    used += u.virtual_blocks;
    running += u.num_running;
    if (l.id == victim) continue;
    total += l.num_total_blocks;
    any = true;
  }
  if (!any) return -std::numeric_limits<double>::infinity();
  return static_cast<double>(total - used) / static_cast<double>(std::max<int64_t>(1, running));
}

}  // namespace ecoserve::policy
