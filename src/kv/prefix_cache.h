// PrefixCache: content-addressed sharing of full KV blocks (automatic prefix caching).
//
// A full block (block_size tokens) is keyed by a hash chain: key(i) =
// XXH3_64bits(key(i-1) || the block's token ids), with key(-1) = kRootHash, so a
// key names the block's tokens *and* everything before them. Cached blocks are
// shared read-only: every user holds one reference in the BlockAllocator, and
// the cache itself holds one more on each cached block. When the last user
// releases a cached block it becomes *evictable*: it stays hit-able, and sits in
// an LRU list; allocate() takes a free block first and otherwise evicts the
// least-recently released cached block. The stored token ids of each cached
// block are compared on every hit, so a hash collision can never hand out the
// wrong KV.
//
// Every block is in exactly one of three states, and
//   num_free_raw() + num_evictable() + num_in_use() == num_blocks():
//   free (allocator refcount 0), evictable (cached, refcount 1 = the cache's own),
//   in use (held by at least one user; may also be cached).
//
// Counters: queries and hits are counted in TOKENS (vLLM's convention), by
// whoever calls record_query() (the scheduler, once per admission).
//
// Cost: every operation is O(1) per block. A large simulation (many instances,
// millions of blocks inserted and evicted) is bound by cache misses here, so the
// batch forms (allocate_n, insert_chain) first prefetch what their blocks will
// touch and then do exactly what the single-block calls would, in the same order.
//
// Ownership: borrows the BlockAllocator, which must outlive the cache and must
// only be used through the cache while the cache exists. Not thread-safe: owned
// by one instance's scheduler thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "kv/block_allocator.h"
#include "kv/block_hash_table.h"

namespace ecoserve::kv {

using BlockHash = std::uint64_t;

class PrefixCache {
 public:
  static constexpr BlockHash kRootHash = 0x9e3779b97f4a7c15ull;

  PrefixCache(BlockAllocator* allocator, int32_t block_size);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int32_t block_size() const { return block_size_; }

  // Key of a block whose tokens are `tokens` (block_size of them) after a block keyed `parent`.
  static BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);
  // Appends to *hashes the keys of the full blocks of `tokens` not hashed yet
  // (hashes->size() .. tokens.size() / block_size - 1). Incremental: O(new tokens).
  static void extend_hashes(std::span<const int32_t> tokens, int32_t block_size,
                            std::vector<BlockHash>* hashes);

  struct Match {
    int32_t num_blocks = 0;     // leading blocks found in the cache
    int32_t num_evictable = 0;  // of those, currently evictable (taking them lowers num_free())
  };
  // Longest cached chain of the first max_blocks `hashes` (tokens: the sequence's
  // tokens, used to verify). No side effects, no counters.
  Match match(std::span<const BlockHash> hashes, std::span<const int32_t> tokens,
              int32_t max_blocks) const;
  // Like match(), and takes one reference on each matched block, appending them
  // to *out. Returns the number of blocks taken.
  int32_t acquire(std::span<const BlockHash> hashes, std::span<const int32_t> tokens,
                  int32_t max_blocks, std::vector<BlockId>* out);

  // A block for new content (refcount 1): a free one, placed after `after` (the
  // sequence's last block) where it can be (BlockAllocator::allocate, `run` blocks to
  // come in a row), else the LRU evictable one (dropped from the cache).
  // RESOURCE_EXHAUSTED when every block is in use.
  StatusOr<BlockId> allocate(BlockId after = BlockAllocator::kNoBlock, int32_t run = 1);
  // n blocks, appended to *out (a sequence's block table): exactly the blocks n calls
  // of allocate(out->back(), the blocks still to come) would hand out (evicting the
  // same blocks), the free ones first, in that order, then the evicted ones in ascending
  // order (a chain is evicted tail first: its run comes back as a run). All or nothing:
  // RESOURCE_EXHAUSTED (and no change) when n > num_free().
  Status allocate_n(int32_t n, std::vector<BlockId>* out);
  // Adds a user reference to a block the caller already holds (or to an evictable block).
  void share(BlockId block);
  // Drops one user reference. A cached block whose last user left becomes the
  // most recently used evictable block; an uncached one returns to the free list.
  void release(BlockId block);
  // Registers a full, computed block that the caller holds under `hash`, with
  // its tokens. Returns false (and leaves the block uncached) when the key is
  // already cached (another copy of the same content) or the block already is.
  bool insert(BlockHash hash, BlockId block, std::span<const int32_t> tokens);
  // insert(hashes[i], blocks[i], tokens[i * block_size, (i + 1) * block_size))
  // for every i in order (hashes and blocks of one size, tokens block_size times
  // that). Returns how many were inserted.
  int32_t insert_chain(std::span<const BlockHash> hashes, std::span<const BlockId> blocks,
                       std::span<const int32_t> tokens);
  // A hint for a coming insert_chain(hashes, blocks, ...): starts loading the map
  // slots and token rows it will touch (a scheduler calls it when it plans the
  // step that computes the blocks, so the loads land while the step runs). No
  // effect on contents; blocks out of range are skipped.
  void prefetch_chain(std::span<const BlockHash> hashes, std::span<const BlockId> blocks) const;

