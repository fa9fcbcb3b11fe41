#include "sim/sim_cluster.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>
#include <random>

namespace ecoserve::sim {
namespace {

// 10 ms per step + 0.1 ms per prefill token + 1 ms per decode sequence.
std::shared_ptr<const policy::CostModel> constant_cost() {
  return std::make_shared<ConstantCostModel>(0.010, 0.0001, 0.001);
}

SimInstanceSpec mixed_instance(int32_t gpu, const std::string& policy = "chunked", int32_t blocks = 256) {
  SimInstanceSpec s;
  s.role = policy::InstanceRole::kMixed;
  s.options.core.policy = policy;
  s.options.core.max_num_seqs = 64;
  s.options.core.max_num_batched_tokens = 512;
  s.options.core.chunk_size = 512;
  s.options.executor.block_size = 16;
  s.options.executor.num_kv_blocks = blocks;
  s.options.executor.max_context = 2048;
  s.options.record_steps = true;
  s.cost_model = constant_cost();
  s.gpus = {GpuId(gpu)};
  return s;
}

SimClusterOptions one_node(int32_t gpus) {
  SimClusterOptions o;
  o.topology.num_nodes = 1;
  o.topology.gpus_per_node = gpus;
  o.topology.intra = "pcie";
  o.topology.intra_bytes_per_s = 1e6;
  o.topology.intra_latency = Duration::zero();
  o.kv_bytes_per_token = 1000;
  o.keep_token_times = true;
  return o;
}

SimRequest req(double at, int32_t in, int32_t out) {
  SimRequest r;
  r.arrival_s = at;
  r.input_tokens = in;
  r.output_tokens = out;
  return r;
}

SimResult run(SimClusterOptions o, const std::vector<SimRequest>& reqs) {
  auto c = SimCluster::create(std::move(o));
  EXPECT_TRUE(c.ok()) << c.status().message();
  auto r = (*c)->run(reqs);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

TEST(SimClusterGolden, OneInstanceTwoRequestsExactTimes) {
  SimClusterOptions o = one_node(1);
  o.instances = {mixed_instance(0)};
  // t=0      step 1: prefill A (100 tokens)            10 + 10 ms      -> A's first token at 0.020
  // t=0.020  step 2: decode A + prefill B (50 tokens)  10 + 1 + 5 ms   -> A 2nd, B first at 0.036
  // t=0.036  step 3: decode A + decode B               10 + 2 ms       -> A 3rd (done), B 2nd (done) at 0.048
  SimResult r = run(o, {req(0.0, 100, 3), req(0.005, 50, 2)});
  ASSERT_EQ(r.requests.size(), 2u);
  const SimRequestResult& a = r.requests[0];
  const SimRequestResult& b = r.requests[1];
  ASSERT_TRUE(a.success);
  ASSERT_TRUE(b.success);
  EXPECT_EQ(a.finish_reason, "length");
  EXPECT_NEAR(a.first_token_s, 0.020, 1e-9);
  ASSERT_EQ(a.token_s.size(), 3u);
  EXPECT_NEAR(a.token_s[1], 0.036, 1e-9);
  EXPECT_NEAR(a.end_s, 0.048, 1e-9);
  EXPECT_NEAR(b.first_token_s - b.arrival_s, 0.031, 1e-9);  // TTFT
  EXPECT_NEAR(b.end_s, 0.048, 1e-9);
  EXPECT_NEAR((a.end_s - a.first_token_s) / 2, 0.014, 1e-9);  // TPOT
  EXPECT_NEAR(b.end_s - b.first_token_s, 0.012, 1e-9);
  ASSERT_EQ(r.instances.size(), 1u);
  EXPECT_EQ(r.instances[0].counters.steps, 3);
  EXPECT_EQ(r.instances[0].free_blocks_at_end, r.instances[0].total_blocks);
  EXPECT_EQ(r.stats.completed, 2);
}

TEST(SimClusterGolden, InstancesSharingAHostSlowEachOtherDown) {
  // Two instances on one node (host), round robin; a step is x1.1 when it starts with
  // the other instance idle and x1.5 when the other is mid-step.
  SimClusterOptions o = one_node(2);
  o.instances = {mixed_instance(0), mixed_instance(1)};
  o.router = "round-robin";
  o.host_step_scale_alone = 1.1;
  o.host_step_scale_shared = 1.5;
  // A (100 tokens, 1 output) on i0 at t=0: alone, 20 ms x 1.1 -> first token at 0.022.
  // B (100 tokens, 1 output) on i1 at t=0.010: i0 is mid-step, 20 ms x 1.5 -> 0.040.
  // C (100 tokens, 1 output) on i0 at t=0.100: both idle again, 0.122.
  SimResult r = run(o, {req(0.0, 100, 1), req(0.010, 100, 1), req(0.100, 100, 1)});
  ASSERT_EQ(r.requests.size(), 3u);
  EXPECT_NEAR(r.requests[0].first_token_s, 0.022, 1e-9);
  EXPECT_NEAR(r.requests[1].first_token_s, 0.040, 1e-9);
  EXPECT_NEAR(r.requests[2].first_token_s, 0.122, 1e-9);
  // Without the host model: 0.020, 0.030, 0.120.
  o.host_step_scale_alone = o.host_step_scale_shared = 1.0;
  r = run(o, {req(0.0, 100, 1), req(0.010, 100, 1), req(0.100, 100, 1)});
  EXPECT_NEAR(r.requests[0].first_token_s, 0.020, 1e-9);
  EXPECT_NEAR(r.requests[1].first_token_s, 0.030, 1e-9);
  EXPECT_NEAR(r.requests[2].first_token_s, 0.120, 1e-9);
  o.host_step_scale_shared = 0;
  EXPECT_EQ(SimCluster::create(o).status().message(), "host step scales must be > 0 (1, 0)");
}

TEST(SimClusterGolden, PrefillFirstRunsTheNewPromptAlone) {
  SimClusterOptions o = one_node(1);
  o.instances = {mixed_instance(0, "prefill-first")};
  // t=0      prefill A                    20 ms -> 0.020
  // t=0.020  prefill B alone (prefill-first)  15 ms -> B first at 0.035 (A waits)
  // t=0.035  decode A + B                 12 ms -> 0.047 (A 2nd, B 2nd: B done)
  // t=0.047  decode A                     11 ms -> 0.058 (A done)
  SimResult r = run(o, {req(0.0, 100, 3), req(0.005, 50, 2)});
  EXPECT_NEAR(r.requests[1].first_token_s, 0.035, 1e-9);
  EXPECT_NEAR(r.requests[1].end_s, 0.047, 1e-9);
  EXPECT_NEAR(r.requests[0].end_s, 0.058, 1e-9);
}

TEST(SimClusterGolden, FudgHandOffExactTimeline) {
  SimClusterOptions o = one_node(2);
  o.strategy = "fudg";
  SimInstanceSpec p = mixed_instance(0, "prefill-only");
  p.role = policy::InstanceRole::kPrefill;
  SimInstanceSpec d = mixed_instance(1, "decode-only");
  d.role = policy::InstanceRole::kDecode;
  o.instances = {p, d};
  // t=0      prefill on i0: 100 tokens, 20 ms           -> first token at 0.020
  // KV: 100 tokens x 1000 B over GPU0 up + GPU1 down at 1 MB/s: 0.1 s -> at 0.120
  // t=0.120  decode on i1: 11 ms per step              -> 0.131, 0.142
  SimResult r = run(o, {req(0.0, 100, 3)});
  const SimRequestResult& a = r.requests[0];
  ASSERT_TRUE(a.success) << a.error;
  ASSERT_EQ(a.token_s.size(), 3u);
  EXPECT_NEAR(a.token_s[0], 0.020, 1e-9);
  EXPECT_NEAR(a.token_s[1], 0.131, 1e-9);
  EXPECT_NEAR(a.token_s[2], 0.142, 1e-9);
  EXPECT_EQ(a.instance, 1);
  EXPECT_EQ(r.stats.kv_transfers, 1);
  EXPECT_EQ(r.stats.kv_transfer_bytes, 100000);
  EXPECT_EQ(r.stats.network_bytes_sent, r.stats.network_bytes_delivered);
  EXPECT_NEAR(r.stats.kv_transfer_seconds, 0.1, 1e-9);
  for (const auto& inst : r.instances) EXPECT_EQ(inst.free_blocks_at_end, inst.total_blocks) << inst.name;
}

std::vector<SimRequest> random_workload(int n, double rate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<int32_t> in(16, 600), out(1, 120);
  std::vector<SimRequest> v;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    v.push_back(req(t, in(rng), out(rng)));
  }
  return v;
}

SimClusterOptions four_instances(const std::string& strategy) {
  SimClusterOptions o = one_node(4);
  o.topology.intra_bytes_per_s = 1e9;
  o.strategy = strategy;
  for (int i = 0; i < 4; ++i) {
    SimInstanceSpec s = mixed_instance(i, strategy == "padg" ? "temporal" : "chunked", 120);
    s.cost_model = std::make_shared<ConstantCostModel>(0.005, 0.00002, 0.0002);
    if (strategy == "fudg") {
      const bool prefill = i < 2;
      s.role = prefill ? policy::InstanceRole::kPrefill : policy::InstanceRole::kDecode;
      s.options.core.policy = prefill ? "prefill-only" : "decode-only";
    }
    if (strategy == "padg") s.options.core.cost_model = s.cost_model;
    o.instances.push_back(s);
  }
  o.migrate_interval = std::chrono::milliseconds(50);
  o.migration.source_freeness = 4;
  o.migration.destination_freeness = 8;
  o.migration.min_spread = 2;
  return o;
}

class SimClusterConservation : public ::testing::TestWithParam<std::string> {};

TEST_P(SimClusterConservation, EveryRequestFinishesAndEveryBlockIsFree) {
  const std::vector<SimRequest> w = random_workload(300, 40.0, 7);
  SimResult r = run(four_instances(GetParam()), w);
  int64_t ok = 0, tokens = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const SimRequestResult& q = r.requests[i];
    ASSERT_FALSE(q.finish_reason.empty()) << "request " << i << " never finished";
    if (q.success) {
      ++ok;
      EXPECT_EQ(q.output_tokens, w[i].output_tokens) << i;
      EXPECT_GE(q.first_token_s, q.arrival_s);
      EXPECT_GE(q.end_s, q.first_token_s);
      ASSERT_EQ(q.token_s.size(), static_cast<size_t>(q.output_tokens));
      EXPECT_TRUE(std::is_sorted(q.token_s.begin(), q.token_s.end()));
    } else {
      EXPECT_FALSE(q.error.empty()) << "request " << i << " failed without a reason";
    }
    tokens += q.output_tokens;
  }
  EXPECT_EQ(ok, static_cast<int64_t>(w.size())) << "every request fits: none should fail";
  EXPECT_EQ(r.stats.completed + r.stats.failed + r.stats.rejected, static_cast<int64_t>(w.size()));
  for (const auto& inst : r.instances) EXPECT_EQ(inst.free_blocks_at_end, inst.total_blocks) << inst.name;
  EXPECT_EQ(r.stats.network_bytes_sent, r.stats.network_bytes_delivered);
  EXPECT_GT(tokens, 0);
  if (GetParam() == "fudg") {
    // A request of one output token ends on its prefill instance: nothing moves.
    const auto moved = std::count_if(w.begin(), w.end(), [](const SimRequest& q) { return q.output_tokens > 1; });
    EXPECT_EQ(r.stats.kv_transfers, moved);
    EXPECT_LT(moved, static_cast<int64_t>(w.size()));
  }
}

TEST_P(SimClusterConservation, SameSeedSameResult) {
  const std::vector<SimRequest> w = random_workload(200, 40.0, 11);
  SimResult a = run(four_instances(GetParam()), w);
  SimResult b = run(four_instances(GetParam()), w);
  ASSERT_EQ(a.requests.size(), b.requests.size());
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].token_s, b.requests[i].token_s) << i;
    EXPECT_EQ(a.requests[i].instance, b.requests[i].instance) << i;
  }
  EXPECT_EQ(a.stats.events, b.stats.events);
  EXPECT_EQ(a.migrations.size(), b.migrations.size());
}

