#include "server/http_route.h"

#include <gtest/gtest.h>

namespace ecoserve::server {
namespace {

Route routed(std::string_view method, std::string_view target, std::optional<std::string_view> auth = std::nullopt,
             std::string_view key = "") {
  auto r = route_request(method, target, auth, key);
  if (auto* rej = std::get_if<RouteRejection>(&r)) {
    ADD_FAILURE() << method << " " << target << " rejected: " << rej->error.http_status << " " << rej->error.message;
    return {};
  }
  return std::get<Route>(r);
}

RouteRejection rejected(std::string_view method, std::string_view target,
                        std::optional<std::string_view> auth = std::nullopt, std::string_view key = "") {
  auto r = route_request(method, target, auth, key);
  if (auto* rej = std::get_if<RouteRejection>(&r)) return *rej;
  ADD_FAILURE() << method << " " << target << " was routed";
  return {};
}

TEST(HttpRoute, KnownRoutesAndQueryStrings) {
  EXPECT_EQ(routed("POST", "/v1/completions").kind, RouteKind::kCompletions);
  EXPECT_EQ(routed("POST", "/v1/chat/completions?x=1").kind, RouteKind::kChatCompletions);
  EXPECT_TRUE(routed("POST", "/v1/chat/completions").generation());
  EXPECT_EQ(routed("POST", "/v1/chat/completions").endpoint(), Endpoint::kChatCompletions);
  EXPECT_EQ(routed("GET", "/v1/models").kind, RouteKind::kModels);
  EXPECT_FALSE(routed("GET", "/v1/models").generation());
  EXPECT_EQ(routed("GET", "/metrics").kind, RouteKind::kMetrics);
  Route head = routed("HEAD", "/health");
  EXPECT_EQ(head.kind, RouteKind::kHealth);
  EXPECT_TRUE(head.head_only);
  EXPECT_FALSE(routed("GET", "/health").head_only);
}

TEST(HttpRoute, UnknownPathIs404WithPrintableMessage) {
  RouteRejection r = rejected("POST", "/v1/nope");
  EXPECT_EQ(r.error.http_status, 404);
  EXPECT_EQ(r.error.code, "not_found");
  EXPECT_EQ(r.error.message, "no route for POST /v1/nope");
  EXPECT_EQ(r.extra_headers, "");
  // Control bytes are never echoed back; long paths are cut.
  RouteRejection ctl = rejected("GET", std::string("/a\x01\x7f", 4) + std::string(300, 'b'));
  EXPECT_EQ(ctl.error.message.substr(0, 20), "no route for GET /a?");
  EXPECT_EQ(ctl.error.message.size(), std::string("no route for GET ").size() + 200 + 3);
  EXPECT_EQ(rejected("GET", "/v1/completions/").error.http_status, 404);  // no prefix matching
}

TEST(HttpRoute, WrongMethodIs405WithAllow) {
  RouteRejection get = rejected("GET", "/v1/completions");
  EXPECT_EQ(get.error.http_status, 405);
  EXPECT_EQ(get.error.code, "method_not_allowed");
  EXPECT_EQ(get.extra_headers, "Allow: POST\r\n");
  RouteRejection post = rejected("POST", "/health");
  EXPECT_EQ(post.error.http_status, 405);
  EXPECT_EQ(post.extra_headers, "Allow: GET, HEAD\r\n");
  EXPECT_EQ(rejected("DELETE", "/v1/models").error.http_status, 405);
}

TEST(HttpRoute, ApiKeyGuardsOnlyV1) {
  RouteRejection missing = rejected("POST", "/v1/completions", std::nullopt, "sekret");
  EXPECT_EQ(missing.error.http_status, 401);
  EXPECT_EQ(missing.error.code, "invalid_api_key");
  EXPECT_NE(missing.error.message.find("missing API key"), std::string::npos);
  EXPECT_EQ(missing.extra_headers, "WWW-Authenticate: Bearer\r\n");
  RouteRejection wrong = rejected("GET", "/v1/models", "Bearer other", "sekret");
  EXPECT_EQ(wrong.error.http_status, 401);
  EXPECT_EQ(wrong.error.message, "incorrect API key provided");
  EXPECT_EQ(rejected("POST", "/v1/completions", "sekret", "sekret").error.http_status, 401);  // no "Bearer "
  EXPECT_EQ(routed("POST", "/v1/completions", "Bearer sekret", "sekret").kind, RouteKind::kCompletions);
  EXPECT_EQ(routed("GET", "/health", std::nullopt, "sekret").kind, RouteKind::kHealth);
  EXPECT_EQ(routed("GET", "/metrics", std::nullopt, "sekret").kind, RouteKind::kMetrics);
  EXPECT_EQ(rejected("GET", "/admin/cluster", std::nullopt, "sekret").error.http_status, 401);
  EXPECT_EQ(routed("GET", "/admin/cluster", "Bearer sekret", "sekret").kind, RouteKind::kAdminCluster);
  // 404 and 405 are decided before the key: probing paths tells nothing more.
  EXPECT_EQ(rejected("GET", "/v1/completions", std::nullopt, "sekret").error.http_status, 405);
}

TEST(HttpRoute, PromptBytesAgainstTheContext) {
  // 512-token context, tokens of at most 4 bytes: 511 tokens = 2044 bytes may fit.
  EXPECT_FALSE(check_prompt_bytes(0, 512, 4, "prompt"));
  EXPECT_FALSE(check_prompt_bytes(2044, 512, 4, "prompt"));
  auto over = check_prompt_bytes(2045, 512, 4, "prompt");
  ASSERT_TRUE(over);
  EXPECT_EQ(over->http_status, 400);
  EXPECT_EQ(over->param, "prompt");
  EXPECT_EQ(over->message,
            "This model's maximum context length is 512 tokens. However, the prompt is 2045 bytes long, which "
            "encodes to at least 512 tokens (no token covers more than 4 bytes). Please reduce the length of the "
            "prompt.");
  auto chat = check_prompt_bytes(int64_t{4} << 20, 2048, 16, "messages");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->param, "messages");
  EXPECT_NE(chat->message.find("4194304 bytes long"), std::string::npos);
  EXPECT_TRUE(check_prompt_bytes(1, 1, 4, "prompt"));   // no room for a completion token at all
  EXPECT_FALSE(check_prompt_bytes(10, 11, 0, "prompt"));  // max_token_bytes < 1 counts as 1
  EXPECT_TRUE(check_prompt_bytes(11, 11, 0, "prompt"));
}

}  // namespace
}  // namespace ecoserve::server

