// PrefixIndex: the router's approximate map of which instance holds which
// prompt prefix in its KV cache (the role of SGLang's router tree or Mooncake's
// conductor), for cache-aware routing and conditional disaggregation.
//
// Keys are the hash chain of full KV blocks (kv::PrefixCache): block i's hash
// already encodes every token up to the end of block i, so one flat map from
// hash to the instances that (probably) hold it answers prefix matches. It is
// approximate: the router records what it sent where (the instance will cache
// those blocks after prefill) and ages entries out per instance with an LRU of
// `capacity_blocks`, a stand-in for the instance's own eviction; an instance
// that fails or restarts is dropped with remove_instance(). A wrong guess costs
// only a cache miss.
//
// match() is O(prompt blocks x holders) and stops at the first block no
// instance holds. Not thread-safe: the router calls it under its lock.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/ids.h"
#include "kv/prefix_cache.h"

namespace ecoserve::policy {

class PrefixIndex {
 public:
  struct Options {
    int32_t capacity_blocks = 1 << 16;  // per instance; least recently used blocks are forgotten beyond
  };

  PrefixIndex() : PrefixIndex(Options{}) {}
  explicit PrefixIndex(const Options& options) : options_(options) {}

  // The instance holds (or will hold) these blocks; refreshes their recency.
  void insert(InstanceId instance, std::span<const kv::BlockHash> hashes);
  // The instance no longer holds these blocks.
  void evict(InstanceId instance, std::span<const kv::BlockHash> hashes);
  // Forgets everything about the instance.
  void remove_instance(InstanceId instance);

  // For each instance holding at least the first block: how many leading blocks of
  // `hashes` it holds (block i counts only if blocks 0..i-1 do). Order unspecified.
  struct Match {
    InstanceId instance;
    int32_t num_blocks = 0;
  };
  std::vector<Match> match(std::span<const kv::BlockHash> hashes) const;
  // Leading blocks of `hashes` one instance holds.
  int32_t match_instance(InstanceId instance, std::span<const kv::BlockHash> hashes) const;

  int64_t num_blocks(InstanceId instance) const;

 private:
  struct PerInstance {
    std::list<kv::BlockHash> lru;  // most recent at the front
    std::unordered_map<kv::BlockHash, std::list<kv::BlockHash>::iterator> pos;
  };
  void drop(InstanceId instance, kv::BlockHash hash);

  Options options_;
  std::unordered_map<InstanceId, PerInstance> instances_;
  // hash -> instances holding it (few per hash: a small vector).
  std::unordered_map<kv::BlockHash, std::vector<InstanceId>> holders_;
};

}  // namespace ecoserve::policy
