// FreenessScaler: Llumnix's scaling rule (OSDI'24, section 4.4.3) - add an
// instance when the active instances' average freeness stays below a threshold,
// drain one when it stays above another.
//
// Active instances: healthy, non-draining, kMixed. The caller samples
// mean_freeness(view) periodically and feeds it to observe(now, value); decide()
// turns the samples into a ScaleSignal:
//   1. kHold while in cooldown: a decision was issued and now - last decision < cooldown.
//   2. kHold until a full window has been observed since the last decision (or
//      since the first sample ever): the first sample kept since then is at least
//      `window` old (now - first >= window).
//   3. The samples of the last window are those taken at or after now - window
//      (older ones are dropped). kScaleUp when every one is below
//      scale_up_freeness and active_instances < max_instances; kScaleDown when
//      every one is above scale_down_freeness and active_instances > min_instances.
//      NaN samples are neither below nor above: they hold.
//   4. After kScaleUp or kScaleDown, the samples are cleared and a new window
//      starts at the next observe(); the decision time starts the cooldown.
// An active count outside [min_instances, max_instances] is not corrected by the
// scaler (it only refuses to go further out); that is the operator's business.
//
// Owns its samples; no clock (times come in as arguments), no threads, no I/O.
// Not thread-safe: one caller at a time (the router's timer or the simulator).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "policy/cluster_view.h"
#include "policy/freeness.h"
#include "policy/mitosis_scaler.h"

namespace ecoserve::policy {

struct FreenessScalingOptions {
  // Scale up when the mean freeness (blocks per running request) stays below this...
  double scale_up_freeness = 4.0;
  // ... and down when it stays above this.
  double scale_down_freeness = 64.0;
  Duration window = std::chrono::seconds(30);    // how long a condition must hold
  Duration cooldown = std::chrono::seconds(60);  // no decision sooner after the last one
  int32_t min_instances = 1;  // never scale down to fewer active instances
  int32_t max_instances = 8;  // never scale up beyond this many
};

// OK when both thresholds are finite with scale_up_freeness < scale_down_freeness,
// window > 0, cooldown >= 0, 1 <= min_instances <= max_instances;
// INVALID_ARGUMENT naming the field otherwise.
Status validate(const FreenessScalingOptions& options);

class FreenessScaler {
 public:
  // INVALID_ARGUMENT when `options` are invalid.
  static StatusOr<FreenessScaler> create(const FreenessScalingOptions& options);
  // `options` must be valid (validate()); CHECKed.
  explicit FreenessScaler(const FreenessScalingOptions& options);

  // A sample of the active instances' mean freeness taken at `now` (times never
  // go backwards; a sample older than the newest one is ignored).
  void observe(TimePoint now, double mean_freeness);
  // The decision at `now` for a cluster of `active_instances` (rules above).
  ScaleSignal decide(TimePoint now, int32_t active_instances);

  const FreenessScalingOptions& options() const { return options_; }
  std::optional<TimePoint> last_decision() const { return last_decision_; }
  size_t num_samples() const { return samples_.size(); }

 private:
  void prune(TimePoint now);

  FreenessScalingOptions options_;
  std::deque<std::pair<TimePoint, double>> samples_;  // within the current window, oldest first
  std::optional<TimePoint> window_start_;             // first sample since the last decision
  std::optional<TimePoint> last_decision_;
};

// Mean freeness (policy/freeness.h, from the request lists when view.with_requests)
// of the active instances (healthy, non-draining, kMixed), each clamped to
// [-1e6, 1e6] so one idle instance (huge F) or an instance without memory cannot
// dominate. 0 when there is no active instance.
double mean_freeness(const ClusterView& view, const FreenessOptions& options);

// Which instance to drain on kScaleDown: among the active instances, the one with
// the fewest running requests (cheapest to drain: fewest migrations), ties to the
// highest position (the newest). Running requests are counted from the request
// list when view.with_requests, else InstanceLoad::num_running. nullopt when fewer
// than two instances are active (the last one would have nowhere to send its
// requests). `options` is accepted for symmetry with mean_freeness and unused.
std::optional<InstanceId> pick_instance_to_drain(const ClusterView& view, const FreenessOptions& options);

// The cluster-wide freeness the active instances would have if `victim` were
// drained into them: (sum M - sum V) / sum B over the active instances but the
// victim, with the victim's virtual usage and running requests added. The router
// scales down only while this stays above scale_up_freeness, so removing an
// instance never by itself calls for adding one back (no flapping).
double freeness_without(const ClusterView& view, InstanceId victim, const FreenessOptions& options);

}  // namespace ecoserve::policy
