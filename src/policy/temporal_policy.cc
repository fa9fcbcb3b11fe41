#include "policy/temporal_policy.h"

#include <algorithm>
#include <unordered_map>

#include "policy/batch_builder.h"

namespace ecoserve::policy {
namespace {

bool has_prefill_work(const InstanceView& view) {
  if (!view.waiting.empty()) return true;
  for (const RequestView& r : view.running) {
    if (!r.is_decode()) return true;
  }
  for (const RequestView& r : view.swapped) {
    if (!r.is_decode()) return true;
  }
  return false;
}

// Prefill chunks only: partial prefills, then swapped prefills, then waiting requests.
PolicyDecision plan_prefill(const InstanceView& view, const PolicyOptions& options) {
  return plan_decode_first(view, options, /*run_decodes=*/false, /*admit_fresh_prompts=*/true);
}

// One token for every decode (running, then resumed swapped decodes); no prefill.
PolicyDecision plan_decodes(const InstanceView& view, const PolicyOptions& options) {
  BatchBuilder b(view, options);
  b.schedule_running_decodes();
  if (!b.any_preempted()) {
    for (const RequestView& r : view.swapped) {
      if (!r.is_decode() || b.token_budget() == 0 || !b.admit(r, 1)) break;
    }
  }
  return b.finish();
}

// A waiting prompt whose TTFT deadline (arrival + SLO_TTFT) comes before now + horizon.
bool ttft_due(const InstanceView& view, TimePoint now, Duration horizon) {
  for (const RequestView& r : view.waiting) {
    if (r.slo_ttft > Duration::zero() && r.arrival + r.slo_ttft <= now + horizon) return true;
  }
  return false;
}

}  // namespace

std::optional<Duration> TemporalPolicy::mean_saved_tpot(const InstanceView& view, TimePoint now) {
  Duration total{};
  int64_t n = 0;
  for (const RequestView& r : view.running) {
    if (!r.is_decode() || !r.has_first_token() || r.slo_tpot <= Duration::zero()) continue;
    total += r.saved_tpot(now);
    ++n;
  }
  if (n == 0) return std::nullopt;
  return total / n;
}

Duration TemporalPolicy::predict(const InstanceView& view, const PolicyDecision& d) const {
  if (!cost_model_ || d.runs.empty()) return Duration::zero();
  std::unordered_map<RequestId, const RequestView*> by_id;
  for (const auto* list : {&view.running, &view.swapped, &view.waiting}) {
    for (const RequestView& r : *list) by_id[r.id] = &r;
  }
  StepShape shape;
  for (const RunDecision& run : d.runs) {
    auto it = by_id.find(run.id);
    if (it == by_id.end()) continue;
    const RequestView& r = *it->second;
    if (r.is_decode() && run.num_tokens == 1) {
      shape.decode_seqs += 1;
      shape.decode_context_tokens += r.num_tokens();
    } else {
      shape.prefill_seqs += 1;
      shape.prefill_tokens += run.num_tokens;
      shape.prefill_context_tokens += r.start();
    }
  }
  return from_seconds(cost_model_->step_seconds(shape));
}

void TemporalPolicy::enter(InstancePhase phase, TimePoint now) {
  if (phase == phase_) return;
  phase_ = phase;
  last_switch_ = now;
  ++num_switches_;
}

PolicyDecision TemporalPolicy::plan(const InstanceView& view, TimePoint now) {
  if (has_prefill_work(view)) {
    PolicyDecision prefill = plan_prefill(view, options_);
    if (!prefill.runs.empty()) {
      const std::optional<Duration> slack = mean_saved_tpot(view, now);
      Duration need = predict(view, prefill);
      if (phase_ == InstancePhase::kDecode && slack_exhausted_) need += temporal_.resume_slack;
      // The slack runs out within this step: a smaller prefill step (half the
      // tokens, down to kMinPrefillTokens) may still fit it.
      const Duration full_need = need;
      PolicyDecision step = prefill;
      PolicyOptions smaller = options_;
      const Duration extra = need - predict(view, prefill);  // resume_slack, if any
      while (temporal_.shrink_to_slack && slack && *slack < need &&
             smaller.max_num_batched_tokens / 2 >= kMinPrefillTokens) {
        smaller.max_num_batched_tokens /= 2;
        smaller.chunk_size = options_.chunk_size > 0 ? std::min(options_.chunk_size, smaller.max_num_batched_tokens)
                                                     : smaller.max_num_batched_tokens;
        PolicyDecision fewer = plan_prefill(view, smaller);
        if (fewer.runs.empty()) break;
        need = predict(view, fewer) + extra;
        step = std::move(fewer);
      }
      if (!slack || *slack >= need) {
        slack_exhausted_ = false;
        enter(InstancePhase::kPrefill, now);
        return step;
      }
      PolicyDecision decode = plan_decodes(view, options_);
      // A prompt that would miss its TTFT SLO by waiting out one more decode step
      // prefills now: prompts cannot starve behind decodes whose slack never comes
      // back (an SLO_TPOT below the decode step time).
      if (ttft_due(view, now, full_need + predict(view, decode))) {
        slack_exhausted_ = false;
        enter(InstancePhase::kPrefill, now);
        return prefill;
      }
      if (!decode.runs.empty()) {
        slack_exhausted_ = true;
        enter(InstancePhase::kDecode, now);
        return decode;
      }
      enter(InstancePhase::kPrefill, now);  // nothing to decode: the slack protects no one
      return prefill;
    }
  }
  PolicyDecision decode = plan_decodes(view, options_);
  if (!decode.runs.empty() || !decode.preempt.empty()) {
    slack_exhausted_ = false;
    enter(InstancePhase::kDecode, now);
  }
  return decode;
}

}  // namespace ecoserve::policy
