// Tests of MigrationPlanner. Block size 16 and max_tokens 0 (no high-priority
// headroom) unless said otherwise; freeness F = (M - sum V) / max(1, B) is worked
// out by hand in the comments.
#include "policy/migration_planner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <vector>

#include "policy/freeness_test_util.h"

namespace ecoserve::policy {
namespace {

using testing::inst;
using testing::migrating;
using testing::queued;
using testing::running;

ClusterView view(std::vector<InstanceLoad> instances) { return testing::with_requests(std::move(instances)); }

MigrationOrder order(uint64_t request, int32_t source, int32_t destination,
                     MigrationReason reason = MigrationReason::kLoadBalance) {
  return MigrationOrder{RequestId(request), InstanceId(source), InstanceId(destination), reason};
}

std::vector<MigrationOrder> plan(const ClusterView& v, MigrationPlannerOptions o = {}) {
  return MigrationPlanner(o).plan(v);
}

MigrationPlannerOptions with_max(int32_t max_migrations) {
  MigrationPlannerOptions o;
  o.max_migrations = max_migrations;
  return o;
}

// Four instances (ids = positions), two sources and two destinations, listed out of order:
//   0: M 100, running 2 x 160 tokens (10 + 10):        F = (100 - 20) / 2 = 40   destination
//   1: M 100, running r1 256 prio 1, r2 250, r3..r6 256 (16 blocks each, 96):
//                                                      F = (100 - 96) / 6 = 0.67 source
//   2: M 100, running 160 tokens (10):                 F = (100 - 10) / 1 = 90   destination
//   3: M 100, running r7..r10 384 tokens (24 each, 96): F = (100 - 96) / 4 = 1   source
ClusterView four() {
  return view({
      inst(0, 100, {running(20, 160), running(21, 160)}),
      inst(1, 100, {running(1, 256, 1), running(2, 250), running(3, 256), running(4, 256), running(5, 256),
                    running(6, 256)}),
      inst(2, 100, {running(30, 160)}),
      inst(3, 100, {running(7, 384), running(8, 384), running(9, 384), running(10, 384)}),
  });
}

TEST(MigrationPlannerTest, PairsTheLeastFreeWithTheFreest) {
  // Sources ascending: 1 (0.67), 3 (1). Destinations descending: 2 (90), 0 (40).
  // Pair (1, 2): low-priority-shortest on 1 takes r2 (priority 0, 250 tokens, 16 blocks):
  //   source after (100 - 80) / 5 = 4 <= destination after (100 - 26) / 2 = 37.
  // Pair (3, 0): r7 (all equal: lowest id, 24 blocks):
  //   source after (100 - 72) / 3 = 9.33 <= destination after (100 - 44) / 3 = 18.67.
  const ClusterView v = four();
  const std::vector<MigrationOrder> expected = {order(2, 1, 2), order(7, 3, 0)};
  EXPECT_EQ(plan(v, with_max(2)), expected);
  EXPECT_EQ(plan(v, with_max(2)), expected);  // deterministic
  EXPECT_EQ(plan(v, with_max(8)), expected);  // no more candidates
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(2, 1, 2)}));  // max_migrations 1: the first pair
}

// One source, one destination:
//   0: M 90, running r1 300 tokens (19), r2 100 prio 1 (7), r3 200 (13), r4 600 (38), r5 100 (7):
//      sum V 84, F = (90 - 84) / 5 = 1.2
//   1: M 100, empty: F = 100.
ClusterView choice_view() {
  return view({inst(0, 90, {running(1, 300), running(2, 100, 1), running(3, 200), running(4, 600), running(5, 100)}),
               inst(1, 100)});
}

