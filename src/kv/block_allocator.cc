#include "kv/block_allocator.h"

#include <bit>

namespace ecoserve::kv {

BlockAllocator::BlockAllocator(int32_t num_blocks)
    : refcount_(num_blocks, 0),
      free_((static_cast<size_t>(num_blocks) + 63) / 64, ~uint64_t{0}),
      num_free_(num_blocks) {
  if (num_blocks % 64 != 0) free_.back() = (uint64_t{1} << (num_blocks % 64)) - 1;
}

int32_t BlockAllocator::run_start(int32_t run) const {
  // The longest stretch of free blocks [best, best + best_len), the first of equals.
  int32_t best = -1, best_len = 0, start = -1;
  const int32_t n = num_blocks();
  auto close = [&](int32_t end) {
    if (start >= 0 && end - start > best_len) {
      best = start;
      best_len = end - start;
    }
    start = -1;
  };
  for (size_t w = 0; w < free_.size(); ++w) {
    uint64_t word = free_[w];
    const int32_t base = static_cast<int32_t>(w * 64);
    if (word == ~uint64_t{0}) {
      if (start < 0) start = base;
      continue;
    }
    if (word == 0) {
      close(base);
      continue;
    }
    int32_t at = 0;  // bits below `at` are done
    while (at < 64) {
      const uint64_t rest = word >> at;
      if (rest & 1) {  // a free stretch from base + at
        const int32_t ones = std::countr_one(rest);
        if (start < 0) start = base + at;
        at += ones;
        if (at < 64) close(base + at);
      } else {
        close(base + at);
        if (rest == 0) break;
        at += std::countr_zero(rest);
      }
    }
  }
  close(n);
  if (best <= 0 || best_len <= run) return best;
  return best + (best_len - run) / 2;
}

void BlockAllocator::take(int32_t b) {
  free_[b >> 6] &= ~(uint64_t{1} << (b & 63));
  --num_free_;
  refcount_[b] = 1;
}

StatusOr<BlockId> BlockAllocator::allocate(BlockId after, int32_t run) {
  if (num_free_ == 0) return resource_exhausted_error("no free KV block (all {} in use)", num_blocks());
  const BlockId next(after.value + 1);
  const int32_t b = after.value >= 0 && is_free(next) ? next.value : run_start(run < 1 ? 1 : run);
  take(b);
  return BlockId(b);
}

BlockId BlockAllocator::allocate_free(BlockId id) {
  ECO_CHECK_MSG(is_free(id), "allocate_free() of block {}, which is in use or out of range", id.value);
  take(id.value);
  return id;
}

StatusOr<std::vector<BlockId>> BlockAllocator::allocate_n(int32_t n) {
  if (n > num_free()) {
    return resource_exhausted_error("need {} KV blocks, {} free of {}", n, num_free(), num_blocks());
  }
  std::vector<BlockId> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) out.push_back(*allocate(out.empty() ? kNoBlock : out.back(), n - i));
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
    free_[id.value >> 6] |= uint64_t{1} << (id.value & 63);
    ++num_free_;
    return true;
  }
  return false;
}

}  // namespace ecoserve::kv
