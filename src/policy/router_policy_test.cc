#include "policy/router_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace ecoserve::policy {
namespace {

InstanceLoad inst(int32_t id, int64_t waiting_tokens = 0, int64_t running_tokens = 0, int32_t requests = 0) {
  InstanceLoad l;
  l.id = InstanceId(id);
  l.num_waiting_tokens = waiting_tokens;
  l.num_running_tokens = running_tokens;
  l.num_waiting = requests;
  return l;
}

RouteRequest req(const std::vector<kv::BlockHash>& hashes = {}) {
  RouteRequest r;
  r.prompt_len = static_cast<int32_t>(hashes.size()) * 16;
  r.block_hashes = hashes;
  return r;
}

int32_t route_id(RouterPolicy& p, const ClusterView& v, const RouteRequest& r) {
  auto id = p.route(v, r);
  return id ? id->value : -1;
}

TEST(RouterPolicyTest, RoundRobinRotatesAndSkipsUnhealthyAndNonMixed) {
  RoundRobinRouter rr;
  ClusterView v{{inst(10), inst(11), inst(12)}};
  EXPECT_EQ(route_id(rr, v, req()), 10);
  EXPECT_EQ(route_id(rr, v, req()), 11);
  EXPECT_EQ(route_id(rr, v, req()), 12);
  EXPECT_EQ(route_id(rr, v, req()), 10);
  v.instances[1].healthy = false;
  v.instances[2].role = InstanceRole::kDecode;
  EXPECT_EQ(route_id(rr, v, req()), 10);
  EXPECT_EQ(route_id(rr, v, req()), 10);
  v.instances[0].healthy = false;
  EXPECT_EQ(route_id(rr, v, req()), -1);
  EXPECT_EQ(route_id(rr, ClusterView{}, req()), -1);
}

TEST(RouterPolicyTest, LeastLoadedByTokensThenRequestsThenPosition) {
  LeastLoadedRouter ll;
  ClusterView v{{inst(0, 100, 50), inst(1, 0, 120), inst(2, 60, 60)}};
  EXPECT_EQ(route_id(ll, v, req()), 1);  // 1 and 2 tie at 120 tokens and 0 requests: lower position
  v.instances[1].num_waiting = 3;        // now 1 has more requests
  EXPECT_EQ(route_id(ll, v, req()), 2);
  v.instances[1].num_waiting = 0;
  v.instances[0].num_waiting_tokens = 0;  // 50 tokens: the least
  EXPECT_EQ(route_id(ll, v, req()), 0);
  v.instances[0].healthy = false;
  v.instances[1].healthy = false;
  EXPECT_EQ(route_id(ll, v, req()), 2);
  for (auto& i : v.instances) i.healthy = false;
  EXPECT_EQ(route_id(ll, v, req()), -1);
}

TEST(RouterPolicyTest, CacheAwareFollowsTheLongestPrefix) {
  CacheAwareRouter ca(RouterOptions{});
  ClusterView v{{inst(0), inst(1), inst(2)}};
  const std::vector<kv::BlockHash> a = {1, 2, 3, 4}, b = {50, 51, 52, 53};
  ca.index().insert(InstanceId(2), a);
  ca.index().insert(InstanceId(1), std::vector<kv::BlockHash>{1, 2});
  EXPECT_EQ(route_id(ca, v, req(a)), 2);  // 4 blocks on 2, 2 on 1
  // No match anywhere: least-loaded (all idle: position 0), and 0 now holds b.
  EXPECT_EQ(route_id(ca, v, req(b)), 0);
  EXPECT_EQ(ca.index().match_instance(InstanceId(0), b), 4);
  // A match below cache_threshold (1 of 4 blocks < 0.5) goes least-loaded.
  v.instances[0].num_running_tokens = 10;
  const std::vector<kv::BlockHash> c = {1, 90, 91, 92};
  EXPECT_EQ(route_id(ca, v, req(c)), 1);  // 1 and 2 both hold block 1 only; 1 is idle and first
}

TEST(RouterPolicyTest, CacheAwareIgnoresUnhealthyHoldersAndTiesGoToTheLessLoaded) {
  CacheAwareRouter ca(RouterOptions{});
  ClusterView v{{inst(0, 0, 500), inst(1, 0, 300), inst(2)}};
  const std::vector<kv::BlockHash> a = {1, 2, 3, 4};
  ca.index().insert(InstanceId(0), a);
  ca.index().insert(InstanceId(1), a);
  ca.index().insert(InstanceId(2), std::vector<kv::BlockHash>{1, 2, 3});
  EXPECT_EQ(route_id(ca, v, req(a)), 1);  // 0 and 1 hold all 4 blocks; 1 is less loaded
  v.instances[1].healthy = false;
  v.instances[0].healthy = false;
  EXPECT_EQ(route_id(ca, v, req(a)), 2);  // the longest holders are down: 3 blocks on 2
  EXPECT_EQ(ca.index().match_instance(InstanceId(2), a), 4);  // routing a there recorded all 4 blocks
  ca.remove_instance(InstanceId(2));                          // 2 restarted: it holds nothing
  EXPECT_EQ(ca.index().match_instance(InstanceId(2), a), 0);
  EXPECT_EQ(ca.index().match_instance(InstanceId(1), a), 4);
}

TEST(RouterPolicyTest, HotPrefixSpreadsOnceTheHolderIsMuchBusier) {
  RouterOptions o;
  o.balance_abs_tokens = 1000;
  o.balance_rel = 1.5;
  CacheAwareRouter ca(o);
  ClusterView v{{inst(0), inst(1)}};
  const std::vector<kv::BlockHash> hot = {7, 8, 9, 10};
  std::vector<int32_t> chosen;
  // Each request adds 500 tokens to its instance (the router's accounting).
  for (int i = 0; i < 8; ++i) {
    const int32_t id = route_id(ca, v, req(hot));
    chosen.push_back(id);
    v.instances[static_cast<size_t>(id)].num_waiting_tokens += 500;
  }
  // First to 0 (idle, first); it then holds the prefix and keeps it until it is more
  // than 1000 tokens and 1.5x busier than 1: at 1500 vs 0 the next goes to 1, which
  // then also holds the prefix; ties between holders go to the less loaded.
  EXPECT_EQ(chosen, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 0, 1}));
}

TEST(RouterPolicyTest, MakeRouterPolicyKnowsItsNames) {
  for (const char* name : {"round-robin", "least-loaded", "cache-aware", "freeness"}) {
    auto p = make_router_policy(name, RouterOptions{});
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->name(), name);
  }
  auto bad = make_router_policy("random", RouterOptions{});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown router 'random' (round-robin, least-loaded, cache-aware, freeness)");
}

}  // namespace
}  // namespace ecoserve::policy
