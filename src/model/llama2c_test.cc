#include "model/llama2c.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/test_data.h"

namespace ecoserve::model {
namespace {

const char kCkpt[] = "models/stories260k.bin";
const char kTok[] = "models/stories260k-tok512.bin";

std::vector<float> read_floats(const std::string& path, std::size_t float_offset, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(28 + 4 * float_offset));
  std::vector<float> v(n);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(4 * n));
  return v;
}

TEST(Llama2cTest, Stories260kHeader) {
  auto ckpt = shared_data_path(kCkpt);
  if (!ckpt) GTEST_SKIP() << missing_data_message(kCkpt);
  auto c = read_llama2c_config(*ckpt);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->dim, 64);
  EXPECT_EQ(c->hidden_dim, 172);
  EXPECT_EQ(c->n_layers, 5);
  EXPECT_EQ(c->n_heads, 8);
  EXPECT_EQ(c->n_kv_heads, 4);
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_TRUE(c->shared_classifier);
  EXPECT_EQ(c->seq_len, 512);
}

TEST(Llama2cTest, Stories260kConvert) {
  auto ckpt = shared_data_path(kCkpt);
  auto tok = shared_data_path(kTok);
  if (!ckpt || !tok) GTEST_SKIP() << missing_data_message(kCkpt);
  GgufWriter w;
  Llama2cConfig cfg;
  ASSERT_TRUE(build_llama2c_gguf(*ckpt, *tok, w, &cfg).ok());
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok());
  auto f = GgufFile::from_bytes(std::move(*bytes));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), "llama");
  EXPECT_EQ(*g.get_int("llama.context_length"), 512);
  EXPECT_EQ(*g.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(*g.get_int("llama.block_count"), 5);
  EXPECT_EQ(*g.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(*g.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(*g.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(*g.get_int("llama.rope.dimension_count"), 8);

  // Tokenizer.
  EXPECT_EQ(*g.get_string("tokenizer.ggml.model"), "llama");
  auto tokens = *g.get_string_array("tokenizer.ggml.tokens");
  auto types = *g.get_int_array("tokenizer.ggml.token_type");
  auto scores = *g.get_float_array("tokenizer.ggml.scores");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[258], "<0xFF>");
  EXPECT_EQ(tokens[259], "\xE2\x96\x81t");      // " t"
  EXPECT_EQ(tokens[265], "\xE2\x96\x81the");    // " the"
  EXPECT_EQ(tokens[260], "he");
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[2], 3);
  EXPECT_EQ(types[3], 6);
  EXPECT_EQ(types[258], 6);
  EXPECT_EQ(types[259], 1);
  EXPECT_EQ(scores[260], -1.0);
  EXPECT_EQ(scores[265], -6.0);
  EXPECT_EQ(*g.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(*g.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(*g.get_int("tokenizer.ggml.unknown_token_id"), 0);

  // Tensors: shapes, tied output.
  EXPECT_EQ(g.tensors().size(), 2u + 5u * 9u);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("token_embd.weight")->dims, (std::vector<std::int64_t>{64, 512}));
  EXPECT_EQ(g.find_tensor("blk.4.attn_q.weight")->dims, (std::vector<std::int64_t>{64, 64}));
  EXPECT_EQ(g.find_tensor("blk.4.attn_k.weight")->dims, (std::vector<std::int64_t>{64, 32}));
  EXPECT_EQ(g.find_tensor("blk.0.ffn_gate.weight")->dims, (std::vector<std::int64_t>{64, 172}));
  EXPECT_EQ(g.find_tensor("blk.0.ffn_down.weight")->dims, (std::vector<std::int64_t>{172, 64}));
  EXPECT_EQ(g.find_tensor("blk.0.ffn_up.weight")->dims, (std::vector<std::int64_t>{64, 172}));
  EXPECT_EQ(g.find_tensor("output_norm.weight")->dims, (std::vector<std::int64_t>{64}));

  // Known values round-trip exactly. Float offsets: emb 0 (32768), rms_att 32768 (320),
  // wq 33088 (20480), wk 53568 (10240), wv 63808, wo 74048, rms_ffn 94528, w1 94848 (55040),
  // w2 149888, w3 204928, rms_final 259968.
  auto check = [&](const char* name, std::size_t file_off, std::size_t n) {
    const GgufTensor* t = g.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->nbytes, 4 * n) << name;
    const auto expect = read_floats(*ckpt, file_off, n);
    EXPECT_EQ(std::memcmp(t->data, expect.data(), 4 * n), 0) << name;
  };
  check("token_embd.weight", 0, 32768);
  check("blk.0.attn_norm.weight", 32768, 64);
  check("blk.2.attn_q.weight", 33088 + 2 * 4096, 4096);
  check("blk.1.attn_k.weight", 53568 + 1 * 2048, 2048);
  check("blk.4.attn_v.weight", 63808 + 4 * 2048, 2048);
  check("blk.3.attn_output.weight", 74048 + 3 * 4096, 4096);
  check("blk.4.ffn_norm.weight", 94528 + 4 * 64, 64);
  check("blk.1.ffn_gate.weight", 94848 + 1 * 11008, 11008);
  check("blk.2.ffn_down.weight", 149888 + 2 * 11008, 11008);
  check("blk.4.ffn_up.weight", 204928 + 4 * 11008, 11008);
  check("output_norm.weight", 259968, 64);
  // A single known element: the first float after the header is token 0's embedding[0].
  float first;
  std::memcpy(&first, g.find_tensor("token_embd.weight")->data, 4);
  EXPECT_EQ(first, read_floats(*ckpt, 0, 1)[0]);
  EXPECT_NE(first, 0.0f);
}

TEST(Llama2cTest, ConvertWritesLoadableFile) {
  auto ckpt = shared_data_path(kCkpt);
  auto tok = shared_data_path(kTok);
  if (!ckpt || !tok) GTEST_SKIP() << missing_data_message(kCkpt);
  const std::string out =
      (std::filesystem::temp_directory_path() / ("llama2c_test_" + std::to_string(::getpid()) + ".gguf")).string();
  ASSERT_TRUE(convert_llama2c(*ckpt, *tok, out).ok());
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ((*f)->tensors().size(), 47u);
  std::remove(out.c_str());
}

TEST(Llama2cTest, BadInputsAreClearErrors) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string bad = (dir / ("llama2c_bad_" + std::to_string(::getpid()) + ".bin")).string();
  auto write = [&](const std::vector<std::int32_t>& ints) {
    std::ofstream o(bad, std::ios::binary);
    o.write(reinterpret_cast<const char*>(ints.data()), static_cast<std::streamsize>(4 * ints.size()));
  };
  write({64, 172});
  auto c = read_llama2c_config(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("truncated"), std::string::npos) << c.status().message();
  write({64, 172, 5, 8, 4, 512, 512, 0, 0});
  c = read_llama2c_config(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("implies"), std::string::npos) << c.status().message();
  write({0x46554747, 3, 0, 0, 0, 0, 0});
  c = read_llama2c_config(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("implausible"), std::string::npos) << c.status().message();
  write({64, 172, 5, 7, 4, 512, 512});
  c = read_llama2c_config(bad);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("inconsistent"), std::string::npos) << c.status().message();
  // Tokenizer with a length past the end.
  write({7, 0, 1000});
  auto v = read_llama2c_tokenizer(bad, 512);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("truncated"), std::string::npos) << v.status().message();
  EXPECT_EQ(read_llama2c_config("/nonexistent.bin").status().code(), StatusCode::kNotFound);
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace ecoserve::model