INSTANTIATE_TEST_SUITE_P(Strategies, SimClusterConservation, ::testing::Values("nodg", "fudg", "padg", "llumnix"));

TEST(SimCluster, RejectsBadOptions) {
  SimClusterOptions o = one_node(1);
  o.instances = {mixed_instance(0)};
  o.strategy = "magic";
  EXPECT_EQ(SimCluster::create(o).status().message(), "unknown strategy 'magic' (nodg, fudg, padg, llumnix)");
  o.strategy = "fudg";
  EXPECT_EQ(SimCluster::create(o).status().message(), "fudg needs prefill and decode instances (0 prefill, 0 decode)");
  o.strategy = "nodg";
  o.instances[0].gpus = {GpuId(3)};
  EXPECT_EQ(SimCluster::create(o).status().message(), "instance i0: GPU 3 is outside the 1 GPUs of the topology");
}

}  // namespace
}  // namespace ecoserve::sim

namespace ecoserve::sim {
namespace {

TEST(SimClusterGolden, LlumnixMigrationExactTimeline) {
  SimClusterOptions o = one_node(2);
  o.strategy = "llumnix";
  o.migrate_interval = Duration::zero();  // only the operator's migration below
  o.instances = {mixed_instance(0), mixed_instance(1)};
  SimClusterOptions::Action move;
  move.at_s = 0.1;
  move.kind = SimClusterOptions::Action::kMigrate;
  move.request = 0;
  move.target = 1;
  o.actions = {move};
  // i0: prefill 100 tokens 20 ms (first token 0.020), then 11 ms decode steps: token k at 0.020 + 0.011 (k - 1).
  // 0.100: reserve on i1; the copy stage waits for i0's step boundary at 0.108 (token 9): positions
  //        [0, 108) = 108 kB over 1 MB/s links -> 0.216, loaded on i1 (idle) at once.
  // 0.218: i0's next boundary (token 19): 118 - 108 = 10 positions <= one block: stop-and-copy of
  //        [108, 118) = 10 kB -> 0.228: commit on i1. Downtime 10 ms.
  // i1 decodes on: token 20 at 0.239, token 50 at 0.239 + 30 x 0.011 = 0.569.
  SimResult r = run(o, {req(0.0, 100, 50)});
  const SimRequestResult& a = r.requests[0];
  ASSERT_TRUE(a.success) << a.error;
  ASSERT_EQ(a.token_s.size(), 50u);
  EXPECT_NEAR(a.token_s[8], 0.108, 1e-6);
  EXPECT_NEAR(a.token_s[18], 0.218, 1e-6);
  EXPECT_NEAR(a.token_s[19], 0.239, 1e-6);
  EXPECT_NEAR(a.end_s, 0.569, 1e-6);
  EXPECT_EQ(a.instance, 1);
  EXPECT_EQ(a.migrations, 1);
  ASSERT_EQ(r.migrations.size(), 1u);
  const SimMigration& m = r.migrations[0];
  EXPECT_EQ(m.outcome, "completed");
  EXPECT_EQ(m.stages, 2);
  EXPECT_EQ(m.bytes, 118000);
  EXPECT_NEAR(m.started_s, 0.100, 1e-9);
  EXPECT_NEAR(m.finished_s, 0.228, 1e-6);
  EXPECT_NEAR(m.downtime_s, 0.010, 1e-6);
  EXPECT_EQ(r.stats.network_bytes_sent, 118000);
  EXPECT_EQ(r.stats.network_bytes_delivered, 118000);
  for (const auto& inst : r.instances) EXPECT_EQ(inst.free_blocks_at_end, inst.total_blocks) << inst.name;
}

TEST(SimClusterGolden, MitosisSplitExactTimeline) {
  SimClusterOptions o = one_node(4);
  o.strategy = "padg";
  o.mitosis.macro_min = 2;
  o.mitosis.macro_max = 3;
  for (int i = 0; i < 3; ++i) {
    o.instances.push_back(mixed_instance(i, "temporal"));
    o.instances.back().options.core.cost_model = o.instances.back().cost_model;
  }
  SimClusterOptions::Action add;
  add.at_s = 1.0;
  add.kind = SimClusterOptions::Action::kAddInstance;
  add.instance = mixed_instance(3, "temporal");
  add.instance.options.core.cost_model = add.instance.cost_model;
  o.actions = {add};
  // 3 instances fill one macro (N_u = 3); the 4th splits it: the oldest keeps
  // ceil(4/2) = 2 (i0 i1), i2 moves by handle and i3 joins it: m0{i0 i1} m1{i2 i3}.
  // A request running on i2 across the split keeps running there; requests after
  // the split go to the less loaded macro instance.
  SimResult r = run(o, {req(0.5, 40, 100), req(0.6, 40, 100), req(0.7, 40, 100), req(1.5, 40, 5)});
  ASSERT_EQ(r.layout_changes.size(), 2u);
  EXPECT_EQ(r.layout_changes[0].action, "start");
  EXPECT_EQ(r.layout_changes[0].layout, "m0{i0 i1 i2}");
  EXPECT_DOUBLE_EQ(r.layout_changes[1].at_s, 1.0);
  EXPECT_EQ(r.layout_changes[1].action, "add i3");
  EXPECT_EQ(r.layout_changes[1].layout, "m0{i0 i1} m1{i2 i3}");
  for (const auto& q : r.requests) EXPECT_TRUE(q.success) << q.error;
  // Algorithm 1 kept the first three on i0 (constraints held); the split moved no request.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.requests[static_cast<size_t>(i)].instance, 0) << i;
  // After the split m1 is the less loaded macro instance; its first member i2 takes the
  // request: prefill 40 tokens (14 ms) at once, then 4 decode steps of 11 ms.
  EXPECT_EQ(r.requests[3].instance, 2);
  EXPECT_NEAR(r.requests[3].first_token_s, 1.514, 1e-9);
  EXPECT_NEAR(r.requests[3].end_s, 1.558, 1e-9);
  EXPECT_EQ(r.stats.completed, 4);
}

}  // namespace
}  // namespace ecoserve::sim

