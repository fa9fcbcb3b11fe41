#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

namespace ecoserve::kv {
namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 0) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

// Allocates blocks for `tokens`, "computes" them and registers the full ones, like a scheduler.
std::vector<BlockId> fill(PrefixCache& c, const std::vector<int32_t>& tokens) {
  std::vector<BlockHash> h;
  PrefixCache::extend_hashes(tokens, kBs, &h);
  std::vector<BlockId> blocks;
  c.acquire(h, tokens, static_cast<int32_t>(h.size()), &blocks);
  while (static_cast<int32_t>(blocks.size()) < blocks_for_tokens(tokens.size(), kBs)) {
    blocks.push_back(*c.allocate(blocks.empty() ? BlockAllocator::kNoBlock : blocks.back()));
  }
  for (size_t i = 0; i < h.size(); ++i) {
    c.insert(h[i], blocks[i], std::span<const int32_t>(tokens).subspan(i * kBs, kBs));
  }
  return blocks;
}

void release_all(PrefixCache& c, const std::vector<BlockId>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) c.release(*it);
}

TEST(PrefixCacheTest, HashChainDependsOnParentAndTokens) {
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<BlockHash> h;
  PrefixCache::extend_hashes(a, kBs, &h);
  ASSERT_EQ(h.size(), 2u);  // the 9th token is a partial block
  EXPECT_EQ(h[0], PrefixCache::hash_block(PrefixCache::kRootHash, std::span<const int32_t>(a).first(4)));
  EXPECT_EQ(h[1], PrefixCache::hash_block(h[0], std::span<const int32_t>(a).subspan(4, 4)));
  // Same second block after a different first block: different key.
  std::vector<int32_t> b = {0, 2, 3, 4, 5, 6, 7, 8};
  std::vector<BlockHash> hb;
  PrefixCache::extend_hashes(b, kBs, &hb);
  EXPECT_NE(hb[1], h[1]);
  // Incremental extension gives the same keys.
  std::vector<BlockHash> inc;
  PrefixCache::extend_hashes(std::span<const int32_t>(a).first(5), kBs, &inc);
  EXPECT_EQ(inc.size(), 1u);
  PrefixCache::extend_hashes(a, kBs, &inc);
  EXPECT_EQ(inc, h);
}

TEST(PrefixCacheTest, SharedPrefixReusesSameBlocks) {
  BlockAllocator alloc(10);
  PrefixCache c(&alloc, kBs);
  auto p1 = iota_tokens(10);  // blocks [0..3] [4..7] + partial
  auto b1 = fill(c, p1);
  ASSERT_EQ(b1.size(), 3u);
  EXPECT_EQ(c.num_cached(), 2);

  // A second sequence sharing the first 8 tokens, then diverging.
  std::vector<int32_t> p2 = iota_tokens(8);
  p2.push_back(100);
  p2.push_back(101);
  p2.push_back(102);
  p2.push_back(103);
  std::vector<BlockHash> h2;
  PrefixCache::extend_hashes(p2, kBs, &h2);
  auto m = c.match(h2, p2, 3);
  EXPECT_EQ(m.num_blocks, 2);
  EXPECT_EQ(m.num_evictable, 0);  // p1 still holds them
  std::vector<BlockId> b2;
  EXPECT_EQ(c.acquire(h2, p2, 3, &b2), 2);
  EXPECT_EQ(b2[0], b1[0]);
  EXPECT_EQ(b2[1], b1[1]);
  EXPECT_EQ(c.user_refcount(b1[0]), 2);
  EXPECT_EQ(alloc.refcount(b1[0]), 3);  // two users + the cache
  EXPECT_EQ(c.num_in_use(), 3);

  release_all(c, b1);
  EXPECT_EQ(c.num_evictable(), 0) << "p2 still uses the shared blocks";
  EXPECT_EQ(c.num_in_use(), 2);
  release_all(c, b2);
  EXPECT_EQ(c.num_evictable(), 2);
  EXPECT_EQ(c.num_in_use(), 0);
  EXPECT_EQ(c.num_free(), 10);
  // Still hit-able after everybody left.
  EXPECT_EQ(c.match(h2, p2, 3).num_blocks, 2);
  EXPECT_EQ(c.match(h2, p2, 3).num_evictable, 2);
  // max_blocks limits the match.
  EXPECT_EQ(c.match(h2, p2, 1).num_blocks, 1);
}

TEST(PrefixCacheTest, CollisionIsNotAHit) {
  BlockAllocator alloc(4);
  PrefixCache c(&alloc, kBs);
  auto p = iota_tokens(4);
  auto b = fill(c, p);
  std::vector<BlockHash> h;
  PrefixCache::extend_hashes(p, kBs, &h);
  // Same key, different tokens (a forged collision): verified and rejected.
  std::vector<int32_t> other = {9, 9, 9, 9};
  EXPECT_EQ(c.match(h, other, 1).num_blocks, 0);
  EXPECT_EQ(c.match(h, p, 1).num_blocks, 1);
  release_all(c, b);
}

