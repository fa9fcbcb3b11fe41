#include "loadgen/prompt_builder.h"

#include <gtest/gtest.h>

#include "base/test_data.h"
#include "loadgen/dataset_stats.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ecoserve::loadgen {
namespace {

TEST(PromptBuilder, ApproximateWithoutTokenizer) {
  PromptBuilder b;
  EXPECT_FALSE(b.exact());
  std::mt19937_64 rng(3);
  std::string p = b.random_prompt(50, rng);
  int words = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] == ' ') ++words;
  EXPECT_EQ(words, 50);
  EXPECT_EQ(b.count_tokens("abcdefgh"), 2);  // ceil(chars / 4)
  EXPECT_EQ(b.count_tokens("abcdefghi"), 3);
  // Block content depends only on the hash id.
  std::vector<std::int64_t> h1 = {7, 8}, h2 = {7, 9};
  std::string a = b.block_prompt(h1, 4, 8), c = b.block_prompt(h2, 4, 8);
  EXPECT_EQ(a.substr(0, a.size() / 3), c.substr(0, a.size() / 3));
  EXPECT_NE(a, c);
}

class ExactPrompts : public ::testing::TestWithParam<const char*> {};

TEST_P(ExactPrompts, ReencodeToTheAskedLength) {
  auto path = shared_data_path(GetParam());
  if (!path) GTEST_SKIP() << missing_data_message(GetParam());
  auto file = model::GgufFile::open(*path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto tok = model::Tokenizer::from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  PromptBuilder b(tok->get());
  ASSERT_TRUE(b.exact());
  std::mt19937_64 rng(11);
  int exact = 0, total = 0;
  for (std::int64_t n : {1, 2, 5, 17, 64, 300}) {
    for (int rep = 0; rep < 3; ++rep) {
      std::string p = b.random_prompt(n, rng);
      ++total;
      if (static_cast<std::int64_t>((*tok)->encode(p, false, true).size()) == n) ++exact;
      EXPECT_EQ(b.count_tokens(p), static_cast<std::int64_t>((*tok)->encode(p, false, true).size()));
    }
  }
  EXPECT_EQ(exact, total);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, ExactPrompts,
                         ::testing::Values("models/tinystories-656k-q8_0.gguf", "vocab/ggml-vocab-llama-spm.gguf",
                                           "vocab/ggml-vocab-gpt-2.gguf"));

TEST(DatasetStats, PrefixShareOnHandMadeSequences) {
  // Four prompts; with N = 2, L = 3: a and b share [1,2,3] (3 tokens), c shares [1,2] only.
  std::vector<std::vector<std::int64_t>> seqs = {{1, 2, 3, 4}, {1, 2, 3, 9, 9}, {1, 2, 7}, {5}};
  auto s = prefix_stats(seqs, 2, 3);
  EXPECT_EQ(s.prompts, 4u);
  EXPECT_EQ(s.prompts_sharing, 2u);
  EXPECT_DOUBLE_EQ(s.share, 0.5);
  EXPECT_DOUBLE_EQ(s.mean_surviving_prefix_tokens, (3 + 3 + 2 + 0) / 4.0);
  EXPECT_DOUBLE_EQ(s.shared_token_fraction, 8.0 / 13.0);
  // Block units: each id worth 512 tokens.
  auto blocks = prefix_stats(seqs, 2, 1024, 512);
  EXPECT_EQ(blocks.prompts_sharing, 3u);
  auto ls = length_stats({1, 2, 3, 4, 10});
  EXPECT_DOUBLE_EQ(ls.mean, 4);
  EXPECT_DOUBLE_EQ(ls.median, 3);
  EXPECT_DOUBLE_EQ(ls.p90, 7.6);
  EXPECT_EQ(ls.sum, 20);
}

TEST(DatasetStats, MooncakeFileSharing) {
  const std::string rel = "traces/mooncake_synthetic.jsonl";
  auto path = shared_data_path(rel);
  if (!path) GTEST_SKIP() << missing_data_message(rel);
  StatsOptions o{.kind = DatasetKind::kMooncake, .path = *path, .min_count = 2, .min_prefix_tokens = 512};
  auto s = compute_dataset_stats(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->entries, 3993u);
  ASSERT_TRUE(s->prefix);
  // Independent check: a prompt shares >= 1 block iff its first hash id occurs in another prompt too.
  auto entries = load_mooncake_trace(*path);
  std::map<std::int64_t, int> first_count;
  for (const auto& e : *entries)
    if (!e.hash_ids.empty()) ++first_count[e.hash_ids[0]];
  std::size_t sharing = 0;
  for (const auto& e : *entries)
    if (!e.hash_ids.empty() && first_count[e.hash_ids[0]] >= 2) ++sharing;
  EXPECT_EQ(s->prefix->prompts_sharing, sharing);
  std::string text = format_dataset_stats(*s, o);
  EXPECT_NE(text.find("Prompts with shared prefix >= L:"), std::string::npos);
}

}  // namespace
}  // namespace ecoserve::loadgen
