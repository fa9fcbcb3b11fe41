#include "kv/block_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace ecoserve::kv {
namespace {

TEST(BlockAllocatorTest, AllocateShareRelease) {
  BlockAllocator a(3);
  EXPECT_EQ(a.num_free(), 3);
  BlockId b0 = *a.allocate();
  BlockId b1 = *a.allocate();
  EXPECT_EQ(b0.value, 0);
  EXPECT_EQ(b1.value, 1);
  a.share(b0);
  EXPECT_EQ(a.refcount(b0), 2);
  EXPECT_FALSE(a.release(b0));
  EXPECT_TRUE(a.release(b0));
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_EQ(a.num_used(), 1);
}

TEST(BlockAllocatorTest, ExhaustionIsAnErrorNotACrash) {
  BlockAllocator a(2);
  auto two = a.allocate_n(2);
  ASSERT_TRUE(two.ok());
  auto none = a.allocate();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  a.release((*two)[0]);
  auto three = a.allocate_n(2);
  EXPECT_EQ(three.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(a.num_free(), 1) << "allocate_n is all or nothing";
}

TEST(BlockAllocatorDeathTest, DoubleReleaseAborts) {
  BlockAllocator a(1);
  BlockId b = *a.allocate();
  a.release(b);
  EXPECT_DEATH(a.release(b), "free block");
}

TEST(BlockAllocatorTest, AllocateFreeTakesThatBlock) {
  BlockAllocator a(100);
  EXPECT_EQ(a.allocate_free(BlockId(70)).value, 70);
  EXPECT_EQ(a.refcount(BlockId(70)), 1);
  EXPECT_FALSE(a.is_free(BlockId(70)));
  EXPECT_EQ(a.num_free(), 99);
  EXPECT_EQ(a.allocate(BlockId(69))->value, 0) << "70 is taken: a new run, at the start of [0, 70)";
}

TEST(BlockAllocatorDeathTest, AllocateFreeOfABlockInUseAborts) {
  BlockAllocator a(4);
  const BlockId b = *a.allocate();
  EXPECT_DEATH(a.allocate_free(b), "in use or out of range");
  EXPECT_DEATH(a.allocate_free(BlockId(4)), "in use or out of range");
}

std::vector<int32_t> ids(const std::vector<BlockId>& blocks) {
  std::vector<int32_t> v;
  for (BlockId b : blocks) v.push_back(b.value);
  return v;
}

// Two sequences taking blocks in turn (batched decode) each grow in a run of their own:
// the second starts halfway into the free blocks after the first, and each next block
// lands right after its sequence's last one.
TEST(BlockAllocatorTest, InterleavedSequencesGrowInRunsOfTheirOwn) {
  BlockAllocator a(64);
  std::vector<BlockId> s1 = *a.allocate_n(3), s2 = *a.allocate_n(3);
  EXPECT_EQ(ids(s1), (std::vector<int32_t>{0, 1, 2})) << "a stretch from block 0 is taken from its start";
  EXPECT_EQ(ids(s2), (std::vector<int32_t>{32, 33, 34})) << "[3, 64): 29 spare blocks before, 29 after";
  for (int i = 0; i < 4; ++i) {
    s1.push_back(*a.allocate(s1.back()));
    s2.push_back(*a.allocate(s2.back()));
  }
  EXPECT_EQ(ids(s1), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ids(s2), (std::vector<int32_t>{32, 33, 34, 35, 36, 37, 38}));
  // A third starts halfway into the first of the longest stretches, [7, 32) and [39, 64).
  EXPECT_EQ(a.allocate()->value, 7 + 12);
  EXPECT_EQ(a.num_free(), 64 - 15);
}

// When the block after a sequence's last is taken, the next one starts a new run in the
// longest free stretch; stretches are found across the bitmap's 64-block words, and one
// no longer than the run asked for is taken from its start.
TEST(BlockAllocatorTest, ANewRunGoesToTheLongestFreeStretch) {
  BlockAllocator a(200);
  const std::vector<BlockId> all = *a.allocate_n(200);
  for (int32_t b = 0; b < 200; ++b) ASSERT_EQ(all[b].value, b);
  EXPECT_FALSE(a.allocate().ok());
  auto free_range = [&](int32_t from, int32_t to) {
    for (int32_t b = from; b < to; ++b) EXPECT_TRUE(a.release(BlockId(b)));
  };
  free_range(5, 10);     // 5 blocks
  free_range(63, 130);   // 67 blocks over three words
  free_range(150, 161);  // 11
  free_range(190, 200);  // 10, up to the last block
  EXPECT_TRUE(a.is_free(BlockId(63)) && a.is_free(BlockId(129)) && !a.is_free(BlockId(130)));
  EXPECT_EQ(a.allocate(BlockId(40))->value, 63 + 33) << "41 is in use: halfway into [63, 130)";
  EXPECT_EQ(a.allocate(BlockId(4))->value, 5) << "after 4 comes 5";
  // Now [63, 96) and [97, 130) are 33 long each: the first of equals, halfway for 9.
  EXPECT_EQ(a.allocate(BlockAllocator::kNoBlock, 9)->value, 63 + 12);
  // A run of 40 fits nowhere whole: from the start of the longest stretch, [97, 130).
  EXPECT_EQ(a.allocate(BlockAllocator::kNoBlock, 40)->value, 97);
  EXPECT_EQ(a.allocate(BlockId(199))->value, 98 + 15) << "past the last block: a new run, halfway into [98, 130)";
}

// Against a model of the free set, under random allocations (with and without a
// sequence's last block) and releases: no block is handed out twice, the count holds,
// the block after `after` is taken whenever it is free, and a new run starts in a
// longest free stretch.
TEST(BlockAllocatorTest, RandomUseMatchesAModelOfTheFreeBlocks) {
  for (int32_t n : {1, 63, 64, 65, 300}) {
    BlockAllocator a(n);
    std::vector<bool> used(n, false);
    std::vector<std::vector<BlockId>> seqs(5);
    std::mt19937 rng(static_cast<unsigned>(n));
    for (int step = 0; step < 4000; ++step) {
      std::vector<BlockId>& seq = seqs[rng() % seqs.size()];
      if (rng() % 3 == 0 && !seq.empty()) {  // the sequence finishes
        for (BlockId b : seq) {
          EXPECT_TRUE(a.release(b));
          used[b.value] = false;
        }
        seq.clear();
        continue;
      }
      const BlockId after = seq.empty() ? BlockAllocator::kNoBlock : seq.back();
      const int32_t run = 1 + static_cast<int32_t>(rng() % 4);
      StatusOr<BlockId> got = a.allocate(after, run);
      const int32_t free_count = static_cast<int32_t>(std::count(used.begin(), used.end(), false));
      ASSERT_EQ(a.num_free() + (got.ok() ? 1 : 0), free_count);
      if (!got.ok()) {
        ASSERT_EQ(free_count, 0);
        continue;
      }
      const int32_t b = got->value;
      ASSERT_TRUE(b >= 0 && b < n && !used[b]) << "block " << b << " handed out twice";
      if (after.value >= 0 && after.value + 1 < n && !used[after.value + 1]) {
        ASSERT_EQ(b, after.value + 1);
      } else {
        // The longest free stretch (first of equals) holds b.
        int32_t best = -1, best_len = 0;
        for (int32_t i = 0; i < n;) {
          if (used[i]) {
            ++i;
            continue;
          }
          int32_t j = i;
          while (j < n && !used[j]) ++j;
          if (j - i > best_len) best = i, best_len = j - i;
          i = j;
        }
        ASSERT_GE(b, best);
        ASSERT_LT(b, best + best_len);
      }
      used[b] = true;
      seq.push_back(*got);
    }
  }
}

TEST(BlockAllocatorTest, BlocksForTokens) {
  EXPECT_EQ(blocks_for_tokens(0, 16), 0);
  EXPECT_EQ(blocks_for_tokens(1, 16), 1);
  EXPECT_EQ(blocks_for_tokens(16, 16), 1);
  EXPECT_EQ(blocks_for_tokens(17, 16), 2);
  EXPECT_EQ(blocks_for_tokens(5, 1), 5);
}

}  // namespace
}  // namespace ecoserve::kv
