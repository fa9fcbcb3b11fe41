#include "loadgen/sse_parser.h"

#include <gtest/gtest.h>

#include "loadgen/prefix_tree.h"
#include "loadgen/server_url.h"
#include "loadgen/svg_plot.h"

namespace ecoserve::loadgen {
namespace {

TEST(SseParser, EventsSplitAtAnyByte) {
  const std::string body =
      ": comment\r\ndata: {\"a\":1}\r\n\r\ndata: line1\ndata: line2\n\nevent: x\ndata: y\n\n"
      "error: {\"message\":\"boom\"}\n\ndata: [DONE]";
  for (std::size_t step : {1, 2, 3, 7, 1000}) {
    std::vector<SseEvent> got;
    SseParser p([&](const SseEvent& e) { got.push_back(e); });
    for (std::size_t i = 0; i < body.size(); i += step) p.feed(std::string_view(body).substr(i, step));
    p.finish();
    ASSERT_EQ(got.size(), 5u) << step;
    EXPECT_EQ(got[0].data, "{\"a\":1}");
    EXPECT_EQ(got[1].data, "line1\nline2");
    EXPECT_EQ(got[2].type, "x");
    EXPECT_EQ(got[3].type, "error");
    EXPECT_EQ(got[4].data, "[DONE]");
  }
}

TEST(SseParser, OpenAiChunks) {
  auto c = parse_stream_data(R"({"choices":[{"index":0,"text":"Hel"}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text, "Hel");
  c = parse_stream_data(R"({"choices":[{"delta":{"role":"assistant","content":null}}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text, "");
  c = parse_stream_data(R"({"choices":[{"delta":{"content":"lo"}}]})");
  EXPECT_EQ(c->text, "lo");
  c = parse_stream_data(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}})");
  EXPECT_TRUE(c->has_usage);
  EXPECT_EQ(c->prompt_tokens, 12);
  EXPECT_EQ(c->completion_tokens, 34);
  EXPECT_TRUE(parse_stream_data("[DONE]")->done);
  c = parse_stream_data(R"({"error":{"message":"context too long","code":400}})");
  EXPECT_EQ(c->error, "context too long");
  EXPECT_FALSE(parse_stream_data("garbage").ok());
}

TEST(SseParser, UsageCountsAreCheckedNotConverted) {
  // Integral floats and missing/null counts are accepted.
  auto c = parse_stream_data(R"({"usage":{"prompt_tokens":12.0,"completion_tokens":null}})");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->prompt_tokens, 12);
  EXPECT_EQ(c->completion_tokens, 0);
  // 1e185 into int64 was undefined behaviour (found by the fuzzer); a string threw type_error.
  for (const char* bad : {R"({"usage":{"prompt_tokens":1e185}})", R"({"usage":{"completion_tokens":"7"}})",
                          R"({"usage":{"prompt_tokens":-1}})", R"({"usage":{"prompt_tokens":2.5}})",
                          R"({"usage":{"completion_tokens":18446744073709551615}})"}) {
    auto r = parse_stream_data(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("is not a token count"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(parse_stream_data(R"({"usage":{"prompt_tokens":1e185}})").status().message(),
            "stream chunk: usage.prompt_tokens is not a token count: 1e+185");
}

TEST(ServerUrl, ParseAndTargets) {
  auto u = ServerUrl::parse("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->target(Endpoint::kCompletions), "/v1/completions");
  EXPECT_EQ(u->target(Endpoint::kChat), "/v1/chat/completions");
  auto v = ServerUrl::parse("http://host/v1/");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->port, "80");
  EXPECT_EQ(v->target(Endpoint::kCompletions), "/v1/completions");
  EXPECT_FALSE(ServerUrl::parse("https://x").ok());
  EXPECT_FALSE(ServerUrl::parse("localhost:8000").ok());
  EXPECT_FALSE(ServerUrl::parse("http://x:99999").ok());
  EXPECT_FALSE(ServerUrl::parse("http://:80").ok());
}

TEST(PrefixTree, CountsAndPruning) {
  PrefixTree t;
  std::vector<std::int64_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 9}, c = {1, 2, 7}, d = {5};
  for (const auto* s : {&a, &b, &c, &d}) t.insert(*s);
  EXPECT_EQ(t.num_nodes(), 7u);  // 1,2,3,4,9,7,5
  EXPECT_EQ(t.surviving_prefix(a, 2), 3);  // 1,2,3 seen by a and b
  EXPECT_EQ(t.surviving_prefix(c, 2), 2);
  EXPECT_EQ(t.surviving_prefix(c, 3), 2);
  EXPECT_EQ(t.surviving_prefix(a, 4), 0);
  EXPECT_EQ(t.surviving_prefix(d, 2), 0);
  EXPECT_EQ(t.surviving_prefix(d, 1), 1);
}

TEST(SvgPlot, RendersAxesAndSeries) {
  SvgPlot p("TTFT CDF", "ms", "fraction");
  p.add({.name = "ttft", .points = cdf_points({3, 1, 2}), .step = true});
  std::string svg = p.render();
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("TTFT CDF"), std::string::npos);
  EXPECT_NE(svg.find("<path d=\"M"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  auto ticks = nice_ticks(0, 97);
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(ticks.front(), 0);
  EXPECT_EQ(ticks[1], 20);
  EXPECT_EQ(ticks.back(), 100);
}

}  // namespace
}  // namespace ecoserve::loadgen