namespace ecoserve::sim {
namespace {

// The live router's autoscaling rules in simulation: an overloaded padg cluster grows
// by the mitosis rules (joins, then a split), then shrinks when the load is gone.
TEST(SimClusterScaling, PadgAutoscaleGrowsAndSplitsThenShrinks) {
  SimClusterOptions o = one_node(8);
  o.strategy = "padg";
  o.mitosis.macro_min = 2;
  o.mitosis.macro_max = 3;
  for (int i = 0; i < 2; ++i) {
    o.instances.push_back(mixed_instance(i, "temporal"));
    o.instances.back().options.core.cost_model = o.instances.back().cost_model;
  }
  o.scale_template = o.instances[0];
  o.autoscale = true;
  o.autoscale_window = std::chrono::seconds(2);
  o.autoscale_max = 6;
  o.autoscale_policy.cooldown = std::chrono::seconds(2);
  std::vector<SimRequest> w;
  for (int i = 0; i < 600; ++i) {  // 40 req/s for 15 s, each ~2 instance-seconds of decode
    SimRequest r = req(i * 0.025, 200, 60);
    r.slo_ttft_s = 0.5;
    r.slo_tpot_s = 0.05;
    w.push_back(r);
  }
  w.push_back(req(120.0, 10, 2));  // a late request: the cluster is idle long before it
  SimResult r = run(o, w);
  EXPECT_EQ(r.stats.completed, static_cast<int64_t>(w.size()));
  EXPECT_GE(r.stats.scale_ups, 2);
  EXPECT_GE(r.stats.scale_downs, 1);
  bool split = false;
  for (const SimLayoutChange& c : r.layout_changes) split |= c.layout.find("m1{") != std::string::npos;
  EXPECT_TRUE(split) << "growing past N_u = 3 must split the macro instance";
  // The whole life of the layout: joins until N_u, a split (i2 moves by handle), joins
  // into the oldest macro with room, then removals newest-first and a merge below N_l.
  const std::vector<std::string> expected = {
      "0.0 start m0{i0 i1}",          "2.5 add i2 m0{i0 i1 i2}",       "4.5 add i3 m0{i0 i1} m1{i2 i3}",
      "6.5 add i4 m0{i0 i1 i4} m1{i2 i3}", "8.5 add i5 m0{i0 i1 i4} m1{i2 i3 i5}",
      "20.5 remove i5 m0{i0 i1 i4} m1{i2 i3}", "22.5 remove i4 m0{i0 i1} m1{i2 i3}",
      "24.5 remove i3 m0{i0 i1 i2}",   "26.5 remove i2 m0{i0 i1}",      "28.5 remove i1 m0{i0}"};
  std::vector<std::string> got;
  for (const SimLayoutChange& c : r.layout_changes) got.push_back(fmt::format("{:.1f} {} {}", c.at_s, c.action, c.layout));
  EXPECT_EQ(got, expected);
  for (const auto& inst : r.instances) EXPECT_EQ(inst.free_blocks_at_end, inst.total_blocks) << inst.name;
}

}  // namespace
}  // namespace ecoserve::sim