TEST(MigrationPlannerTest, EachChoicePolicyPicksItsRequest) {
  const ClusterView v = choice_view();
  MigrationPlannerOptions o;
  o.choice = MigrationChoice::kShortestFirst;  // r2 and r5 have 100 tokens: the lower id
  EXPECT_EQ(plan(v, o), (std::vector<MigrationOrder>{order(2, 0, 1)}));
  o.choice = MigrationChoice::kLowPriorityShortestFirst;  // priority 0 first: r5 (100) before r3 (200)
  EXPECT_EQ(plan(v, o), (std::vector<MigrationOrder>{order(5, 0, 1)}));
  // r4 (38 blocks): source after (90 - 46) / 4 = 11 <= destination after (100 - 38) / 1 = 62.
  o.choice = MigrationChoice::kLongestFirst;
  EXPECT_EQ(plan(v, o), (std::vector<MigrationOrder>{order(4, 0, 1)}));
}

TEST(MigrationPlannerTest, NoMigrationWhenTheSpreadIsBelowMinSpread) {
  // Destination 1: M 100, two running of 512 tokens (32 each): F = (100 - 64) / 2 = 18 > 16.
  // Spread 18 - 1.2 = 16.8. Low-priority-shortest takes r5 (7 blocks):
  //   source after (90 - 77) / 4 = 3.25 <= destination after (100 - 71) / 3 = 9.67.
  ClusterView v = choice_view();
  v.instances[1] = inst(1, 100, {running(40, 512), running(41, 512)});
  MigrationPlannerOptions o;
  EXPECT_EQ(plan(v, o), (std::vector<MigrationOrder>{order(5, 0, 1)}));  // min_spread 8
  o.min_spread = 16.0;
  EXPECT_EQ(plan(v, o), (std::vector<MigrationOrder>{order(5, 0, 1)}));
  o.min_spread = 17.0;
  EXPECT_TRUE(plan(v, o).empty());
  // Neither is a source or a destination past the thresholds: nothing, whatever the spread.
  o = MigrationPlannerOptions{};
  o.destination_freeness = 18.0;  // 18 is not above 18
  EXPECT_TRUE(plan(v, o).empty());
  o = MigrationPlannerOptions{};
  o.source_freeness = 1.2;  // 1.2 is not below 1.2
  EXPECT_TRUE(plan(v, o).empty());
}

TEST(MigrationPlannerTest, NoMigrationInvolvesAnInstanceWithAMigratingRequest) {
  ClusterView v = four();
  // 2's only request is migrating (it still counts: F = 90): 2 is no destination, so
  // source 1 pairs with 0: r2 -> 0, source after 4 <= destination after (100 - 36) / 3 = 21.33.
  v.instances[2].requests[0].migrating = true;
  EXPECT_EQ(plan(v, with_max(2)), (std::vector<MigrationOrder>{order(2, 1, 0)}));
  // 1 has a migrating request too: only 3 is a source left: r7 -> 0.
  v.instances[1].requests[5].migrating = true;
  EXPECT_EQ(plan(v, with_max(2)), (std::vector<MigrationOrder>{order(7, 3, 0)}));
  // And with 0 migrating as well, no destination is left.
  v.instances[0].requests[1].migrating = true;
  EXPECT_TRUE(plan(v, with_max(2)).empty());
}

TEST(MigrationPlannerTest, AntiPingPongSkipsMovesThatWouldInvertTheImbalance) {
  // 0: M 100, running r1 640 tokens (40), r2 960 prio 1 (60): F = 0.
  // 1: M 100, running 2 x 256 tokens (16 + 16): F = (100 - 32) / 2 = 34; spread 34.
  // r1: source after (100 - 60) / 1 = 40 > destination after (100 - 72) / 3 = 9.33: no.
  // r2: source after (100 - 40) / 1 = 60 > destination after (100 - 92) / 3 = 2.67: no.
  ClusterView v = view({inst(0, 100, {running(1, 640), running(2, 960, 1)}),
                        inst(1, 100, {running(3, 256), running(4, 256)})});
  EXPECT_TRUE(plan(v).empty());
  // Add r5 (48 tokens, 3 blocks) with M 103: F = (103 - 103) / 3 = 0. Longest-first
  // tries r2: source (103 - 43) / 2 = 30 > destination 2.67; r1: (103 - 63) / 2 = 20 >
  // 9.33; then r5: source (103 - 100) / 2 = 1.5 <= destination (100 - 35) / 3 = 21.67: r5.
  v.instances[0] = inst(0, 103, {running(1, 640), running(2, 960, 1), running(5, 48)});
  MigrationPlannerOptions o;
  o.choice = MigrationChoice::kLongestFirst;
  EXPECT_EQ(plan(v, o), (std::vector<MigrationOrder>{order(5, 0, 1)}));
}

