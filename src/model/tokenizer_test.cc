#include "model/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "base/test_data.h"
#include "model/pretokenizer.h"
#include "model/tokenizer_utf8.h"

namespace ecoserve::model {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ids_to_string(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s;
}

// Inputs of a llama.cpp vocab test: every input is followed by the separator.
std::vector<std::string> split_inputs(const std::string& content) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t m = content.find(sep, pos);
    if (m == std::string::npos) {
      if (pos < content.size()) out.push_back(content.substr(pos));
      break;
    }
    out.push_back(content.substr(pos, m - pos));
    pos = m + sep.size();
  }
  return out;
}

std::vector<std::vector<std::int32_t>> read_expected(const std::string& content) {
  std::vector<std::vector<std::int32_t>> out;
  std::istringstream lines(content);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::vector<std::int32_t> ids;
    std::int32_t id;
    while (in >> id) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  auto file = GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::from_gguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  if (!tok.ok()) return nullptr;
  return std::move(tok).value();
}

struct VocabCase {
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<std::string> inputs;
  std::vector<std::vector<std::int32_t>> expected;
};

// Loads ../shared/data/vocab/ggml-vocab-NAME.gguf and its .inp/.out; empty optional if absent.
std::optional<VocabCase> load_vocab_case(const std::string& name, std::string* missing) {
  const std::string rel = "vocab/ggml-vocab-" + name + ".gguf";
  for (const std::string& r : {rel, rel + ".inp", rel + ".out"}) {
    if (!shared_data_path(r)) {
      *missing = missing_data_message(r);
      return std::nullopt;
    }
  }
  VocabCase c;
  c.tokenizer = load_tokenizer(*shared_data_path(rel));
  c.inputs = split_inputs(read_file(*shared_data_path(rel + ".inp")));
  c.expected = read_expected(read_file(*shared_data_path(rel + ".out")));
  return c;
}

class VocabFileTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string missing;
    auto c = load_vocab_case(GetParam(), &missing);
    if (!c) GTEST_SKIP() << missing;
    case_ = std::move(*c);
    ASSERT_NE(case_.tokenizer, nullptr);
    ASSERT_EQ(case_.inputs.size(), case_.expected.size()) << "inputs vs expected lines";
    ASSERT_GT(case_.inputs.size(), 10u);
  }
  VocabCase case_;
};

