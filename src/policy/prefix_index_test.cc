#include "policy/prefix_index.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ecoserve::policy {
namespace {

std::vector<kv::BlockHash> chain(std::initializer_list<kv::BlockHash> h) { return std::vector<kv::BlockHash>(h); }

int32_t blocks_of(const std::vector<PrefixIndex::Match>& m, int32_t instance) {
  for (const auto& x : m) {
    if (x.instance == InstanceId(instance)) return x.num_blocks;
  }
  return 0;
}

TEST(PrefixIndexTest, LongestLeadingMatchPerInstance) {
  PrefixIndex idx;
  idx.insert(InstanceId(0), chain({1, 2, 3, 4}));
  idx.insert(InstanceId(1), chain({1, 2}));
  idx.insert(InstanceId(2), chain({9, 2, 3}));  // shares later hashes, not the first
  const auto m = idx.match(chain({1, 2, 3, 5}));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(blocks_of(m, 0), 3);
  EXPECT_EQ(blocks_of(m, 1), 2);
  EXPECT_EQ(blocks_of(m, 2), 0);
  EXPECT_TRUE(idx.match(chain({7, 1, 2})).empty());  // stops at the first block no one holds
  EXPECT_TRUE(idx.match({}).empty());
  EXPECT_EQ(idx.match_instance(InstanceId(0), chain({1, 2, 3, 5})), 3);
  EXPECT_EQ(idx.match_instance(InstanceId(7), chain({1})), 0);
}

TEST(PrefixIndexTest, AHoleEndsAnInstancesMatch) {
  PrefixIndex idx;
  idx.insert(InstanceId(0), chain({1, 3}));  // block 2 missing (evicted)
  idx.insert(InstanceId(1), chain({1, 2, 3}));
  const auto m = idx.match(chain({1, 2, 3}));
  EXPECT_EQ(blocks_of(m, 0), 1);
  EXPECT_EQ(blocks_of(m, 1), 3);
}

TEST(PrefixIndexTest, CapacityEvictsTheLeastRecentlyUsed) {
  PrefixIndex idx(PrefixIndex::Options{.capacity_blocks = 3});
  idx.insert(InstanceId(0), chain({1, 2, 3}));
  idx.insert(InstanceId(0), chain({1}));      // refresh 1: 2 is now the oldest
  idx.insert(InstanceId(0), chain({10}));     // evicts 2
  EXPECT_EQ(idx.num_blocks(InstanceId(0)), 3);
  EXPECT_EQ(idx.match_instance(InstanceId(0), chain({1, 2, 3})), 1);
  EXPECT_EQ(idx.match_instance(InstanceId(0), chain({10})), 1);
  // Another instance's blocks are counted separately.
  idx.insert(InstanceId(1), chain({1, 2, 3}));
  EXPECT_EQ(idx.num_blocks(InstanceId(1)), 3);
  EXPECT_EQ(idx.match_instance(InstanceId(1), chain({1, 2, 3})), 3);
}

TEST(PrefixIndexTest, EvictAndRemoveInstance) {
  PrefixIndex idx;
  idx.insert(InstanceId(0), chain({1, 2, 3}));
  idx.insert(InstanceId(1), chain({1, 2, 3}));
  idx.evict(InstanceId(0), chain({2}));
  EXPECT_EQ(blocks_of(idx.match(chain({1, 2, 3})), 0), 1);
  idx.remove_instance(InstanceId(1));
  const auto m = idx.match(chain({1, 2, 3}));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].instance, InstanceId(0));
  EXPECT_EQ(idx.num_blocks(InstanceId(1)), 0);
  idx.remove_instance(InstanceId(0));
  EXPECT_TRUE(idx.match(chain({1})).empty());
}

}  // namespace
}  // namespace ecoserve::policy
