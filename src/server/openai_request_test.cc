#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace ecoserve::server {
namespace {

CompletionRequest ok(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = parse_completion_request(body, e);
  if (auto* err = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << "unexpected error: " << err->message;
    return {};
  }
  return std::get<CompletionRequest>(r);
}

ApiError err(std::string_view body, Endpoint e = Endpoint::kCompletions) {
  auto r = parse_completion_request(body, e);
  if (auto* er = std::get_if<ApiError>(&r)) return *er;
  ADD_FAILURE() << "expected an error for " << body;
  return {};
}

TEST(OpenAiRequest, ParsesCompletionFields) {
  CompletionRequest r = ok(R"({"model":"m","prompt":"Once","max_tokens":40,"temperature":0,"top_p":0.9,
      "top_k":5,"min_p":0.1,"frequency_penalty":0.5,"presence_penalty":-0.5,"repetition_penalty":1.1,
      "seed":7,"n":3,"stop":["\n","The end"],"stream":true,"stream_options":{"include_usage":true},
      "logprobs":2,"ignore_eos":true,"priority":4})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.max_tokens, 40);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(r.has_seed);
  EXPECT_EQ(r.seed, 7);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "The end"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.sampling.ignore_eos);
  EXPECT_EQ(r.priority, 4);
}

TEST(OpenAiRequest, DefaultsAndTokenPrompts) {
  CompletionRequest r = ok(R"({"prompt":[1,15043,3186],"stop":"x"})");
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(r.max_tokens, std::nullopt);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(ok(R"({"prompt":["one"],"top_k":-1})").sampling.top_k, 0);
}

TEST(OpenAiRequest, ParsesChat) {
  CompletionRequest r = ok(R"({"model":"m","messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]},
      {"role":"assistant","content":null}],"max_completion_tokens":9,"logprobs":true,"top_logprobs":3})",
                           Endpoint::kChatCompletions);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
}

TEST(OpenAiRequest, MalformedJson) {
  ApiError e = err(R"({"prompt": "x",)");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_NE(e.message.find("malformed JSON"), std::string::npos);
  EXPECT_EQ(err("[1,2]").http_status, 400);
}

TEST(OpenAiRequest, WrongTypesNameTheField) {
  struct Case { const char* body; const char* param; };
  for (const Case& c : std::initializer_list<Case>{
           {R"({"prompt":"x","max_tokens":"10"})", "max_tokens"},
           {R"({"prompt":"x","temperature":"hot"})", "temperature"},
           {R"({"prompt":"x","stream":1})", "stream"},
           {R"({"prompt":"x","n":1.5})", "n"},
           {R"({"prompt":"x","stop":[1]})", "stop"},
           {R"({"prompt":"x","logprobs":true})", "logprobs"},
           {R"({"prompt":"x","model":3})", "model"},
           {R"({"prompt":{"a":1}})", "prompt"},
           {R"({"prompt":"x","seed":"s"})", "seed"},
       }) {
    ApiError e = err(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error");
  }
  EXPECT_EQ(err(R"({"messages":"hi"})", Endpoint::kChatCompletions).param, "messages");
  EXPECT_EQ(err(R"({"messages":[{"role":"user","content":5}]})", Endpoint::kChatCompletions).param,
            "messages[0].content");
}

TEST(OpenAiRequest, OutOfRangeValues) {
  struct Case { const char* body; const char* param; };
  for (const Case& c : std::initializer_list<Case>{
           {R"({"prompt":"x","temperature":-0.1})", "temperature"},
           {R"({"prompt":"x","top_p":0})", "top_p"},
           {R"({"prompt":"x","top_p":1.01})", "top_p"},
           {R"({"prompt":"x","n":0})", "n"},
           {R"({"prompt":"x","n":65})", "n"},
           {R"({"prompt":"x","max_tokens":0})", "max_tokens"},
           {R"({"prompt":"x","min_p":1.5})", "min_p"},
           {R"({"prompt":"x","frequency_penalty":2.5})", "frequency_penalty"},
           {R"({"prompt":"x","presence_penalty":-3})", "presence_penalty"},
           {R"({"prompt":"x","repetition_penalty":0})", "repetition_penalty"},
           {R"({"prompt":"x","logprobs":21})", "logprobs"},
           {R"({"prompt":"x","top_k":-2})", "top_k"},
           {R"({"prompt":""})", "prompt"},
           {R"({"prompt":"x","stream_options":{"include_usage":true}})", "stream_options"},
       }) {
    ApiError e = err(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
  }
  EXPECT_EQ(err(R"({"messages":[]})", Endpoint::kChatCompletions).param, "messages");
  EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", Endpoint::kChatCompletions).param,
            "top_logprobs");
  EXPECT_EQ(err(R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})",
                Endpoint::kChatCompletions)
                .param,
            "max_completion_tokens");
}

TEST(OpenAiRequest, NumbersBeyondADoubleAre400sNamingTheField) {
  // nlohmann throws out_of_range.406 for these; it once escaped the handler and aborted the server.
  struct Case { const char* body; Endpoint endpoint; const char* param; };
  for (const Case& c : std::initializer_list<Case>{
           {R"({"prompt":"hi","temperature":1e400})", Endpoint::kCompletions, "temperature"},
           {R"({"prompt":"hi","top_p":1e999})", Endpoint::kCompletions, "top_p"},
           {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":-1e400})", Endpoint::kChatCompletions,
            "max_tokens"},
           {R"({"prompt":"hi","stream_options":{"include_usage":1e400}})", Endpoint::kCompletions,
            "stream_options.include_usage"},
           {R"({"prompt":"hi","stop":["a", 1e400]})", Endpoint::kCompletions, "stop"},
       }) {
    ApiError e = err(c.body, c.endpoint);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.message.rfind("'" + std::string(c.param) + "' is out of range: number overflow", 0), 0u)
        << e.message;
  }
  ApiError top = err("1e400");
  EXPECT_EQ(top.param, "");
  EXPECT_EQ(top.message.rfind("a number in the request body is out of range", 0), 0u) << top.message;
  // A syntax error after a key names that key; the detail of nlohmann's message is kept.
  ApiError syntax = err(R"({"prompt":"x","n":})");
  EXPECT_EQ(syntax.param, "n");
  EXPECT_EQ(syntax.message,
            "malformed JSON in the request body: parse error at line 1, column 19: syntax error while parsing value - "
            "unexpected '}'; expected '[', '{', or a literal");
  // Large but finite numbers are values, checked by range like any other.
  EXPECT_EQ(err(R"({"prompt":"hi","temperature":1e300})").param, "temperature");
  EXPECT_EQ(err(R"({"prompt":"hi","max_tokens":1e300})").param, "max_tokens");
}

TEST(OpenAiRequest, ErrorJsonShape) {
  ApiError e = bad_request("'n' must be between 1 and 64, got 0", "n");
  EXPECT_EQ(dump_json(e.to_json()),
            R"({"error":{"code":null,"message":"'n' must be between 1 and 64, got 0","param":"n","type":"invalid_request_error"}})");
}

}  // namespace
}  // namespace ecoserve::server