TEST_P(VocabFileTest, EncodesLikeLlamaCpp) {
  int failures = 0;
  for (std::size_t i = 0; i < case_.inputs.size(); ++i) {
    const auto got = case_.tokenizer->encode(case_.inputs[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids_to_string(got), ids_to_string(case_.expected[i]))
        << "input #" << i << ": '" << case_.inputs[i] << "'";
    failures += got != case_.expected[i];
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(VocabFileTest, DecodeRoundTrips) {
  for (std::size_t i = 0; i < case_.inputs.size(); ++i) {
    const std::string& text = case_.inputs[i];
    const auto ids = case_.tokenizer->encode(text, false, false);
    EXPECT_EQ(case_.tokenizer->decode(ids), text) << "input #" << i << " ids " << ids_to_string(ids);
  }
}

TEST_P(VocabFileTest, IncrementalChunksAreValidUtf8AndConcatenateToDecode) {
  for (std::size_t i = 0; i < case_.inputs.size(); ++i) {
    auto ids = case_.tokenizer->encode(case_.inputs[i], /*add_special=*/true, false);
    IncrementalDetokenizer detok(*case_.tokenizer);
    std::string joined;
    for (std::int32_t id : ids) {
      const std::string chunk = detok.push(id);
      EXPECT_TRUE(utf8::is_valid(chunk)) << "input #" << i << " token " << id;
      joined += chunk;
    }
    joined += detok.flush();
    EXPECT_EQ(joined, case_.tokenizer->decode(ids)) << "input #" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, VocabFileTest,
                         ::testing::Values("llama-spm", "gpt-2", "falcon", "deepseek-llm"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

std::unique_ptr<Tokenizer> load_vocab(const std::string& name) {
  const std::string rel = "vocab/ggml-vocab-" + name + ".gguf";
  if (!shared_data_path(rel)) return nullptr;
  return load_tokenizer(*shared_data_path(rel));
}

TEST(TokenizerSpm, MetadataAndSpecialTokens) {
  auto tok = load_vocab("llama-spm");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-llama-spm.gguf");
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->token_type(1), TokenType::kControl);
  EXPECT_EQ(tok->find_token("<0x0A>"), 13);

  // add_special prepends BOS; "Hello world" -> ▁Hello ▁world.
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<std::int32_t>{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("Hello world", false), (std::vector<std::int32_t>{15043, 3186}));
  EXPECT_EQ(tok->encode("", true), (std::vector<std::int32_t>{1}));
  EXPECT_TRUE(tok->encode("", false).empty());

  // parse_special: "<s>" and "</s>" become their ids; the text after a special
  // token gets the space prefix again.
  EXPECT_EQ(tok->encode("<s>Hello</s>world", false, true),
            (std::vector<std::int32_t>{1, 15043, 2, 3186}));
  // Without parse_special the text is tokenized as text (no control ids).
  for (std::int32_t id : tok->encode("<s>Hello</s>", false, false)) {
    EXPECT_NE(id, 1);
    EXPECT_NE(id, 2);
  }
  // Rendering: control tokens are empty unless render_special.
  EXPECT_EQ(tok->token_to_piece(1), "");
  EXPECT_EQ(tok->token_to_piece(1, true), "<s>");
  EXPECT_EQ(tok->token_to_piece(15043), " Hello");
  EXPECT_EQ(tok->token_to_piece(13), "\n");
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{1, 15043, 3186, 2}), "Hello world");
  EXPECT_EQ(tok->decode(std::vector<std::int32_t>{1, 15043, 3186, 2}, true), "<s>Hello world</s>");
}

TEST(TokenizerSpm, ByteFallbackAndIncrementalUtf8) {
  auto tok = load_vocab("llama-spm");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-llama-spm.gguf");
  // U+1F999 is not in the vocabulary: four byte tokens F0 9F A6 99 (<0xNN> = 3 + byte).
  const std::string llama = "\xF0\x9F\xA6\x99";
  const auto ids = tok->encode(llama, false);
  ASSERT_EQ(ids, (std::vector<std::int32_t>{29871, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99}));
  EXPECT_EQ(tok->decode(ids), llama);

  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(29871), "");  // the prefix space, stripped
  EXPECT_EQ(detok.push(3 + 0xF0), "");
  EXPECT_EQ(detok.push(3 + 0x9F), "");
  EXPECT_EQ(detok.push(3 + 0xA6), "");
  EXPECT_EQ(detok.push(3 + 0x99), llama);
  EXPECT_EQ(detok.flush(), "");

  // "é" spelled as byte tokens <0xC3><0xA9> after BOS and a word.
  const std::int32_t c3 = tok->find_token("<0xC3>"), a9 = tok->find_token("<0xA9>");
  ASSERT_EQ(c3, 3 + 0xC3);
  ASSERT_EQ(a9, 3 + 0xA9);
  IncrementalDetokenizer d2(*tok);
  EXPECT_EQ(d2.push(1), "");
  EXPECT_EQ(d2.push(15043), "Hello");
  EXPECT_EQ(d2.push(c3), "");
  EXPECT_EQ(d2.push(a9), "\xC3\xA9");
  // A dangling lead byte is held back, then replaced at flush().
  EXPECT_EQ(d2.push(c3), "");
  EXPECT_EQ(d2.flush(), "\xEF\xBF\xBD");
  // A lead byte followed by something that is not a continuation: U+FFFD then the text.
  IncrementalDetokenizer d3(*tok, false, /*strip_leading_space=*/false);
  EXPECT_EQ(d3.push(c3), "");
  EXPECT_EQ(d3.push(15043), "\xEF\xBF\xBD Hello");
}

TEST(TokenizerBpe, Gpt2SpecialTokensAndPieces) {
  auto tok = load_vocab("gpt-2");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(tok->model_name(), "gpt2");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_FALSE(tok->add_space_prefix());
  const std::int32_t eot = tok->find_token("<|endoftext|>");
  ASSERT_EQ(eot, 50256);
  EXPECT_TRUE(tok->is_eog(eot));
  EXPECT_EQ(tok->token_type(eot), TokenType::kControl);

  // "Hello world" = Hello Ġworld.
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<std::int32_t>{15496, 995}));
  EXPECT_EQ(tok->encode("Hello<|endoftext|> world", false, true),
            (std::vector<std::int32_t>{15496, 50256, 995}));
  const auto plain = tok->encode("Hello<|endoftext|> world", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), eot), 0);
  EXPECT_EQ(tok->decode(plain), "Hello<|endoftext|> world");
  EXPECT_EQ(tok->token_to_piece(995), " world");
  EXPECT_EQ(tok->token_to_piece(eot), "");
  EXPECT_EQ(tok->token_to_piece(eot, true), "<|endoftext|>");
  EXPECT_EQ(tok->token_text(995), "\xC4\xA0world");  // "Ġworld"
}