TEST(MigrationPlannerTest, ADestinationWithoutTheRoomIsSkipped) {
  // choice_view(), but 1's free blocks say 7: r5 (100 tokens) needs ceil(101 / 16) = 7
  // blocks, fits; with 6 it does not, nor does any other request: nothing.
  ClusterView v = choice_view();
  v.instances[1].num_free_blocks = 7;
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(5, 0, 1)}));
  v.instances[1].num_free_blocks = 6;
  EXPECT_TRUE(plan(v).empty());
}

TEST(MigrationPlannerTest, DrainMovesEveryRunningRequestToDistinctDestinations) {
  // 0 (draining): running r1 100 tokens, r2 200, r3 50; queued r4; r5 already migrating.
  // Destinations by freeness: 2 (empty: 100), 3 (20 blocks: 80), 1 (40 blocks: 60);
  // 4 is a prefill instance. Low-priority-shortest order: r3, r1, r2.
  ClusterView v = view({inst(0, 100, {running(1, 100), running(2, 200), running(3, 50), queued(4, 30),
                                      migrating(5, 40)}),
                        inst(1, 100, {running(10, 640)}), inst(2, 100), inst(3, 100, {running(11, 320)}),
                        inst(4, 100)});
  v.instances[0].draining = true;
  v.instances[4].role = InstanceRole::kPrefill;
  const auto drain = MigrationReason::kDrain;
  // Three orders although max_migrations is 1: up to one per destination.
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(3, 0, 2, drain), order(1, 0, 3, drain),
                                                  order(2, 0, 1, drain)}));
  // A destination must fit the request: with 3 free blocks 2 fits none of them (r3 needs
  // ceil(51 / 16) = 4), so r3 -> 3, r1 -> 1, and r2 waits for the next call.
  v.instances[2].num_free_blocks = 3;
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(3, 0, 3, drain), order(1, 0, 1, drain)}));
  v.instances[2].num_free_blocks = 100;
  // With 3 unhealthy, two destinations: r3 -> 2, r1 -> 1; r2 waits for the next call.
  v.instances[3].healthy = false;
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(3, 0, 2, drain), order(1, 0, 1, drain)}));
  // A draining instance is no destination, and a drain destination takes no other order:
  // 2 draining too (empty) leaves 1 for r3 alone.
  v.instances[2].draining = true;
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(3, 0, 1, drain)}));
}

