// PrefixTree: a trie over token (or block-hash) sequences with a count on each node,
// for measuring how much prompts share prefixes (what prefix caching can reuse).
//
// insert() adds one to every node on the sequence's path. Counts never grow with
// depth, so pruning every node seen fewer than N times leaves, for each sequence,
// exactly its leading nodes with count >= N: surviving_prefix() returns that length.
// Children are kept in one hash map keyed by (parent, token). Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace ecoserve::loadgen {

class PrefixTree {
 public:
  void insert(std::span<const std::int64_t> tokens);
  // Length of the longest prefix of `tokens` whose nodes all have count >= min_count.
  std::int64_t surviving_prefix(std::span<const std::int64_t> tokens, std::int64_t min_count) const;
  std::size_t num_nodes() const { return counts_.size(); }  // excluding the root
  std::size_t num_sequences() const { return sequences_; }

 private:
  struct Key {
    std::uint64_t parent;
    std::int64_t token;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = k.parent * 0x9e3779b97f4a7c15ULL ^ static_cast<std::uint64_t>(k.token) * 0xc2b2ae3d27d4eb4fULL;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  // Node ids start at 1; 0 is the root.
  std::unordered_map<Key, std::uint64_t, KeyHash> children_;
  std::vector<std::int64_t> counts_;  // counts_[id - 1]
  std::size_t sequences_ = 0;
};

}  // namespace ecoserve::loadgen
