#include "model/llama_model.h"

#include <gtest/gtest.h>

#include <cstring>

#include "base/test_data.h"
#include "kernels/packed_weights.h"
#include "model/synth.h"

namespace ecoserve::model {
namespace {

// A synth `tiny` model with one metadata key or tensor changed, loaded from memory.
StatusOr<std::shared_ptr<const LlamaModel>> load_modified(const std::function<void(GgufWriter&)>& edit) {
  SynthOptions opt;
  opt.preset = "tiny";
  GgufWriter w;
  ECO_RETURN_IF_ERROR(build_synth_model(opt, w));
  edit(w);
  ECO_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, w.to_bytes());
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, GgufFile::from_bytes(std::move(bytes)));
  return LlamaModel::from_gguf(std::move(f));
}

class LlamaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!shared_data_path("vocab/ggml-vocab-llama-spm.gguf")) {
      GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-llama-spm.gguf");
    }
  }
};

TEST_F(LlamaModelTest, LoadsSynthTinyConfig) {
  auto m = load_modified([](GgufWriter&) {});
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const LlamaConfig& c = (*m)->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(c.n_vocab, 32000);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_NE((*m)->fingerprint(), 0u);
}

TEST_F(LlamaModelTest, UnknownArchitectureIsNamed) {
  auto m = load_modified([](GgufWriter& w) { w.set_string("general.architecture", "mamba"); });
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("unsupported architecture 'mamba'"), std::string::npos) << m.status().message();
}

TEST_F(LlamaModelTest, LinearRopeScalingAndBadHeadCounts) {
  auto scaled = load_modified([](GgufWriter& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_float32("llama.rope.scaling.factor", 4.0f);
  });
  ASSERT_TRUE(scaled.ok()) << scaled.status().to_string();
  EXPECT_FLOAT_EQ((*scaled)->config().rope_freq_scale, 0.25f);

  auto yarn = load_modified([](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "yarn"); });
  ASSERT_FALSE(yarn.ok());
  EXPECT_NE(yarn.status().message().find("'yarn'"), std::string::npos);

  auto heads = load_modified([](GgufWriter& w) { w.set_uint32("llama.attention.head_count_kv", 3); });
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.status().message().find("head_count_kv 3"), std::string::npos) << heads.status().message();
}

TEST_F(LlamaModelTest, BlockCountBeyondTheTensorsIsRejectedBeforeAllocating) {
  // 2^24 layers passes the range check; the old loader allocated ~7 GB of layer
  // table before noticing the missing tensors.
  auto m = load_modified([](GgufWriter& w) { w.set_uint32("llama.block_count", 1u << 24); });
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("block_count 16777216 needs at least"), std::string::npos)
      << m.status().message();
  auto three = load_modified([](GgufWriter& w) { w.set_uint32("llama.block_count", 3); });
  ASSERT_FALSE(three.ok());  // tiny has 2 layers: 21 tensors
  EXPECT_NE(three.status().message().find("block_count 3 needs at least 27 tensors, the file has 21"),
            std::string::npos)
      << three.status().message();
}

TEST_F(LlamaModelTest, FingerprintDependsOnWeights) {
  auto a = load_modified([](GgufWriter&) {});
  SynthOptions opt;
  opt.preset = "tiny";
  opt.seed = 2;
  GgufWriter w;
  ASSERT_TRUE(build_synth_model(opt, w).ok());
  auto f = GgufFile::from_bytes(*w.to_bytes());
  ASSERT_TRUE(f.ok());
  auto b = LlamaModel::from_gguf(std::move(*f));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->fingerprint(), (*b)->fingerprint());
}

TEST(LlamaModelRealTest, TinyStoriesIsTiedGqa) {
  auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
  if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
  auto m = LlamaModel::load(*path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const LlamaConfig& c = (*m)->config();
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.n_head, 8);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.n_vocab, 2048);
  EXPECT_EQ(c.n_ctx_train, 512);
  EXPECT_EQ((*m)->output().data, (*m)->token_embd().data);
}

// A private copy's Q8_0 (and Q4_K) matrices are repacked (kRows8), a shared mapping's are
// not; the fingerprint (of the file as stored) and the embeddings agree.
TEST(LlamaModelRealTest, PrivateLoadRepacksQ8_0Matrices) {
  auto path = shared_data_path("models/tinystories-656k-q8_0.gguf");
  if (!path) GTEST_SKIP() << missing_data_message("models/tinystories-656k-q8_0.gguf");
  auto packed = LlamaModel::load(*path, GgufFile::Load::kReadHugePages);
  auto mapped = LlamaModel::load(*path, GgufFile::Load::kMmap);
  ASSERT_TRUE(packed.ok() && mapped.ok());
  const auto& p = **packed;
  const auto& m = **mapped;
  EXPECT_EQ(p.fingerprint(), m.fingerprint());
  for (const auto* v : {&p.token_embd(), &p.output(), &p.layers()[0].wq, &p.layers()[0].wk, &p.layers()[0].w_down}) {
    EXPECT_EQ(v->layout, kernels::WeightLayout::kRows8);
  }
  EXPECT_EQ(m.token_embd().layout, kernels::WeightLayout::kGguf);
  EXPECT_EQ(m.layers()[0].w_up.layout, kernels::WeightLayout::kGguf);
  EXPECT_EQ(p.output().data, p.token_embd().data);
  std::vector<float> a(p.config().n_embd), b(p.config().n_embd);
  for (int32_t token : {0, 1, 7, 8, 1000, p.config().n_vocab - 1}) {
    p.embed(token, a.data());
    m.embed(token, b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "token " << token;
  }
  // The repacked bytes are the GGUF rows, interleaved.
  std::vector<uint8_t> row(p.layers()[1].wv.row_bytes);
  const auto& wv = p.layers()[1].wv;
  for (int64_t r = 0; r < wv.rows; ++r) {
    kernels::unpack_rows8_row(wv.type, static_cast<const uint8_t*>(wv.data), wv.cols, r, row.data());
    ASSERT_EQ(std::memcmp(row.data(), static_cast<const uint8_t*>(m.layers()[1].wv.data) + r * wv.row_bytes,
                          wv.row_bytes),
              0)
        << "row " << r;
  }
}

TEST(LlamaModelRealTest, MissingFileIsNotFound) {
  auto m = LlamaModel::load("/nonexistent/model.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ecoserve::model