TEST(MigrationPlannerTest, DefragmentsAnInstanceWhoseHeadRequestCannotStart) {
  // 0: M 20, running r1 160 tokens (10), r2 64 (4), queued r3 127 tokens: needs
  //    ceil(128 / 16) = 8 blocks > 6 free. sum V = 22, F = (20 - 22) / 2 = -1.
  // 1: M 20, running r4 64 tokens (4): 16 free, F = 16 (not above 16: no load balance).
  // The cluster has 6 + 16 = 22 >= 8 free blocks. Low-priority-shortest: r2, fits 1
  // (ceil(65 / 16) = 5 <= 16); source after (20 - 18) / 1 = 2 <= destination after
  // (20 - 8) / 2 = 6.
  ClusterView v = view({inst(0, 20, {running(1, 160), running(2, 64), queued(3, 127)}), inst(1, 20, {running(4, 64)})});
  const auto defrag = MigrationReason::kDefragment;
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(2, 0, 1, defrag)}));
  // Longest-first tries r1 first: source after (20 - 12) / 1 = 8 > destination after
  // (20 - 14) / 2 = 3 (anti-ping-pong), so r2 again.
  MigrationPlannerOptions o;
  o.choice = MigrationChoice::kLongestFirst;
  EXPECT_EQ(plan(v, o), (std::vector<MigrationOrder>{order(2, 0, 1, defrag)}));
  o = MigrationPlannerOptions{};
  o.defragment = false;
  EXPECT_TRUE(plan(v, o).empty());
  // The head needs ceil(401 / 16) = 26 > 22 free blocks in the whole cluster: moving does not help.
  v.instances[0].requests[2].num_tokens = 400;
  EXPECT_TRUE(plan(v).empty());
  // A head that fits needs nothing.
  v.instances[0].requests[2].num_tokens = 95;  // ceil(96 / 16) = 6 <= 6
  EXPECT_TRUE(plan(v).empty());
}

TEST(MigrationPlannerTest, DefragmentationComesAfterLoadBalanceAndSkipsItsInstances) {
  // four() plus a queued request on 3 that cannot start (ceil(101 / 16) = 7 > 4 free),
  // and 4: M 250, 12 running of 160 tokens (120): F = 130 / 12 = 10.83, 130 free (no
  // load-balance destination: not above 16).
  // 3's F = (100 - 103) / 4 = -0.75: the least free source, paired with 2
  // (r7: source after (100 - 79) / 3 = 7 <= destination after (100 - 34) / 2 = 33);
  // 1 pairs with 0 (r2: 4 <= (100 - 36) / 3 = 21.33). 3 is in an order already: no
  // defragmentation of it, although 4 could take a request.
  ClusterView v = four();
  v.instances[3].requests.push_back(queued(11, 100));
  std::vector<RequestLoad> small;
  for (uint64_t id = 50; id < 62; ++id) small.push_back(running(id, 160));
  v.instances.push_back(inst(4, 250, small));
  EXPECT_EQ(plan(v, with_max(4)), (std::vector<MigrationOrder>{order(7, 3, 2), order(2, 1, 0)}));
  // With one order per call the budget is spent by load balance.
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(7, 3, 2)}));
  // 0 and 2 busy migrating: no load-balance destination. 3 is defragmented: the freest
  // other destination is 4 (then 1); r7 fits (25 <= 130 blocks) and source after 7 <=
  // destination after (250 - 144) / 13 = 8.15.
  v.instances[0].requests[0].migrating = true;
  v.instances[2].requests[0].migrating = true;
  EXPECT_EQ(plan(v, with_max(4)), (std::vector<MigrationOrder>{order(7, 3, 4, MigrationReason::kDefragment)}));
}

TEST(MigrationPlannerTest, LoadBalanceAndDefragmentationShareMaxMigrations) {
  // 0 (B): the defragmentation case above: F = -1, head needs 8 blocks > 6 free.
  // 1 (C): M 20, running r4 64 tokens (4): F = 16, 16 free.
  // 2 (S): choice_view()'s source (requests r11..r15): F = 1.2.
  // 3 (D1): M 100, empty (F = 100) but only 4 free blocks.
  // 4 (D2): M 100, running 2 x 512 tokens (32 each): F = 18, 36 free.
  // Sources: B (-1), S (1.2); destinations: D1 (100), D2 (18).
  // Pair (B, D1): r2 needs ceil(65 / 16) = 5 > 4 blocks, r1 11: no order.
  // Pair (S, D2): r15 (priority 0, 100 tokens): 7 <= 36 blocks, source after
  //   (90 - 77) / 4 = 3.25 <= destination after (100 - 71) / 3 = 9.67.
  // Defragmentation of B: D1 does not fit r2, C does: source after (20 - 18) / 1 = 2 <=
  //   destination after (20 - 8) / 2 = 6.
  InstanceLoad d1 = inst(3, 100);
  d1.num_free_blocks = 4;
  const ClusterView v = view({inst(0, 20, {running(1, 160), running(2, 64), queued(3, 127)}),
                              inst(1, 20, {running(4, 64)}),
                              inst(2, 90, {running(11, 300), running(12, 100, 1), running(13, 200), running(14, 600),
                                           running(15, 100)}),
                              d1, inst(4, 100, {running(40, 512), running(41, 512)})});
  EXPECT_EQ(plan(v), (std::vector<MigrationOrder>{order(15, 2, 4)}));  // max_migrations 1: spent
  EXPECT_EQ(plan(v, with_max(2)),
            (std::vector<MigrationOrder>{order(15, 2, 4), order(2, 0, 1, MigrationReason::kDefragment)}));
}

