#include "sim/planner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "sim/cost_model_executor.h"
#include "sim/gpu_spec.h"
#include "sim/model_spec.h"
#include "sim/roofline_cost_model.h"

namespace ecoserve::sim {
namespace {

std::vector<SimRequest> fixed_workload(int32_t n, int32_t in, int32_t out) {
  std::vector<SimRequest> w(static_cast<size_t>(n));
  for (SimRequest& r : w) r.input_tokens = in, r.output_tokens = out;
  return w;
}

// --- retime ---

TEST(Retime, SeededPoissonArrivalsThatScaleWithTheRate) {
  const std::vector<SimRequest> w = fixed_workload(2000, 7, 3);
  const std::vector<SimRequest> a = retime(w, 4.0, 42);
  const std::vector<SimRequest> b = retime(w, 8.0, 42);
  ASSERT_EQ(a.size(), w.size());
  EXPECT_EQ(a[0].arrival_s, 0.0);
  for (size_t i = 1; i < a.size(); ++i) {
    ASSERT_GE(a[i].arrival_s, a[i - 1].arrival_s);
    EXPECT_DOUBLE_EQ(b[i].arrival_s, a[i].arrival_s / 2);  // common random numbers
    EXPECT_EQ(a[i].input_tokens, 7);
    EXPECT_EQ(a[i].output_tokens, 3);
  }
  // 1999 exponential gaps of mean 1/4 s: the mean within 5% (its sd is 2.2%).
  EXPECT_NEAR(a.back().arrival_s / 1999, 0.25, 0.25 * 0.05);
  EXPECT_EQ(retime(w, 4.0, 42)[1000].arrival_s, a[1000].arrival_s);  // deterministic
  EXPECT_NE(retime(w, 4.0, 43)[1000].arrival_s, a[1000].arrival_s);
  EXPECT_TRUE(retime(w, 0.0, 42).empty());
}

TEST(ProbeWorkload, CyclesTheTemplateAndStampsTheSlo) {
  std::vector<SimRequest> w = fixed_workload(2, 10, 5);
  w[1].input_tokens = 20;
  const auto p = probe_workload(w, 5, 2.0, 1, SloSpec{.ttft_s = 0.5, .tpot_s = 0.1});
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].input_tokens, 10);
  EXPECT_EQ(p[3].input_tokens, 20);
  EXPECT_EQ(p[4].input_tokens, 10);
  EXPECT_EQ(p[2].slo_ttft_s, 0.5);
  EXPECT_EQ(p[2].slo_tpot_s, 0.1);
}

// --- the planner on a constant cost model ---

// 5 ms per step + 0.1 ms per prefill token + 1 ms per decoding sequence, whatever the layout.
DeploymentSpec constant_base() {
  DeploymentSpec b;
  b.cost_model = "given";
  b.given_cost_model = std::make_shared<ConstantCostModel>(0.005, 0.0001, 0.001);
  b.given_kv_blocks = 4096;  // 65536 tokens
  b.given_max_context = 4096;
  b.given_kv_bytes_per_token = 1000;
  b.core.policy = "chunked";
  b.core.max_num_seqs = 64;
  b.core.max_num_batched_tokens = 1024;
  b.core.chunk_size = 1024;
  b.cluster.topology.gpus_per_node = 8;
  b.cluster.topology.num_nodes = 1;
  return b;
}

PlanOptions fast_options() {
  PlanOptions o;
  o.probe.requests = 150;
  o.probe.max_requests = 3000;
  o.probe.search_steps = 4;
  return o;
}

const PlanCandidate* find(const Plan& p, const std::string& prefix, const std::string& placement = "") {
  for (const PlanCandidate& c : p.candidates) {
    if (c.description.rfind(prefix, 0) == 0 && (placement.empty() || c.spec.placement == placement)) return &c;
  }
  return nullptr;
}

const PlanEvaluation* find_eval(const Plan& p, const std::string& unit) {
  for (const PlanEvaluation& e : p.evaluations) {
    if (e.unit == unit) return &e;
  }
  return nullptr;
}

