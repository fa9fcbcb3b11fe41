// BlockHashTable: the prefix cache's index from a block's hash to the block that
// holds it - an open-addressing table (linear probing, backward-shift deletion)
// sized once for at most `capacity` entries, so lookups touch one or two cache
// lines and nothing is allocated after construction. std::unordered_map, a node
// per entry, spent most of a large simulation's time in cache misses.
//
// A slot keeps its key and value side by side (16 bytes, four to a cache line),
// so a probe costs one cache miss, not one per array. prefetch(key) starts
// loading a key's home slot: callers about to touch many keys (a prompt's
// blocks, a batch of evictions) prefetch them all first so the misses overlap.
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
    slots_.assign(slots, Slot{0, kEmpty});
    mask_ = slots - 1;
  }

  // The value of `key`, or -1.
  int32_t find(uint64_t key) const {
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kEmpty) return -1;
      if (s.key == key) return s.value;
    }
  }
  bool contains(uint64_t key) const { return find(key) >= 0; }
  // Adds key -> value (value >= 0). False (and no change) when the key is present
  // or the table holds `capacity` entries already.
  bool insert(uint64_t key, int32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) return false;
    std::size_t i = home(key);
    for (; slots_[i].value != kEmpty; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return false;
    }
    slots_[i] = Slot{key, value};
    ++size_;
    return true;
  }
  // Removes `key`; false when absent. Later entries of its probe run move back, so
  // no tombstones accumulate.
  bool erase(uint64_t key) {
    std::size_t i = home(key);
    for (; slots_[i].value != kEmpty; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
    }
    if (slots_[i].value == kEmpty) return false;
    for (std::size_t j = (i + 1) & mask_; slots_[j].value != kEmpty; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j].key);
      // Entry j may fill the hole at i when its home is not in (i, j] (cyclically).
      const bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].value = kEmpty;
    --size_;
    return true;
  }
  // A hint: starts loading the slot where a probe for `key` begins. No effect on contents.
  void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[home(key)]); }
  int32_t size() const { return static_cast<int32_t>(size_); }

 private:
  static constexpr int32_t kEmpty = -1;
  struct Slot {
    uint64_t key;
    int32_t value;  // kEmpty: free
  };
  std::size_t home(uint64_t key) const {
    // Fibonacci hashing spreads hashes whose low bits are alike.
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> 20) & mask_;
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 7;
  std::size_t size_ = 0;
};

}  // namespace ecoserve::kv
