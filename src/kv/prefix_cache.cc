#include "kv/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include <xxhash.h>

namespace ecoserve::kv {

PrefixCache::PrefixCache(BlockAllocator* allocator, int32_t block_size)
    : allocator_(allocator), block_size_(block_size) {
  ECO_CHECK(allocator != nullptr);
  ECO_CHECK_MSG(block_size > 0, "block_size {} must be positive", block_size);
  const auto n = static_cast<size_t>(allocator->num_blocks());
  hash_.assign(n, 0);
  cached_.assign(n, 0);
  tokens_.assign(n * static_cast<size_t>(block_size), 0);
  prev_.assign(n, -1);
  next_.assign(n, -1);
  in_lru_.assign(n, 0);
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

StatusOr<BlockId> PrefixCache::allocate() {
  if (allocator_->num_free() == 0) {
    if (head_ < 0) {
      return resource_exhausted_error("no free KV block (all {} in use, none evictable)", num_blocks());
    }
    evict(head_);
  }
  return allocator_->allocate();
}

void PrefixCache::share(BlockId block) {
  allocator_->share(block);  // checks range and refcount > 0
  if (in_lru_[block.value]) lru_remove(block.value);
}

void PrefixCache::release(BlockId block) {
  const int32_t b = block.value;
  ECO_CHECK_MSG(b >= 0 && b < num_blocks(), "block {} out of range", b);
  ECO_CHECK_MSG(!in_lru_[b], "release() of evictable block {} (no user holds it)", b);
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
  hash_[b] = hash;
  cached_[b] = 1;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(b) * block_size_);
  return true;
}

int32_t PrefixCache::evict_all() {
  int32_t n = 0;
  while (head_ >= 0) {
    evict(head_);
    n++;
  }
  return n;
}

void PrefixCache::evict(int32_t b) {
  lru_remove(b);
  map_.erase(hash_[b]);
  cached_[b] = 0;
  num_evictions_++;
  const bool freed = allocator_->release(BlockId(b));
  ECO_CHECK_MSG(freed, "evicted block {} still referenced", b);
}

void PrefixCache::lru_push_back(int32_t b) {
  prev_[b] = tail_;
  next_[b] = -1;
  if (tail_ >= 0) next_[tail_] = b; else head_ = b;
  tail_ = b;
  in_lru_[b] = 1;
  num_evictable_++;
}

void PrefixCache::lru_remove(int32_t b) {
  if (prev_[b] >= 0) next_[prev_[b]] = next_[b]; else head_ = next_[b];
  if (next_[b] >= 0) prev_[next_[b]] = prev_[b]; else tail_ = prev_[b];
  prev_[b] = next_[b] = -1;
  in_lru_[b] = 0;
  num_evictable_--;
}

}  // namespace ecoserve::kv
