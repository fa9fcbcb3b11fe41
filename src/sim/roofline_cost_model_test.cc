// RooflineCostModel on a tiny made-up model and GPU, every number worked by hand
// (the arithmetic is in the comments), plus validation and monotonicity.
#include "sim/roofline_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ecoserve::sim {
namespace {

using policy::StepShape;

// hidden 8, 2 layers, 2 heads of 4, 1 kv head, ffn 16 (SwiGLU), vocab 32, bf16.
ModelSpec tiny() {
  ModelSpec m;
  m.name = "tiny";
  m.hidden = 8;
  m.layers = 2;
  m.heads = 2;
  m.kv_heads = 1;
  m.ffn = 16;
  m.vocab = 32;
  m.gated_mlp = true;
  m.max_context = 64;
  return m;
}

// 1000 FLOP/s and 1000 B/s; at 50% efficiency each: 500 FLOP/s, 500 B/s.
GpuSpec toy_gpu() {
  GpuSpec g;
  g.name = "toy";
  g.peak_flops = 1000.0;
  g.hbm_bytes_per_s = 1000.0;
  g.memory_bytes = 1 << 20;
  g.intra_link = "nvlink";
  g.intra_link_bytes_per_s = 10.0;
  g.intra_link_hop_latency_s = 0.5;
  return g;
}

// Compute efficiency 0.5 at any size >= 1 token (exp(-1 / 1e-9) == 0), memory 0.5,
// 1 s per layer, elementwise traffic 2x the fused minimum.
RooflineOptions flat_options() {
  return RooflineOptions{.compute_efficiency_max = 0.5,
                         .compute_efficiency_tokens = 1e-9,
                         .memory_efficiency = 0.5,
                         .layer_overhead_seconds = 1.0,
                         .elementwise_traffic = 2.0};
}

// One prefill chunk of 4 tokens over 4 cached + 2 decodes over 10 context tokens in all.
const StepShape kMixed{
    .prefill_seqs = 1, .prefill_tokens = 4, .prefill_context_tokens = 4, .decode_seqs = 2, .decode_context_tokens = 10};

std::unique_ptr<RooflineCostModel> make(Parallelism par = {}, RooflineOptions o = flat_options()) {
  auto m = RooflineCostModel::create(tiny(), toy_gpu(), par, o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(RooflineCostModelTest, MixedStepByHand) {
  auto model = make();
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->name(), "roofline");
  const RooflineBreakdown b = model->breakdown(kMixed);
  // T = 6 rows. GEMM M x K x N: 2MKN FLOPs / 500, 2 (KN + MK + MN) bytes / 500.
  //   qkv      6 x 8 x 16: 1536 FLOPs -> 3.072 s; 544 B -> 1.088 s       compute 3.072
  //   prefill  4 d nh n q (c + q/2) = 4*4*2*1*4*6 = 768 -> 1.536; 2 (2*4*2*4 + 8*2*1*4) = 256 B
  //   decode   4 d nh K = 4*4*2*10 = 320 -> 0.64; 2 (2*2*2*4 + 10*2*1*4) = 224 B -> 0.448
  //   o        6 x 8 x 8: 768 -> 1.536; 320 B -> 0.64
  //   mlp_up   6 x 8 x 32: 3072 -> 6.144; 992 B
  //   mlp_down 6 x 16 x 8: 1536 -> 3.072; 544 B
  //   elementwise 2 * 6 * (2*2*8 + 2*3*8 + 3*16) = 1536 B x 2 -> 6.144 s   memory
  ASSERT_EQ(b.layer_ops.size(), 8u);
  const double expected[] = {3.072, 1.536, 0.64, 1.536, 6.144, 3.072, 6.144, 3.072};
  const char* names[] = {"qkv", "attn_prefill", "attn_decode", "o", "mlp_up", "mlp_down", "elementwise", "lm_head"};
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(b.layer_ops[i].op.name, names[i]);
    EXPECT_NEAR(b.layer_ops[i].seconds, expected[i], 1e-12) << names[i];
    EXPECT_EQ(b.layer_ops[i].compute_bound, i != 6) << names[i];
  }
  // Per layer 16.0 s compute + 6.144 s memory; x 2 layers; lm_head 3 rows x 8 x 32:
  // 1536 FLOPs -> 3.072 s (752 B -> 1.504 s) once.
  EXPECT_NEAR(b.compute_seconds, 2 * 16.0 + 3.072, 1e-12);
  EXPECT_NEAR(b.memory_seconds, 2 * 6.144, 1e-12);
  EXPECT_DOUBLE_EQ(b.overhead_seconds, 2.0);
  EXPECT_DOUBLE_EQ(b.tp_comm_seconds, 0.0);
  EXPECT_DOUBLE_EQ(b.pp_comm_seconds, 0.0);
  EXPECT_NEAR(b.total_seconds, 49.36, 1e-12);
  EXPECT_NEAR(model->step_seconds(kMixed), 49.36, 1e-12);
  EXPECT_NEAR(model->layer_seconds(kMixed), 16.0 + 6.144 + 1.0, 1e-12);
  // FLOPs per GPU: 2 x (1536 + 768 + 320 + 768 + 3072 + 1536) + 1536.
  EXPECT_DOUBLE_EQ(b.flops, 2 * 8000.0 + 1536.0);
}

TEST(RooflineCostModelTest, TensorAndPipelineParallelByHand) {
  auto model = make({.tp = 2, .pp = 2});
  ASSERT_NE(model, nullptr);
  const RooflineBreakdown b = model->breakdown(kMixed);
  // Per GPU: 1 head, the kv head replicated (ceil(1/2) = 1), ffn 8.
  //   qkv 6 x 8 x 12: 1152 -> 2.304      prefill 384 FLOPs -> 0.768 (192 B -> 0.384)
  //   decode 160 FLOPs -> 0.32 but 2 (2*2*1*4 + 10*2*1*4) = 192 B -> 0.384   memory
  //   o 6 x 4 x 8: 384 -> 0.768          mlp_up 6 x 8 x 16: 1536 -> 3.072
  //   mlp_down 6 x 8 x 8: 768 -> 1.536   elementwise 2*6*(32 + 48 + 24) = 1248 B x 2 -> 4.992
  const double expected[] = {2.304, 0.768, 0.384, 0.768, 3.072, 1.536, 4.992, 1.536};
  ASSERT_EQ(b.layer_ops.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(b.layer_ops[i].seconds, expected[i], 1e-12) << i;
  EXPECT_FALSE(b.layer_ops[2].compute_bound);
  // Two all-reduces per layer of 6 x 8 x 2 = 96 B over 2 ranks: 2/2 x 96/10 + 2 hops x 0.5 = 10.6 s.
  EXPECT_NEAR(b.tp_comm_seconds, 2 * 2 * 10.6, 1e-12);
  // One stage-to-stage send of 96 B: 9.6 + 0.5.
  EXPECT_NEAR(b.pp_comm_seconds, 10.1, 1e-12);
  EXPECT_NEAR(b.compute_seconds, 2 * 8.448 + 1.536, 1e-12);
  EXPECT_NEAR(b.memory_seconds, 2 * 5.376, 1e-12);
  EXPECT_NEAR(model->step_seconds(kMixed), 18.432 + 10.752 + 2.0 + 42.4 + 10.1, 1e-12);
}

TEST(RooflineCostModelTest, ComputeEfficiencySaturatesWithTokens) {
  auto model = make({}, RooflineOptions{.compute_efficiency_max = 0.8, .compute_efficiency_tokens = 100.0});
  ASSERT_NE(model, nullptr);
  EXPECT_DOUBLE_EQ(model->compute_efficiency(100.0), 0.8 * (1.0 - std::exp(-1.0)));
  EXPECT_DOUBLE_EQ(model->compute_efficiency(0.0), 0.0);
  EXPECT_NEAR(model->compute_efficiency(1e6), 0.8, 1e-12);
  // The default constants are what the header says.
  RooflineOptions d;
  EXPECT_EQ(d.compute_efficiency_max, kRooflineComputeEfficiencyMax);
  EXPECT_EQ(d.layer_overhead_seconds, kRooflineLayerOverheadSeconds);
}

TEST(RooflineCostModelTest, EmptyStepIsFree) {
  auto model = make();
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->step_seconds(StepShape{}), 0.0);
  EXPECT_TRUE(model->layer_ops(StepShape{}).empty());
}

TEST(RooflineCostModelTest, CreateRejectsBadLayoutsAndOptions) {
  auto bad = RooflineCostModel::create(tiny(), toy_gpu(), {.tp = 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "model 'tiny': tp=3 does not divide its 2 attention heads");
  EXPECT_EQ(RooflineCostModel::create(tiny(), toy_gpu(), {.pp = 3}).status().message(),
            "model 'tiny': pp=3 is more than its 2 layers");
  ModelSpec six = tiny();
  six.hidden = 12;
  six.heads = 6;
  six.kv_heads = 3;
  EXPECT_EQ(RooflineCostModel::create(six, toy_gpu(), {.tp = 2}).status().message(),
            "model 'tiny': tp=2 and its 3 kv heads do not divide one another");
  EXPECT_EQ(
      RooflineCostModel::create(tiny(), toy_gpu(), {}, RooflineOptions{.memory_efficiency = 1.5}).status().message(),
      "roofline: memory_efficiency must be in (0, 1] (got 1.5)");
  GpuSpec g = toy_gpu();
  g.intra_link = "infiniband";
  EXPECT_EQ(RooflineCostModel::create(tiny(), g).status().message(),
            "gpu 'toy': intra_link must be 'nvlink' or 'pcie' (got 'infiniband')");
}

TEST(RooflineCostModelTest, StepTimeGrowsWithEverySize) {
  auto h100 = gpu_preset("h100-sxm");
  auto model = RooflineCostModel::create(*model_preset("llama-2-70b"), *h100, {.tp = 4});
  ASSERT_TRUE(model.ok());
  double last = 0.0;
  for (int32_t b = 1; b <= 1024; b *= 2) {
    const double t = (*model)->step_seconds({.decode_seqs = b, .decode_context_tokens = 1024LL * b});
    EXPECT_GT(t, last) << b;
    last = t;
  }
  last = 0.0;
  for (int64_t k = 128; k <= 32768; k *= 2) {
    const double t = (*model)->step_seconds({.decode_seqs = 64, .decode_context_tokens = 64 * k});
    EXPECT_GT(t, last) << k;
    last = t;
  }
  last = 0.0;
  for (int32_t p = 1; p <= 16384; p *= 2) {
    const double t = (*model)->step_seconds({.prefill_seqs = 1, .prefill_tokens = p});
    EXPECT_GT(t, last) << p;
    last = t;
  }
  // A cached prefix makes the same chunk dearer (attention over more keys).
  EXPECT_GT((*model)->step_seconds({.prefill_seqs = 1, .prefill_tokens = 512, .prefill_context_tokens = 4096}),
            (*model)->step_seconds({.prefill_seqs = 1, .prefill_tokens = 512}));
  // More GPUs per layer: faster per step at tp=8 than tp=4 for a big prefill;
  // pp only adds the sends.
  auto tp8 = RooflineCostModel::create(*model_preset("llama-2-70b"), *h100, {.tp = 8});
  auto tp4pp2 = RooflineCostModel::create(*model_preset("llama-2-70b"), *h100, {.tp = 4, .pp = 2});
  const StepShape big{.prefill_seqs = 1, .prefill_tokens = 8192};
  EXPECT_LT((*tp8)->step_seconds(big), (*model)->step_seconds(big));
  EXPECT_NEAR((*tp4pp2)->step_seconds(big) - (*model)->step_seconds(big), send_seconds(8192.0 * 8192 * 2, *h100),
              1e-12);
}

}  // namespace
}  // namespace ecoserve::sim

namespace ecoserve::sim {
namespace {

// step_seconds() is breakdown()'s total computed without the per-operator list.
TEST(RooflineCostModelTest, StepSecondsIsTheBreakdownsTotal) {
  for (const char* name : {"llama-2-7b", "llama-2-70b", "opt-13b"}) {
    auto model = model_preset(name);
    ASSERT_TRUE(model.ok());
    auto gpu = gpu_preset("a100-80gb");
    ASSERT_TRUE(gpu.ok());
    for (Parallelism par : {Parallelism{1, 1}, Parallelism{4, 1}, Parallelism{2, 2}}) {
      auto m = RooflineCostModel::create(*model, *gpu, par);
      if (!m.ok()) continue;  // does not fit this layout
      for (policy::StepShape s : {policy::StepShape{1, 512, 0, 0, 0}, policy::StepShape{0, 0, 0, 32, 32 * 1024},
                                  policy::StepShape{2, 300, 1000, 7, 9000}, policy::StepShape{}}) {
        EXPECT_DOUBLE_EQ((*m)->step_seconds(s), (*m)->breakdown(s).total_seconds) << name << " tp" << par.tp;
      }
    }
  }
}

}  // namespace
}  // namespace ecoserve::sim
