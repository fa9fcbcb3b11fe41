#include "kv/block_allocator.h"

#include <gtest/gtest.h>

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

TEST(BlockAllocatorTest, BlocksForTokens) {
  EXPECT_EQ(blocks_for_tokens(0, 16), 0);
  EXPECT_EQ(blocks_for_tokens(1, 16), 1);
  EXPECT_EQ(blocks_for_tokens(16, 16), 1);
  EXPECT_EQ(blocks_for_tokens(17, 16), 2);
  EXPECT_EQ(blocks_for_tokens(5, 1), 5);
}

}  // namespace
}  // namespace ecoserve::kv
