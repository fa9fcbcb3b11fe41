#include "policy/mitosis_scaler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace ecoserve::policy {

Status validate(const MitosisOptions& options) {
  if (options.macro_min < 1) {
    return invalid_argument_error("mitosis: macro_min (N_l) must be >= 1, got {}", options.macro_min);
  }
  if (2 * int64_t{options.macro_min} > int64_t{options.macro_max} + 1) {
    return invalid_argument_error(
        "mitosis: macro_max (N_u) must be >= 2 * macro_min - 1 = {} so a split of N_u + 1 leaves two halves of "
        "at least macro_min, got macro_max {} with macro_min {}",
        2 * options.macro_min - 1, options.macro_max, options.macro_min);
  }
  return ok_status();
}

const MacroGroup* MacroLayout::find(MacroId id) const {
  for (const MacroGroup& g : macros) {
    if (g.id == id) return &g;
  }
  return nullptr;
}

std::optional<MacroId> MacroLayout::macro_of(InstanceId instance) const {
  for (const MacroGroup& g : macros) {
    if (std::find(g.members.begin(), g.members.end(), instance) != g.members.end()) return g.id;
  }
  return std::nullopt;
}

int32_t MacroLayout::num_instances() const {
  int32_t n = 0;
  for (const MacroGroup& g : macros) n += g.size();
  return n;
}

Status validate(const MacroLayout& layout, const MitosisOptions& options) {
  std::unordered_set<MacroId> ids;
  std::unordered_set<InstanceId> instances;
  const bool sole = layout.macros.size() == 1;
  for (const MacroGroup& g : layout.macros) {
    if (!ids.insert(g.id).second) return invalid_argument_error("mitosis layout: macro {} appears twice", g.id.value);
    for (InstanceId i : g.members) {
      if (!instances.insert(i).second) {
        return invalid_argument_error("mitosis layout: instance {} appears twice (macro {})", i.value, g.id.value);
      }
    }
    const int32_t lo = sole ? 1 : options.macro_min;
    if (g.size() < lo || g.size() > options.macro_max) {
      return invalid_argument_error("mitosis layout: macro {} has {} members, outside [{}, {}]{}", g.id.value,
                                    g.size(), lo, options.macro_max, sole ? " (sole macro)" : "");
    }
  }
  return ok_status();
}

std::string_view scale_step_kind_name(ScaleStepKind kind) {
  switch (kind) {
    case ScaleStepKind::kAdd: return "add";
    case ScaleStepKind::kSplit: return "split";
    case ScaleStepKind::kMerge: return "merge";
    case ScaleStepKind::kRemove: return "remove";
  }
  return "?";
}

namespace {

std::string instance_list(const std::vector<InstanceId>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += fmt::format("{}i{}", k ? " " : "", v[k].value);
  return s + "]";
}

}  // namespace

