#include "kv/prefix_cache.h"

#include <algorithm>
#include <cstring>

// Inlined (same hashes as the library's): a block's hash is a short call made per block.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ecoserve::kv {

PrefixCache::PrefixCache(BlockAllocator* allocator, int32_t block_size)
    : allocator_(allocator), block_size_(block_size) {
  ECO_CHECK(allocator != nullptr);
  ECO_CHECK_MSG(block_size > 0, "block_size {} must be positive", block_size);
  const auto n = static_cast<size_t>(allocator->num_blocks());
  meta_.assign(n, Meta{});
  cached_.assign(n, 0);
  tokens_.assign(n * static_cast<size_t>(block_size), 0);
  in_lru_.assign(n, 0);
  lru_.reserve(n + 64);
  map_ = BlockHashTable(static_cast<int32_t>(n));
}

BlockHash PrefixCache::hash_block(BlockHash parent, std::span<const int32_t> tokens) {
  // Hash (parent key, token ids) as one little buffer; blocks are small (<= a few hundred tokens).
  constexpr size_t kStack = 256;
  if (tokens.size() <= kStack) {
    int32_t buf[2 + kStack];
    std::memcpy(buf, &parent, sizeof(parent));
    std::memcpy(buf + 2, tokens.data(), tokens.size_bytes());
    return XXH3_64bits(buf, sizeof(parent) + tokens.size_bytes());
  }
  std::vector<int32_t> buf(2 + tokens.size());
  std::memcpy(buf.data(), &parent, sizeof(parent));
  std::memcpy(buf.data() + 2, tokens.data(), tokens.size_bytes());
  return XXH3_64bits(buf.data(), buf.size() * sizeof(int32_t));
}

void PrefixCache::extend_hashes(std::span<const int32_t> tokens, int32_t block_size,
                                std::vector<BlockHash>* hashes) {
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  BlockHash parent = hashes->empty() ? kRootHash : hashes->back();
  for (size_t i = hashes->size(); i < full; ++i) {
    parent = hash_block(parent, tokens.subspan(i * block_size, block_size));
    hashes->push_back(parent);
  }
}

int32_t PrefixCache::find(BlockHash hash, std::span<const int32_t> block_tokens) const {
  const int32_t b = map_.find(hash);
  if (b < 0) return -1;
  const int32_t* stored = tokens_.data() + static_cast<size_t>(b) * block_size_;
  if (!std::equal(block_tokens.begin(), block_tokens.end(), stored)) return -1;  // collision
  return b;
}

PrefixCache::Match PrefixCache::match(std::span<const BlockHash> hashes, std::span<const int32_t> tokens,
                                      int32_t max_blocks) const {
  Match m;
  const int32_t n = std::min<int32_t>(max_blocks, static_cast<int32_t>(hashes.size()));
  for (int32_t i = 0; i < n; ++i) {
    if (static_cast<size_t>(i + 1) * block_size_ > tokens.size()) break;
    const int32_t b = find(hashes[i], tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_));
    if (b < 0) break;
    m.num_blocks++;
    if (in_lru_[b]) m.num_evictable++;
  }
  return m;
}

int32_t PrefixCache::acquire(std::span<const BlockHash> hashes, std::span<const int32_t> tokens,
                             int32_t max_blocks, std::vector<BlockId>* out) {
  const int32_t n = std::min<int32_t>(max_blocks, static_cast<int32_t>(hashes.size()));
  int32_t taken = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (static_cast<size_t>(i + 1) * block_size_ > tokens.size()) break;
    const int32_t b = find(hashes[i], tokens.subspan(static_cast<size_t>(i) * block_size_, block_size_));
    if (b < 0) break;
    share(BlockId(b));
    out->push_back(BlockId(b));
    taken++;
  }
  return taken;
}

StatusOr<BlockId> PrefixCache::allocate(BlockId after, int32_t run) {
  if (allocator_->num_free() == 0) {
    const int32_t victim = lru_head();
    if (victim < 0) {
      return resource_exhausted_error("no free KV block (all {} in use, none evictable)", num_blocks());
    }
    prefetch_lru_ahead();
    evict(victim);
    return allocator_->allocate_free(BlockId(victim));  // the one free block: no search
  }
  return allocator_->allocate(after, run);
}

Status PrefixCache::allocate_n(int32_t n, std::vector<BlockId>* out) {
  if (n > num_free()) {
    return resource_exhausted_error("need {} KV blocks, {} free of {}", n, num_free(), num_blocks());
  }
  // allocate() takes free blocks first, then evicts from the LRU head: the victims
  // are the first n - num_free_raw() live LRU entries. Start loading their map
  // slots (one miss each, overlapped here rather than one after another).
  int32_t victims = n - allocator_->num_free();
  if (victims > 1) {
    for (size_t i = lru_head_; victims > 0 && i < lru_.size(); ++i) {
      if (!lru_live(lru_[i])) continue;
      map_.prefetch(lru_[i].hash);
      --victims;
    }
  }
  out->reserve(out->size() + static_cast<size_t>(std::max(n, 0)));
  const int32_t from_free = std::min(n, allocator_->num_free());
  for (int32_t i = 0; i < n; ++i) {
    out->push_back(*allocate(out->empty() ? BlockAllocator::kNoBlock : out->back(), n - i));
  }
  // The evicted blocks in ascending order: a chain leaves the LRU tail first, so a run
  // of blocks it held comes back as one run.
  std::sort(out->end() - (n - from_free), out->end());
  return ok_status();
}

