// BlockAllocator: ids and reference counts of the KV cache's physical blocks.
//
// Bookkeeping only: it owns no tensors. A block is free (refcount 0, on the free
// list) or in use (refcount >= 1). allocate() hands out a free block with
// refcount 1; share() adds a reference (prefix sharing, n > 1 samples); release()
// drops one and returns the block to the free list at zero. Misuse (releasing a
// free block, an id out of range) is a broken invariant and aborts.
// Not thread-safe: owned by one instance's scheduler thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/ids.h"
#include "base/status.h"

namespace ecoserve::kv {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }

  // A free block with refcount 1, or RESOURCE_EXHAUSTED when none is free.
  StatusOr<BlockId> allocate();
  // n blocks at once, all or nothing.
  StatusOr<std::vector<BlockId>> allocate_n(int32_t n);
  void share(BlockId id);
  // Drops one reference; returns true when the block became free.
  bool release(BlockId id);
  // A hint: starts loading the block's refcount (no effect; out of range: nothing).
  void prefetch(BlockId id) const {
    if (id.value >= 0 && static_cast<size_t>(id.value) < refcount_.size()) __builtin_prefetch(&refcount_[id.value]);
  }
  int32_t refcount(BlockId id) const {
    ECO_CHECK_MSG(id.value >= 0 && id.value < num_blocks(), "block {} out of range", id.value);
    return refcount_[id.value];
  }

 private:
  std::vector<int32_t> refcount_;
  std::vector<BlockId> free_;  // stack; lowest ids handed out first
};

// Number of blocks needed for num_tokens tokens.
inline int32_t blocks_for_tokens(int64_t num_tokens, int32_t block_size) {
  return static_cast<int32_t>((num_tokens + block_size - 1) / block_size);
}

}  // namespace ecoserve::kv