  bool is_cached(BlockId block) const { return cached_[block.value] != 0; }
  // References held by users (not counting the cache's own).
  int32_t user_refcount(BlockId block) const {
    return allocator_->refcount(block) - (cached_[block.value] ? 1 : 0);
  }
  // Blocks with user_refcount() >= 2 (shared by prefix hits or pinned). When 0,
  // every block a user holds is held by that user alone.
  int32_t num_shared() const { return num_shared_; }

  int32_t num_blocks() const { return allocator_->num_blocks(); }
  // Blocks an allocate() can hand out: free plus evictable.
  int32_t num_free() const { return allocator_->num_free() + num_evictable_; }
  int32_t num_free_raw() const { return allocator_->num_free(); }
  int32_t num_evictable() const { return num_evictable_; }
  int32_t num_in_use() const { return num_blocks() - num_free(); }
  int32_t num_cached() const { return map_.size(); }

  // Evicts every evictable block (tests, reset). Returns how many.
  int32_t evict_all();

  void record_query(int64_t query_tokens, int64_t hit_tokens) {
    query_tokens_ += query_tokens;
    hit_tokens_ += hit_tokens;
  }
  int64_t query_tokens() const { return query_tokens_; }
  int64_t hit_tokens() const { return hit_tokens_; }
  int64_t num_evictions() const { return num_evictions_; }

 private:
  // Block for hashes[i] if cached with matching tokens, else -1.
  int32_t find(BlockHash hash, std::span<const int32_t> block_tokens) const;
  void lru_push_back(int32_t b);
  void lru_remove(int32_t b);
  void evict(int32_t b);

  // Per block: its key while cached, and the stamp of its latest LRU entry.
  struct Meta {
    BlockHash hash = 0;
    uint32_t lru_stamp = 0;
  };
  // The LRU list of evictable blocks is a FIFO queue (push at the tail, evict at
  // the head) with lazy removal: a block taken out of it (a prefix hit) leaves a
  // stale entry behind, skipped when it reaches the head; an entry is live when
  // its block is in the LRU and the stamps agree. Victims sit side by side in
  // memory instead of at the end of a chain of dependent loads.
  struct LruEntry {
    int32_t block;
    uint32_t stamp;
    BlockHash hash;  // the block's key when pushed (its key while the entry is live)
  };
  bool lru_live(const LruEntry& e) const { return in_lru_[e.block] && meta_[e.block].lru_stamp == e.stamp; }
  // The least recently used evictable block (-1 when none); drops stale entries before it.
  int32_t lru_head();
  // Starts loading what evicting the next kLruPrefetch LRU entries will touch (their
  // map slots and per-block state), so single-block allocations that evict do not
  // each wait for a cache miss. A hint only: no effect on contents.
  void prefetch_lru_ahead();
  static constexpr size_t kLruPrefetch = 16;

  BlockAllocator* allocator_;
  int32_t block_size_;
  BlockHashTable map_;  // key -> block (at most one key per block)
  std::vector<Meta> meta_;                      // per block
  std::vector<uint8_t> cached_;
  std::vector<int32_t> tokens_;                 // per block, block_size ids, valid when cached
  std::vector<uint8_t> in_lru_;
  std::vector<LruEntry> lru_;  // [lru_head_, size): live and stale entries, oldest first
  size_t lru_head_ = 0;
  size_t lru_prefetched_ = 0;  // entries before this one were prefetched (prefetch_lru_ahead)
  int32_t num_evictable_ = 0;
  int32_t num_shared_ = 0;  // blocks with user_refcount() >= 2
  int64_t query_tokens_ = 0, hit_tokens_ = 0, num_evictions_ = 0;
};

}  // namespace ecoserve::kv