TEST(PrefixCacheTest, InsertDuplicateContentKeepsFirstCopy) {
  BlockAllocator alloc(4);
  PrefixCache c(&alloc, kBs);
  auto p = iota_tokens(4);
  std::vector<BlockHash> h;
  PrefixCache::extend_hashes(p, kBs, &h);
  BlockId x = *c.allocate();
  BlockId y = *c.allocate();
  EXPECT_TRUE(c.insert(h[0], x, p));
  EXPECT_FALSE(c.insert(h[0], y, p));
  EXPECT_FALSE(c.insert(h[0], x, p));
  EXPECT_TRUE(c.is_cached(x));
  EXPECT_FALSE(c.is_cached(y));
  c.release(y);
  EXPECT_EQ(c.num_free_raw(), 3) << "the uncached copy goes straight back to the free list";
  c.release(x);
  EXPECT_EQ(c.num_evictable(), 1);
}

TEST(PrefixCacheTest, LruEvictionOrder) {
  BlockAllocator alloc(4);
  PrefixCache c(&alloc, kBs);
  // Three single-block sequences A, B, C, released in the order B, A, C.
  auto a = iota_tokens(4, 0), b = iota_tokens(4, 100), cc = iota_tokens(4, 200);
  auto ba = fill(c, a), bb = fill(c, b), bc = fill(c, cc);
  c.release(bb[0]);
  c.release(ba[0]);
  c.release(bc[0]);
  EXPECT_EQ(c.num_evictable(), 3);
  EXPECT_EQ(c.num_free_raw(), 1);

  // Touch A again (hit), then let it go: A becomes most recently used.
  std::vector<BlockHash> ha;
  PrefixCache::extend_hashes(a, kBs, &ha);
  std::vector<BlockId> got;
  ASSERT_EQ(c.acquire(ha, a, 1, &got), 1);
  EXPECT_EQ(got[0], ba[0]);
  EXPECT_EQ(c.num_evictable(), 2);
  c.release(got[0]);  // LRU order now: B, C, A

  BlockId f = *c.allocate();  // the free block first: nothing evicted
  EXPECT_EQ(c.num_evictions(), 0);
  BlockId e1 = *c.allocate();
  EXPECT_EQ(e1, bb[0]) << "B was least recently used";
  BlockId e2 = *c.allocate();
  EXPECT_EQ(e2, bc[0]);
  BlockId e3 = *c.allocate();
  EXPECT_EQ(e3, ba[0]);
  EXPECT_EQ(c.num_evictions(), 3);
  EXPECT_EQ(c.num_cached(), 0);
  auto none = c.allocate();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  for (BlockId x : {f, e1, e2, e3}) c.release(x);
  EXPECT_EQ(c.num_free_raw(), 4);
}

// allocate_n takes the free blocks first (placed after the table's last block), then
// evicts from the LRU head and hands the victims out in ascending order: a finished
// chain, released tail first, comes back as the run it was.
TEST(PrefixCacheTest, AllocateNHandsEvictedBlocksOutInAscendingOrder) {
  BlockAllocator alloc(6);
  PrefixCache c(&alloc, kBs);
  const std::vector<BlockId> chain = fill(c, iota_tokens(16));
  ASSERT_EQ(chain, (std::vector<BlockId>{BlockId(0), BlockId(1), BlockId(2), BlockId(3)}));
  release_all(c, chain);  // LRU: 3, 2, 1, 0
  ASSERT_EQ(c.num_evictable(), 4);
  std::vector<BlockId> got;
  ASSERT_TRUE(c.allocate_n(4, &got).ok());
  EXPECT_EQ(got, (std::vector<BlockId>{BlockId(4), BlockId(5), BlockId(2), BlockId(3)}))
      << "free 4 and 5 first, then the victims 3 and 2 in ascending order";
  EXPECT_EQ(c.num_evictions(), 2);
  std::vector<BlockId> rest;
  ASSERT_TRUE(c.allocate_n(2, &rest).ok());
  EXPECT_EQ(rest, (std::vector<BlockId>{BlockId(0), BlockId(1)}));
}

TEST(PrefixCacheTest, EvictedParentBreaksChainButNotContent) {
  BlockAllocator alloc(3);
  PrefixCache c(&alloc, kBs);
  auto p = iota_tokens(8);
  auto b = fill(c, p);
  release_all(c, b);  // releases block 1 first: LRU order block1, block0
  BlockId e = *c.allocate();  // one free block exists
  BlockId e2 = *c.allocate();  // evicts the tail block (block 1) first
  EXPECT_EQ(e2, b[1]);
  std::vector<BlockHash> h;
  PrefixCache::extend_hashes(p, kBs, &h);
  EXPECT_EQ(c.match(h, p, 2).num_blocks, 1) << "the first block is still cached";
  c.release(e);
  c.release(e2);
}