TEST(TokenizerBpe, DeepseekUserDefinedAndControlTokens) {
  auto tok = load_vocab("deepseek-llm");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-deepseek-llm.gguf");
  EXPECT_EQ(tok->pre_name(), "deepseek-llm");
  EXPECT_EQ(tok->bos_id(), 100000);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(100001));
  // User-defined tokens (e.g. 100014 "\xC3\xBC") are split out even without parse_special;
  // control tokens only with it.
  const std::string bos_text(tok->token_text(100000));
  const std::string text = "F\xC3\xBChrer" + bos_text;
  const auto plain = tok->encode(text, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 100014), 1);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 100000), 0);
  const auto special = tok->encode(text, true, true);
  ASSERT_GE(special.size(), 3u);
  EXPECT_EQ(special.front(), 100000);  // add_bos
  EXPECT_EQ(special.back(), 100000);   // parsed from the text
  EXPECT_EQ(tok->decode(special), "F\xC3\xBChrer");
  EXPECT_EQ(tok->decode(special, true), bos_text + "F\xC3\xBChrer" + bos_text);
}

TEST(TokenizerBpe, InvalidUtf8InputIsReplacedNotFatal) {
  auto tok = load_vocab("gpt-2");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-gpt-2.gguf");
  // Like llama.cpp, invalid bytes become U+FFFD before pre-tokenization.
  const auto ids = tok->encode("a\xFF\xC3 b", false);
  EXPECT_EQ(tok->decode(ids), "a\xEF\xBF\xBD\xEF\xBF\xBD b");
  auto spm = load_vocab("llama-spm");
  if (!spm) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-llama-spm.gguf");
  // SentencePiece keeps the raw bytes through byte fallback.
  EXPECT_EQ(spm->decode(spm->encode("a\xFF\xC3 b", false)), "a\xFF\xC3 b");
}

TEST(TokenizerBpe, ConcurrentEncodesAgree) {
  auto tok = load_vocab("gpt-2");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-gpt-2.gguf");
  const std::string text = "Concurrent tokenization must give the same ids 12345 \xE4\xBD\xA0\xE5\xA5\xBD!";
  const auto expected = tok->encode(text, false);
  std::vector<std::vector<std::int32_t>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) results[t] = tok->encode(text, false);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

TEST(TokenizerBpe, LongTextIsTokenizedAndRoundTrips) {
  auto tok = load_vocab("gpt-2");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-gpt-2.gguf");
  std::string text;
  while (text.size() < 10000) text += "The quick brown fox, 1234 times! \xC3\xA9t\xC3\xA9\n";
  text += std::string(5000, 'a');  // one very long word
  const auto ids = tok->encode(text, false);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(TokenizerSpm, LongTextRoundTrips) {
  auto tok = load_vocab("llama-spm");
  if (!tok) GTEST_SKIP() << missing_data_message("vocab/ggml-vocab-llama-spm.gguf");
  std::string text;
  while (text.size() < 10000) text += "The quick brown fox, 1234 times! \xC3\xA9t\xC3\xA9\n";
  const auto ids = tok->encode(text, false);
  EXPECT_LT(ids.size(), text.size() / 2);
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(TokenizerModel, TinyStoriesOnceUponATime) {
  const std::string rel = "models/tinystories-656k-q8_0.gguf";
  auto path = shared_data_path(rel);
  if (!path) GTEST_SKIP() << missing_data_message(rel);
  auto tok = load_tokenizer(*path);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->vocab_size(), 2048);
  const auto ids = tok->encode("Once upon a time", true);
  // Checked by hand against the vocabulary in the file. Every score there is -1000,
  // so SentencePiece merging takes the leftmost mergeable pair each time:
  // "▁Once▁upon▁a▁time" -> <|start_story|> "▁" "On" "ce▁" "upon▁a▁tim" "e".
  EXPECT_EQ(ids, (std::vector<std::int32_t>{1, 80, 147, 201, 282, 57})) << ids_to_string(ids);
  EXPECT_EQ(tok->token_text(1), "<|start_story|>");
  EXPECT_EQ(tok->token_text(80), "\xE2\x96\x81");
  EXPECT_EQ(tok->token_text(147), "On");
  EXPECT_EQ(tok->token_text(201), "ce\xE2\x96\x81");
  EXPECT_EQ(tok->token_text(282), "upon\xE2\x96\x81" "a\xE2\x96\x81tim");
  EXPECT_EQ(tok->token_text(57), "e");
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->decode(ids), "Once upon a time");

  // Streaming a continuation keeps the space a first token starts with.
  IncrementalDetokenizer cont(*tok, false, /*strip_leading_space=*/false);
  EXPECT_EQ(cont.push(80), " ");
  IncrementalDetokenizer fresh(*tok);
  EXPECT_EQ(fresh.push(1), "");
  EXPECT_EQ(fresh.push(80), "");
  EXPECT_EQ(fresh.push(147), "On");
}

