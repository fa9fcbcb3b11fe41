#include "loadgen/prefix_tree.h"

namespace ecoserve::loadgen {

void PrefixTree::insert(std::span<const std::int64_t> tokens) {
  ++sequences_;
  std::uint64_t node = 0;
  for (std::int64_t t : tokens) {
    auto [it, inserted] = children_.try_emplace(Key{node, t}, counts_.size() + 1);
    if (inserted) counts_.push_back(0);
    node = it->second;
    ++counts_[node - 1];
  }
}

std::int64_t PrefixTree::surviving_prefix(std::span<const std::int64_t> tokens, std::int64_t min_count) const {
  std::uint64_t node = 0;
  std::int64_t depth = 0;
  for (std::int64_t t : tokens) {
    auto it = children_.find(Key{node, t});
    if (it == children_.end() || counts_[it->second - 1] < min_count) break;
    node = it->second;
    ++depth;
  }
  return depth;
}

}  // namespace ecoserve::loadgen