namespace ecoserve::server {
namespace {

TEST(HttpRoute, AdminInstancesAddAndRemoveByDecodedName) {
  EXPECT_EQ(routed("POST", "/admin/instances").kind, RouteKind::kAdminAddInstance);
  const Route del = routed("DELETE", "/admin/instances/tcp%3A%2F%2F127.0.0.1%3A5555");
  EXPECT_EQ(del.kind, RouteKind::kAdminRemoveInstance);
  EXPECT_EQ(del.name, "tcp://127.0.0.1:5555");
  EXPECT_EQ(routed("DELETE", "/admin/instances/3?now=1").name, "3");
  EXPECT_EQ(rejected("GET", "/admin/instances/3").error.http_status, 405);
  EXPECT_EQ(rejected("GET", "/admin/instances/3").extra_headers, "Allow: DELETE\r\n");
  EXPECT_EQ(rejected("DELETE", "/admin/instances/").error.http_status, 400);
  EXPECT_EQ(rejected("DELETE", "/admin/instances/%4").error.http_status, 400);
  EXPECT_EQ(rejected("DELETE", "/admin/instances/%0a").error.http_status, 400);
  // Guarded by the API key like every /admin route.
  EXPECT_EQ(rejected("POST", "/admin/instances", std::nullopt, "k").error.http_status, 401);
  EXPECT_EQ(routed("DELETE", "/admin/instances/1", "Bearer k", "k").name, "1");
}

}  // namespace
}  // namespace ecoserve::server
