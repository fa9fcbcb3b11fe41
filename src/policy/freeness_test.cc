// Tests of policy/freeness.h, FreenessRouter and FreenessScaler. Block size 16
// throughout; every expected number is worked out by hand in the comments.
#include "policy/freeness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "policy/freeness_router.h"
#include "policy/freeness_scaler.h"
#include "policy/freeness_test_util.h"

namespace ecoserve::policy {
namespace {

using std::chrono::seconds;

constexpr double kInf = std::numeric_limits<double>::infinity();

using testing::inst;
using testing::queued;
using testing::running;
using testing::with_requests;

// ---------------------------------------------------------------------------
// Virtual usage and freeness.

TEST(FreenessTest, VirtualUsageOfRunningAndQueuedRequests) {
  const FreenessOptions o;
  EXPECT_EQ(virtual_usage_blocks(running(1, 33), 16, o), 3);  // ceil(33 / 16)
  EXPECT_EQ(virtual_usage_blocks(running(1, 32), 16, o), 2);
  EXPECT_EQ(virtual_usage_blocks(running(1, 0), 16, o), 0);
  // Queued: the prompt plus the first output token.
  EXPECT_EQ(virtual_usage_blocks(queued(1, 31), 16, o), 2);  // ceil(32 / 16)
  EXPECT_EQ(virtual_usage_blocks(queued(1, 32), 16, o), 3);  // ceil(33 / 16)
}

TEST(FreenessTest, HighPriorityHeadroom) {
  const FreenessOptions o;  // headroom cap 1024 tokens
  // Priority 1, 33 tokens (3 blocks), remaining = 150 - 50 = 100 tokens -> ceil(100 / 16) = 7 blocks.
  EXPECT_EQ(virtual_usage_blocks(running(1, 33, 1, 50, 150), 16, o), 3 + 7);
  // Remaining 5000 is capped at 1024 tokens = 64 blocks.
  EXPECT_EQ(virtual_usage_blocks(running(1, 33, 1, 0, 5000), 16, o), 3 + 64);
  // Nothing left to generate (num_generated > max_tokens clamps to 0): no headroom.
  EXPECT_EQ(virtual_usage_blocks(running(1, 33, 1, 200, 150), 16, o), 3);
  // Priority 0 gets none.
  EXPECT_EQ(virtual_usage_blocks(running(1, 33, 0, 50, 150), 16, o), 3);
  // A queued high-priority request: ceil(101 / 16) = 7 demand + ceil(100 / 16) = 7 headroom.
  EXPECT_EQ(virtual_usage_blocks(queued(1, 100, 1, 100), 16, o), 14);
  // A smaller cap: min(100, 20) = 20 tokens -> 2 blocks; cap 0 disables it.
  FreenessOptions small;
  small.high_priority_headroom_tokens = 20;
  EXPECT_EQ(virtual_usage_blocks(running(1, 33, 1, 50, 150), 16, small), 3 + 2);
  small.high_priority_headroom_tokens = 0;
  EXPECT_EQ(virtual_usage_blocks(running(1, 33, 1, 50, 150), 16, small), 3);
}

TEST(FreenessTest, FreenessFromTheRequestList) {
  const FreenessOptions o;
  // M = 100; running 33 tokens (3) + 64 tokens (4), queued 20 (ceil(21 / 16) = 2):
  // sum V = 9, B = 2 -> F = (100 - 9) / 2 = 45.5.
  const InstanceLoad l = inst(0, 100, {running(1, 33), running(2, 64), queued(3, 20)});
  EXPECT_DOUBLE_EQ(freeness(l, true, o), 45.5);
  EXPECT_DOUBLE_EQ(freeness(l, o), 45.5);  // a non-empty list is used
  const InstanceUsage u = instance_usage(l, true, o);
  EXPECT_EQ(u.virtual_blocks, 9);
  EXPECT_EQ(u.num_running, 2);
}

TEST(FreenessTest, EmptyBatchCountsAsOne) {
  const FreenessOptions o;
  // Only a queued request of 20 tokens (2 blocks): B = 0 -> 1, F = (100 - 2) / 1 = 98.
  EXPECT_DOUBLE_EQ(freeness(inst(0, 100, {queued(1, 20)}), true, o), 98.0);
  // Nothing at all: F = M.
  EXPECT_DOUBLE_EQ(freeness(inst(0, 100), true, o), 100.0);
}

TEST(FreenessTest, OverloadedInstanceIsNegative) {
  // M = 10; running 100 tokens (7 blocks) + queued 100 (ceil(101 / 16) = 7): F = (10 - 14) / 1 = -4.
  EXPECT_DOUBLE_EQ(freeness(inst(0, 10, {running(1, 100), queued(2, 100)}), true, FreenessOptions{}), -4.0);
}

TEST(FreenessTest, DrainingOrUnhealthyIsMinusInfinity) {
  const FreenessOptions o;
  InstanceLoad l = inst(0, 100, {running(1, 33)});
  l.draining = true;
  EXPECT_EQ(freeness(l, true, o), -kInf);
  EXPECT_EQ(freeness(l, false, o), -kInf);
  EXPECT_EQ(freeness(l, o), -kInf);
  l.draining = false;
  l.healthy = false;
  EXPECT_EQ(freeness(l, true, o), -kInf);
  EXPECT_EQ(freeness(l, o), -kInf);
}

TEST(FreenessTest, AggregateFallbackWithoutRequestLists) {
  const FreenessOptions o;
  InstanceLoad l;
  l.num_total_blocks = 100;
  l.num_free_blocks = 60;
  l.num_waiting_tokens = 40;  // ceil(40 / 16) = 3 blocks
  l.num_running = 4;
  // sum V = (100 - 60) + 3 = 43; F = (100 - 43) / 4 = 14.25.
  EXPECT_DOUBLE_EQ(freeness(l, false, o), 14.25);
  EXPECT_DOUBLE_EQ(freeness(l, o), 14.25);  // an empty list: aggregates
  // The aggregates carry no priorities: a list would have added headroom, they do not.
  l.num_running = 0;  // B = 1: F = 57
  EXPECT_DOUBLE_EQ(freeness(l, false, o), 57.0);
  // with_requests = true but an empty list means "no requests": F = M.
  EXPECT_DOUBLE_EQ(freeness(l, true, o), 100.0);
}

TEST(FreenessTest, ValidateNamesTheField) {
  EXPECT_TRUE(validate(FreenessOptions{}).ok());
  FreenessOptions o;
  o.high_priority_headroom_tokens = -1;
  const Status s = validate(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("high_priority_headroom_tokens"), std::string::npos) << s.message();
}

// ---------------------------------------------------------------------------
// FreenessRouter.

RouteRequest req(int32_t prompt_len, int32_t priority = 0, int32_t max_tokens = 0) {
  RouteRequest r;
  r.prompt_len = prompt_len;
  r.priority = priority;
  r.max_tokens = max_tokens;
  return r;
}

int32_t route_id(RouterPolicy& p, const ClusterView& v, const RouteRequest& r) {
  auto id = p.route(v, r);
  return id ? id->value : -1;
}

TEST(FreenessRouterTest, PicksTheFreestAndSkipsDrainingUnhealthyAndNonMixed) {
  FreenessRouter router;
  EXPECT_EQ(router.name(), "freeness");
  // The new request: 31 tokens -> ceil(32 / 16) = 2 blocks, B unchanged.
  //   0: M 100, one running of 320 tokens (20):        (100 - 20 - 2) / 1 = 78
  //   1: M 100, two running of 160 tokens (10 each):   (100 - 20 - 2) / 2 = 39
  //   2: M 200, one running of 800 tokens (50):        (200 - 50 - 2) / 1 = 148
  ClusterView v = with_requests({inst(0, 100, {running(1, 320)}), inst(1, 100, {running(2, 160), running(3, 160)}),
                                 inst(2, 200, {running(4, 800)})});
  EXPECT_DOUBLE_EQ(router.freeness_with(v.instances[0], true, req(31)), 78.0);
  EXPECT_DOUBLE_EQ(router.freeness_with(v.instances[1], true, req(31)), 39.0);
  EXPECT_DOUBLE_EQ(router.freeness_with(v.instances[2], true, req(31)), 148.0);
  EXPECT_EQ(route_id(router, v, req(31)), 2);
  v.instances[2].draining = true;
  EXPECT_EQ(route_id(router, v, req(31)), 0);
  v.instances[0].healthy = false;
  EXPECT_EQ(route_id(router, v, req(31)), 1);
  v.instances[1].role = InstanceRole::kPrefill;
  EXPECT_EQ(route_id(router, v, req(31)), -1);
  EXPECT_EQ(route_id(router, ClusterView{}, req(31)), -1);
}

TEST(FreenessRouterTest, TiesGoToTheLowestPosition) {
  FreenessRouter router;
  ClusterView v = with_requests({inst(7, 100, {running(1, 64)}), inst(3, 100, {running(2, 64)}),
                                 inst(5, 100, {running(3, 64)})});
  EXPECT_EQ(route_id(router, v, req(10)), 7);
  v.instances[0].healthy = false;
  EXPECT_EQ(route_id(router, v, req(10)), 3);  // position 1, although id 3 < 5 either way
}

TEST(FreenessRouterTest, TheNewRequestsHeadroomChangesThePick) {
  FreenessRouter router;
  // 0: M 100, one running of 640 tokens (40 blocks): B = 1.
  // 1: M 200, two running of 656 tokens (41 blocks each, 82): B = 2.
  ClusterView v = with_requests({inst(0, 100, {running(1, 640)}), inst(1, 200, {running(2, 656), running(3, 656)})});
  // Priority 0, 15 tokens -> ceil(16 / 16) = 1 block:
  //   0: (100 - 40 - 1) / 1 = 59;  1: (200 - 82 - 1) / 2 = 58.5  -> 0.
  EXPECT_EQ(route_id(router, v, req(15)), 0);
  // Priority 1 with max_tokens 160: 1 + ceil(160 / 16) = 11 blocks, which weigh
  // twice as much on the batch of one:
  //   0: (100 - 40 - 11) / 1 = 49;  1: (200 - 82 - 11) / 2 = 53.5  -> 1.
  EXPECT_DOUBLE_EQ(router.freeness_with(v.instances[0], true, req(15, 1, 160)), 49.0);
  EXPECT_DOUBLE_EQ(router.freeness_with(v.instances[1], true, req(15, 1, 160)), 53.5);
  EXPECT_EQ(route_id(router, v, req(15, 1, 160)), 1);
  // Without headroom the high-priority request goes where the others go.
  FreenessOptions none;
  none.high_priority_headroom_tokens = 0;
  FreenessRouter no_headroom(none);
  EXPECT_EQ(route_id(no_headroom, v, req(15, 1, 160)), 0);
}

TEST(FreenessRouterTest, ARunningHighPriorityRequestMakesItsInstanceLookBusier) {
  FreenessRouter router;
  // New request: 31 tokens -> 2 blocks.
  // 1: M 100, running 320 tokens (20):  (100 - 20 - 2) / 1 = 78.
  // 0: M 100, running 33 tokens (3) of priority 0: (100 - 3 - 2) / 1 = 95 -> 0.
  ClusterView v = with_requests({inst(0, 100, {running(1, 33, 0, 0, 800)}), inst(1, 100, {running(2, 320)})});
  EXPECT_EQ(route_id(router, v, req(31)), 0);
  // The same request at priority 1 with 800 tokens to go: + ceil(800 / 16) = 50 blocks
  // of headroom: (100 - 53 - 2) / 1 = 45 < 78 -> 1.
  v.instances[0].requests[0].priority = 1;
  EXPECT_DOUBLE_EQ(router.freeness_with(v.instances[0], true, req(31)), 45.0);
  EXPECT_EQ(route_id(router, v, req(31)), 1);
}

TEST(FreenessRouterTest, UsesTheAggregatesWithoutRequestLists) {
  FreenessRouter router;
  ClusterView v;
  v.instances = {inst(0, 100), inst(1, 100)};
  // 0: 50 blocks used, 1 running:  (100 - 50 - 2) / 1 = 48.
  // 1: 40 blocks used, 3 running:  (100 - 40 - 2) / 3 = 19.33  -> 0 despite more free blocks.
  v.instances[0].num_free_blocks = 50;
  v.instances[0].num_running = 1;
  v.instances[1].num_free_blocks = 60;
  v.instances[1].num_running = 3;
  EXPECT_DOUBLE_EQ(router.freeness_with(v.instances[0], false, req(31)), 48.0);
  EXPECT_EQ(route_id(router, v, req(31)), 0);
  // A waiting prompt of 600 tokens on 0 (ceil(600 / 16) = 38 blocks): (100 - 88 - 2) / 1 = 10 -> 1.
  v.instances[0].num_waiting_tokens = 600;
  EXPECT_EQ(route_id(router, v, req(31)), 1);
}

// ---------------------------------------------------------------------------
// FreenessScaler, mean_freeness, pick_instance_to_drain.

TimePoint at_s(int64_t s) { return TimePoint(seconds(s)); }

FreenessScalingOptions scaling() {
  FreenessScalingOptions o;  // up below 4, down above 64, window 30 s, cooldown 60 s, 1..8 instances
  return o;
}

TEST(FreenessScalerTest, ScalesUpOnlyAfterAFullWindowBelowTheThreshold) {
  FreenessScaler s(scaling());
  s.observe(at_s(0), 2.0);
  s.observe(at_s(10), 2.0);
  s.observe(at_s(20), 3.9);
  EXPECT_EQ(s.decide(at_s(20), 2), ScaleSignal::kHold);  // 20 s observed < 30 s window
  EXPECT_EQ(s.decide(at_s(29), 2), ScaleSignal::kHold);
  s.observe(at_s(30), 3.0);
  EXPECT_EQ(s.decide(at_s(30), 2), ScaleSignal::kScaleUp);  // samples at 0, 10, 20, 30: all < 4
  EXPECT_EQ(s.last_decision(), at_s(30));
  EXPECT_EQ(s.num_samples(), 0u);  // a new window starts
}

TEST(FreenessScalerTest, OneSampleAtOrAboveTheThresholdHoldsUntilItLeavesTheWindow) {
  FreenessScaler s(scaling());
  s.observe(at_s(0), 2.0);
  s.observe(at_s(10), 4.0);  // not below 4
  s.observe(at_s(20), 2.0);
  s.observe(at_s(30), 2.0);
  EXPECT_EQ(s.decide(at_s(30), 2), ScaleSignal::kHold);
  s.observe(at_s(40), 2.0);
  EXPECT_EQ(s.decide(at_s(40), 2), ScaleSignal::kHold);  // the window [10, 40] still holds t = 10
  s.observe(at_s(41), 2.0);
  EXPECT_EQ(s.decide(at_s(41), 2), ScaleSignal::kScaleUp);  // [11, 41]: 20, 30, 40, 41
  // Neither below nor above (4 .. 64) holds; so does a NaN sample.
  FreenessScaler mid(scaling());
  for (int64_t t = 0; t <= 30; t += 10) mid.observe(at_s(t), 10.0);
  EXPECT_EQ(mid.decide(at_s(30), 2), ScaleSignal::kHold);
  FreenessScaler nan(scaling());
  nan.observe(at_s(0), std::nan(""));
  nan.observe(at_s(30), 1.0);
  EXPECT_EQ(nan.decide(at_s(30), 2), ScaleSignal::kHold);
}

TEST(FreenessScalerTest, ScalesDownAfterAFullWindowAboveTheThreshold) {
  FreenessScaler s(scaling());
  for (int64_t t = 0; t <= 30; t += 10) s.observe(at_s(t), 100.0);
  EXPECT_EQ(s.decide(at_s(29), 3), ScaleSignal::kHold);
  EXPECT_EQ(s.decide(at_s(30), 3), ScaleSignal::kScaleDown);
  // 64 itself is not above 64.
  FreenessScaler edge(scaling());
  for (int64_t t = 0; t <= 30; t += 10) edge.observe(at_s(t), t == 20 ? 64.0 : 100.0);
  EXPECT_EQ(edge.decide(at_s(30), 3), ScaleSignal::kHold);
}

TEST(FreenessScalerTest, CooldownAndANewWindowFollowEachDecision) {
  FreenessScaler s(scaling());
  for (int64_t t = 0; t <= 30; t += 10) s.observe(at_s(t), 1.0);
  ASSERT_EQ(s.decide(at_s(30), 2), ScaleSignal::kScaleUp);
  // The next window starts at the first sample after the decision (t = 40).
  for (int64_t t = 40; t <= 60; t += 10) s.observe(at_s(t), 1.0);
  EXPECT_EQ(s.decide(at_s(60), 3), ScaleSignal::kHold);  // window 40..60 not full, and cooldown
  s.observe(at_s(70), 1.0);
  EXPECT_EQ(s.decide(at_s(70), 3), ScaleSignal::kHold);  // window full, but cooldown until 90
  s.observe(at_s(80), 1.0);
  EXPECT_EQ(s.decide(at_s(89), 3), ScaleSignal::kHold);  // 89 - 30 < 60
  s.observe(at_s(90), 1.0);
  EXPECT_EQ(s.decide(at_s(90), 3), ScaleSignal::kScaleUp);  // cooldown over exactly at 90; samples 60..90
  EXPECT_EQ(s.last_decision(), at_s(90));
  // Right after that decision, a window must fill again even with cooldown 0.
  FreenessScalingOptions o = scaling();
  o.cooldown = Duration::zero();
  FreenessScaler z(o);
  for (int64_t t = 0; t <= 30; t += 10) z.observe(at_s(t), 1.0);
  ASSERT_EQ(z.decide(at_s(30), 2), ScaleSignal::kScaleUp);
  z.observe(at_s(31), 1.0);
  EXPECT_EQ(z.decide(at_s(31), 3), ScaleSignal::kHold);
  z.observe(at_s(61), 1.0);
  EXPECT_EQ(z.decide(at_s(61), 3), ScaleSignal::kScaleUp);
}

TEST(FreenessScalerTest, RespectsMinAndMaxInstances) {
  FreenessScalingOptions o = scaling();
  o.min_instances = 2;
  o.max_instances = 4;
  FreenessScaler up(o);
  for (int64_t t = 0; t <= 30; t += 10) up.observe(at_s(t), 1.0);
  EXPECT_EQ(up.decide(at_s(30), 4), ScaleSignal::kHold);  // at max
  EXPECT_EQ(up.decide(at_s(30), 5), ScaleSignal::kHold);  // above max: not further
  EXPECT_FALSE(up.last_decision().has_value());           // holds do not start a cooldown
  EXPECT_EQ(up.decide(at_s(30), 3), ScaleSignal::kScaleUp);
  FreenessScaler down(o);
  for (int64_t t = 0; t <= 30; t += 10) down.observe(at_s(t), 100.0);
  EXPECT_EQ(down.decide(at_s(30), 2), ScaleSignal::kHold);  // at min
  EXPECT_EQ(down.decide(at_s(30), 3), ScaleSignal::kScaleDown);
}

TEST(FreenessScalerTest, ValidateNamesTheField) {
  EXPECT_TRUE(validate(scaling()).ok());
  auto expect_invalid = [](FreenessScalingOptions o, std::string_view field) {
    const Status s = validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
    EXPECT_EQ(FreenessScaler::create(o).status().code(), StatusCode::kInvalidArgument);
  };
  FreenessScalingOptions o = scaling();
  o.scale_up_freeness = 64.0;  // not < scale_down_freeness
  expect_invalid(o, "scale_down_freeness");
  o = scaling();
  o.scale_up_freeness = std::nan("");
  expect_invalid(o, "scale_up_freeness");
  o = scaling();
  o.window = Duration::zero();
  expect_invalid(o, "window");
  o = scaling();
  o.cooldown = -seconds(1);
  expect_invalid(o, "cooldown");
  o = scaling();
  o.min_instances = 0;
  expect_invalid(o, "min_instances");
  o = scaling();
  o.min_instances = 3;
  o.max_instances = 2;
  expect_invalid(o, "max_instances");
  EXPECT_TRUE(FreenessScaler::create(scaling()).ok());
}

TEST(FreenessScalerTest, MeanFreenessOverActiveInstances) {
  const FreenessOptions o;
  // Active: 0 (M 100, running 33 tokens = 3 blocks: F = 97) and 1 (empty: F = 100) -> 98.5.
  ClusterView v = with_requests({inst(0, 100, {running(1, 33)}), inst(1, 100), inst(2, 100), inst(3, 100),
                                 inst(4, 100)});
  v.instances[2].draining = true;
  v.instances[3].healthy = false;
  v.instances[4].role = InstanceRole::kPrefill;
  EXPECT_DOUBLE_EQ(mean_freeness(v, o), 98.5);
  // An instance with 2e6 free blocks counts as 1e6: (97 + 1e6) / 2 = 500048.5.
  v.instances[1].num_total_blocks = 2'000'000;
  EXPECT_DOUBLE_EQ(mean_freeness(v, o), 500048.5);
  EXPECT_DOUBLE_EQ(mean_freeness(ClusterView{}, o), 0.0);
}

TEST(FreenessScalerTest, PicksTheInstanceWithFewestRunningRequestsToDrain) {
  const FreenessOptions o;
  ClusterView v = with_requests({inst(0, 100, {running(1, 10), running(2, 10)}),
                                 inst(1, 100, {running(3, 10), queued(4, 10), queued(5, 10)}),
                                 inst(2, 100, {running(6, 10)}), inst(3, 100), inst(4, 100)});
  v.instances[3].draining = true;  // 0 running, but already draining
  v.instances[4].healthy = false;  // 0 running, but not active
  // 1 and 2 have one running request each: the higher position, 2.
  EXPECT_EQ(pick_instance_to_drain(v, o), InstanceId(2));
  v.instances[2].requests.push_back(running(7, 10));
  EXPECT_EQ(pick_instance_to_drain(v, o), InstanceId(1));  // queued requests do not count
  // Without request lists: InstanceLoad::num_running (inst() set 2, 1, 1).
  v.with_requests = false;
  EXPECT_EQ(pick_instance_to_drain(v, o), InstanceId(2));
  // A sole active instance is never drained.
  v.instances[0].healthy = false;
  v.instances[1].role = InstanceRole::kDecode;
  EXPECT_EQ(pick_instance_to_drain(v, o), std::nullopt);
}

TEST(FreenessScalerTest, FreenessWithoutAnInstanceMovesItsLoadToTheOthers) {
  const FreenessOptions o;
  // 0: M 100, 3 blocks, 1 running; 1: M 100, 2 + 2 blocks, 2 running; 2: draining (ignored).
  ClusterView v = with_requests({inst(0, 100, {running(1, 33)}), inst(1, 100, {running(2, 20), running(3, 30)}),
                                 inst(2, 100, {running(4, 500)})});
  v.instances[2].draining = true;
  // Without 1: (100 - (3 + 4)) / (1 + 2) = 31. Without 0: (100 - 7) / 3 = 31.
  EXPECT_DOUBLE_EQ(freeness_without(v, InstanceId(1), o), 31.0);
  EXPECT_DOUBLE_EQ(freeness_without(v, InstanceId(0), o), 31.0);
  // Two idle instances of 64 blocks: one gone, the other is still empty: 64.
  ClusterView idle = with_requests({inst(0, 64), inst(1, 64)});
  EXPECT_DOUBLE_EQ(freeness_without(idle, InstanceId(1), o), 64.0);
  // The last active one: nothing left to take its load.
  ClusterView one = with_requests({inst(0, 64)});
  EXPECT_EQ(freeness_without(one, InstanceId(0), o), -std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace ecoserve::policy
