#include "kv/block_allocator.h"

namespace ecoserve::kv {

BlockAllocator::BlockAllocator(int32_t num_blocks) : refcount_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t i = num_blocks - 1; i >= 0; --i) free_.push_back(BlockId(i));
}

StatusOr<BlockId> BlockAllocator::allocate() {
  if (free_.empty()) return resource_exhausted_error("no free KV block (all {} in use)", num_blocks());
  BlockId id = free_.back();
  free_.pop_back();
  refcount_[id.value] = 1;
  return id;
}

StatusOr<std::vector<BlockId>> BlockAllocator::allocate_n(int32_t n) {
  if (n > num_free()) {
    return resource_exhausted_error("need {} KV blocks, {} free of {}", n, num_free(), num_blocks());
  }
  std::vector<BlockId> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) out.push_back(*allocate());
  return out;
}

void BlockAllocator::share(BlockId id) {
  ECO_CHECK_MSG(id.value >= 0 && id.value < num_blocks(), "block {} out of range", id.value);
  ECO_CHECK_MSG(refcount_[id.value] > 0, "share() of free block {}", id.value);
  refcount_[id.value]++;
}

bool BlockAllocator::release(BlockId id) {
  ECO_CHECK_MSG(id.value >= 0 && id.value < num_blocks(), "block {} out of range", id.value);
  ECO_CHECK_MSG(refcount_[id.value] > 0, "release() of free block {}", id.value);
  if (--refcount_[id.value] == 0) {
    free_.push_back(id);
    return true;
  }
  return false;
}

}  // namespace ecoserve::kv
