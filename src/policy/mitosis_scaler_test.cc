#include "policy/mitosis_scaler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace ecoserve::policy {
namespace {

using Macro = std::pair<int32_t, std::vector<int32_t>>;  // {macro id, member ids}

MacroLayout layout(std::initializer_list<Macro> macros) {
  MacroLayout l;
  for (const auto& [id, members] : macros) {
    MacroGroup g{MacroId(id), {}};
    for (int32_t m : members) g.members.push_back(InstanceId(m));
    l.macros.push_back(std::move(g));
  }
  return l;
}

std::vector<InstanceId> iids(std::initializer_list<int32_t> v) {
  std::vector<InstanceId> out;
  for (int32_t x : v) out.push_back(InstanceId(x));
  return out;
}

ScaleStep add(int32_t i, int32_t to) { return ScaleStep::add(InstanceId(i), MacroId(to)); }
ScaleStep split(int32_t from, int32_t to, std::initializer_list<int32_t> moved) {
  return ScaleStep::split(MacroId(from), MacroId(to), iids(moved));
}
ScaleStep merge(int32_t from, int32_t to, std::initializer_list<int32_t> moved) {
  return ScaleStep::merge(MacroId(from), MacroId(to), iids(moved));
}
ScaleStep remove(int32_t i, int32_t from) { return ScaleStep::remove(InstanceId(i), MacroId(from)); }
ScalePlan plan(std::vector<ScaleStep> steps) { return ScalePlan{std::move(steps)}; }

std::string dump(const MacroLayout& l) { return ::testing::PrintToString(l); }

MitosisOptions opts(int32_t macro_min, int32_t macro_max) { return MitosisOptions{macro_min, macro_max}; }

// Plans the addition of `instance`, checks the plan, applies it and checks the layout.
void expect_add(MacroLayout& l, int32_t instance, const MitosisOptions& o, const ScalePlan& want_plan,
                const MacroLayout& want_layout) {
  SCOPED_TRACE("add " + std::to_string(instance) + " to " + dump(l));
  auto p = plan_add(l, InstanceId(instance), o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(*p, want_plan);
  ASSERT_TRUE(apply(l, *p).ok());
  EXPECT_EQ(l, want_layout);
  EXPECT_TRUE(validate(l, o).ok()) << validate(l, o).to_string();
}

void expect_remove(MacroLayout& l, const MitosisOptions& o, const ScalePlan& want_plan,
                   const MacroLayout& want_layout) {
  SCOPED_TRACE("remove from " + dump(l));
  auto p = plan_remove(l, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(*p, want_plan);
  ASSERT_TRUE(apply(l, *p).ok());
  EXPECT_EQ(l, want_layout);
  EXPECT_TRUE(validate(l, o).ok()) << validate(l, o).to_string();
}

// The paper's Figure 7 with N_l = 2, N_u = 4, grown from one macro of 2 to 10 instances.
MacroLayout grow_figure7() {
  const MitosisOptions o = opts(2, 4);
  MacroLayout l = layout({{0, {0, 1}}});
  expect_add(l, 2, o, plan({add(2, 0)}), layout({{0, {0, 1, 2}}}));
  expect_add(l, 3, o, plan({add(3, 0)}), layout({{0, {0, 1, 2, 3}}}));
  // Full: the 5th instance splits m0 into 3 + 2; the newest member moves, the new one joins m1.
  expect_add(l, 4, o, plan({split(0, 1, {3}), add(4, 1)}), layout({{0, {0, 1, 2}}, {1, {3, 4}}}));
  // The original fills first, then the new one.
  expect_add(l, 5, o, plan({add(5, 0)}), layout({{0, {0, 1, 2, 5}}, {1, {3, 4}}}));
  expect_add(l, 6, o, plan({add(6, 1)}), layout({{0, {0, 1, 2, 5}}, {1, {3, 4, 6}}}));
  expect_add(l, 7, o, plan({add(7, 1)}), layout({{0, {0, 1, 2, 5}}, {1, {3, 4, 6, 7}}}));
  // All full: the oldest (m0) splits again; the new macro is max id + 1 = 2.
  expect_add(l, 8, o, plan({split(0, 2, {5}), add(8, 2)}),
             layout({{0, {0, 1, 2}}, {1, {3, 4, 6, 7}}, {2, {5, 8}}}));
  expect_add(l, 9, o, plan({add(9, 0)}), layout({{0, {0, 1, 2, 9}}, {1, {3, 4, 6, 7}}, {2, {5, 8}}}));
  return l;
}

TEST(MitosisScalerTest, Figure7AddSequence) {
  const MacroLayout l = grow_figure7();
  EXPECT_EQ(l.num_instances(), 10);
}

TEST(MitosisScalerTest, Figure7RemoveSequence) {
  const MitosisOptions o = opts(2, 4);
  MacroLayout l = grow_figure7();
  ASSERT_FALSE(HasFailure());
  // Macros above N_l drain smallest first (ties: the newest), newest member first.
  expect_remove(l, o, plan({remove(7, 1)}), layout({{0, {0, 1, 2, 9}}, {1, {3, 4, 6}}, {2, {5, 8}}}));
  expect_remove(l, o, plan({remove(6, 1)}), layout({{0, {0, 1, 2, 9}}, {1, {3, 4}}, {2, {5, 8}}}));
  expect_remove(l, o, plan({remove(9, 0)}), layout({{0, {0, 1, 2}}, {1, {3, 4}}, {2, {5, 8}}}));
  expect_remove(l, o, plan({remove(2, 0)}), layout({{0, {0, 1}}, {1, {3, 4}}, {2, {5, 8}}}));
  // All at N_l: the newest macro loses a member and merges into the smallest other (ties: oldest).
  expect_remove(l, o, plan({remove(8, 2), merge(2, 0, {5})}), layout({{0, {0, 1, 5}}, {1, {3, 4}}}));
  expect_remove(l, o, plan({remove(5, 0)}), layout({{0, {0, 1}}, {1, {3, 4}}}));
  expect_remove(l, o, plan({remove(4, 1), merge(1, 0, {3})}), layout({{0, {0, 1, 3}}}));
  expect_remove(l, o, plan({remove(3, 0)}), layout({{0, {0, 1}}}));
  // A cluster smaller than N_l is one macro holding all instances.
  expect_remove(l, o, plan({remove(1, 0)}), layout({{0, {0}}}));
  EXPECT_EQ(l.num_instances(), 1);
  expect_remove(l, o, plan({remove(0, 0)}), MacroLayout{});
  auto none = plan_remove(l, o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
}

TEST(MitosisScalerTest, FirstInstanceFoundsMacroZeroAndSoleMacroGrowsFromOne) {
  const MitosisOptions o = opts(2, 4);
  MacroLayout l;
  expect_add(l, 42, o, plan({add(42, 0)}), layout({{0, {42}}}));
  expect_add(l, 7, o, plan({add(7, 0)}), layout({{0, {42, 7}}}));
  EXPECT_EQ(l.macro_of(InstanceId(7)), MacroId(0));
  EXPECT_EQ(l.macro_of(InstanceId(8)), std::nullopt);
  ASSERT_NE(l.find(MacroId(0)), nullptr);
  EXPECT_EQ(l.find(MacroId(1)), nullptr);
}

TEST(MitosisScalerTest, SplitIsAsEvenAsPossibleOriginalKeepsTheLargerHalf) {
  {  // N_u = 3: 4 -> 2 + 2.
    MacroLayout l = layout({{0, {0, 1, 2}}});
    expect_add(l, 3, opts(2, 3), plan({split(0, 1, {2}), add(3, 1)}), layout({{0, {0, 1}}, {1, {2, 3}}}));
  }
  {  // N_u = 6: 7 -> 4 + 3, two handles move.
    MacroLayout l = layout({{0, {0, 1, 2, 3, 4, 5}}});
    expect_add(l, 6, opts(3, 6), plan({split(0, 1, {4, 5}), add(6, 1)}),
               layout({{0, {0, 1, 2, 3}}, {1, {4, 5, 6}}}));
  }
  {  // N_l = 3, N_u = 5 (tightest bound 2 N_l = N_u + 1): 6 -> 3 + 3.
    MacroLayout l = layout({{0, {0, 1, 2, 3, 4}}});
    expect_add(l, 5, opts(3, 5), plan({split(0, 1, {3, 4}), add(5, 1)}),
               layout({{0, {0, 1, 2}}, {1, {3, 4, 5}}}));
  }
  {  // N_l = N_u = 1: every instance is its own macro; the split moves nothing.
    MacroLayout l = layout({{0, {0}}});
    expect_add(l, 1, opts(1, 1), plan({split(0, 1, {}), add(1, 1)}), layout({{0, {0}}, {1, {1}}}));
    expect_remove(l, opts(1, 1), plan({remove(1, 1)}), layout({{0, {0}}}));
  }
}

TEST(MitosisScalerTest, NewMacroIdIsMaxExistingPlusOneAndTheOldestFullMacroSplits) {
  // Layout order (age), not id order, decides which macro is the oldest.
  MacroLayout l = layout({{7, {0, 1, 2, 3}}, {3, {4, 5, 6, 7}}});
  expect_add(l, 8, opts(2, 4), plan({split(7, 8, {3}), add(8, 8)}),
             layout({{7, {0, 1, 2}}, {3, {4, 5, 6, 7}}, {8, {3, 8}}}));
  // The oldest macro with room takes the next one, even though a younger one is emptier.
  expect_add(l, 9, opts(2, 4), plan({add(9, 7)}),
             layout({{7, {0, 1, 2, 9}}, {3, {4, 5, 6, 7}}, {8, {3, 8}}}));
}

TEST(MitosisScalerTest, RemoveDrainsTheSmallestMacroAboveMinimumFirst) {
  const MitosisOptions o = opts(2, 5);
  MacroLayout l = layout({{0, {0, 1, 2, 3, 4}}, {1, {5, 6, 7}}, {2, {8, 9}}, {3, {10, 11, 12, 13}}});
  expect_remove(l, o, plan({remove(7, 1)}),
                layout({{0, {0, 1, 2, 3, 4}}, {1, {5, 6}}, {2, {8, 9}}, {3, {10, 11, 12, 13}}}));
  expect_remove(l, o, plan({remove(13, 3)}),
                layout({{0, {0, 1, 2, 3, 4}}, {1, {5, 6}}, {2, {8, 9}}, {3, {10, 11, 12}}}));
  expect_remove(l, o, plan({remove(12, 3)}),
                layout({{0, {0, 1, 2, 3, 4}}, {1, {5, 6}}, {2, {8, 9}}, {3, {10, 11}}}));
  expect_remove(l, o, plan({remove(4, 0)}),
                layout({{0, {0, 1, 2, 3}}, {1, {5, 6}}, {2, {8, 9}}, {3, {10, 11}}}));
}

TEST(MitosisScalerTest, MergeGoesIntoTheSmallestOtherMacro) {
  // Every macro at N_l = 3; the newest (m4) loses 12 and merges {10, 11} into the
  // smallest other macro, the oldest of the tied ones: 3 + 2 = 5 = N_u.
  const MitosisOptions o = opts(3, 5);
  MacroLayout l = layout({{2, {0, 1, 2}}, {0, {3, 4, 5}}, {4, {10, 11, 12}}});
  expect_remove(l, o, plan({remove(12, 4), merge(4, 2, {10, 11})}),
                layout({{2, {0, 1, 2, 10, 11}}, {0, {3, 4, 5}}}));
}

TEST(MitosisScalerTest, MacroMinOneEmptiedMacroDisappearsWithoutMerge) {
  const MitosisOptions o = opts(1, 2);
  MacroLayout l = layout({{0, {0, 1}}, {1, {2}}, {2, {3}}});
  expect_remove(l, o, plan({remove(1, 0)}), layout({{0, {0}}, {1, {2}}, {2, {3}}}));  // R2: m0 is above N_l
  expect_remove(l, o, plan({remove(3, 2)}), layout({{0, {0}}, {1, {2}}}));            // R3: newest macro empties
  expect_remove(l, o, plan({remove(2, 1)}), layout({{0, {0}}}));
  expect_remove(l, o, plan({remove(0, 0)}), MacroLayout{});
}

// Removing a named instance (DELETE /admin/instances/{id}).
TEST(MitosisScalerTest, RemovingANamedInstanceMergesAndSplitsToKeepTheBounds) {
  const MitosisOptions o = opts(2, 4);
  auto removed = [&](const MacroLayout& l, int32_t id, const ScalePlan& want, const MacroLayout& after) {
    StatusOr<ScalePlan> p = plan_remove_instance(l, InstanceId(id), o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(*p, want);
    MacroLayout next = l;
    ASSERT_TRUE(apply(next, *p).ok());
    EXPECT_EQ(next, after);
    EXPECT_TRUE(validate(next, o).ok()) << next;
  };
  // Above N_l: it just leaves, whichever member it is.
  removed(layout({{0, {0, 1, 2}}, {1, {3, 4}}}), 1, plan({remove(1, 0)}), layout({{0, {0, 2}}, {1, {3, 4}}}));
  // m1 would drop to 1 < N_l: 4 merges into the smaller other macro m0 (2 + 1 = 3 <= N_u).
  removed(layout({{0, {0, 1}}, {1, {3, 4}}, {2, {5, 6, 7}}}), 3, plan({remove(3, 1), merge(1, 0, {4})}),
          layout({{0, {0, 1, 4}}, {2, {5, 6, 7}}}));
  // The merge would make 4 + 1 = 5 > N_u: m0 splits, keeping ceil(5 / 2) = 3, a new m2 takes {3, 5}.
  removed(layout({{0, {0, 1, 2, 3}}, {1, {4, 5}}}), 4,
          plan({remove(4, 1), merge(1, 0, {5}), split(0, 2, {3, 5})}), layout({{0, {0, 1, 2}}, {2, {3, 5}}}));
  // A sole macro shrinks below N_l; an instance in no macro is NOT_FOUND.
  removed(layout({{0, {0, 1}}}), 0, plan({remove(0, 0)}), layout({{0, {1}}}));
  EXPECT_EQ(plan_remove_instance(layout({{0, {0, 1}}}), InstanceId(7), o).status().code(), StatusCode::kNotFound);
}

TEST(MitosisScalerTest, PlansAreDeterministic) {
  const MitosisOptions o = opts(2, 4);
  const MacroLayout l = layout({{0, {0, 1, 2, 3}}, {5, {4, 5, 6, 7}}, {1, {8, 9}}, {3, {10, 11}}});
  for (int round = 0; round < 2; ++round) {
    auto a1 = plan_add(l, InstanceId(12), o);
    auto a2 = plan_add(MacroLayout(l), InstanceId(12), o);
    ASSERT_TRUE(a1.ok() && a2.ok());
    EXPECT_EQ(*a1, *a2);
    EXPECT_EQ(*a1, plan({add(12, 1)}));
    auto r1 = plan_remove(l, o);
    auto r2 = plan_remove(MacroLayout(l), o);
    ASSERT_TRUE(r1.ok() && r2.ok());
    EXPECT_EQ(*r1, *r2);
    EXPECT_EQ(*r1, plan({remove(7, 5)}));  // 4 and 4 above N_l: the newer one
  }
  EXPECT_EQ(::testing::PrintToString(layout({{0, {0, 1}}, {3, {4}}})), "m0{i0 i1} m3{i4}");
  EXPECT_EQ(::testing::PrintToString(MacroLayout{}), "{}");
  EXPECT_EQ(to_string(split(0, 1, {3, 4})), "split m0 -> m1 [i3 i4]");
  EXPECT_EQ(to_string(merge(2, 0, {5})), "merge m2 -> m0 [i5]");
  EXPECT_EQ(to_string(add(3, 1)), "add i3 -> m1");
  EXPECT_EQ(to_string(remove(8, 2)), "remove i8 <- m2");
}

TEST(MitosisScalerTest, RandomAddsAndRemovesKeepTheInvariant) {
  for (const MitosisOptions o : {opts(1, 1), opts(1, 3), opts(2, 3), opts(2, 4), opts(3, 5), opts(3, 8)}) {
    SCOPED_TRACE(std::to_string(o.macro_min) + ".." + std::to_string(o.macro_max));
    std::mt19937 rng(1234 + o.macro_min * 31 + o.macro_max);
    MacroLayout l;
    std::set<int32_t> present;
    int32_t next_instance = 0;
    for (int step = 0; step < 2000; ++step) {
      const bool grow = present.empty() || (rng() % 100) < (present.size() < 40 ? 60u : 30u);
      if (grow) {
        auto p = plan_add(l, InstanceId(next_instance), o);
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        // A split moves at most floor((N_u + 1) / 2) - 1 handles.
        EXPECT_LE(p->num_moved(), (o.macro_max + 1) / 2 - 1);
        ASSERT_TRUE(apply(l, *p).ok()) << *p;
        present.insert(next_instance++);
      } else {
        auto p = plan_remove(l, o);
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        ASSERT_TRUE(p->removed_instance().has_value());
        // A merge moves at most N_l - 1 handles.
        EXPECT_LE(p->num_moved(), o.macro_min - 1);
        ASSERT_TRUE(apply(l, *p).ok()) << *p;
        ASSERT_EQ(present.erase(p->removed_instance()->value), 1u);
      }
      ASSERT_TRUE(validate(l, o).ok()) << validate(l, o).to_string() << " after step " << step << ": " << dump(l);
      std::set<int32_t> in_layout;
      for (const MacroGroup& g : l.macros) {
        for (InstanceId i : g.members) in_layout.insert(i.value);
      }
      ASSERT_EQ(in_layout, present);
    }
  }
}

TEST(MitosisScalerTest, RejectsInvalidOptionsNamingTheField) {
  EXPECT_TRUE(validate(opts(2, 4)).ok());
  EXPECT_TRUE(validate(opts(2, 3)).ok());
  EXPECT_TRUE(validate(opts(1, 1)).ok());
  Status s = validate(opts(0, 4));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("macro_min"), std::string::npos) << s.message();
  s = validate(opts(3, 4));  // 6 > 5: a split of 5 cannot leave two halves of 3
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("macro_max"), std::string::npos) << s.message();
  s = validate(opts(2, 2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // The planners refuse invalid options too.
  EXPECT_EQ(plan_add(layout({{0, {0}}}), InstanceId(1), opts(0, 4)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_remove(layout({{0, {0}}}), opts(3, 4)).status().code(), StatusCode::kInvalidArgument);
}

TEST(MitosisScalerTest, RejectsInvalidLayouts) {
  const MitosisOptions o = opts(2, 4);
  auto expect_invalid = [&](const MacroLayout& l, std::string_view needle) {
    SCOPED_TRACE(dump(l));
    Status s = validate(l, o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_EQ(plan_add(l, InstanceId(99), o).status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(plan_remove(l, o).status().code(), StatusCode::kInvalidArgument);
  };
  expect_invalid(layout({{0, {0, 1}}, {0, {2, 3}}}), "macro 0 appears twice");
  expect_invalid(layout({{0, {0, 1}}, {1, {1, 3}}}), "instance 1 appears twice");
  expect_invalid(layout({{0, {0, 1}}, {1, {2}}}), "macro 1 has 1 members");
  expect_invalid(layout({{0, {0, 1, 2, 3, 4}}}), "macro 0 has 5 members");
  expect_invalid(layout({{0, {}}}), "macro 0 has 0 members");
  EXPECT_TRUE(validate(MacroLayout{}, o).ok());
  EXPECT_TRUE(validate(layout({{0, {0}}}), o).ok());  // a sole macro may be below N_l
  auto dup = plan_add(layout({{0, {0, 1}}}), InstanceId(1), o);
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("instance 1"), std::string::npos) << dup.status().message();
}

TEST(MitosisScalerTest, ApplyIsAllOrNothingOnStalePlans) {
  const MacroLayout before = layout({{0, {0, 1, 2}}, {1, {3, 4}}});
  auto expect_stale = [&](const ScalePlan& p) {
    SCOPED_TRACE(::testing::PrintToString(p));
    MacroLayout l = before;
    Status s = apply(l, p);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(l, before);
  };
  expect_stale(plan({add(9, 1), add(3, 0)}));                  // instance already present (after a good step)
  expect_stale(plan({split(0, 1, {2})}));                      // new macro exists
  expect_stale(plan({split(0, 2, {3})}));                      // moved instance not in the source
  expect_stale(plan({split(0, 2, {2, 2})}));                   // listed twice
  expect_stale(plan({split(5, 2, {})}));                       // no source
  expect_stale(plan({merge(1, 0, {3})}));                      // moved != members (stale)
  expect_stale(plan({merge(1, 1, {3, 4})}));                   // into itself
  expect_stale(plan({merge(1, 7, {3, 4})}));                   // no target
  expect_stale(plan({remove(3, 0)}));                          // wrong macro
  expect_stale(plan({remove(3, 1), remove(3, 1)}));            // removed twice
  MacroLayout l = before;
  ASSERT_TRUE(apply(l, plan({merge(1, 0, {3, 4}), remove(0, 0)})).ok());
  EXPECT_EQ(l, layout({{0, {1, 2, 3, 4}}}));
  ASSERT_TRUE(apply(l, ScalePlan{}).ok());
  EXPECT_EQ(l, layout({{0, {1, 2, 3, 4}}}));
}

// ---------------------------------------------------------------------------
// decide_scaling

TimePoint at_s(int64_t s) { return TimePoint(std::chrono::seconds(s)); }

ScalingWindow window(std::optional<double> attainment, double utilization, int64_t now_s = 1000,
                     std::optional<int64_t> last_s = std::nullopt) {
  ScalingWindow w;
  w.slo_attainment = attainment;
  w.mean_utilization = utilization;
  w.now = at_s(now_s);
  if (last_s) w.last_decision = at_s(*last_s);
  return w;
}

TEST(MitosisAutoscaleTest, ThresholdRule) {
  const AutoscaleOptions o;  // target 0.9, high 0.8, low 0.3, cooldown 60 s
  EXPECT_EQ(decide_scaling(window(0.85, 0.5), o), ScaleSignal::kScaleUp);    // SLO miss
  EXPECT_EQ(decide_scaling(window(0.85, 0.1), o), ScaleSignal::kScaleUp);    // SLO miss beats idle
  EXPECT_EQ(decide_scaling(window(0.99, 0.81), o), ScaleSignal::kScaleUp);   // busy
  EXPECT_EQ(decide_scaling(window(0.99, 0.8), o), ScaleSignal::kHold);       // at high: not above
  EXPECT_EQ(decide_scaling(window(0.9, 0.5), o), ScaleSignal::kHold);        // at target: met
  EXPECT_EQ(decide_scaling(window(0.95, 0.29), o), ScaleSignal::kScaleDown); // idle and met
  EXPECT_EQ(decide_scaling(window(0.9, 0.29), o), ScaleSignal::kScaleDown);
  EXPECT_EQ(decide_scaling(window(0.95, 0.3), o), ScaleSignal::kHold);       // at low: not below
  // No request finished: no SLO evidence; utilisation decides.
  EXPECT_EQ(decide_scaling(window(std::nullopt, 0.0), o), ScaleSignal::kScaleDown);
  EXPECT_EQ(decide_scaling(window(std::nullopt, 0.5), o), ScaleSignal::kHold);
  EXPECT_EQ(decide_scaling(window(std::nullopt, 0.9), o), ScaleSignal::kScaleUp);
  // NaN never scales by itself.
  EXPECT_EQ(decide_scaling(window(std::nan(""), 0.5), o), ScaleSignal::kHold);
  EXPECT_EQ(decide_scaling(window(0.95, std::nan("")), o), ScaleSignal::kHold);
  EXPECT_EQ(scale_signal_name(ScaleSignal::kScaleUp), "scale-up");
}

TEST(MitosisAutoscaleTest, CooldownHoldsUntilElapsed) {
  const AutoscaleOptions o;  // 60 s
  EXPECT_EQ(decide_scaling(window(0.5, 0.9, 1000, 1000), o), ScaleSignal::kHold);
  EXPECT_EQ(decide_scaling(window(0.5, 0.9, 1059, 1000), o), ScaleSignal::kHold);
  EXPECT_EQ(decide_scaling(window(0.5, 0.9, 1060, 1000), o), ScaleSignal::kScaleUp);  // exactly cooldown later
  EXPECT_EQ(decide_scaling(window(0.99, 0.1, 1059, 1000), o), ScaleSignal::kHold);
  EXPECT_EQ(decide_scaling(window(0.99, 0.1, 1061, 1000), o), ScaleSignal::kScaleDown);
  // A caller loop: the first decision starts the cooldown.
  std::optional<TimePoint> last;
  std::vector<ScaleSignal> got;
  for (int64_t t = 0; t <= 150; t += 30) {
    ScalingWindow w = window(0.5, 0.9, t);
    w.last_decision = last;
    ScaleSignal s = decide_scaling(w, o);
    if (s != ScaleSignal::kHold) last = w.now;
    got.push_back(s);
  }
  EXPECT_EQ(got, (std::vector<ScaleSignal>{ScaleSignal::kScaleUp, ScaleSignal::kHold, ScaleSignal::kScaleUp,
                                           ScaleSignal::kHold, ScaleSignal::kScaleUp, ScaleSignal::kHold}));
  AutoscaleOptions none = o;
  none.cooldown = Duration::zero();
  EXPECT_EQ(decide_scaling(window(0.5, 0.9, 1000, 1000), none), ScaleSignal::kScaleUp);
}

TEST(MitosisAutoscaleTest, RejectsInvalidOptionsNamingTheField) {
  EXPECT_TRUE(validate(AutoscaleOptions{}).ok());
  auto expect_invalid = [](const AutoscaleOptions& o, std::string_view field) {
    Status s = validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
  };
  AutoscaleOptions o;
  o.target_attainment = 0.0;
  expect_invalid(o, "target_attainment");
  o = {};
  o.target_attainment = 1.5;
  expect_invalid(o, "target_attainment");
  o = {};
  o.high_utilization = 1.2;
  expect_invalid(o, "high_utilization");
  o = {};
  o.low_utilization = 0.8;  // == high
  expect_invalid(o, "low_utilization");
  o = {};
  o.low_utilization = -0.1;
  expect_invalid(o, "low_utilization");
  o = {};
  o.low_utilization = std::nan("");
  expect_invalid(o, "low_utilization");
  o = {};
  o.cooldown = -std::chrono::seconds(1);
  expect_invalid(o, "cooldown");
}

}  // namespace
}  // namespace ecoserve::policy