TEST(Planner, DecodeHeavyWorkloadGetsMoreDecodeInstances) {
  // 100-token prompts, 200 tokens out. A prompt alone: 5 + 10 = 15 ms; a decode step
  // of B sequences 5 + B ms, so TPOT <= 50 ms allows B <= 45: one decode instance
  // serves at most 45 / (200 x 0.050) = 4.5 req/s, while one prefill instance packs
  // 10 prompts in a 105 ms step (95 req/s). 8 req/s need >= 2 decode instances and 1 prefill.
  PlanRequest r;
  r.base = constant_base();
  r.strategies = {"fudg", "nodg"};
  r.workload_template = fixed_workload(150, 100, 200);
  r.slo = SloSpec{.ttft_s = 0.5, .tpot_s = 0.050};
  r.target_rate = 8;
  auto p = plan(r, fast_options());
  ASSERT_TRUE(p.ok()) << p.status().message();
  const PlanEvaluation* decode = find_eval(*p, "decode tp1pp1");
  const PlanEvaluation* prefill = find_eval(*p, "prefill tp1pp1");
  ASSERT_NE(decode, nullptr);
  ASSERT_NE(prefill, nullptr);
  EXPECT_GT(decode->goodput, 2.0);
  EXPECT_LE(decode->goodput, 4.5 * 1.1);  // the bound (a finite run may pass slightly above it)
  EXPECT_GT(prefill->goodput, 5 * decode->goodput);
  const PlanCandidate* packed = find(*p, "fudg P:", "packed");
  ASSERT_NE(packed, nullptr);
  EXPECT_EQ(packed->spec.prefill.instances, 1);
  EXPECT_EQ(packed->spec.decode.instances, static_cast<int32_t>(std::ceil(8 / decode->goodput)));
  EXPECT_GE(packed->spec.decode.instances, 2);
  EXPECT_EQ(packed->spec.placement, "packed");
  EXPECT_EQ(packed->description,
            "fudg P: tp1pp1 x1, D: tp1pp1 x" + std::to_string(packed->spec.decode.instances) + ", packed");
  EXPECT_GE(packed->goodput, 8.0);
  // Candidates are sorted by goodput per GPU; the recommended one is feasible.
  for (size_t i = 1; i < p->candidates.size(); ++i) {
    EXPECT_GE(p->candidates[i - 1].goodput_per_gpu, p->candidates[i].goodput_per_gpu);
  }
  ASSERT_LT(p->recommended, p->candidates.size());
  const PlanCandidate& rec = p->candidates[p->recommended];
  EXPECT_TRUE(rec.feasible) << rec.note;
  EXPECT_GE(rec.verified_attainment, 0.9);
  EXPECT_EQ(rec.verified_rate, 8.0);
  for (const PlanCandidate& c : p->candidates) {
    if (c.feasible) {
      EXPECT_GE(c.gpus, rec.gpus) << c.description;
    }
  }
  EXPECT_NE(p->reason.find("fewest"), std::string::npos) << p->reason;
}

TEST(Planner, PrefillHeavyWorkloadGetsMorePrefillInstances) {
  // 1000-token prompts (105 ms alone: at most ~9.5 req/s per prefill instance), 2 tokens
  // out: decode is nearly free. 20 req/s need >= 3 prefill instances and one decode.
  PlanRequest r;
  r.base = constant_base();
  r.strategies = {"fudg"};
  r.workload_template = fixed_workload(150, 1000, 2);
  r.slo = SloSpec{.ttft_s = 0.5, .tpot_s = 0.050};
  r.target_rate = 20;
  auto p = plan(r, fast_options());
  ASSERT_TRUE(p.ok()) << p.status().message();
  const PlanCandidate* packed = find(*p, "fudg P:", "packed");
  ASSERT_NE(packed, nullptr);
  EXPECT_GE(packed->spec.prefill.instances, 3);
  EXPECT_EQ(packed->spec.decode.instances, 1);
  EXPECT_GT(packed->spec.prefill.instances, packed->spec.decode.instances);
  // Algorithm 2 pairs them inside the node too.
  const PlanCandidate* paired = find(*p, "fudg P:", "paired");
  ASSERT_NE(paired, nullptr);
  EXPECT_GT(paired->spec.prefill.instances, paired->spec.decode.instances);
}