void PrefixCache::share(BlockId block) {
  allocator_->share(block);  // checks range and refcount > 0
  const int32_t b = block.value;
  if (in_lru_[b]) lru_remove(b);
  if (allocator_->refcount(block) - cached_[b] == 2) ++num_shared_;
}

void PrefixCache::release(BlockId block) {
  const int32_t b = block.value;
  ECO_CHECK_MSG(b >= 0 && b < num_blocks(), "block {} out of range", b);
  ECO_CHECK_MSG(!in_lru_[b], "release() of evictable block {} (no user holds it)", b);
  if (allocator_->refcount(block) - cached_[b] == 2) --num_shared_;
  allocator_->release(block);
  if (cached_[b] && allocator_->refcount(block) == 1) lru_push_back(b);
}

bool PrefixCache::insert(BlockHash hash, BlockId block, std::span<const int32_t> tokens) {
  const int32_t b = block.value;
  ECO_CHECK_MSG(b >= 0 && b < num_blocks(), "block {} out of range", b);
  ECO_CHECK_MSG(static_cast<int32_t>(tokens.size()) == block_size_, "insert() of {} tokens, block size {}",
                tokens.size(), block_size_);
  ECO_CHECK_MSG(allocator_->refcount(block) > 0 && !in_lru_[b], "insert() of block {} nobody holds", b);
  if (cached_[b] || map_.contains(hash)) return false;
  allocator_->share(block);  // the cache's own reference
  map_.insert(hash, b);
  meta_[b].hash = hash;
  cached_[b] = 1;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
  return true;
}

int32_t PrefixCache::insert_chain(std::span<const BlockHash> hashes, std::span<const BlockId> blocks,
                                  std::span<const int32_t> tokens) {
  ECO_CHECK_MSG(hashes.size() == blocks.size() && tokens.size() == hashes.size() * static_cast<size_t>(block_size_),
                "insert_chain() of {} hashes, {} blocks, {} tokens", hashes.size(), blocks.size(), tokens.size());
  if (hashes.size() > 1) prefetch_chain(hashes, blocks);  // overlap the misses of the map slots and token copies
  int32_t n = 0;
  for (size_t i = 0; i < hashes.size(); ++i) {
    n += insert(hashes[i], blocks[i], tokens.subspan(i * block_size_, block_size_)) ? 1 : 0;
  }
  return n;
}

void PrefixCache::prefetch_chain(std::span<const BlockHash> hashes, std::span<const BlockId> blocks) const {
  const size_t n = std::min(hashes.size(), blocks.size());
  for (size_t i = 0; i < n; ++i) {
    map_.prefetch(hashes[i]);
    const int32_t b = blocks[i].value;
    if (b >= 0 && b < num_blocks()) {
      const int32_t* dst = tokens_.data() + static_cast<size_t>(b) * block_size_;
      __builtin_prefetch(dst, 1);
      __builtin_prefetch(dst + block_size_ - 1, 1);
    }
  }
}

int32_t PrefixCache::evict_all() {
  int32_t n = 0;
  for (int32_t b = lru_head(); b >= 0; b = lru_head()) {
    evict(b);
    n++;
  }
  return n;
}

void PrefixCache::evict(int32_t b) {
  lru_remove(b);
  map_.erase(meta_[b].hash);
  cached_[b] = 0;
  num_evictions_++;
  const bool freed = allocator_->release(BlockId(b));
  ECO_CHECK_MSG(freed, "evicted block {} still referenced", b);
}

void PrefixCache::lru_push_back(int32_t b) {
  const uint32_t stamp = ++meta_[b].lru_stamp;
  in_lru_[b] = 1;
  num_evictable_++;
  if (lru_.size() >= 64 && lru_.size() >= 2 * static_cast<size_t>(num_evictable_)) {
    // At least half the entries are stale or consumed (before lru_head_): keep the
    // live ones, in order. Amortized O(1) per push; at most 2 x num_evictable + 64 entries.
    size_t n = 0;
    for (size_t i = lru_head_; i < lru_.size(); ++i) {
      if (lru_live(lru_[i])) lru_[n++] = lru_[i];
    }
    lru_.resize(n);
    lru_head_ = 0;
    lru_prefetched_ = 0;
  }
  lru_.push_back(LruEntry{b, stamp, meta_[b].hash});
}

void PrefixCache::lru_remove(int32_t b) {
  in_lru_[b] = 0;  // its entry goes stale
  num_evictable_--;
}

void PrefixCache::prefetch_lru_ahead() {
  const size_t end = std::min(lru_.size(), lru_head_ + kLruPrefetch);
  for (size_t i = std::max(lru_prefetched_, lru_head_); i < end; ++i) {
    const LruEntry& e = lru_[i];
    map_.prefetch(e.hash);
    __builtin_prefetch(&meta_[static_cast<size_t>(e.block)]);
    __builtin_prefetch(&in_lru_[static_cast<size_t>(e.block)]);
    allocator_->prefetch(BlockId(e.block));
  }
  lru_prefetched_ = std::max(lru_prefetched_, end);
}

int32_t PrefixCache::lru_head() {
  while (lru_head_ < lru_.size() && !lru_live(lru_[lru_head_])) ++lru_head_;
  return lru_head_ < lru_.size() ? lru_[lru_head_].block : -1;
}

}  // namespace ecoserve::kv
