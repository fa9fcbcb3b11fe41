// ModelSpec and GpuSpec presets, sizes, KV capacity and the communication helpers:
// numbers checked against the published parameter counts and by hand.
#include "sim/model_spec.h"

#include <gtest/gtest.h>

#include "sim/gpu_spec.h"

namespace ecoserve::sim {
namespace {

ModelSpec preset(std::string_view name) {
  auto m = model_preset(name);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : ModelSpec{};
}

GpuSpec gpu(std::string_view name) {
  auto g = gpu_preset(name);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : GpuSpec{};
}

TEST(ModelSpecTest, ParamsMatchThePublishedCounts) {
  // Llama 2 7B: 6,738,415,616 parameters with the 65 norm vectors (266,240), which
  // params() leaves out.
  EXPECT_EQ(preset("llama-2-7b").params(), 6738415616 - 65 * 4096);
  // Llama 2 70B: 68,976,648,192 with 161 norm vectors of 8192.
  EXPECT_EQ(preset("llama-2-70b").params(), 68976648192 - 161 * 8192);
  // OPT-175B: 96 x 12 h^2 + one (tied) 50272 x 12288 embedding.
  EXPECT_EQ(preset("opt-175b").params(), 96LL * 12 * 12288 * 12288 + 50272LL * 12288);
  EXPECT_EQ(preset("llama-2-7b").weight_bytes(), 2 * preset("llama-2-7b").params());
  // Llama 3 8B: 8,030,261,248 with 65 norm vectors of 4096.
  EXPECT_EQ(preset("llama-3-8b").params(), 8030261248 - 65 * 4096);
  // Qwen2-72B: 72,706,203,648 with 161 norm vectors of 8192 and the q/k/v biases
  // (80 x (8192 + 2 x 1024)).
  EXPECT_EQ(preset("qwen2-72b").params(), 72706203648 - 161 * 8192 - 80 * (8192 + 2 * 1024));
}

TEST(ModelSpecTest, KvBytesPerTokenAndHeadDim) {
  EXPECT_EQ(preset("llama-2-7b").kv_bytes_per_token(), 2 * 32 * 32 * 128 * 2);  // 512 KiB
  EXPECT_EQ(preset("llama-2-70b").kv_bytes_per_token(), 2 * 80 * 8 * 128 * 2);  // 320 KiB (GQA)
  EXPECT_EQ(preset("llama-30b").head_dim(), 128);
  EXPECT_EQ(preset("opt-66b").head_dim(), 128);
  EXPECT_EQ(preset("qwen2-7b").head_dim(), 128);
  const ModelSpec cl = preset("codellama-34b");
  EXPECT_EQ(cl.max_context, 16384);
  EXPECT_EQ(cl.kv_heads, 8);
  EXPECT_FALSE(preset("opt-13b").gated_mlp);
  EXPECT_TRUE(preset("opt-13b").tied_embeddings);
}

TEST(ModelSpecTest, PresetsAreCaseInsensitiveAndValid) {
  EXPECT_EQ(preset("Llama-2-70B").name, "llama-2-70b");
  for (const std::string& name : model_preset_names()) {
    const ModelSpec m = preset(name);
    EXPECT_EQ(m.name, name);
    EXPECT_TRUE(validate_model_spec(m).ok()) << name;
  }
  EXPECT_EQ(model_preset_names().size(), 12u);
}

TEST(ModelSpecTest, UnknownPresetListsTheKnownNames) {
  auto m = model_preset("gpt-5");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.status().message(),
            "unknown model preset 'gpt-5' (known: opt-13b, opt-66b, opt-175b, llama-2-7b, llama-2-13b, llama-2-70b, "
            "llama-30b, codellama-34b, llama-3-8b, llama-3-70b, qwen2-7b, qwen2-72b)");
  auto g = gpu_preset("v100");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "unknown gpu preset 'v100' (known: a100-80gb, a800, h100-sxm, h200, l20, l40s)");
}

TEST(ModelSpecTest, ValidateNamesTheField) {
  ModelSpec m = preset("llama-2-7b");
  m.kv_heads = 5;
  EXPECT_EQ(validate_model_spec(m).message(), "model 'llama-2-7b': kv_heads 5 does not divide heads 32");
  m = preset("llama-2-7b");
  m.hidden = 4100;
  EXPECT_EQ(validate_model_spec(m).message(), "model 'llama-2-7b': hidden 4100 is not a multiple of heads 32");
  m.vocab = 0;
  EXPECT_EQ(validate_model_spec(m).message(), "model 'llama-2-7b': vocab must be > 0 (got 0)");
}

TEST(ModelSpecTest, ProfileModelNameMatchesTheShape) {
  EXPECT_EQ(profile_model_name(preset("llama-2-7b")), "llama2-7b");
  EXPECT_EQ(profile_model_name(preset("llama-2-13b")), "llama2-13b");
  EXPECT_EQ(profile_model_name(preset("llama-2-70b")), "llama2-70b");
  EXPECT_EQ(profile_model_name(preset("llama-3-8b")), "llama3-8b");
  EXPECT_EQ(profile_model_name(preset("qwen2-7b")), "qwen2-7b");
  // Same layers as llama2-70b but another vocabulary (lm_head differs): not profiled.
  EXPECT_EQ(profile_model_name(preset("llama-3-70b")), "");
  EXPECT_EQ(profile_model_name(preset("opt-13b")), "");
  ModelSpec renamed = preset("llama-2-7b");
  renamed.name = "my-7b";
  EXPECT_EQ(profile_model_name(renamed), "llama2-7b");
  renamed.dtype_bytes = 1;
  EXPECT_EQ(profile_model_name(renamed), "");
}