TEST(Planner, WithoutATargetRanksByGoodputPerGpuAndCoversEveryStrategy) {
  PlanRequest r;
  r.base = constant_base();
  r.workload_template = fixed_workload(150, 100, 20);
  r.slo = SloSpec{.ttft_s = 0.3, .tpot_s = 0.040};
  r.max_gpus = 4;
  std::vector<double> fractions;
  PlanOptions o = fast_options();
  o.padg_macro_sizes = {2, 4};
  o.progress = [&](const PlanProgress& pr) { fractions.push_back(pr.fraction); };
  auto p = plan(r, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  std::set<std::string> strategies;
  for (const PlanCandidate& c : p->candidates) strategies.insert(c.strategy);
  EXPECT_EQ(strategies, (std::set<std::string>{"nodg", "fudg", "padg", "llumnix"}));
  ASSERT_LT(p->recommended, p->candidates.size());
  const PlanCandidate& rec = p->candidates[p->recommended];
  EXPECT_TRUE(rec.feasible);
  for (const PlanCandidate& c : p->candidates) {
    if (c.feasible) {
      EXPECT_LE(c.goodput_per_gpu, rec.goodput_per_gpu) << c.description;
    }
    if (c.gpus > 4) {
      EXPECT_FALSE(c.feasible) << c.description;
    }
  }
  // nodg without a target: one instance.
  const PlanCandidate* nodg = find(*p, "nodg");
  ASSERT_NE(nodg, nullptr);
  EXPECT_EQ(nodg->description, "nodg tp1pp1 x1");
  ASSERT_FALSE(fractions.empty());
  EXPECT_EQ(fractions.back(), 1.0);
  for (size_t i = 1; i < fractions.size(); ++i) EXPECT_GE(fractions[i], fractions[i - 1]);
  // Deterministic.
  o.progress = nullptr;
  auto again = plan(r, o);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->candidates.size(), p->candidates.size());
  for (size_t i = 0; i < p->candidates.size(); ++i) {
    EXPECT_EQ(again->candidates[i].description, p->candidates[i].description);
    EXPECT_EQ(again->candidates[i].goodput, p->candidates[i].goodput);
  }
}

TEST(Planner, RejectsBadRequests) {
  PlanRequest r;
  r.base = constant_base();
  r.workload_template = fixed_workload(10, 100, 20);
  r.slo = SloSpec{.ttft_s = 0.3, .tpot_s = 0.040};
  PlanRequest bad = r;
  bad.strategies = {"nodg", "banana"};
  EXPECT_FALSE(plan(bad).ok());
  bad = r;
  bad.workload_template.clear();
  EXPECT_FALSE(plan(bad).ok());
  bad = r;
  bad.slo.tpot_s = 0;
  EXPECT_FALSE(plan(bad).ok());
  bad = r;
  bad.max_gpus = 9;  // one node of 8
  EXPECT_FALSE(plan(bad).ok());
  bad = r;
  bad.target_rate = -1;
  EXPECT_FALSE(plan(bad).ok());
}

TEST(Planner, LayoutsThatDoNotFitAreSkippedAndNamed) {
  // Llama-2-70B (128.5 GiB of weights) does not fit one 80 GB GPU.
  DeploymentSpec base;
  base.model = "llama-2-70b";
  base.gpu = "a100-80gb";
  base.cluster.topology.gpus_per_node = 4;
  base.cluster.topology.num_nodes = 1;
  const std::vector<Parallelism> layouts = candidate_layouts(base, 4);
  ASSERT_EQ(layouts.size(), 6u);  // tp1pp1, tp1pp2, tp2pp1, tp1pp4, tp2pp2, tp4pp1
  EXPECT_EQ(layout_name(layouts[0]), "tp1pp1");
  EXPECT_EQ(layout_name(layouts[5]), "tp4pp1");
  PlanRequest r;
  r.base = base;
  r.strategies = {"nodg"};
  r.workload_template = fixed_workload(50, 256, 16);
  r.slo = SloSpec{.ttft_s = 2.0, .tpot_s = 0.2};
  PlanOptions o;
  o.probe.requests = 50;
  o.probe.search_steps = 2;
  auto p = plan(r, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const PlanEvaluation* one = find_eval(*p, "tp1pp1");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->note.rfind("does not fit: ", 0), 0u) << one->note;
  ASSERT_EQ(p->candidates.size(), 1u);
  EXPECT_NE(p->candidates[0].note.find("1 layout(s) do not fit: tp1pp1"), std::string::npos) << p->candidates[0].note;
  EXPECT_GE(p->candidates[0].gpus, 2);
  EXPECT_TRUE(p->candidates[0].feasible);
}

// --- DistServe, Figure 1 ---
//
// OPT-13B on one A100-80GB, every request 512 tokens in and 64 out, Poisson
// arrivals, SLO: 90% of requests within TTFT 0.4 s and TPOT 0.04 s. The paper
// reports goodputs of 1.6 req/s colocated (vLLM: prefill-first, continuous
// batching), 5.6 req/s for a prefill-only instance (TTFT only) and 10 req/s for a
// decode-only instance (TPOT only). vLLM's defaults of the time: max_num_seqs 256,
// max_num_batched_tokens 2048 (OPT's context); prefill-only chunks of 512.

