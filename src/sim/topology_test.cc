#include "sim/topology.h"

#include <cstdint>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace ecoserve::sim {
namespace {

constexpr std::int64_t kSec = 1'000'000'000;
constexpr std::int64_t kUs = 1'000;

std::int64_t ns_of(const SimRuntime& rt) { return rt.now().time_since_epoch().count(); }

// 2 nodes x 2 GPUs; GPU links 1 GB/s with 1 us GPU-to-GPU latency; NICs 4 Gb/s =
// 0.5 GB/s with 10 us added between nodes. Link ids in creation order:
//   node0: gpu0 up 0, down 1; gpu1 up 2, down 3; nic_out 4, nic_in 5
//   node1: gpu2 up 6, down 7; gpu3 up 8, down 9; nic_out 10, nic_in 11
TopologyOptions small_options() {
  TopologyOptions o;
  o.num_nodes = 2;
  o.gpus_per_node = 2;
  o.intra = "nvlink";
  o.intra_bytes_per_s = 1e9;
  o.intra_latency = Duration(1 * kUs);
  o.inter_node_gbps = 4;
  o.inter_latency = Duration(10 * kUs);
  return o;
}

class TopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Topology::create(net_, small_options());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    topo_.emplace(std::move(t).value());
  }
  static GpuId g(int i) { return GpuId(i); }

  SimRuntime rt_;
  SimNetwork net_{rt_};
  std::optional<Topology> topo_;
};

TEST(TopologyValidateTest, RejectsBadOptions) {
  auto bad = [](auto mutate) {
    TopologyOptions o = small_options();
    mutate(o);
    return Topology::validate(o).code();
  };
  EXPECT_TRUE(Topology::validate(small_options()).ok());
  EXPECT_TRUE(Topology::validate(TopologyOptions{}).ok());
  const auto kInvalid = StatusCode::kInvalidArgument;
  EXPECT_EQ(bad([](TopologyOptions& o) { o.num_nodes = 0; }), kInvalid);
  EXPECT_EQ(bad([](TopologyOptions& o) { o.gpus_per_node = -1; }), kInvalid);
  EXPECT_EQ(bad([](TopologyOptions& o) { o.num_nodes = 1 << 20, o.gpus_per_node = 1 << 10; }), kInvalid);
  EXPECT_EQ(bad([](TopologyOptions& o) { o.intra = "infiniband"; }), kInvalid);
  EXPECT_EQ(bad([](TopologyOptions& o) { o.intra_bytes_per_s = -1; }), kInvalid);
  EXPECT_EQ(bad([](TopologyOptions& o) { o.intra_latency = Duration(-1); }), kInvalid);
  EXPECT_EQ(bad([](TopologyOptions& o) { o.inter_node_gbps = 0; }), kInvalid);
  EXPECT_EQ(bad([](TopologyOptions& o) { o.inter_latency = Duration(-5); }), kInvalid);
  SimRuntime rt;
  SimNetwork net(rt);
  TopologyOptions o = small_options();
  o.intra = "pcie4";
  auto t = Topology::create(net, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), kInvalid);
  EXPECT_NE(t.status().message().find("intra"), std::string::npos) << t.status().message();
  EXPECT_EQ(net.num_links(), 0u);
}

TEST(TopologyDefaultsTest, BandwidthDefaultsPerInterconnect) {
  SimRuntime rt;
  SimNetwork net(rt);
  TopologyOptions o;
  o.num_nodes = 1;
  o.gpus_per_node = 2;
  o.intra = "pcie";
  o.inter_node_gbps = 100;
  auto pcie = Topology::create(net, o);
  ASSERT_TRUE(pcie.ok());
  EXPECT_EQ(pcie->intra_bytes_per_s(), kPcieBytesPerS);
  EXPECT_EQ(net.link(pcie->gpu_up(GpuId(1))).bytes_per_second, kPcieBytesPerS);
  EXPECT_EQ(pcie->inter_bytes_per_s(), 12.5e9);  // 100 Gb/s
  EXPECT_EQ(net.link(pcie->nic_out(0)).bytes_per_second, 12.5e9);
  o.intra = "nvlink";
  auto nvlink = Topology::create(net, o);
  ASSERT_TRUE(nvlink.ok());
  EXPECT_EQ(net.link(nvlink->gpu_down(GpuId(0))).bytes_per_second, kNvlinkBytesPerS);
  EXPECT_EQ(net.num_links(), 2u * (2 * 2 + 2));
}

TEST_F(TopologyTest, GpuNumberingAndLinks) {
  EXPECT_EQ(topo_->num_gpus(), 4);
  EXPECT_EQ(topo_->gpu(1, 0), GpuId(2));
  EXPECT_EQ(topo_->node_of(g(3)), 1);
  EXPECT_TRUE(topo_->contains(g(3)));
  EXPECT_FALSE(topo_->contains(g(4)));
  EXPECT_EQ(topo_->gpu_up(g(1)), LinkId(2));
  EXPECT_EQ(topo_->gpu_down(g(2)), LinkId(7));
  EXPECT_EQ(topo_->nic_out(1), LinkId(10));
  EXPECT_EQ(topo_->nic_in(0), LinkId(5));
  EXPECT_EQ(net_.link(LinkId(8)).name, "node1.gpu1.up");
  EXPECT_EQ(net_.link(LinkId(4)).name, "node0.nic_out");
  EXPECT_EQ(net_.link(LinkId(4)).bytes_per_second, 0.5e9);
}

