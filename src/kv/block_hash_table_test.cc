#include "kv/block_hash_table.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace ecoserve::kv {
namespace {

TEST(BlockHashTable, InsertFindErase) {
  BlockHashTable t(4);
  EXPECT_EQ(t.find(42), -1);
  EXPECT_TRUE(t.insert(42, 7));
  EXPECT_FALSE(t.insert(42, 8));  // present: unchanged
  EXPECT_EQ(t.find(42), 7);
  EXPECT_TRUE(t.insert(0, 1));  // key 0 is an ordinary key
  EXPECT_EQ(t.find(0), 1);
  EXPECT_TRUE(t.erase(42));
  EXPECT_FALSE(t.erase(42));
  EXPECT_EQ(t.find(42), -1);
  EXPECT_EQ(t.size(), 1);
}

TEST(BlockHashTable, FullTableRefusesMore) {
  BlockHashTable t(3);  // 8 slots: at most 4 entries keep it half empty
  int inserted = 0;
  for (uint64_t k = 1; k <= 10; ++k) inserted += t.insert(k * 1000003, static_cast<int32_t>(k));
  EXPECT_EQ(inserted, 4);
  EXPECT_EQ(t.size(), 4);
}

// Colliding probe runs: erasing from the middle keeps every other key findable.
TEST(BlockHashTable, MatchesAMapUnderRandomChurn) {
  BlockHashTable t(512);
  std::unordered_map<uint64_t, int32_t> ref;
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 200; ++i) keys.push_back(rng() & 0xfff00000ull);  // few distinct home slots
  for (int step = 0; step < 20000; ++step) {
    const uint64_t k = keys[rng() % keys.size()];
    if (rng() % 2) {
      const bool fresh = !ref.count(k) && ref.size() < 512;
      EXPECT_EQ(t.insert(k, step), fresh);
      if (fresh) ref[k] = step;
    } else {
      EXPECT_EQ(t.erase(k), ref.erase(k) == 1);
    }
    if (step % 97 == 0) {
      for (uint64_t q : keys) EXPECT_EQ(t.find(q), ref.count(q) ? ref[q] : -1);
    }
  }
  EXPECT_EQ(t.size(), static_cast<int32_t>(ref.size()));
}

}  // namespace
}  // namespace ecoserve::kv
