// TemporalPolicy: EcoServe's instance scheduler for partial disaggregation (padg).
//
// The instance alternates a prefill phase and a decode phase instead of mixing
// them in one batch (Section 4.2.3.3 of the EcoServe paper):
//  - Prefill priority: while prompts are waiting (or a prefill is unfinished),
//    the instance is in a prefill phase and each step runs prefill chunks only
//    (partial prefills, then swapped and waiting requests; chunks of at most
//    chunk_size tokens, the compute-saturating size) - no decode token runs.
//  - The decodes pay for it with their saved TPOT (RequestView::saved_tpot):
//    a prefill step runs only while the decoding requests' mean saved TPOT at
//    `now` is at least the step's predicted time (CostModel; 0 without one), so
//    the phase never runs longer than their slack allows. With
//    Options::shrink_to_slack, a full step (token budget, chunk_size) that would
//    overrun it is halved (budget and chunk) down to kMinPrefillTokens until it
//    fits, so the phase fills the slack; by default it switches to decode. Once it would, the
//    instance switches to a decode phase, and goes back to prefill only when the
//    mean saved TPOT has grown back to the predicted step time plus
//    Options::resume_slack (each decode step adds SLO_TPOT minus its duration).
//  - TTFT guard (not in the paper): when a waiting prompt's TTFT deadline
//    (arrival + SLO_TTFT) would pass before the next decode step and the
//    prefill step after it could end, the prefill runs despite the slack. So a
//    prompt never starves behind decodes whose slack cannot come back (an
//    SLO_TPOT below the decode step time): both SLOs are missed, the TTFT one by
//    less.
//  - Otherwise (nothing to prefill) every running decode gets one token per step.
//  - A step never goes empty while work exists: a prefill phase that cannot
//    place any chunk (no blocks, no sequence slot) decodes instead, and a decode
//    phase with nothing to decode prefills.
// Decoding requests without a TPOT SLO do not constrain the prefill phase; with
// none decoding the slack is unlimited.
//
// State: the current phase, the `now` of the plan that switched to it, and a
// switch count (InstancePolicy::phase() etc.); nothing else. Deterministic: the
// same views and times give the same decisions. Borrows the cost model (shared).
#pragma once

#include <memory>
#include <optional>

#include "policy/cost_model.h"
#include "policy/instance_policy.h"

namespace ecoserve::policy {

class TemporalPolicy final : public InstancePolicy {
 public:
  struct Options {
    // Extra mean saved TPOT required to go back from a decode phase (entered
    // because the slack ran out) to prefill: hysteresis, so the instance does not
    // flip phase every step. 0 = switch back as soon as the next step fits.
    Duration resume_slack{};
    // Halve a prefill step that would overrun the slack (down to
    // kMinPrefillTokens) instead of switching to decode. Off by default: on
    // this project's CPU runs (scripts/goodput_compare.sh, 110m model, 2 x 1
    // thread) whole-chunk phases had the higher P90 goodput (sharegpt 2.67 vs
    // 2.19 req/s, longbench 2.19 vs 1.46): fine-grained switching gives up the
    // decode batches a phase is for.
    bool shrink_to_slack = false;
  };
  TemporalPolicy(PolicyOptions options, std::shared_ptr<const CostModel> cost_model)
      : TemporalPolicy(options, std::move(cost_model), Options{}) {}
  TemporalPolicy(PolicyOptions options, std::shared_ptr<const CostModel> cost_model, Options temporal)
      : options_(options), temporal_(temporal), cost_model_(std::move(cost_model)) {}

  // The smallest prefill step the slack check tries before giving up to decode.
  static constexpr int32_t kMinPrefillTokens = 16;

  PolicyDecision plan(const InstanceView& view, TimePoint now) override;
  InstanceRole role() const override { return InstanceRole::kMixed; }
  std::string_view name() const override { return "temporal"; }
  const PolicyOptions& options() const override { return options_; }
  InstancePhase phase() const override { return phase_; }
  TimePoint last_phase_switch() const override { return last_switch_; }
  int64_t num_phase_switches() const override { return num_switches_; }

  // Mean saved TPOT at `now` of the running decodes that have a TPOT SLO, or
  // nullopt when there is none (no constraint). Pure.
  static std::optional<Duration> mean_saved_tpot(const InstanceView& view, TimePoint now);
  // Predicted time of a decision's step on `view` (0 without a cost model).
  Duration predict(const InstanceView& view, const PolicyDecision& d) const;

 private:
  void enter(InstancePhase phase, TimePoint now);

  PolicyOptions options_;
  Options temporal_;
  std::shared_ptr<const CostModel> cost_model_;
  InstancePhase phase_ = InstancePhase::kDecode;
  TimePoint last_switch_{};
  int64_t num_switches_ = 0;
  bool slack_exhausted_ = false;  // the last decode phase began because prefill did not fit the slack
};

}  // namespace ecoserve::policy