TEST(GpuSpecTest, PresetsQuoteTheDatasheets) {
  const GpuSpec h100 = gpu("H100-SXM");
  EXPECT_DOUBLE_EQ(h100.peak_flops, 989.4e12);
  EXPECT_DOUBLE_EQ(h100.hbm_bytes_per_s, 3.35e12);
  EXPECT_EQ(h100.memory_bytes, 80LL << 30);
  EXPECT_EQ(h100.intra_link, "nvlink");
  EXPECT_DOUBLE_EQ(h100.intra_link_bytes_per_s, 450e9);
  const GpuSpec l20 = gpu("l20");
  EXPECT_DOUBLE_EQ(l20.peak_flops, 119.5e12);
  EXPECT_DOUBLE_EQ(l20.hbm_bytes_per_s, 864e9);
  EXPECT_EQ(l20.memory_bytes, 48LL << 30);
  EXPECT_EQ(l20.intra_link, "pcie");
  EXPECT_DOUBLE_EQ(gpu("a800").intra_link_bytes_per_s, 200e9);
  for (const std::string& name : gpu_preset_names()) EXPECT_TRUE(validate_gpu_spec(gpu(name)).ok()) << name;
}

TEST(GpuSpecTest, KvCapacityByHand) {
  // 7B on one H100: 72 GiB usable - 12.55 GiB weights - 1 GiB reserve, at 512 KiB per token.
  const int64_t usable = (80LL << 30) * 9 / 10;
  const int64_t weights = 2 * (32 * preset("llama-2-7b").layer_params() + 2LL * 32000 * 4096);
  EXPECT_EQ(weight_bytes_per_gpu(preset("llama-2-7b"), {}), weights);
  auto cap = kv_capacity_tokens(preset("llama-2-7b"), gpu("h100-sxm"), {});
  ASSERT_TRUE(cap.ok()) << cap.status().to_string();
  EXPECT_EQ(*cap, (usable - weights - kActivationReserveBytesPerGpu) / (2 * 32 * 32 * 128 * 2));
  EXPECT_EQ(*cap, 119704);
  // 70B at tp=2: 64.24 GiB of weights per GPU; each GPU holds 4 of the 8 kv heads.
  cap = kv_capacity_tokens(preset("llama-2-70b"), gpu("h100-sxm"), {.tp = 2});
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(*cap, 44313);
  // tp=4 and tp=2 x pp=2 put the same bytes on each GPU (one embedding-sized matrix
  // per stage when pp > 1, half the layers and kv heads each).
  EXPECT_EQ(*kv_capacity_tokens(preset("llama-2-70b"), gpu("h100-sxm"), {.tp = 4}), 509619);
  EXPECT_EQ(*kv_capacity_tokens(preset("llama-2-70b"), gpu("h100-sxm"), {.tp = 2, .pp = 2}), 509619);
  // tp beyond the kv heads replicates them: tp=16 holds one of 8 per GPU, like tp=8.
  EXPECT_EQ(kv_heads_per_gpu(preset("llama-2-70b"), {.tp = 16}), 1);
  EXPECT_EQ(layers_per_stage(preset("llama-2-70b"), {.pp = 3}), 27);
}

TEST(GpuSpecTest, KvCapacityErrors) {
  auto cap = kv_capacity_tokens(preset("llama-2-70b"), gpu("h100-sxm"), {});
  ASSERT_FALSE(cap.ok());
  EXPECT_EQ(cap.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cap.status().message(),
            "llama-2-70b does not fit on 1 x h100-sxm (tp=1, pp=1): its weights need 128.5 GiB per GPU (128.5 GiB in "
            "all), but a GPU has 72.0 GiB usable (90% of 80.0 GiB) minus a 1.0 GiB activation reserve; the weights "
            "alone need at least 2 GPUs");
  cap = kv_capacity_tokens(preset("llama-2-7b"), gpu("h100-sxm"), {}, 1.5);
  EXPECT_EQ(cap.status().message(), "memory_fraction must be in (0, 1] (got 1.5)");
  cap = kv_capacity_tokens(preset("llama-2-7b"), gpu("h100-sxm"), {.tp = 3});
  EXPECT_EQ(cap.status().message(), "model 'llama-2-7b': tp=3 does not divide its 32 attention heads");
  cap = kv_capacity_tokens(preset("llama-2-7b"), gpu("h100-sxm"), {.pp = 33});
  EXPECT_EQ(cap.status().message(), "model 'llama-2-7b': pp=33 is more than its 32 layers");
}

TEST(GpuSpecTest, RingAllReduceAndSend) {
  GpuSpec g;
  g.intra_link_bytes_per_s = 100.0;
  g.intra_link_hop_latency_s = 0.5;
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(1000.0, 1, g), 0.0);
  // 4 ranks: 2 x 3 / 4 x 1000 / 100 = 15 s of bandwidth + 6 hops x 0.5 s.
  EXPECT_DOUBLE_EQ(ring_allreduce_seconds(1000.0, 4, g), 18.0);
  EXPECT_DOUBLE_EQ(send_seconds(1000.0, g), 10.5);
}

}  // namespace
}  // namespace ecoserve::sim
