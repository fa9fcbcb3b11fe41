#include "model/synth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/test_data.h"
#include "kernels/quant.h"

namespace ecoserve::model {
namespace {

using kernels::GgmlType;

const char kVocab[] = "vocab/ggml-vocab-llama-spm.gguf";

StatusOr<std::unique_ptr<GgufFile>> synth_bytes(const SynthOptions& o) {
  GgufWriter w;
  ECO_RETURN_IF_ERROR(build_synth_model(o, w));
  ECO_ASSIGN_OR_RETURN(auto bytes, w.to_bytes());
  return GgufFile::from_bytes(std::move(bytes));
}

TEST(SynthTest, Presets) {
  auto tiny = synth_preset("tiny");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->dim, 64);
  EXPECT_EQ(tiny->n_kv_heads, 2);
  auto b = synth_preset("1b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->dim, 2048);
  EXPECT_EQ(b->n_layers, 22);
  EXPECT_EQ(b->n_heads, 32);
  EXPECT_EQ(b->n_kv_heads, 4);
  EXPECT_EQ(b->ffn_dim, 5632);
  // TinyLlama-1.1B has 1,100,048,384 parameters.
  EXPECT_EQ(synth_param_count(*b, 32000, false), 1100048384);
  // stories15M shape, tied: 32000*288 + 288 + 6 * (2*288 + 4*288*288 + 3*288*768).
  auto s15 = synth_preset("15m");
  ASSERT_TRUE(s15.ok());
  EXPECT_EQ(synth_param_count(*s15, 32000, true), 15191712);
  auto bad = synth_preset("7b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tiny, 15m, 110m, 1b"), std::string::npos);
}

TEST(SynthTest, TinyF32Untied) {
  auto vocab = shared_data_path(kVocab);
  if (!vocab) GTEST_SKIP() << missing_data_message(kVocab);
  SynthOptions o;
  o.vocab_path = *vocab;
  o.seed = 5;
  auto f = synth_bytes(o);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), "llama");
  EXPECT_EQ(*g.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(*g.get_int("llama.block_count"), 2);
  EXPECT_EQ(*g.get_int("llama.feed_forward_length"), 192);
  EXPECT_EQ(*g.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(*g.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(*g.get_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(*g.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_FLOAT_EQ(static_cast<float>(*g.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(*g.get_int("general.file_type"), 0);
  EXPECT_EQ(*g.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(g.get_float_array("tokenizer.ggml.scores")->size(), 32000u);
  EXPECT_EQ(*g.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(*g.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_TRUE(*g.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(g.tensors().size(), 3u + 2u * 9u);
  const GgufTensor* emb = g.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dims, (std::vector<std::int64_t>{64, 32000}));
  ASSERT_NE(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("blk.1.attn_k.weight")->dims, (std::vector<std::int64_t>{64, 32}));
  EXPECT_EQ(g.find_tensor("blk.1.ffn_down.weight")->dims, (std::vector<std::int64_t>{192, 64}));
  EXPECT_EQ(g.find_tensor("blk.0.ffn_gate.weight")->dims, (std::vector<std::int64_t>{64, 192}));
  const GgufTensor* norm = g.find_tensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, GgmlType::kF32);
  EXPECT_EQ(norm->dims, (std::vector<std::int64_t>{64}));
  for (int i = 0; i < 64; ++i) {
    float v;
    std::memcpy(&v, norm->data + 4 * i, 4);
    ASSERT_EQ(v, 1.0f);
  }
  // Weights ~ N(0, 0.02).
  const GgufTensor* q = g.find_tensor("blk.0.attn_q.weight");
  std::vector<float> x(static_cast<std::size_t>(q->num_elements()));
  std::memcpy(x.data(), q->data, q->nbytes);
  double sum = 0, sum_sq = 0, max_abs = 0;
  for (float v : x) {
    sum += v;
    sum_sq += v * v;
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  }
  const double mean = sum / x.size(), std = std::sqrt(sum_sq / x.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std, 0.02, 0.002);
  EXPECT_LT(max_abs, 0.02 * 3.5);
  // Different tensors get different values.
  EXPECT_NE(std::memcmp(q->data, g.find_tensor("blk.1.attn_q.weight")->data, 64), 0);
}

TEST(SynthTest, DeterministicFromSeedAndTiedQ8) {
  auto vocab = shared_data_path(kVocab);
  if (!vocab) GTEST_SKIP() << missing_data_message(kVocab);
  SynthOptions o;
  o.vocab_path = *vocab;
  o.type = GgmlType::kQ8_0;
  o.tied = true;
  GgufWriter w1, w2, w3;
  ASSERT_TRUE(build_synth_model(o, w1).ok());
  ASSERT_TRUE(build_synth_model(o, w2).ok());
  o.seed = 2;
  ASSERT_TRUE(build_synth_model(o, w3).ok());
  auto b1 = w1.to_bytes(), b2 = w2.to_bytes(), b3 = w3.to_bytes();
  ASSERT_TRUE(b1.ok() && b2.ok() && b3.ok());
  EXPECT_EQ(*b1, *b2);
  EXPECT_NE(*b1, *b3);
  auto f = GgufFile::from_bytes(*b1);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->find_tensor("output.weight"), nullptr);
  EXPECT_EQ((*f)->tensors().size(), 2u + 2u * 9u);
  EXPECT_EQ((*f)->find_tensor("token_embd.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ((*f)->find_tensor("blk.0.ffn_up.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ((*f)->find_tensor("output_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ(*(*f)->get_int("general.file_type"), 7);
  std::vector<float> row(64);
  kernels::dequantize_row(GgmlType::kQ8_0, (*f)->find_tensor("blk.0.attn_v.weight")->data, row.data(), 64);
  for (float v : row) EXPECT_LT(std::fabs(v), 0.1f);
}

TEST(SynthTest, GptVocabAndErrors) {
  auto vocab = shared_data_path("vocab/ggml-vocab-gpt-2.gguf");
  if (!vocab) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-gpt-2.gguf");
  SynthOptions o;
  o.vocab_path = *vocab;
  auto f = synth_bytes(o);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*(*f)->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*(*f)->get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ((*f)->get_string_array("tokenizer.ggml.merges")->size(), 50000u);
  EXPECT_EQ((*f)->find_tensor("token_embd.weight")->dims[1], 50257);
  EXPECT_EQ(*(*f)->get_string("general.architecture"), "llama");  // not gpt2 from the vocab file

  SynthOptions bad = o;
  bad.type = GgmlType::kQ4_K;
  GgufWriter w;
  EXPECT_EQ(build_synth_model(bad, w).code(), StatusCode::kInvalidArgument);
  bad = o;
  bad.vocab_path = "/nonexistent.gguf";
  GgufWriter w2;
  Status s = build_synth_model(bad, w2);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent.gguf"), std::string::npos);
}

// The context length: the preset's by default, the option's when set (the weights do not
// change with it), and a negative or too long one is an error naming the range.
TEST(SynthTest, ContextLengthOption) {
  auto vocab = shared_data_path(kVocab);
  if (!vocab) GTEST_SKIP() << missing_data_message(kVocab);
  SynthOptions o;
  o.vocab_path = *vocab;
  auto base = synth_bytes(o);
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  EXPECT_EQ(*(*base)->get_int("llama.context_length"), 2048);
  o.context_length = 32768;
  auto longer = synth_bytes(o);
  ASSERT_TRUE(longer.ok()) << longer.status().to_string();
  EXPECT_EQ(*(*longer)->get_int("llama.context_length"), 32768);
  const GgufTensor* a = (*base)->find_tensor("blk.1.attn_q.weight");
  const GgufTensor* b = (*longer)->find_tensor("blk.1.attn_q.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(std::memcmp(a->data, b->data, 64 * 64 * sizeof(float)), 0);
  for (std::int64_t bad : {std::int64_t{-1}, kMaxSynthContext + 1}) {
    o.context_length = bad;
    GgufWriter w;
    const Status s = build_synth_model(o, w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("context length must be in [1, 1048576]"), std::string::npos) << s.message();
  }
}

// Every weight type synth offers: the matrices carry it, norms stay F32, and
// general.file_type is llama.cpp's code for it. K-quants need rows that are
// whole 256-value blocks, which tiny (dim 64) is not: a clear error.
TEST(SynthTest, EveryWeightTypeAndKQuantRowLengths) {
  auto vocab = shared_data_path(kVocab);
  if (!vocab) GTEST_SKIP() << missing_data_message(kVocab);
  EXPECT_EQ(synth_type_names(), (std::vector<std::string>{"f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k"}));
  const std::pair<const char*, std::uint32_t> small[] = {{"f32", 0}, {"f16", 1}, {"q8_0", 7}, {"q4_0", 2}};
  for (const auto& [name, file_type] : small) {
    SynthOptions o;
    o.vocab_path = *vocab;
    auto type = synth_type(name);
    ASSERT_TRUE(type.ok()) << name;
    o.type = *type;
    auto f = synth_bytes(o);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status().to_string();
    EXPECT_EQ((*f)->find_tensor("blk.1.ffn_down.weight")->type, o.type) << name;
    EXPECT_EQ((*f)->find_tensor("token_embd.weight")->type, o.type) << name;
    EXPECT_EQ((*f)->find_tensor("blk.0.attn_norm.weight")->type, GgmlType::kF32) << name;
    EXPECT_EQ(*(*f)->get_int("general.file_type"), static_cast<int64_t>(file_type)) << name;
  }
  for (const char* name : {"q4_k", "q6_k"}) {
    SynthOptions o;
    o.vocab_path = *vocab;
    o.type = *synth_type(name);
    GgufWriter w;
    Status s = build_synth_model(o, w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find("blocks of 256"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("110m"), std::string::npos) << s.to_string();
  }
  auto bad = synth_type("q5_k");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("q4_k"), std::string::npos) << bad.status().to_string();
}

}  // namespace
}  // namespace ecoserve::model
