// Mitosis scaling (EcoServe, section 4.2.4): how a PaDG cluster grows and shrinks
// its macro instances, and when it should. Pure functions over plain data: no
// clock (times come in as arguments), no threads, no I/O, no state, so the live
// cluster and the simulator make the same decisions. Callable from any thread.
//
// A macro instance groups N_l (macro_min) .. N_u (macro_max) instances that
// stagger their prefill phases. Adding or removing an instance never restarts
// one: a ScalePlan only moves instance *handles* between macro instances
// (split, merge), and adds or removes the one instance being scaled.
//
// Layout invariant (what validate(layout, options) checks and every plan keeps):
//   macro ids are distinct, no instance appears twice, no macro is empty, and
//   every macro has macro_min..macro_max members, except that a layout with a
//   single macro may hold 1..macro_max members (a cluster smaller than N_l is
//   one macro instance holding all of them). An empty layout is valid.
// A layout's order is its age order: new macros are appended at the end, and
// a macro's member order is the order the members joined it.
//
// Rules of plan_add(layout, new_instance):
//   A1. Empty layout: {kAdd, new_instance, MacroId(0)} creates the first macro.
//   A2. Otherwise, when some macro has room (fewer than N_u members), the
//       instance joins the OLDEST macro with room (first in layout order):
//       {kAdd, new_instance, that macro}. (The paper's Figure 7: "further
//       instances go to the original until N_u, then to the new one".)
//   A3. Otherwise every macro is full and the oldest one, F, splits (mitosis):
//       F plus the new instance are N_u + 1 instances; F keeps its first
//       ceil((N_u + 1) / 2) members and a new macro N (id = max existing id + 1,
//       appended at the end) gets floor((N_u + 1) / 2): F's last
//       floor((N_u + 1) / 2) - 1 members (the most recent joiners, in order)
//       move to N, then the new instance joins N:
//         {kSplit, F, N, moved}, {kAdd, new_instance, N}.
//       With N_u = 4: 4 + 1 -> 3 + 2 (one handle moves). Both halves have at
//       least N_l members because 2 * N_l <= N_u + 1 (validate(options)).
//       The paper leaves open which members move and which instance the new
//       macro gets; moving the newest ones and placing the new instance directly
//       in N moves the fewest handles.
//
// Rules of plan_remove(layout) (which instance goes, and the merge it causes):
//   R1. Empty layout: FAILED_PRECONDITION.
//   R2. When some macro has more than N_l members, the victim macro V is the
//       SMALLEST of those (ties: the NEWEST, last in layout order), so macros are
//       drained to N_l smallest-first and full ones are touched last. V's last
//       member (the most recent joiner) is removed: {kRemove, instance, V}.
//   R3. Otherwise every macro has exactly N_l members (or there is one macro
//       of at most N_l). The victim macro V is the NEWEST (last) macro and its
//       last member is removed. If V would drop below N_l and another macro
//       exists, V merges into the SMALLEST other macro (ties: the OLDEST),
//       whose size becomes 2 * N_l - 1 <= N_u:
//         {kRemove, instance, V}, {kMerge, V, into}.
//       With N_l = 1, V becomes empty and simply disappears (no merge step).
//       A sole macro shrinks below N_l down to empty.
//   The paper's wording ("merge when two macro instances together fall to N_l")
//   is read as R3: a merge happens exactly when a macro would drop below N_l.
//   Ties go the opposite way to additions (adds fill the oldest macro with room,
//   removals drain the newest of equal candidates) and a macro's newest member
//   leaves first, so the oldest macros and members stay the most stable. A
//   merged-in member may be the next one removed (its move was cheap: a handle).
//
// Every plan is deterministic: the same layout and options give the same plan.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"