TEST(PrefixCacheTest, RandomizedOperationsKeepInvariants) {
  constexpr int32_t kBlocks = 24;
  BlockAllocator alloc(kBlocks);
  PrefixCache c(&alloc, kBs);
  std::mt19937 rng(1234);
  // A few prompt "families" so that prefixes collide often.
  std::vector<std::vector<int32_t>> families;
  for (int f = 0; f < 4; ++f) families.push_back(iota_tokens(24, f * 1000));
  struct Seq {
    std::vector<int32_t> tokens;
    std::vector<BlockHash> hashes;
    std::vector<BlockId> blocks;
  };
  std::vector<Seq> live;
  std::map<int32_t, int32_t> users;  // block -> expected user refs
  int64_t hits = 0;

  auto check = [&] {
    int32_t in_use = 0;
    for (int32_t b = 0; b < kBlocks; ++b) {
      const int32_t u = users.count(b) ? users[b] : 0;
      ASSERT_GE(c.user_refcount(BlockId(b)), 0);
      ASSERT_EQ(c.user_refcount(BlockId(b)), u) << "block " << b;
      if (u > 0) in_use++;
    }
    ASSERT_EQ(c.num_in_use(), in_use);
    ASSERT_EQ(c.num_free_raw() + c.num_evictable() + in_use, kBlocks);
    ASSERT_LE(c.num_cached(), kBlocks);
  };

  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {  // new sequence: family prefix of random length + random tail
      Seq s;
      const auto& fam = families[rng() % families.size()];
      const int32_t plen = static_cast<int32_t>(rng() % 20);
      s.tokens.assign(fam.begin(), fam.begin() + plen);
      const int32_t tail = 1 + static_cast<int32_t>(rng() % 6);
      for (int32_t i = 0; i < tail; ++i) s.tokens.push_back(static_cast<int32_t>(rng() % 3));
      PrefixCache::extend_hashes(s.tokens, kBs, &s.hashes);
      const int32_t need = blocks_for_tokens(s.tokens.size(), kBs);
      const int32_t max_hit = (static_cast<int32_t>(s.tokens.size()) - 1) / kBs;
      auto m = c.match(s.hashes, s.tokens, max_hit);
      if (need - m.num_blocks + m.num_evictable > c.num_free()) continue;  // does not fit
      const int32_t got = c.acquire(s.hashes, s.tokens, max_hit, &s.blocks);
      ASSERT_EQ(got, m.num_blocks);
      hits += got;
      while (static_cast<int32_t>(s.blocks.size()) < need) {
        auto b = c.allocate();
        ASSERT_TRUE(b.ok()) << b.status().to_string();
        s.blocks.push_back(*b);
      }
      for (BlockId b : s.blocks) users[b.value]++;
      for (size_t i = got; i < s.hashes.size(); ++i) {
        c.insert(s.hashes[i], s.blocks[i], std::span<const int32_t>(s.tokens).subspan(i * kBs, kBs));
      }
      live.push_back(std::move(s));
    } else if (op < 7 && !live.empty()) {  // release a sequence
      const size_t i = rng() % live.size();
      for (auto it = live[i].blocks.rbegin(); it != live[i].blocks.rend(); ++it) {
        c.release(*it);
        if (--users[it->value] == 0) users.erase(it->value);
      }
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    } else if (op < 8 && !live.empty()) {  // share a sequence's blocks (a fork)
      Seq s = live[rng() % live.size()];
      for (BlockId b : s.blocks) {
        c.share(b);
        users[b.value]++;
      }
      live.push_back(std::move(s));
    } else if (op < 9) {  // allocate a lone block and drop it at once
      auto b = c.allocate();
      if (b.ok()) c.release(*b);
    } else if (rng() % 8 == 0) {
      c.evict_all();
      ASSERT_EQ(c.num_evictable(), 0);
    }
    check();
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(hits, 50) << "the workload should exercise sharing";
  EXPECT_GT(c.num_evictions(), 10) << "the workload should exercise eviction";
  for (auto& s : live) {
    for (BlockId b : s.blocks) c.release(b);
  }
  EXPECT_EQ(c.num_in_use(), 0);
  EXPECT_EQ(c.num_free_raw() + c.num_evictable(), kBlocks);
  c.evict_all();
  EXPECT_EQ(c.num_free_raw(), kBlocks);
}

}  // namespace
}  // namespace ecoserve::kv