TEST(Pretokenizer, Gpt2RegexSplits) {
  auto regexes = Pretokenizer::regexes_for("gpt-2");
  ASSERT_TRUE(regexes.ok());
  auto pre = Pretokenizer::create(*regexes);
  ASSERT_TRUE(pre.ok()) << pre.status().to_string();
  const std::string text = "Hello world's  123 !!\n\n  end  ";
  std::vector<std::string> got;
  for (auto p : (*pre)->split(text)) got.emplace_back(p);
  EXPECT_EQ(got, (std::vector<std::string>{"Hello", " world", "'s", " ", " 123", " !!", "\n\n ", " end",
                                           "  "}));
}

TEST(Pretokenizer, UnicodeClassesAndNel) {
  auto pre = Pretokenizer::create(*Pretokenizer::regexes_for("gpt-2"));
  ASSERT_TRUE(pre.ok());
  // U+00E9 is a letter; U+0085 (NEL) is whitespace like llama.cpp's tables.
  std::vector<std::string> got;
  for (auto p : (*pre)->split("caf\xC3\xA9\xC2\x85\xC2\x85x")) got.emplace_back(p);
  EXPECT_EQ(got, (std::vector<std::string>{"caf\xC3\xA9", "\xC2\x85", "\xC2\x85", "x"}));
}

std::vector<std::string> split_with(std::string_view pre_name, std::string_view text) {
  auto regexes = Pretokenizer::regexes_for(pre_name);
  EXPECT_TRUE(regexes.ok()) << pre_name;
  if (!regexes.ok()) return {};
  auto pre = Pretokenizer::create(*regexes);
  EXPECT_TRUE(pre.ok()) << pre.status().to_string();
  if (!pre.ok()) return {};
  std::vector<std::string> got;
  for (auto p : (*pre)->split(text)) got.emplace_back(p);
  return got;
}

TEST(Pretokenizer, Llama3AndQwen2) {
  using V = std::vector<std::string>;
  // Digits in groups of three (llama3) or one by one (qwen2); contractions in any case;
  // one non-letter may lead a word; newlines stay with trailing punctuation.
  EXPECT_EQ(split_with("llama-bpe", "I'M 12345 ok?!\n\nyes"),
            (V{"I", "'M", " ", "123", "45", " ok", "?!\n\n", "yes"}));
  EXPECT_EQ(split_with("llama3", "$hello"), (V{"$hello"}));
  EXPECT_EQ(split_with("qwen2", "I'M 12345 ok?!\n\nyes"),
            (V{"I", "'M", " ", "1", "2", "3", "4", "5", " ok", "?!\n\n", "yes"}));
  // Every name llama.cpp maps to a known list compiles.
  for (const char* name : {"default", "gpt-2", "llama3", "llama-bpe", "qwen2", "deepseek-llm",
                           "deepseek-coder", "falcon", "starcoder", "bloom", "viking", "chatglm-bpe"}) {
    auto r = Pretokenizer::regexes_for(name);
    ASSERT_TRUE(r.ok()) << name;
    EXPECT_TRUE(Pretokenizer::create(*r).ok()) << name;
  }
}

TEST(Pretokenizer, DeepseekAndFalconSequences) {
  using V = std::vector<std::string>;
  // deepseek-llm: newlines alone, letters with one leading space, CJK runs, digits runs.
  EXPECT_EQ(split_with("deepseek-llm", "Hi there\n\xE4\xBD\xA0\xE5\xA5\xBD 2024!"),
            (V{"Hi", " there", "\n", "\xE4\xBD\xA0\xE5\xA5\xBD", " ", "2024", "!"}));
  // falcon: punctuation runs split first, then GPT-2, then three-digit groups.
  EXPECT_EQ(split_with("falcon", "a, b 12345"), (V{"a", ",", " b", " ", "123", "45"}));
}

