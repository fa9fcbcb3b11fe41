#include "policy/prefix_index.h"

#include <algorithm>

namespace ecoserve::policy {

void PrefixIndex::insert(InstanceId instance, std::span<const kv::BlockHash> hashes) {
  PerInstance& in = instances_[instance];
  for (kv::BlockHash h : hashes) {
    auto it = in.pos.find(h);
    if (it != in.pos.end()) {
      in.lru.splice(in.lru.begin(), in.lru, it->second);  // refresh
      continue;
    }
    in.lru.push_front(h);
    in.pos[h] = in.lru.begin();
    holders_[h].push_back(instance);
  }
  while (static_cast<int64_t>(in.lru.size()) > std::max(0, options_.capacity_blocks)) {
    const kv::BlockHash old = in.lru.back();
    drop(instance, old);
  }
}

void PrefixIndex::drop(InstanceId instance, kv::BlockHash hash) {
  PerInstance& in = instances_[instance];
  auto it = in.pos.find(hash);
  if (it == in.pos.end()) return;
  in.lru.erase(it->second);
  in.pos.erase(it);
  auto h = holders_.find(hash);
  if (h == holders_.end()) return;
  auto& v = h->second;
  v.erase(std::remove(v.begin(), v.end(), instance), v.end());
  if (v.empty()) holders_.erase(h);
}

void PrefixIndex::evict(InstanceId instance, std::span<const kv::BlockHash> hashes) {
  if (!instances_.count(instance)) return;
  for (kv::BlockHash h : hashes) drop(instance, h);
}

void PrefixIndex::remove_instance(InstanceId instance) {
  auto it = instances_.find(instance);
  if (it == instances_.end()) return;
  const std::vector<kv::BlockHash> all(it->second.lru.begin(), it->second.lru.end());
  for (kv::BlockHash h : all) drop(instance, h);
  instances_.erase(instance);
}

std::vector<PrefixIndex::Match> PrefixIndex::match(std::span<const kv::BlockHash> hashes) const {
  std::vector<Match> out;
  if (hashes.empty()) return out;
  auto first = holders_.find(hashes[0]);
  if (first == holders_.end()) return out;
  for (InstanceId id : first->second) out.push_back(Match{id, 1});
  // Extend the still-matching instances block by block; stop when none is left.
  size_t live = out.size();
  for (size_t i = 1; i < hashes.size() && live > 0; ++i) {
    auto h = holders_.find(hashes[i]);
    live = 0;
    for (Match& m : out) {
      if (m.num_blocks != static_cast<int32_t>(i)) continue;  // fell behind earlier
      if (h != holders_.end() && std::find(h->second.begin(), h->second.end(), m.instance) != h->second.end()) {
        m.num_blocks++;
        live++;
      }
    }
  }
  return out;
}

int32_t PrefixIndex::match_instance(InstanceId instance, std::span<const kv::BlockHash> hashes) const {
  auto it = instances_.find(instance);
  if (it == instances_.end()) return 0;
  int32_t n = 0;
  for (kv::BlockHash h : hashes) {
    if (!it->second.pos.count(h)) break;
    ++n;
  }
  return n;
}

int64_t PrefixIndex::num_blocks(InstanceId instance) const {
  auto it = instances_.find(instance);
  return it == instances_.end() ? 0 : static_cast<int64_t>(it->second.lru.size());
}

}  // namespace ecoserve::policy
