#include "policy/padg_router.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <unordered_map>

namespace ecoserve::policy {
namespace {

bool candidate(const InstanceLoad& l) { return l.healthy && l.role == InstanceRole::kMixed; }

int64_t blocks_for(int64_t tokens, int32_t block_size) {
  const int64_t bs = std::max(block_size, 1);
  return (tokens + bs - 1) / bs;
}

// The KV constraint: the prompt's blocks (plus the first output token's) fit the
// free blocks less those the queued prompts will take; and a sequence slot is free.
bool kv_fits(const InstanceLoad& l, const RouteRequest& req) {
  const int64_t need = blocks_for(int64_t{req.prompt_len} + 1, l.block_size);
  const int64_t reserved = blocks_for(l.num_waiting_tokens, l.block_size);
  if (need > int64_t{l.num_free_blocks} - reserved) return false;
  return l.max_num_seqs <= 0 || l.num_requests() < l.max_num_seqs;
}

}  // namespace

const char* padg_check_name(PadgCheck c) {
  switch (c) {
    case PadgCheck::kNone: return "ok";
    case PadgCheck::kTtft: return "ttft";
    case PadgCheck::kTpot: return "tpot";
    case PadgCheck::kKv: return "kv";
    case PadgCheck::kDecodeStep: return "decode_step";
    case PadgCheck::kUnavailable: return "unavailable";
  }
  return "unknown";
}

PadgRouter::PadgRouter(const PadgRouterOptions& options, std::shared_ptr<const CostModel> cost_model)
    : options_(options), cost_model_(std::move(cost_model)) {}

void PadgRouter::set_layout(std::vector<std::vector<InstanceId>> layout) {
  std::vector<size_t> last(layout.size(), 0);
  for (size_t m = 0; m < layout.size() && m < layout_.size(); ++m) {
    if (last_[m] < layout_[m].size() && last_[m] < layout[m].size() && layout_[m][last_[m]] == layout[m][last_[m]]) {
      last[m] = last_[m];
    }
  }
  layout_ = std::move(layout);
  last_ = std::move(last);
}

void PadgRouter::remove_instance(InstanceId id) {
  std::vector<std::vector<InstanceId>> next = layout_;
  for (auto& members : next) members.erase(std::remove(members.begin(), members.end(), id), members.end());
  next.erase(std::remove_if(next.begin(), next.end(), [](const auto& m) { return m.empty(); }), next.end());
  set_layout(std::move(next));
  calibration_.erase(id.value);
}

void PadgRouter::observe_ttft(InstanceId id, double predicted, double observed) {
  if (!(predicted > 0.0) || !(observed >= 0.0) || !std::isfinite(observed)) return;
  Calibration& c = calibration_[id.value];
  const double w = std::clamp(options_.calibration_weight, 0.0, 1.0);
  c.observed = (1.0 - w) * c.observed + w * observed;
  c.predicted = (1.0 - w) * c.predicted + w * predicted;
}

double PadgRouter::calibration(InstanceId id) const {
  if (!options_.calibrate) return 1.0;
  auto it = calibration_.find(id.value);
  if (it == calibration_.end() || !(it->second.predicted > 0.0)) return 1.0;
  return std::clamp(it->second.observed / it->second.predicted, options_.min_calibration, options_.max_calibration);
}

double PadgRouter::predict_prefill_seconds(const RouteRequest& req) const {
  if (!cost_model_) return 0.0;
  return cost_model_->prefill_seconds(req.prompt_len, 0, options_.chunk_size);
}

PadgCheck PadgRouter::check_constraints(const InstanceLoad& l, const RouteRequest& req, double prefill_seconds,
                                        bool decode_step) const {
  if (!candidate(l)) return PadgCheck::kUnavailable;
  const Duration slo_ttft = req.slo_ttft > Duration::zero() ? req.slo_ttft : options_.default_slo_ttft;
  const double total = calibration(l.id) * (l.pending_prefill_seconds + prefill_seconds);
  if (total > to_seconds(slo_ttft)) return PadgCheck::kTtft;
  if (l.num_slo_decoding > 0 && l.mean_saved_tpot_seconds < total) return PadgCheck::kTpot;
  if (!kv_fits(l, req)) return PadgCheck::kKv;
  if (decode_step && options_.check_decode_step && cost_model_) {
    const Duration slo_tpot = req.slo_tpot > Duration::zero() ? req.slo_tpot : options_.default_slo_tpot;
    StepShape batch;
    batch.decode_seqs = l.num_running + 1;
    batch.decode_context_tokens = l.num_running_tokens + req.prompt_len;
    if (cost_model_->step_seconds(batch) > to_seconds(slo_tpot)) return PadgCheck::kDecodeStep;
  }
  return PadgCheck::kNone;
}

void PadgRouter::index_view(const ClusterView& view) {
  // Router ids are small dense indices: a flat table (no hashing on the routing path).
  int64_t max_id = 0;
  bool negative = false;
  for (const InstanceLoad& l : view.instances) {
    max_id = std::max<int64_t>(max_id, l.id.value);
    negative |= l.id.value < 0;
  }
  sparse_ = negative || max_id >= static_cast<int64_t>(16 * view.instances.size() + 4096);
  if (sparse_) {
    sparse_position_.clear();
    for (size_t i = 0; i < view.instances.size(); ++i) sparse_position_[view.instances[i].id.value] = i;
    return;
  }
  position_.assign(static_cast<size_t>(max_id) + 1, -1);
  for (size_t i = 0; i < view.instances.size(); ++i) {
    position_[static_cast<size_t>(view.instances[i].id.value)] = static_cast<int64_t>(i);
  }
}

const InstanceLoad* PadgRouter::find(const ClusterView& view, InstanceId id) const {
  if (sparse_) {
    auto it = sparse_position_.find(id.value);
    return it == sparse_position_.end() ? nullptr : &view.instances[it->second];
  }
  if (id.value < 0 || static_cast<size_t>(id.value) >= position_.size()) return nullptr;
  const int64_t at = position_[static_cast<size_t>(id.value)];
  return at < 0 ? nullptr : &view.instances[static_cast<size_t>(at)];
}

PadgDecision PadgRouter::decide(const ClusterView& view, const RouteRequest& req) {
  PadgDecision d;
  d.predicted_prefill_seconds = predict_prefill_seconds(req);
  index_view(view);
  if (layout_.empty()) {
    std::vector<InstanceId> all;
    for (const InstanceLoad& l : view.instances) all.push_back(l.id);
    set_layout({all});
  }
  // The overall scheduler: the macro instance with the least mean load per healthy member.
  int32_t best_macro = -1;
  double best_load = std::numeric_limits<double>::infinity();
  for (size_t m = 0; m < layout_.size(); ++m) {
    int64_t load = 0;
    int32_t healthy = 0;
    for (InstanceId id : layout_[m]) {
      const InstanceLoad* l = find(view, id);
      if (!l || !candidate(*l)) continue;
      load += l->load_tokens();
      ++healthy;
    }
    if (healthy == 0) continue;
    const double mean = static_cast<double>(load) / healthy;
    if (mean < best_load) {
      best_load = mean;
      best_macro = static_cast<int32_t>(m);
    }
  }
  if (best_macro < 0) {
    d.reason = "no healthy instance";
    return d;
  }
  d.macro_index = best_macro;
  const std::vector<InstanceId>& members = layout_[static_cast<size_t>(best_macro)];
  size_t& last = last_[static_cast<size_t>(best_macro)];
  // Algorithm 1: "last" while Algorithm 2 holds there, else the next in the ring;
  // first with the decode-step check, then (no member passing it) with the paper's
  // three checks alone.
  for (int pass = options_.check_decode_step ? 0 : 1; pass < 2; ++pass) {
    for (size_t k = 0; k < members.size(); ++k) {
      const size_t at = (last + k) % members.size();
      const InstanceLoad* found = find(view, members[at]);
      if (!found) continue;
      const InstanceLoad& l = *found;
      if (check_constraints(l, req, d.predicted_prefill_seconds, /*decode_step=*/pass == 0) == PadgCheck::kNone) {
        last = at;
        d.instance = l.id;
        d.constraints_met = true;
        d.uncalibrated_ttft_seconds = l.pending_prefill_seconds + d.predicted_prefill_seconds;
        d.predicted_ttft_seconds = calibration(l.id) * d.uncalibrated_ttft_seconds;
        return d;
      }
    }
  }
  // No member passes: the least predicted TTFT, preferring members with KV room.
  const InstanceLoad* best = nullptr;
  bool best_fits = false;
  for (InstanceId id : members) {
    const InstanceLoad* found = find(view, id);
    if (!found || !candidate(*found)) continue;
    const InstanceLoad& l = *found;
    const bool fits = kv_fits(l, req);
    const double ttft = calibration(l.id) * (l.pending_prefill_seconds + d.predicted_prefill_seconds);
    if (!best || (fits && !best_fits) || (fits == best_fits && ttft < d.predicted_ttft_seconds)) {
      best = &l;
      best_fits = fits;
      d.predicted_ttft_seconds = ttft;
    }
  }
  if (!best) {
    d.reason = "no healthy instance";
    return d;
  }
  d.uncalibrated_ttft_seconds = best->pending_prefill_seconds + d.predicted_prefill_seconds;
  const Duration slo_ttft = req.slo_ttft > Duration::zero() ? req.slo_ttft : options_.default_slo_ttft;
  if (options_.reject_unmeetable && d.predicted_ttft_seconds > to_seconds(slo_ttft)) {
    d.reason = fmt::format("predicted time to first token {:.0f} ms exceeds the TTFT SLO of {:.0f} ms on every instance",
                           d.predicted_ttft_seconds * 1000.0, to_ms(slo_ttft));
    return d;
  }
  d.instance = best->id;
  return d;
}

std::optional<InstanceId> PadgRouter::route(const ClusterView& view, const RouteRequest& req) {
  return decide(view, req).instance;
}

}  // namespace ecoserve::policy
