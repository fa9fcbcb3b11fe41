#include "server/prepare_generation.h"

#include <gtest/gtest.h>

#include "base/test_data.h"
#include "model/gguf.h"

namespace ecoserve::server {
namespace {

constexpr const char* kModel = "models/tinystories-656k-q8_0.gguf";

class PrepareGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = shared_data_path(kModel);
    if (!path) GTEST_SKIP() << missing_data_message(kModel);
    auto file = model::GgufFile::open(*path);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    auto tok = model::Tokenizer::from_gguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tokenizer_ = std::move(tok).value();
    ctx_.tokenizer = tokenizer_.get();
    ctx_.served_model_name = "tiny";
    ctx_.max_context = 64;
    ctx_.max_token_bytes = max_token_bytes(*tokenizer_);
  }

  PreparedGeneration ok(std::string_view body, Endpoint e = Endpoint::kCompletions) {
    auto r = prepare_generation(ctx_, e, body);
    if (auto* err = std::get_if<ApiError>(&r)) {
      ADD_FAILURE() << body << ": " << err->http_status << " " << err->message;
      return {};
    }
    return std::get<PreparedGeneration>(r);
  }
  ApiError err(std::string_view body, Endpoint e = Endpoint::kCompletions) {
    auto r = prepare_generation(ctx_, e, body);
    if (auto* er = std::get_if<ApiError>(&r)) return *er;
    ADD_FAILURE() << "expected an error for " << body.substr(0, 200);
    return {};
  }

  std::unique_ptr<model::Tokenizer> tokenizer_;
  PrepareContext ctx_;
};

TEST_F(PrepareGenerationTest, LongestTokenBoundsTheBytesPerToken) {
  const int32_t m = max_token_bytes(*tokenizer_);
  EXPECT_GE(m, 4);
  bool some_token_is_that_long = m == 4;
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    const size_t len = tokenizer_->token_text(id).size();
    EXPECT_LE(len, static_cast<size_t>(m)) << id;
    some_token_is_that_long |= len == static_cast<size_t>(m);
  }
  EXPECT_TRUE(some_token_is_that_long);
  // The bound holds for real text: no prompt encodes to fewer tokens than bytes / m.
  const std::string text = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
  const auto ids = tokenizer_->encode(text, /*add_special=*/false, /*parse_special=*/false);
  EXPECT_GE(static_cast<int64_t>(ids.size()) * m, static_cast<int64_t>(text.size()));
}

TEST_F(PrepareGenerationTest, CompletionPromptIsTokenizedWithBos) {
  PreparedGeneration g = ok(R"({"model":"tiny","prompt":"Once upon a time"})");
  EXPECT_EQ(g.prompt, tokenizer_->encode("Once upon a time", true, true));
  ASSERT_FALSE(g.prompt.empty());
  EXPECT_EQ(g.prompt[0], tokenizer_->bos_id());
  EXPECT_EQ(g.max_tokens, 16);  // the completions default
  EXPECT_EQ(g.request.prompt, "Once upon a time");
  // No model named: the served one.
  EXPECT_EQ(ok(R"({"prompt":"Once upon a time","max_tokens":7})").max_tokens, 7);
}

TEST_F(PrepareGenerationTest, TokenPromptsAreCheckedAgainstTheVocabulary) {
  EXPECT_EQ(ok(R"({"prompt":[1, 400, 2]})").prompt, (std::vector<int32_t>{1, 400, 2}));
  ApiError e = err(R"({"prompt":[1, 100000]})");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.message, "prompt token id 100000 is out of range (vocabulary size " +
                           std::to_string(tokenizer_->vocab_size()) + ")");
}

TEST_F(PrepareGenerationTest, UnknownModelIs404) {
  ApiError e = err(R"({"model":"gpt-4","prompt":"x"})");
  EXPECT_EQ(e.http_status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(e.param, "model");
  EXPECT_EQ(e.message, "The model `gpt-4` does not exist; this server serves `tiny`");
}

TEST_F(PrepareGenerationTest, PromptTooManyBytesIsRejectedBeforeTokenizing) {
  const int64_t limit = int64_t{63} * ctx_.max_token_bytes;  // 63 tokens of the longest kind
  const std::string big(static_cast<size_t>(limit) + 1, 'a');
  ApiError e = err(R"({"prompt":")" + big + "\"}");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("the prompt is " + std::to_string(limit + 1) + " bytes long"), std::string::npos)
      << e.message;
  // Chat counts the bytes of every message's content.
  const std::string half(static_cast<size_t>(limit / 2) + 1, 'a');
  ApiError chat = err(R"({"messages":[{"role":"user","content":")" + half +
                          R"("},{"role":"user","content":")" + half + "\"}]}",
                      Endpoint::kChatCompletions);
  EXPECT_EQ(chat.param, "messages");
  EXPECT_NE(chat.message.find("the messages is " + std::to_string(2 * half.size()) + " bytes long"),
            std::string::npos)
      << chat.message;
}

TEST_F(PrepareGenerationTest, PromptPlusCompletionOverTheContext) {
  // Fits by bytes, not by tokens: each " a" is its own token.
  std::string words;
  for (int i = 0; i < 70; ++i) words += " a";
  ApiError e = err(R"({"prompt":")" + words + "\"}");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "prompt");
  EXPECT_EQ(e.message.rfind("This model's maximum context length is 64 tokens. However, you requested", 0), 0u)
      << e.message;
  const size_t plen = tokenizer_->encode("Once upon a time", true, true).size();
  // max_tokens exactly filling the context is allowed; one more is not.
  const int32_t room = 64 - static_cast<int32_t>(plen);
  EXPECT_EQ(ok(R"({"prompt":"Once upon a time","max_tokens":)" + std::to_string(room) + "}").max_tokens, room);
  EXPECT_EQ(err(R"({"prompt":"Once upon a time","max_tokens":)" + std::to_string(room + 1) + "}").message,
            "This model's maximum context length is 64 tokens. However, you requested 65 tokens (" +
                std::to_string(plen) + " in the prompt, " + std::to_string(room + 1) +
                " in the completion). Please reduce the length of the prompt or completion.");
}

TEST_F(PrepareGenerationTest, ChatDefaultsToTheRestOfTheContext) {
  PreparedGeneration g = ok(R"({"messages":[{"role":"user","content":"Tell me a story"}]})", Endpoint::kChatCompletions);
  ASSERT_FALSE(g.prompt.empty());
  EXPECT_EQ(g.max_tokens, 64 - static_cast<int32_t>(g.prompt.size()));
  const std::string rendered = render_chat(ctx_.chat_template, g.request.messages, ctx_.bos_text, ctx_.eos_text);
  EXPECT_EQ(g.prompt, tokenizer_->encode(rendered, true, true));
}

TEST_F(PrepareGenerationTest, ParseErrorsPassThrough) {
  EXPECT_EQ(err(R"({"prompt":"hi","temperature":1e400})").param, "temperature");
  EXPECT_EQ(err("not json").http_status, 400);
}

}  // namespace
}  // namespace ecoserve::server