DeploymentSpec figure1_base() {
  DeploymentSpec b;
  b.model = "opt-13b";
  b.gpu = "a100-80gb";
  b.cost_model = "roofline";
  b.core.policy = "prefill-first";
  b.core.max_num_seqs = 256;
  b.core.max_num_batched_tokens = 2048;
  b.core.chunk_size = 512;
  b.cluster.topology.gpus_per_node = 8;
  return b;
}

struct Figure1 {
  double colocated = 0, prefill = 0, decode = 0;
};

Figure1 figure1(const DeploymentSpec& base) {
  const std::vector<SimRequest> w = fixed_workload(300, 512, 64);
  const SloSpec slo{.ttft_s = 0.4, .tpot_s = 0.04, .attainment = 0.9};
  ProbeOptions o;
  o.requests = 300;
  o.search_steps = 6;
  Figure1 f;
  auto c = measure_mixed(base, "nodg", {1, 1}, 1, w, slo, o);
  auto p = measure_prefill(base, {1, 1}, {1, 1}, w, slo, o);
  auto d = measure_decode(base, {1, 1}, {1, 1}, w, slo, o);
  EXPECT_TRUE(c.ok() && p.ok() && d.ok());
  if (c.ok()) f.colocated = c->goodput;
  if (p.ok()) f.prefill = p->goodput;
  if (d.ok()) f.decode = d->goodput;
  ::testing::Test::RecordProperty("goodputs", ::testing::PrintToString(std::vector<double>{f.colocated, f.prefill, f.decode}));
  return f;
}

TEST(DistServeFigure1, TheUncalibratedRooflineIsAboutTwiceAsFastAsThePapersA100) {
  // The roofline's constants were fitted to an H100 profile (PyTorch 2.11, CUDA
  // graphs); on the A100's datasheet numbers it predicts a 512-token prefill of
  // OPT-13B in 66 ms and a batch-1 decode step in 20 ms. With those, all three
  // goodputs come out 2-2.4x the paper's (3.90, 10.9 and 22.1 req/s when written).
  const Figure1 f = figure1(figure1_base());
  EXPECT_GT(f.colocated, 1.6 * 1.5);
  EXPECT_GT(f.prefill, 5.6 * 1.5);
  EXPECT_GT(f.decode, 10 * 1.5);
  // Disaggregation's gain holds regardless: each phase alone serves far more.
  EXPECT_GT(f.prefill, 2 * f.colocated);
  EXPECT_GT(f.decode, 4 * f.colocated);
}

TEST(DistServeFigure1, WithStepTimesCalibratedToThePapersSystemGoodputsAgreeWithin25Percent) {
  // Calibration: every step 1.4x the roofline's (compute and memory efficiency
  // divided by 1.4, layer overhead times 1.4): a 512-token prefill in 93 ms (~45% of
  // the A100's peak), a batch-1 decode step in 28 ms - plausible for the 2023
  // engines the paper measured. One factor, chosen by hand from a scan
  // (colocated/prefill/decode req/s: 1.3: 1.74/7.68/11.0; 1.35: 1.53/7.17/9.75;
  // 1.4: 1.33/6.69/8.55; 1.45: 1.14/6.24/7.43), brings all three within 25%
  // (-17%, +19%, -15% at 1.4). The fit is tight: decode goodput moves ~25% per 0.1.
  constexpr double kSlowdown = 1.4;
  DeploymentSpec base = figure1_base();
  auto model = model_preset("opt-13b");
  auto gpu = gpu_preset("a100-80gb");
  ASSERT_TRUE(model.ok() && gpu.ok());
  RooflineOptions ro;
  ro.compute_efficiency_max /= kSlowdown;
  ro.memory_efficiency /= kSlowdown;
  ro.layer_overhead_seconds *= kSlowdown;
  auto cost = RooflineCostModel::create(*model, *gpu, {1, 1}, ro);
  ASSERT_TRUE(cost.ok());
  auto tokens = kv_capacity_tokens(*model, *gpu, {1, 1});
  ASSERT_TRUE(tokens.ok());
  base.cost_model = "given";
  base.given_cost_model = std::shared_ptr<const policy::CostModel>(std::move(cost).value());
  base.given_kv_blocks = static_cast<int32_t>(*tokens / base.block_size);
  base.given_max_context = model->max_context;
  base.given_kv_bytes_per_token = model->kv_bytes_per_token();
  const Figure1 f = figure1(base);
  EXPECT_NEAR(f.colocated, 1.6, 1.6 * 0.25);
  EXPECT_NEAR(f.prefill, 5.6, 5.6 * 0.25);
  EXPECT_NEAR(f.decode, 10, 10 * 0.25);
}

}  // namespace
}  // namespace ecoserve::sim