TEST_F(TopologyTest, PathsWithinAndAcrossNodes) {
  EXPECT_TRUE(topo_->path(g(2), g(2)).empty());
  EXPECT_EQ(topo_->path(g(0), g(1)), (std::vector<LinkId>{LinkId(0), LinkId(3)}));
  EXPECT_EQ(topo_->path(g(3), g(2)), (std::vector<LinkId>{LinkId(8), LinkId(7)}));
  EXPECT_EQ(topo_->path(g(0), g(3)), (std::vector<LinkId>{LinkId(0), LinkId(4), LinkId(11), LinkId(9)}));
  EXPECT_EQ(topo_->path(g(2), g(1)), (std::vector<LinkId>{LinkId(6), LinkId(10), LinkId(5), LinkId(3)}));
  EXPECT_EQ(net_.path_latency(topo_->path(g(0), g(1))), Duration(1 * kUs));
  EXPECT_EQ(net_.path_latency(topo_->path(g(0), g(3))), Duration(11 * kUs));
}

// 1e9 B inside a node: 1 GB/s -> 1 s + 1 us. Across nodes: the 0.5 GB/s NIC is the
// bottleneck -> 2 s + 1 us + 10 us.
TEST_F(TopologyTest, IntraNodeAndInterNodeTransferTimes) {
  std::int64_t intra_done = -1, inter_done = -1;
  net_.start_flow(topo_->path(g(0), g(1)), 1'000'000'000, [&] { intra_done = ns_of(rt_); });
  net_.start_flow(topo_->path(g(2), g(0)), 1'000'000'000, [&] { inter_done = ns_of(rt_); });
  rt_.run();
  EXPECT_EQ(intra_done, 1 * kSec + 1 * kUs);
  EXPECT_EQ(inter_done, 2 * kSec + 11 * kUs);
}

// Tensor-parallel shards 0->2 and 1->3, 1e9 B each, plus an intra-node flow 0->1 of
// 0.75e9 B, all at 0. Both shard flows cross node0's NIC-out (0.5 GB/s): 0.25 GB/s
// each. The intra flow shares gpu0's up link with shard 0->2, which uses only 0.25 of
// its 1 GB/s, so max-min gives it the other 0.75 GB/s: 0.75e9 B in 1 s (+1 us).
// The shards take 1e9 / 0.25e9 = 4 s (+11 us); the transfer's on_done fires once then.
TEST_F(TopologyTest, ShardPairTransferCompletesWhenAllShardsAre) {
  int fired = 0;
  std::int64_t transfer_done = -1, intra_done = -1;
  const std::vector<FlowId> flows = topo_->transfer({{g(0), g(2)}, {g(1), g(3)}}, 1'000'000'000, [&] {
    ++fired;
    transfer_done = ns_of(rt_);
  });
  ASSERT_EQ(flows.size(), 2u);
  const FlowId intra = net_.start_flow(topo_->path(g(0), g(1)), 750'000'000, [&] { intra_done = ns_of(rt_); });
  EXPECT_EQ(net_.flow_rate(flows[0]), 0.25e9);
  EXPECT_EQ(net_.flow_rate(flows[1]), 0.25e9);
  EXPECT_EQ(net_.flow_rate(intra), 0.75e9);
  rt_.run_until(TimePoint(Duration(2 * kSec)));
  EXPECT_EQ(intra_done, 1 * kSec + 1 * kUs);
  EXPECT_EQ(net_.flow_rate(flows[0]), 0.25e9);  // still NIC-bound
  EXPECT_EQ(fired, 0);
  rt_.run();
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(transfer_done, 4 * kSec + 11 * kUs);
  EXPECT_EQ(net_.bytes_delivered(), 2'750'000'000);
  EXPECT_NEAR(net_.link_stats(topo_->nic_out(0)).bytes_carried, 2e9, 1e-3);
  EXPECT_EQ(net_.link_stats(topo_->nic_out(0)).busy_time, Duration(4 * kSec));
}

// A same-GPU pair is instant; the transfer waits for the cross-node pair 1->3 alone
// on the NIC: 1e9 / 0.5e9 = 2 s + 11 us. No pairs: on_done at now, as an event.
TEST_F(TopologyTest, ShardTransferWithLocalPairAndWithNoPairs) {
  int fired = 0;
  std::int64_t done = -1;
  topo_->transfer({{g(0), g(0)}, {g(1), g(3)}}, 1'000'000'000, [&] {
    ++fired;
    done = ns_of(rt_);
  });
  rt_.run();
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(done, 2 * kSec + 11 * kUs);

  bool empty_fired = false;
  topo_->transfer({}, 123, [&] { empty_fired = true; });
  EXPECT_FALSE(empty_fired);  // not from inside transfer()
  rt_.run();
  EXPECT_TRUE(empty_fired);
  EXPECT_EQ(ns_of(rt_), 2 * kSec + 11 * kUs);
}

TEST_F(TopologyTest, CancellingAShardMeansTheTransferNeverCompletes) {
  bool fired = false;
  const auto flows = topo_->transfer({{g(0), g(2)}, {g(1), g(3)}}, 1000, [&] { fired = true; });
  EXPECT_TRUE(net_.cancel_flow(flows[1]));
  rt_.run();
  EXPECT_FALSE(fired);
  EXPECT_EQ(net_.bytes_delivered(), 1000);
}

}  // namespace
}  // namespace ecoserve::sim
