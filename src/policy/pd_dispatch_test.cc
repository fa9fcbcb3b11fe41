#include "policy/pd_dispatch.h"

#include <gtest/gtest.h>

namespace ecoserve::policy {
namespace {

InstanceLoad node(int32_t id, InstanceRole role, int32_t free_blocks = 100, int64_t waiting_tokens = 0) {
  InstanceLoad l;
  l.id = InstanceId(id);
  l.role = role;
  l.num_free_blocks = free_blocks;
  l.num_waiting_tokens = waiting_tokens;
  l.block_size = 16;
  return l;
}

RouteRequest req(int32_t prompt_len, const std::vector<kv::BlockHash>* hashes = nullptr) {
  RouteRequest r;
  r.prompt_len = prompt_len;
  if (hashes) r.block_hashes = *hashes;
  return r;
}

constexpr auto P = InstanceRole::kPrefill;
constexpr auto D = InstanceRole::kDecode;

TEST(PdDispatchTest, PicksTheIdlestPrefillAndTheRoomiestDecode) {
  ClusterView v{{node(0, P, 100, 500), node(1, P, 100, 200), node(2, D, 40), node(3, D, 90), node(4, D, 90)}};
  v.instances[3].num_running = 2;
  v.instances[4].num_running = 1;
  auto d = pd_dispatch(v, req(300), PdDispatchOptions{});
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, (PdDecision{InstanceId(1), InstanceId(4), true}));  // 90 free on 3 and 4; 4 has fewer requests
}

TEST(PdDispatchTest, FullDecodeInstancesComeLastAndUnhealthyOnesNever) {
  ClusterView v{{node(0, P), node(1, D, 90), node(2, D, 10)}};
  v.instances[1].max_num_seqs = 2;
  v.instances[1].num_running = 2;
  EXPECT_EQ(pd_dispatch(v, req(300), {})->decode, InstanceId(2));
  // Both full: the request queues on the roomiest rather than being refused.
  v.instances[2].max_num_seqs = 1;
  v.instances[2].num_running = 1;
  EXPECT_EQ(pd_dispatch(v, req(300), {})->decode, InstanceId(1));
  v.instances[1].healthy = false;
  EXPECT_EQ(pd_dispatch(v, req(300), {})->decode, InstanceId(2));
  v.instances[2].healthy = false;
  EXPECT_FALSE(pd_dispatch(v, req(300), {}));
}

TEST(PdDispatchTest, TheDecodeInstanceOnThePrefillInstancesNodeWins) {
  // Nodes: P0 and D2 on node 0, P1 and D3 on node 1. P1 is idler, so the request
  // prefills there and decodes on D3 although D2 has more room.
  ClusterView v{{node(0, P, 100, 500), node(1, P, 100, 200), node(2, D, 90), node(3, D, 40)}};
  for (int i = 0; i < 4; ++i) v.instances[static_cast<size_t>(i)].node = i % 2;
  EXPECT_EQ(*pd_dispatch(v, req(300), {}), (PdDecision{InstanceId(1), InstanceId(3), true}));
  // ... unless D3 is full, or the preference is off.
  PdDispatchOptions off;
  off.prefer_same_node = false;
  EXPECT_EQ(pd_dispatch(v, req(300), off)->decode, InstanceId(2));
  v.instances[3].max_num_seqs = 1;
  v.instances[3].num_running = 1;
  EXPECT_EQ(pd_dispatch(v, req(300), {})->decode, InstanceId(2));
  // Unknown nodes (-1, the live router's): the roomiest.
  for (auto& l : v.instances) l.node = -1;
  v.instances[3].num_running = 0;
  EXPECT_EQ(pd_dispatch(v, req(300), {})->decode, InstanceId(2));
}

TEST(PdDispatchTest, ConditionalDisaggregation) {
  ClusterView v{{node(0, P), node(1, D)}};
  PdDispatchOptions o;
  o.remote_prefill_min_tokens = 64;
  EXPECT_EQ(*pd_dispatch(v, req(63), o), (PdDecision{InstanceId(1), InstanceId(1), false}));
  EXPECT_EQ(*pd_dispatch(v, req(64), o), (PdDecision{InstanceId(0), InstanceId(1), true}));
  // No healthy prefill instance: local.
  v.instances[0].healthy = false;
  EXPECT_FALSE(pd_dispatch(v, req(500), o)->remote_prefill);
  v.instances[0].healthy = true;
  // The decode instance caches 3 of the prompt's 4 blocks: local.
  PrefixIndex idx;
  const std::vector<kv::BlockHash> h = {1, 2, 3, 4};
  idx.insert(InstanceId(1), std::vector<kv::BlockHash>{1, 2, 3});
  EXPECT_FALSE(pd_dispatch(v, req(70, &h), o, &idx)->remote_prefill);
  // 1 of 4 cached, and 70 - 16 = 54 uncached tokens < 64: still local.
  PrefixIndex one;
  one.insert(InstanceId(1), std::vector<kv::BlockHash>{1});
  EXPECT_FALSE(pd_dispatch(v, req(70, &h), o, &one)->remote_prefill);
  // 1 of 8 cached and 120 uncached tokens: remote.
  const std::vector<kv::BlockHash> h8 = {1, 5, 6, 7, 8, 9, 10, 11};
  EXPECT_TRUE(pd_dispatch(v, req(136, &h8), o, &one)->remote_prefill);
}

}  // namespace
}  // namespace ecoserve::policy