namespace ecoserve::sim {
namespace {

// An overloaded instance: requests not answered within the timeout fail with
// "timeout" and leave nothing behind.
TEST(SimCluster, RequestTimeoutBoundsAnOverloadedRun) {
  for (const std::string strategy : {"nodg", "fudg", "llumnix"}) {
    SimClusterOptions o = four_instances(strategy);
    o.request_timeout_s = 0.5;
    std::vector<SimRequest> w;
    for (int i = 0; i < 400; ++i) w.push_back(req(i * 0.001, 500, 100));  // 1000 req/s
    SimResult r = run(o, w);
    int64_t timeouts = 0;
    for (const auto& q : r.requests) {
      if (q.finish_reason == "timeout") {
        ++timeouts;
        EXPECT_NEAR(q.end_s - q.arrival_s, 0.5, 1e-6);
        EXPECT_EQ(q.error, "no answer within 0.5 s");
      }
    }
    EXPECT_GT(timeouts, 100) << strategy;
    EXPECT_EQ(r.stats.completed + r.stats.failed + r.stats.rejected, static_cast<int64_t>(w.size())) << strategy;
    for (const auto& inst : r.instances) EXPECT_EQ(inst.free_blocks_at_end, inst.total_blocks) << strategy << " " << inst.name;
    EXPECT_EQ(r.stats.network_bytes_sent, r.stats.network_bytes_delivered) << strategy;
  }
}

}  // namespace
}  // namespace ecoserve::sim