std::string to_string(const ScaleStep& step) {
  switch (step.kind) {
    case ScaleStepKind::kAdd: return fmt::format("add i{} -> m{}", step.instance.value, step.to.value);
    case ScaleStepKind::kSplit:
      return fmt::format("split m{} -> m{} {}", step.from.value, step.to.value, instance_list(step.moved));
    case ScaleStepKind::kMerge:
      return fmt::format("merge m{} -> m{} {}", step.from.value, step.to.value, instance_list(step.moved));
    case ScaleStepKind::kRemove: return fmt::format("remove i{} <- m{}", step.instance.value, step.from.value);
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, const MacroLayout& layout) {
  if (layout.macros.empty()) return os << "{}";
  for (size_t k = 0; k < layout.macros.size(); ++k) {
    const MacroGroup& g = layout.macros[k];
    os << (k ? " " : "") << "m" << g.id.value << "{";
    for (size_t j = 0; j < g.members.size(); ++j) os << (j ? " " : "") << "i" << g.members[j].value;
    os << "}";
  }
  return os;
}

std::ostream& operator<<(std::ostream& os, const ScaleStep& step) { return os << to_string(step); }

std::ostream& operator<<(std::ostream& os, const ScalePlan& plan) {
  os << "{";
  for (size_t k = 0; k < plan.steps.size(); ++k) os << (k ? "; " : "") << plan.steps[k];
  return os << "}";
}

std::optional<InstanceId> ScalePlan::removed_instance() const {
  for (const ScaleStep& s : steps) {
    if (s.kind == ScaleStepKind::kRemove) return s.instance;
  }
  return std::nullopt;
}

int32_t ScalePlan::num_moved() const {
  int32_t n = 0;
  for (const ScaleStep& s : steps) {
    if (s.kind == ScaleStepKind::kSplit || s.kind == ScaleStepKind::kMerge) n += static_cast<int32_t>(s.moved.size());
  }
  return n;
}

namespace {

MacroId next_macro_id(const MacroLayout& layout) {
  int32_t next = 0;
  for (const MacroGroup& g : layout.macros) next = std::max(next, g.id.value + 1);
  return MacroId(next);
}

Status check_inputs(const MacroLayout& layout, const MitosisOptions& options) {
  ECO_RETURN_IF_ERROR(validate(options));
  return validate(layout, options);
}

}  // namespace

StatusOr<ScalePlan> plan_add(const MacroLayout& layout, InstanceId new_instance, const MitosisOptions& options) {
  ECO_RETURN_IF_ERROR(check_inputs(layout, options));
  if (auto m = layout.macro_of(new_instance)) {
    return invalid_argument_error("mitosis: instance {} to add is already in macro {}", new_instance.value, m->value);
  }
  ScalePlan plan;
  // A1: the first instance founds macro 0.
  if (layout.macros.empty()) {
    plan.steps.push_back(ScaleStep::add(new_instance, MacroId(0)));
    return plan;
  }
  // A2: the oldest macro with room.
  for (const MacroGroup& g : layout.macros) {
    if (g.size() < options.macro_max) {
      plan.steps.push_back(ScaleStep::add(new_instance, g.id));
      return plan;
    }
  }
  // A3: every macro is full (validate() bounds sizes by macro_max): the oldest splits.
  const MacroGroup& full = layout.macros.front();
  const int32_t total = full.size() + 1;
  const int32_t new_size = total / 2;  // floor; the original keeps the ceiling
  const int32_t num_moved = new_size - 1;
  std::vector<InstanceId> moved(full.members.end() - num_moved, full.members.end());
  const MacroId fresh = next_macro_id(layout);
  plan.steps.push_back(ScaleStep::split(full.id, fresh, std::move(moved)));
  plan.steps.push_back(ScaleStep::add(new_instance, fresh));
  return plan;
}

StatusOr<ScalePlan> plan_remove(const MacroLayout& layout, const MitosisOptions& options) {
  ECO_RETURN_IF_ERROR(check_inputs(layout, options));
  if (layout.macros.empty()) return failed_precondition_error("mitosis: no instance to remove (empty layout)");
  ScalePlan plan;
  // R2: the smallest macro above N_l; ties go to the newest (later position wins on <=).
  const MacroGroup* victim = nullptr;
  for (const MacroGroup& g : layout.macros) {
    if (g.size() > options.macro_min && (!victim || g.size() <= victim->size())) victim = &g;
  }
  if (victim) {
    plan.steps.push_back(ScaleStep::remove(victim->members.back(), victim->id));
    return plan;
  }
  // R3: every macro is at N_l (or the sole macro is at most N_l): the newest loses its
  // newest member and, when it would drop below N_l, merges into the smallest other
  // macro (ties: the oldest).
  const MacroGroup& last = layout.macros.back();
  plan.steps.push_back(ScaleStep::remove(last.members.back(), last.id));
  const int32_t left = last.size() - 1;
  if (left == 0 || left >= options.macro_min || layout.macros.size() == 1) return plan;
  const MacroGroup* into = nullptr;
  for (size_t k = 0; k + 1 < layout.macros.size(); ++k) {
    const MacroGroup& g = layout.macros[k];
    if (!into || g.size() < into->size()) into = &g;
  }
  std::vector<InstanceId> moved(last.members.begin(), last.members.end() - 1);
  plan.steps.push_back(ScaleStep::merge(last.id, into->id, std::move(moved)));
  return plan;
}

StatusOr<ScalePlan> plan_remove_instance(const MacroLayout& layout, InstanceId instance, const MitosisOptions& options) {
  ECO_RETURN_IF_ERROR(check_inputs(layout, options));
  const std::optional<MacroId> from = layout.macro_of(instance);
  if (!from) return not_found_error("mitosis: instance {} is in no macro instance", instance.value);
  const MacroGroup& victim = *layout.find(*from);
  ScalePlan plan;
  plan.steps.push_back(ScaleStep::remove(instance, victim.id));
  const int32_t left = victim.size() - 1;
  if (left == 0 || left >= options.macro_min || layout.macros.size() == 1) return plan;
  // Below N_l: merge into the smallest other macro (ties: the oldest)...
  const MacroGroup* into = nullptr;
  for (const MacroGroup& g : layout.macros) {
    if (g.id != victim.id && (!into || g.size() < into->size())) into = &g;
  }
  std::vector<InstanceId> moved;
  for (InstanceId m : victim.members) {
    if (m != instance) moved.push_back(m);
  }
  plan.steps.push_back(ScaleStep::merge(victim.id, into->id, moved));
  // ...and when that overfills it, split it as an addition would: it keeps the
  // first ceil(S / 2) members, a new macro takes the rest.
  const int32_t merged = into->size() + left;
  if (merged <= options.macro_max) return plan;
  std::vector<InstanceId> all = into->members;
  all.insert(all.end(), moved.begin(), moved.end());
  const size_t keep = static_cast<size_t>((merged + 1) / 2);
  int32_t next_id = 0;
  for (const MacroGroup& g : layout.macros) next_id = std::max(next_id, g.id.value + 1);
  plan.steps.push_back(ScaleStep::split(into->id, MacroId(next_id), std::vector<InstanceId>(all.begin() + keep, all.end())));
  return plan;
}

Status apply(MacroLayout& layout, const ScalePlan& plan) {
  MacroLayout next = layout;
  auto find = [&next](MacroId id) -> MacroGroup* {
    for (MacroGroup& g : next.macros) {
      if (g.id == id) return &g;
    }
    return nullptr;
  };
  auto erase_macro = [&next](MacroId id) {
    std::erase_if(next.macros, [id](const MacroGroup& g) { return g.id == id; });
  };
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    const ScaleStep& s = plan.steps[k];
    auto fail = [&](std::string_view why) {
      return failed_precondition_error("mitosis apply: step {} ({}): {}", k, to_string(s), why);
    };
    switch (s.kind) {
      case ScaleStepKind::kAdd: {
        if (next.macro_of(s.instance)) return fail("instance already in the layout");
        if (MacroGroup* g = find(s.to)) {
          g->members.push_back(s.instance);
        } else {
          next.macros.push_back(MacroGroup{s.to, {s.instance}});
        }
        break;
      }
      case ScaleStepKind::kSplit: {
        MacroGroup* from = find(s.from);
        if (!from) return fail("no such source macro");
        if (find(s.to)) return fail("new macro already exists");
        for (size_t a = 0; a < s.moved.size(); ++a) {
          if (std::find(from->members.begin(), from->members.end(), s.moved[a]) == from->members.end()) {
            return fail("moved instance not in the source macro");
          }
          if (std::find(s.moved.begin(), s.moved.begin() + a, s.moved[a]) != s.moved.begin() + a) {
            return fail("moved instance listed twice");
          }
        }
        std::erase_if(from->members, [&s](InstanceId i) {
          return std::find(s.moved.begin(), s.moved.end(), i) != s.moved.end();
        });
        next.macros.push_back(MacroGroup{s.to, s.moved});  // invalidates `from`
        break;
      }
      case ScaleStepKind::kMerge: {
        MacroGroup* from = find(s.from);
        MacroGroup* to = find(s.to);
        if (!from || !to) return fail("no such macro");
        if (s.from == s.to) return fail("merge of a macro into itself");
        if (from->members != s.moved) return fail("moved instances are not the source macro's members");
        to->members.insert(to->members.end(), from->members.begin(), from->members.end());
        erase_macro(s.from);
        break;
      }
      case ScaleStepKind::kRemove: {
        MacroGroup* from = find(s.from);
        if (!from) return fail("no such macro");
        auto it = std::find(from->members.begin(), from->members.end(), s.instance);
        if (it == from->members.end()) return fail("instance not in the macro");
        from->members.erase(it);
        if (from->members.empty()) erase_macro(s.from);
        break;
      }
    }
  }
  layout = std::move(next);
  return ok_status();
}