namespace ecoserve::policy {

// Identifies a macro instance (a strong id like InstanceId; not interchangeable with it).
using MacroId = StrongId<struct MacroIdTag, std::int32_t>;

struct MitosisOptions {
  int32_t macro_min = 2;  // N_l: fewest members of a macro instance (unless it is the only one)
  int32_t macro_max = 4;  // N_u: most members; one more splits the macro instance
};

// OK when 1 <= macro_min and 2 * macro_min <= macro_max + 1 (a split of N_u + 1
// instances leaves two halves of at least N_l); INVALID_ARGUMENT naming the field otherwise.
Status validate(const MitosisOptions& options);

// One macro instance: its id and its members in the order they joined.
struct MacroGroup {
  MacroId id;
  std::vector<InstanceId> members;
  int32_t size() const { return static_cast<int32_t>(members.size()); }
  friend bool operator==(const MacroGroup&, const MacroGroup&) = default;
};

// The cluster's macro instances, oldest first. Plain data.
struct MacroLayout {
  std::vector<MacroGroup> macros;

  // nullptr when absent.
  const MacroGroup* find(MacroId id) const;
  // The macro holding `instance`, or nullopt.
  std::optional<MacroId> macro_of(InstanceId instance) const;
  int32_t num_instances() const;
  friend bool operator==(const MacroLayout&, const MacroLayout&) = default;
};
// "m0{i0 i1} m1{i3 i4}" (oldest macro first); "{}" when empty.
std::ostream& operator<<(std::ostream& os, const MacroLayout& layout);

// OK when `layout` satisfies the layout invariant above for `options` (which must be
// valid); INVALID_ARGUMENT naming the offending macro or instance otherwise.
Status validate(const MacroLayout& layout, const MitosisOptions& options);

enum class ScaleStepKind : uint8_t {
  kAdd,     // `instance` joins macro `to` (created, appended at the end, when absent)
  kSplit,   // a new macro `to` (appended at the end) takes `moved` (in order) from macro `from`
  kMerge,   // macro `from`'s members (`moved`, in order) join the end of macro `to`; `from` is gone
  kRemove,  // `instance` leaves macro `from` (and the cluster); an emptied `from` is gone
};
std::string_view scale_step_kind_name(ScaleStepKind kind);

// One step of a ScalePlan. Unused fields stay default.
struct ScaleStep {
  ScaleStepKind kind = ScaleStepKind::kAdd;
  InstanceId instance;            // kAdd, kRemove
  MacroId from;                   // kSplit, kMerge, kRemove
  MacroId to;                     // kAdd, kSplit (the new macro), kMerge (the survivor)
  std::vector<InstanceId> moved;  // kSplit, kMerge: handles that change macro

  static ScaleStep add(InstanceId instance, MacroId to) { return {ScaleStepKind::kAdd, instance, {}, to, {}}; }
  static ScaleStep split(MacroId from, MacroId to, std::vector<InstanceId> moved) {
    return {ScaleStepKind::kSplit, {}, from, to, std::move(moved)};
  }
  static ScaleStep merge(MacroId from, MacroId to, std::vector<InstanceId> moved) {
    return {ScaleStepKind::kMerge, {}, from, to, std::move(moved)};
  }
  static ScaleStep remove(InstanceId instance, MacroId from) {
    return {ScaleStepKind::kRemove, instance, from, {}, {}};
  }

  friend bool operator==(const ScaleStep&, const ScaleStep&) = default;
};
// "add i3 -> m1", "split m0 -> m1 [i3]", "merge m2 -> m0 [i5]", "remove i8 <- m2".
std::string to_string(const ScaleStep& step);
std::ostream& operator<<(std::ostream& os, const ScaleStep& step);

// Steps applied in order by apply(). An added instance is started (and a removed one
// stopped) by the caller; the other steps only re-point handles.
struct ScalePlan {
  std::vector<ScaleStep> steps;

