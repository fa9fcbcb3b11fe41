// Fuzz target: the server's request path as far as it runs without a socket.
// Raw bytes go through Beast's request parser with the server's limits (64 KiB
// of header, 4 MiB of body); each complete message (several when pipelined) is
// routed by server::route_request with and without an API key; a generation
// route's body is parsed by parse_completion_request, the prompt's byte length
// checked against a context by check_prompt_bytes, and a chat's messages
// rendered with every chat template. Nothing may throw, and every rejection
// must be one the server can send.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/http_route.h"
#include "server/openai_request.h"

namespace {

namespace http = boost::beast::http;
using namespace ecoserve::server;

constexpr std::string_view kApiKey = "sk-fuzz-key";
constexpr int kMaxPipelined = 8;

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

void check_sendable(const ApiError& e) {
  const std::string wire = dump_json(e.to_json());
  FUZZ_CHECK(!nlohmann::json::parse(wire, nullptr, false).is_discarded(), wire);
}

// The prompt-length gate before tokenizing: rejects exactly when even the
// longest tokens could not fit the prompt and one completion token in the context.
void check_prompt_gate(int64_t bytes, std::string_view param) {
  struct Limits {
    int32_t max_context;
    int32_t max_token_bytes;
  };
  for (Limits l : {Limits{2048, 16}, Limits{8, 4}, Limits{1, 1}, Limits{4096, 0}}) {
    const auto e = check_prompt_bytes(bytes, l.max_context, l.max_token_bytes, param);
    const int64_t per_token = l.max_token_bytes < 1 ? 1 : l.max_token_bytes;
    const bool fits = (bytes + per_token - 1) / per_token <= static_cast<int64_t>(l.max_context) - 1;
    FUZZ_CHECK(e.has_value() != fits);
    if (e) {
      FUZZ_CHECK(e->http_status == 400 && e->param == param, e->message);
      check_sendable(*e);
    }
  }
}

void handle_generation(Endpoint endpoint, const std::string& body) {
  auto parsed = parse_completion_request(body, endpoint);
  if (const auto* e = std::get_if<ApiError>(&parsed)) {
    FUZZ_CHECK(e->http_status == 400, e->message);
    check_sendable(*e);
    return;
  }
  const CompletionRequest& r = std::get<CompletionRequest>(parsed);
  if (endpoint == Endpoint::kCompletions) {
    if (!r.prompt_is_tokens) check_prompt_gate(static_cast<int64_t>(r.prompt.size()), "prompt");
    return;
  }
  for (ChatTemplateKind kind : {ChatTemplateKind::kLlama2, ChatTemplateKind::kLlama3, ChatTemplateKind::kChatml,
                                ChatTemplateKind::kZephyr, ChatTemplateKind::kMistral}) {
    const std::string prompt = render_chat(kind, r.messages, "<s>", "</s>");
    FUZZ_CHECK(!prompt.empty());
    check_prompt_gate(static_cast<int64_t>(prompt.size()), "messages");
  }
}

void handle(const http::request<http::string_body>& req) {
  std::optional<std::string_view> authorization;
  if (auto it = req.find(http::field::authorization); it != req.end()) authorization = sv(it->value());
  const std::string_view method = sv(req.method_string());
  const std::string_view target = sv(req.target());

  const auto open = route_request(method, target, authorization, "");
  const auto keyed = route_request(method, target, authorization, kApiKey);
  if (const auto* reject = std::get_if<RouteRejection>(&open)) {
    const int status = reject->error.http_status;
    // 404 (no route), 405 (wrong method), or 400 for an instance name that does not
    // decode in DELETE /admin/instances/NAME.
    const bool bad_name = status == 400 && reject->error.code == "invalid_instance_name" &&
                          target.starts_with("/admin/instances/");
    FUZZ_CHECK(status == 404 || status == 405 || bad_name, reject->error.message);
    FUZZ_CHECK((status == 405) == reject->extra_headers.starts_with("Allow: "), reject->extra_headers);
    check_sendable(reject->error);
    // A key only adds 401s: the same rejection with one.
    const auto* keyed_reject = std::get_if<RouteRejection>(&keyed);
    FUZZ_CHECK(keyed_reject && keyed_reject->error.http_status == status);
    return;
  }
  const Route route = std::get<Route>(open);
  FUZZ_CHECK(route.head_only == (method == "HEAD"));
  if (const auto* reject = std::get_if<RouteRejection>(&keyed)) {
    FUZZ_CHECK(reject->error.http_status == 401, reject->error.message);
    FUZZ_CHECK(reject->extra_headers == "WWW-Authenticate: Bearer\r\n", reject->extra_headers);
    FUZZ_CHECK(authorization != std::optional<std::string_view>("Bearer sk-fuzz-key"));
    check_sendable(reject->error);
  } else {
    const Route keyed_route = std::get<Route>(keyed);
    FUZZ_CHECK(keyed_route.kind == route.kind && keyed_route.head_only == route.head_only);
    // Only /health and /metrics are open without the key.
    if (route.kind != RouteKind::kHealth && route.kind != RouteKind::kMetrics) {
      FUZZ_CHECK(authorization == std::optional<std::string_view>("Bearer sk-fuzz-key"));
    }
  }
  if (route.generation()) {
    FUZZ_CHECK(method == "POST");
    handle_generation(route.endpoint(), req.body());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  // Like a connection: messages are read one after the other from the same bytes.
  for (int i = 0; i < kMaxPipelined && !rest.empty(); ++i) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(64 * 1024);
    parser.body_limit(4u << 20);
    parser.eager(true);
    boost::beast::error_code ec;
    while (!rest.empty() && !parser.is_done()) {
      const std::size_t n = parser.put(boost::asio::buffer(rest.data(), rest.size()), ec);
      FUZZ_CHECK(n <= rest.size());
      rest.remove_prefix(n);
      if (ec == http::error::need_more) {
        ec = {};
        if (n == 0) break;  // the rest of the message never arrives
        continue;
      }
      if (ec || n == 0) break;
    }
    if (ec || !parser.is_done()) return 0;  // the server answers 400/413 or waits, then closes
    const http::request<http::string_body>& req = parser.get();
    handle(req);
    if (!req.keep_alive()) break;
  }
  return 0;
}