TEST(MigrationPlannerTest, NeedsRequestListsAndSkipsUnhealthyOrNonMixedInstances) {
  ClusterView v = choice_view();
  v.with_requests = false;
  EXPECT_TRUE(plan(v).empty());
  v = choice_view();
  v.instances[1].healthy = false;
  EXPECT_TRUE(plan(v).empty());
  v = choice_view();
  v.instances[1].role = InstanceRole::kDecode;
  EXPECT_TRUE(plan(v).empty());
  v = choice_view();
  v.instances[0].role = InstanceRole::kPrefill;
  EXPECT_TRUE(plan(v).empty());
}

TEST(MigrationPlannerTest, ValidateNamesTheField) {
  EXPECT_TRUE(validate(MigrationPlannerOptions{}).ok());
  auto expect_invalid = [](MigrationPlannerOptions o, std::string_view field) {
    const Status s = validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s.message();
    EXPECT_EQ(MigrationPlanner::create(o).status().code(), StatusCode::kInvalidArgument);
  };
  MigrationPlannerOptions o;
  o.source_freeness = std::nan("");
  expect_invalid(o, "source_freeness");
  o = {};
  o.destination_freeness = o.source_freeness;
  expect_invalid(o, "destination_freeness");
  o = {};
  o.min_spread = -1.0;
  expect_invalid(o, "min_spread");
  o = {};
  o.max_migrations = 0;
  expect_invalid(o, "max_migrations");
  o = {};
  o.choice = static_cast<MigrationChoice>(9);
  expect_invalid(o, "choice");
  o = {};
  o.freeness.high_priority_headroom_tokens = -5;
  expect_invalid(o, "high_priority_headroom_tokens");
  EXPECT_TRUE(MigrationPlanner::create(MigrationPlannerOptions{}).ok());
}

TEST(MigrationPlannerTest, NamesAndParsing) {
  EXPECT_EQ(migration_reason_name(MigrationReason::kLoadBalance), "load_balance");
  EXPECT_EQ(migration_reason_name(MigrationReason::kDefragment), "defragment");
  EXPECT_EQ(migration_reason_name(MigrationReason::kDrain), "drain");
  for (MigrationChoice c : {MigrationChoice::kShortestFirst, MigrationChoice::kLowPriorityShortestFirst,
                            MigrationChoice::kLongestFirst}) {
    auto parsed = parse_migration_choice(migration_choice_name(c));
    ASSERT_TRUE(parsed.ok()) << migration_choice_name(c);
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(*parse_migration_choice("shortest"), MigrationChoice::kShortestFirst);
  EXPECT_EQ(*parse_migration_choice("low-priority"), MigrationChoice::kLowPriorityShortestFirst);
  EXPECT_EQ(*parse_migration_choice("longest"), MigrationChoice::kLongestFirst);
  auto bad = parse_migration_choice("random");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown migration choice 'random' (shortest, low-priority, longest)");
  std::ostringstream os;
  os << order(7, 1, 2, MigrationReason::kDrain);
  EXPECT_EQ(os.str(), "r7 i1->i2 drain");
}

}  // namespace
}  // namespace ecoserve::policy
