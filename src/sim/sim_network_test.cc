#include "sim/sim_network.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ecoserve::sim {
namespace {

constexpr std::int64_t kSec = 1'000'000'000;
constexpr std::int64_t kMs = 1'000'000;

TimePoint at_ns(std::int64_t ns) { return TimePoint(Duration(ns)); }
std::int64_t ns_of(const SimRuntime& rt) { return rt.now().time_since_epoch().count(); }

class SimNetworkTest : public ::testing::Test {
 protected:
  LinkId link(double bytes_per_second, Duration latency = Duration::zero()) {
    auto id = net_.add_link({"l" + std::to_string(net_.num_links()), bytes_per_second, latency});
    EXPECT_TRUE(id.ok()) << id.status().to_string();
    return *id;
  }
  // Starts a flow whose delivery time is recorded in done_[name].
  FlowId start(const std::string& name, std::vector<LinkId> path, std::int64_t bytes) {
    return net_.start_flow(std::move(path), bytes, [this, name] {
      EXPECT_EQ(done_.count(name), 0u) << name << " delivered twice";
      done_[name] = ns_of(rt_);
      order_.push_back(name);
    });
  }

  SimRuntime rt_;
  SimNetwork net_{rt_};
  std::map<std::string, std::int64_t> done_;
  std::vector<std::string> order_;
};

TEST_F(SimNetworkTest, AddLinkValidates) {
  EXPECT_EQ(net_.add_link({"zero", 0.0, {}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(net_.add_link({"neg", -5.0, {}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(net_.add_link({"inf", 1.0 / 0.0, {}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(net_.add_link({"lat", 10.0, Duration(-1)}).status().code(), StatusCode::kInvalidArgument);
  auto ok = net_.add_link({"ok", 10.0, Duration(3)});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->value, 0);
  EXPECT_EQ(net_.link(*ok).name, "ok");
  EXPECT_EQ(net_.num_links(), 1u);
}

// 1000 B over a 100 B/s link with 1 ms latency: 10 s of sending + 1 ms = 10.001 s.
TEST_F(SimNetworkTest, OneFlowTakesBytesOverBandwidthPlusLatency) {
  const LinkId l = link(100, Duration(kMs));
  const FlowId f = start("f", {l}, 1000);
  EXPECT_EQ(net_.flow_rate(f), 100.0);
  EXPECT_EQ(net_.bytes_sent(), 1000);
  EXPECT_EQ(net_.active_flows(), 1u);
  rt_.run_until(at_ns(4 * kSec));
  EXPECT_EQ(net_.flow_remaining_bytes(f), 600.0);
  EXPECT_DOUBLE_EQ(net_.link_stats(l).bytes_carried, 400.0);
  rt_.run();
  EXPECT_EQ(done_["f"], 10 * kSec + kMs);
  EXPECT_EQ(net_.bytes_delivered(), 1000);
  EXPECT_EQ(net_.flows_delivered(), 1u);
  EXPECT_EQ(net_.active_flows(), 0u);
  EXPECT_FALSE(net_.flow_remaining_bytes(f).has_value());
  const LinkStats s = net_.link_stats(l);
  EXPECT_DOUBLE_EQ(s.bytes_carried, 1000.0);
  EXPECT_EQ(s.busy_time, Duration(10 * kSec));  // sending only, not the latency
  EXPECT_EQ(s.active_flows, 0);
}

// 10 B/s link; 100 B and 50 B start at 0 and get 5 B/s each. The 50 B flow ends at
// 50/5 = 10 s; the 100 B flow has 50 B left then, alone at 10 B/s: 10 + 5 = 15 s.
TEST_F(SimNetworkTest, TwoFlowsShareOneLinkEqually) {
  const LinkId l = link(10);
  const FlowId big = start("big", {l}, 100);
  const FlowId small = start("small", {l}, 50);
  EXPECT_EQ(net_.flow_rate(big), 5.0);
  EXPECT_EQ(net_.flow_rate(small), 5.0);
  rt_.run_until(at_ns(12 * kSec));
  EXPECT_EQ(done_["small"], 10 * kSec);
  EXPECT_EQ(net_.flow_rate(big), 10.0);
  EXPECT_EQ(net_.flow_remaining_bytes(big), 30.0);  // 50 - 2 s * 10 B/s
  rt_.run();
  EXPECT_EQ(done_["big"], 15 * kSec);
  EXPECT_EQ(order_, (std::vector<std::string>{"small", "big"}));
  EXPECT_EQ(net_.link_stats(l).busy_time, Duration(15 * kSec));
  EXPECT_DOUBLE_EQ(net_.link_stats(l).bytes_carried, 150.0);
}

// L1: 10 B/s, no latency. L2: 2 B/s, 500 ms latency.
//   A: [L1] 100 B at 0;  C: [L1, L2] 24 B at 0;  B: [L1] 40 B at 5 s.
// [0, 5):  L2 is C's bottleneck (2 B/s), so max-min gives A the rest of L1: A = 8, C = 2.
//          At 5 s: A has 100 - 40 = 60 B left, C 24 - 10 = 14 B.
// [5, 12): B joins. C stays 2 (L2); A and B split L1's remaining 8: 4 each.
//          C ends sending at 5 + 14/2 = 12 s and is delivered at 12.5 s (L2's latency).
//          At 12 s: A has 60 - 28 = 32 B left, B 40 - 28 = 12 B.
// [12, 14.4): A = B = 5. B ends at 12 + 12/5 = 14.4 s. A has 32 - 12 = 20 B left.
// [14.4, 16.4): A alone at 10 B/s: ends at 14.4 + 20/10 = 16.4 s.
TEST_F(SimNetworkTest, ThreeFlowsMaxMinWithLateStartAndOtherBottleneck) {
  const LinkId l1 = link(10);
  const LinkId l2 = link(2, Duration(500 * kMs));
  const FlowId a = start("A", {l1}, 100);
  const FlowId c = start("C", {l1, l2}, 24);
  FlowId b;
  rt_.schedule_at(at_ns(5 * kSec), [&] { b = start("B", {l1}, 40); });
  rt_.run_until(at_ns(1 * kSec));
  EXPECT_EQ(net_.flow_rate(a), 8.0);
  EXPECT_EQ(net_.flow_rate(c), 2.0);
  rt_.run_until(at_ns(6 * kSec));
  EXPECT_EQ(net_.flow_rate(a), 4.0);
  EXPECT_EQ(net_.flow_rate(b), 4.0);
  EXPECT_EQ(net_.flow_rate(c), 2.0);
  EXPECT_EQ(net_.flow_remaining_bytes(a), 56.0);
  EXPECT_EQ(net_.flow_remaining_bytes(c), 12.0);
  rt_.run_until(at_ns(12 * kSec + 250 * kMs));  // C sent, not yet delivered
  EXPECT_EQ(net_.flow_rate(c), 0.0);
  EXPECT_EQ(net_.flow_remaining_bytes(c), 0.0);
  EXPECT_EQ(net_.flow_rate(a), 5.0);
  EXPECT_EQ(net_.active_flows(), 3u);
  EXPECT_EQ(net_.transmitting_flows(), 2u);
  rt_.run();
  EXPECT_EQ(done_["C"], 12 * kSec + 500 * kMs);
  EXPECT_EQ(done_["B"], 14 * kSec + 400 * kMs);
  EXPECT_EQ(done_["A"], 16 * kSec + 400 * kMs);
  EXPECT_EQ(order_, (std::vector<std::string>{"C", "B", "A"}));
  EXPECT_EQ(net_.bytes_sent(), 164);
  EXPECT_EQ(net_.bytes_delivered(), 164);
  EXPECT_NEAR(net_.link_stats(l1).bytes_carried, 164.0, 1e-9);
  EXPECT_NEAR(net_.link_stats(l2).bytes_carried, 24.0, 1e-9);
  EXPECT_EQ(net_.link_stats(l1).busy_time, Duration(16 * kSec + 400 * kMs));
  EXPECT_EQ(net_.link_stats(l2).busy_time, Duration(12 * kSec));
}

// 10 B/s link with 2 s latency; A = 50 B, B = 100 B at 0, 5 B/s each. A's last byte
// leaves at 10 s (delivered 12 s) and B speeds up to 10 B/s at 10 s, not 12 s:
// 50 B left -> sent at 15 s, delivered at 17 s.
TEST_F(SimNetworkTest, BandwidthIsFreedWhenTheLastByteIsSentNotWhenDelivered) {
  const LinkId l = link(10, Duration(2 * kSec));
  const FlowId a = start("A", {l}, 50);
  const FlowId b = start("B", {l}, 100);
  rt_.run_until(at_ns(11 * kSec));
  EXPECT_EQ(net_.flow_rate(b), 10.0);
  EXPECT_EQ(net_.flow_remaining_bytes(a), 0.0);  // in flight, not delivered
  EXPECT_EQ(net_.active_flows(), 2u);
  EXPECT_EQ(net_.transmitting_flows(), 1u);
  rt_.run();
  EXPECT_EQ(done_["A"], 12 * kSec);
  EXPECT_EQ(done_["B"], 17 * kSec);
}

// 10 B/s: A = 50, B = 50, C = 100 at 0, 10/3 B/s each. A and B end together at 15 s
// (one reallocation, delivered in start order); C has 50 B left: 15 + 50/10 = 20 s.
TEST_F(SimNetworkTest, SimultaneousEndsAreDeliveredInStartOrder) {
  const LinkId l = link(10);
  start("C", {l}, 100);
  start("A", {l}, 50);
  start("B", {l}, 50);
  rt_.run();
  EXPECT_EQ(done_["A"], 15 * kSec);
  EXPECT_EQ(done_["B"], 15 * kSec);
  EXPECT_EQ(done_["C"], 20 * kSec);
  EXPECT_EQ(order_, (std::vector<std::string>{"A", "B", "C"}));
}

// 10 B/s: A = B = 100 B at 0 (5 B/s each). B is cancelled at 4 s (20 B sent); A then
// has 80 B left at 10 B/s: ends at 4 + 8 = 12 s. B's on_done never runs.
TEST_F(SimNetworkTest, CancelledFlowFreesBandwidthForOthers) {
  const LinkId l = link(10);
  start("A", {l}, 100);
  const FlowId b = start("B", {l}, 100);
  rt_.schedule_at(at_ns(4 * kSec), [&] { EXPECT_TRUE(net_.cancel_flow(b)); });
  rt_.run();
  EXPECT_EQ(done_["A"], 12 * kSec);
  EXPECT_EQ(done_.count("B"), 0u);
  EXPECT_FALSE(net_.cancel_flow(b));
  EXPECT_EQ(net_.bytes_sent(), 200);
  EXPECT_EQ(net_.bytes_delivered(), 100);
  EXPECT_EQ(net_.bytes_cancelled(), 100);
  EXPECT_DOUBLE_EQ(net_.link_stats(l).bytes_carried, 120.0);  // 20 + 20 + 80
  EXPECT_EQ(net_.active_flows(), 0u);
}

// 10 B over a 10 B/s link with 5 s latency: sent at 1 s, would be delivered at 6 s;
// cancelled at 3 s while in flight.
TEST_F(SimNetworkTest, CancelWhileInFlightAndAfterDelivery) {
  const LinkId l = link(10, Duration(5 * kSec));
  const FlowId f = start("f", {l}, 10);
  const FlowId g = start("g", {}, 7);  // empty path: delivered at 0
  rt_.schedule_at(at_ns(3 * kSec), [&] { EXPECT_TRUE(net_.cancel_flow(f)); });
  rt_.run();
  EXPECT_EQ(done_.count("f"), 0u);
  EXPECT_EQ(done_["g"], 0);
  EXPECT_FALSE(net_.cancel_flow(g));
  EXPECT_FALSE(net_.cancel_flow(FlowId{}));
  EXPECT_EQ(ns_of(rt_), 3 * kSec);  // nothing left after the cancel
  EXPECT_EQ(net_.bytes_cancelled(), 10);
  EXPECT_EQ(net_.bytes_delivered(), 7);
}

// 0 bytes over a 3 ms link: delivered after the latency. 100 B over an empty path:
// delivered at now, as an event (never from inside start_flow).
TEST_F(SimNetworkTest, ZeroBytesAndEmptyPathTakeOnlyTheLatency) {
  const LinkId l = link(10, Duration(3 * kMs));
  rt_.run_until(at_ns(kSec));
  start("zero", {l}, 0);
  start("empty", {}, 100);
  EXPECT_TRUE(done_.empty());
  EXPECT_EQ(net_.active_flows(), 2u);
  EXPECT_EQ(net_.transmitting_flows(), 0u);
  rt_.run();
  EXPECT_EQ(done_["empty"], kSec);
  EXPECT_EQ(done_["zero"], kSec + 3 * kMs);
  EXPECT_EQ(net_.bytes_sent(), 100);
  EXPECT_EQ(net_.bytes_delivered(), 100);
  EXPECT_EQ(net_.link_stats(l).bytes_carried, 0.0);
  EXPECT_EQ(net_.link_stats(l).busy_time, Duration::zero());
}

// A path crossing the same 10 B/s link twice uses it twice: 50 B at 5 B/s = 10 s.
TEST_F(SimNetworkTest, LinkCrossedTwiceCountsTwice) {
  const LinkId l = link(10);
  const FlowId f = start("f", {l, l}, 50);
  EXPECT_EQ(net_.flow_rate(f), 5.0);
  EXPECT_EQ(net_.link_stats(l).active_flows, 2);
  rt_.run();
  EXPECT_EQ(done_["f"], 10 * kSec);
  EXPECT_DOUBLE_EQ(net_.link_stats(l).bytes_carried, 100.0);
}

// Busy time counts only time with a sending flow: 50 B at 10 B/s during [0, 5) and
// 20 B during [8, 10): 7 s busy of 12, 70 B carried.
TEST_F(SimNetworkTest, BusyTimeAndBytesCarriedForUtilization) {
  const LinkId l = link(10);
  start("a", {l}, 50);
  rt_.schedule_at(at_ns(8 * kSec), [&] { start("b", {l}, 20); });
  rt_.run_until(at_ns(9 * kSec));
  EXPECT_EQ(net_.link_stats(l).busy_time, Duration(6 * kSec));
  EXPECT_DOUBLE_EQ(net_.link_stats(l).bytes_carried, 60.0);
  rt_.run_until(at_ns(12 * kSec));
  EXPECT_EQ(done_["b"], 10 * kSec);
  EXPECT_EQ(net_.link_stats(l).busy_time, Duration(7 * kSec));
  EXPECT_DOUBLE_EQ(net_.link_stats(l).bytes_carried, 70.0);
}

TEST_F(SimNetworkTest, OnDoneMayStartAndCancelFlows) {
  const LinkId l = link(10);
  FlowId victim = start("victim", {l}, 1000);
  net_.start_flow({l}, 10, [&] {  // ends at 2 s (5 B/s)
    start("next", {l}, 40);       // shares with victim until victim is cancelled
    EXPECT_TRUE(net_.cancel_flow(victim));
  });
  rt_.run();
  EXPECT_EQ(done_["next"], 6 * kSec);  // 2 s + 40 B at 10 B/s
  EXPECT_EQ(done_.count("victim"), 0u);
}

// Seeded random workload: flows with random paths over 6 links start at random times.
// Checks, at random instants, that rates are feasible and max-min fair (every sending
// flow has a saturated link on which no flow is faster), then that bytes are
// conserved, no flow beats its unshared time, and a second run is identical.
struct RandomRun {
  std::vector<std::int64_t> done_ns;
  std::int64_t sent = 0, delivered = 0;
  double carried = 0, expected_carried = 0;
  int fairness_checks = 0;
};

RandomRun run_random(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  SimRuntime rt;
  SimNetwork net(rt);
  const std::vector<double> caps = {1e6, 2.5e6, 4e6, 1e7, 3e5, 7e6};
  std::vector<LinkId> links;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    links.push_back(*net.add_link({"l" + std::to_string(i), caps[i], Duration(static_cast<std::int64_t>(i) * 1000)}));
  }
  constexpr int kFlows = 400;
  struct F {
    std::vector<LinkId> path;
    std::int64_t bytes = 0, start_ns = 0;
    FlowId id;
  };
  std::vector<F> flows(kFlows);
  RandomRun out;
  out.done_ns.assign(kFlows, -1);
  for (int i = 0; i < kFlows; ++i) {
    F& f = flows[i];
    const int len = 1 + static_cast<int>(rng() % 3);
    std::vector<int> perm = {0, 1, 2, 3, 4, 5};
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int k = 0; k < len; ++k) f.path.push_back(links[perm[k]]);
    f.bytes = static_cast<std::int64_t>(rng() % 2'000'000);
    f.start_ns = static_cast<std::int64_t>(rng() % (20 * kSec));
    rt.schedule_at(at_ns(f.start_ns), [&, i] {
      flows[i].id = net.start_flow(flows[i].path, flows[i].bytes, [&, i] { out.done_ns[i] = ns_of(rt); });
    });
  }
  auto check_fair = [&] {
    std::vector<double> sum(caps.size(), 0.0), max_rate(caps.size(), 0.0);
    for (const F& f : flows) {
      const double r = net.flow_rate(f.id);
      for (LinkId l : f.path) {
        sum[l.value] += r;
        max_rate[l.value] = std::max(max_rate[l.value], r);
      }
    }
    for (std::size_t l = 0; l < caps.size(); ++l) EXPECT_LE(sum[l], caps[l] * (1 + 1e-9));
    for (const F& f : flows) {
      const double r = net.flow_rate(f.id);
      if (r == 0) continue;
      bool bottleneck = false;
      for (LinkId l : f.path) {
        bottleneck |= sum[l.value] >= caps[l.value] * (1 - 1e-9) && r >= max_rate[l.value] * (1 - 1e-9);
      }
      EXPECT_TRUE(bottleneck) << "flow with rate " << r << " has no bottleneck link";
    }
    ++out.fairness_checks;
  };
  for (int i = 0; i < 200; ++i) rt.schedule_at(at_ns(static_cast<std::int64_t>(rng() % (30 * kSec))), check_fair);
  rt.run();
  for (int i = 0; i < kFlows; ++i) {
    const F& f = flows[i];
    EXPECT_GE(out.done_ns[i], 0) << "flow " << i << " never delivered";
    double min_cap = 1e300;
    std::int64_t latency = 0;
    for (LinkId l : f.path) {
      min_cap = std::min(min_cap, caps[l.value]);
      latency += net.link(l).latency.count();
    }
    const auto alone_ns = static_cast<std::int64_t>(static_cast<double>(f.bytes) / min_cap * 1e9);
    EXPECT_GE(out.done_ns[i], f.start_ns + alone_ns + latency - 1) << "flow " << i;
    out.expected_carried += static_cast<double>(f.bytes) * static_cast<double>(f.path.size());
  }
  for (LinkId l : links) out.carried += net.link_stats(l).bytes_carried;
  out.sent = net.bytes_sent();
  out.delivered = net.bytes_delivered();
  EXPECT_EQ(net.active_flows(), 0u);
  EXPECT_EQ(net.transmitting_flows(), 0u);
  return out;
}

TEST(SimNetworkRandomTest, MaxMinFairConservesBytesAndIsDeterministic) {
  const RandomRun a = run_random(99);
  EXPECT_EQ(a.fairness_checks, 200);
  EXPECT_EQ(a.sent, a.delivered);
  EXPECT_NEAR(a.carried, a.expected_carried, a.expected_carried * 1e-9);
  const RandomRun b = run_random(99);
  EXPECT_EQ(a.done_ns, b.done_ns);
}

}  // namespace
}  // namespace ecoserve::sim