TEST(Pretokenizer, UnknownNameIsAnError) {
  auto r = Pretokenizer::regexes_for("no-such-pre");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no-such-pre"), std::string::npos);
}

TEST(Pretokenizer, BadRegexIsAnError) {
  auto r = Pretokenizer::create({"(unclosed"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// --- Small synthetic vocabularies written with GgufWriter ----------------------

StatusOr<std::unique_ptr<Tokenizer>> tokenizer_from_writer(const GgufWriter& w) {
  ECO_ASSIGN_OR_RETURN(std::vector<std::uint8_t> bytes, w.to_bytes());
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::from_bytes(std::move(bytes)));
  return Tokenizer::from_gguf(*file);
}

GgufWriter tiny_spm_writer() {
  // 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces with scores.
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<std::int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.emplace_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\xE2\x96\x81", -1}, {"a", -2}, {"b", -2}, {"c", -2}, {"ab", -3}, {"bc", -1},
      {"\xE2\x96\x81" "a", -5}, {"abc", -4}, {"\xE2\x96\x81" "abc", -6}};
  for (const auto& [t, s] : pieces) {
    tokens.push_back(t);
    scores.push_back(s);
    types.push_back(1);
  }
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_float32_array("tokenizer.ggml.scores", scores);
  w.set_int32_array("tokenizer.ggml.token_type", types);
  return w;
}

TEST(TokenizerSynthetic, SpmMergesByScore) {
  auto tok = tokenizer_from_writer(tiny_spm_writer());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const Tokenizer& t = **tok;
  const std::int32_t base = 259;  // first piece id
  // "▁abc": bc (-1) merges before ab (-3); then "▁" + "a"? "▁a" (-5) vs "a"+"bc" -> "abc" (-4):
  // abc wins, then ▁ + abc -> ▁abc (-6).
  EXPECT_EQ(t.encode("abc", false), (std::vector<std::int32_t>{base + 8}));
  // "ab" alone: ▁a (-5) vs ab (-3): ab first; then ▁ + ab is not a token.
  EXPECT_EQ(t.encode("ab", false), (std::vector<std::int32_t>{base + 0, base + 4}));
  // 'z' is not in the vocabulary: byte fallback <0x7A>.
  EXPECT_EQ(t.encode("z", false), (std::vector<std::int32_t>{base + 0, 3 + 'z'}));
  EXPECT_EQ(t.decode(t.encode("z abc", true)), "z abc");
  // Defaults for a llama vocabulary: BOS 1 added, EOS 2.
  EXPECT_EQ(t.encode("a", true), (std::vector<std::int32_t>{1, base + 6}));
}

TEST(TokenizerSynthetic, MissingOrBadMetadataIsAnError) {
  {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    auto tok = tokenizer_from_writer(w);
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), StatusCode::kNotFound);
    EXPECT_NE(tok.status().message().find("tokenizer.ggml.model"), std::string::npos);
  }
  {
    GgufWriter w = tiny_spm_writer();
    w.set_string("tokenizer.ggml.model", "bert");
    auto tok = tokenizer_from_writer(w);
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find("bert"), std::string::npos);
  }
  {
    GgufWriter w = tiny_spm_writer();
    w.set_float32_array("tokenizer.ggml.scores", {1.0f, 2.0f});
    auto tok = tokenizer_from_writer(w);
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find("scores"), std::string::npos);
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
    auto tok = tokenizer_from_writer(w);
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find("merges"), std::string::npos);
    w.set_string_array("tokenizer.ggml.merges", {"a b"});
    w.set_string("tokenizer.ggml.pre", "mystery");
    tok = tokenizer_from_writer(w);
    ASSERT_FALSE(tok.ok());
    EXPECT_NE(tok.status().message().find("mystery"), std::string::npos);
    w.set_string("tokenizer.ggml.pre", "gpt-2");
    tok = tokenizer_from_writer(w);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    EXPECT_EQ((*tok)->encode("ab ba", false), (std::vector<std::int32_t>{2, 1, 0}));  // ' ' has no token
  }
}

TEST(TokenizerSynthetic, Utf8Helpers) {
  EXPECT_TRUE(utf8::is_valid("h\xC3\xA9\xF0\x9F\xA6\x99"));
  EXPECT_FALSE(utf8::is_valid("\xC3"));
  EXPECT_FALSE(utf8::is_valid("\xC0\x80"));      // overlong
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));  // surrogate
  EXPECT_EQ(utf8::sanitize("a\xFF" "b\xE2\x96"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
}

}  // namespace
}  // namespace ecoserve::model