  // The instance a plan_remove() plan takes out (its kRemove step), or nullopt.
  std::optional<InstanceId> removed_instance() const;
  // How many existing instances change macro (split and merge moves).
  int32_t num_moved() const;
  friend bool operator==(const ScalePlan&, const ScalePlan&) = default;
};
std::ostream& operator<<(std::ostream& os, const ScalePlan& plan);

// The plan that adds `new_instance` (rules A1-A3). INVALID_ARGUMENT when the options
// or the layout are invalid or `new_instance` is already in the layout.
StatusOr<ScalePlan> plan_add(const MacroLayout& layout, InstanceId new_instance, const MitosisOptions& options);

// The plan that removes one instance (rules R1-R3); the instance is
// plan.removed_instance(). INVALID_ARGUMENT when the options or the layout are
// invalid, FAILED_PRECONDITION when the layout is empty.
StatusOr<ScalePlan> plan_remove(const MacroLayout& layout, const MitosisOptions& options);

// The plan that removes the named `instance` (an operator's choice, not rule R2's):
// it leaves its macro; when that macro would drop below N_l and another exists,
// its other members merge into the smallest other macro (ties: the oldest), and
// when the merge overfills that one beyond N_u, it splits as in A3 (it keeps the
// first ceil(S / 2) of its S members, a new macro takes the rest: both halves hold
// N_l..N_u because 2 N_l <= N_u + 1). NOT_FOUND when `instance` is in no macro;
// INVALID_ARGUMENT for invalid options or layout.
StatusOr<ScalePlan> plan_remove_instance(const MacroLayout& layout, InstanceId instance, const MitosisOptions& options);

// Applies `plan`'s steps in order. All or nothing: when a step does not fit the
// layout (a stale plan: unknown macro or instance, an instance added twice, a split
// creating an existing macro, a merge whose `moved` is not its source's members),
// returns FAILED_PRECONDITION naming the step and leaves `layout` unchanged.
// apply() checks the steps, not the size bounds: plans from plan_add/plan_remove
// keep the layout invariant.
Status apply(MacroLayout& layout, const ScalePlan& plan);

// ---------------------------------------------------------------------------
// When to scale: a threshold rule over one observation window.

enum class ScaleSignal : uint8_t { kHold, kScaleUp, kScaleDown };
std::string_view scale_signal_name(ScaleSignal signal);

// What the cluster observed over the last window, and the times the decision needs.
struct ScalingWindow {
  // Share of the requests finished in the window that met both their TTFT and TPOT
  // SLOs, 0..1; nullopt when none finished (no evidence of SLO misses).
  std::optional<double> slo_attainment;
  // Mean utilisation of the instances over the window, 0..1 (KV usage or busy share).
  double mean_utilization = 0.0;
  TimePoint now{};
  // When the last kScaleUp / kScaleDown was issued; nullopt when never.
  std::optional<TimePoint> last_decision;
};

struct AutoscaleOptions {
  double target_attainment = 0.9;  // scale up below this SLO attainment
  double high_utilization = 0.8;   // scale up above this utilisation
  double low_utilization = 0.3;    // scale down below this (when the SLOs are met)
  Duration cooldown = std::chrono::seconds(60);  // no decision sooner after the last one
};

// OK when 0 < target_attainment <= 1, 0 <= low_utilization < high_utilization <= 1
// and cooldown >= 0; INVALID_ARGUMENT naming the field otherwise.
Status validate(const AutoscaleOptions& options);

// The decision for `window` (options must be valid):
//   1. kHold while in cooldown: last_decision set and now - last_decision < cooldown
//      (a decision exactly `cooldown` later is allowed).
//   2. kScaleUp when slo_attainment < target_attainment or mean_utilization >
//      high_utilization (an SLO miss wins over low utilisation).
//   3. kScaleDown when the SLOs are met (slo_attainment >= target_attainment, or
//      nullopt) and mean_utilization < low_utilization.
//   4. kHold otherwise. NaN inputs never cause a scale by themselves.
// The caller records `now` as last_decision when the result is not kHold.
ScaleSignal decide_scaling(const ScalingWindow& window, const AutoscaleOptions& options);

}  // namespace ecoserve::policy