std::string_view scale_signal_name(ScaleSignal signal) {
  switch (signal) {
    case ScaleSignal::kHold: return "hold";
    case ScaleSignal::kScaleUp: return "scale-up";
    case ScaleSignal::kScaleDown: return "scale-down";
  }
  return "?";
}

Status validate(const AutoscaleOptions& options) {
  // Written as negated ranges so NaN fails too.
  if (!(options.target_attainment > 0.0 && options.target_attainment <= 1.0)) {
    return invalid_argument_error("autoscale: target_attainment must be in (0, 1], got {}", options.target_attainment);
  }
  if (!(options.high_utilization > 0.0 && options.high_utilization <= 1.0)) {
    return invalid_argument_error("autoscale: high_utilization must be in (0, 1], got {}", options.high_utilization);
  }
  if (!(options.low_utilization >= 0.0 && options.low_utilization < options.high_utilization)) {
    return invalid_argument_error("autoscale: low_utilization must be in [0, high_utilization = {}), got {}",
                                  options.high_utilization, options.low_utilization);
  }
  if (options.cooldown < Duration::zero()) {
    return invalid_argument_error("autoscale: cooldown must be >= 0, got {} ns", options.cooldown.count());
  }
  return ok_status();
}

ScaleSignal decide_scaling(const ScalingWindow& window, const AutoscaleOptions& options) {
  if (window.last_decision && window.now - *window.last_decision < options.cooldown) return ScaleSignal::kHold;
  const bool slo_missed = window.slo_attainment && *window.slo_attainment < options.target_attainment;
  const bool slo_met = !window.slo_attainment || *window.slo_attainment >= options.target_attainment;
  if (slo_missed || window.mean_utilization > options.high_utilization) return ScaleSignal::kScaleUp;
  if (slo_met && window.mean_utilization < options.low_utilization) return ScaleSignal::kScaleDown;
  return ScaleSignal::kHold;
}

}  // namespace ecoserve::policy
