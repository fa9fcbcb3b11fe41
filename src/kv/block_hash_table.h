// BlockHashTable: the prefix cache's index from a block's hash to the block that
// holds it - an open-addressing table (linear probing, backward-shift deletion)
// sized once for at most `capacity` entries, so lookups touch one or two cache
// lines and nothing is allocated after construction. std::unordered_map, a node
// per entry, spent most of a large simulation's time in cache misses.
//
// Keys are 64-bit block hashes (any value); values are block ids >= 0. Plain
// data; not thread-safe (the prefix cache's owner serializes access).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ecoserve::kv {

class BlockHashTable {
 public:
  // Room for `capacity` entries (the table has >= 2 x capacity slots).
  explicit BlockHashTable(int32_t capacity = 0) {
    std::size_t slots = 8;
    while (slots < 2 * static_cast<std::size_t>(capacity < 0 ? 0 : capacity)) slots *= 2;
    keys_.assign(slots, 0);
    values_.assign(slots, kEmpty);
    mask_ = slots - 1;
  }

  // The value of `key`, or -1.
  int32_t find(uint64_t key) const {
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      if (values_[i] == kEmpty) return -1;
      if (keys_[i] == key) return values_[i];
    }
  }
  bool contains(uint64_t key) const { return find(key) >= 0; }
  // Adds key -> value (value >= 0). False (and no change) when the key is present
  // or the table holds `capacity` entries already.
  bool insert(uint64_t key, int32_t value) {
    if ((size_ + 1) * 2 > keys_.size()) return false;
    std::size_t i = slot(key);
    for (; values_[i] != kEmpty; i = (i + 1) & mask_) {
      if (keys_[i] == key) return false;
    }
    keys_[i] = key;
    values_[i] = value;
    ++size_;
    return true;
  }
  // Removes `key`; false when absent. Later entries of its probe run move back, so
  // no tombstones accumulate.
  bool erase(uint64_t key) {
    std::size_t i = slot(key);
    for (; values_[i] != kEmpty; i = (i + 1) & mask_) {
      if (keys_[i] == key) break;
    }
    if (values_[i] == kEmpty) return false;
    for (std::size_t j = (i + 1) & mask_; values_[j] != kEmpty; j = (j + 1) & mask_) {
      const std::size_t home = slot(keys_[j]);
      // Entry j may fill the hole at i when its home is not in (i, j] (cyclically).
      const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (stays) continue;
      keys_[i] = keys_[j];
      values_[i] = values_[j];
      i = j;
    }
    values_[i] = kEmpty;
    --size_;
    return true;
  }
  int32_t size() const { return static_cast<int32_t>(size_); }

 private:
  static constexpr int32_t kEmpty = -1;
  std::size_t slot(uint64_t key) const {
    // Fibonacci hashing spreads hashes whose low bits are alike.
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> 20) & mask_;
  }

  std::vector<uint64_t> keys_;
  std::vector<int32_t> values_;
  std::size_t mask_ = 7;
  std::size_t size_ = 0;
};

}  // namespace ecoserve::kv
