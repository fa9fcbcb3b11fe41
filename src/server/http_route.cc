#include "server/http_route.h"

#include <optional>

#include <fmt/format.h>

namespace ecoserve::server {

namespace {

struct RouteEntry {
  std::string_view path;
  RouteKind kind;
  bool post;  // else GET (and HEAD)
  bool del = false;  // DELETE only
};

constexpr RouteEntry kRoutes[] = {{"/v1/completions", RouteKind::kCompletions, true},
                                  {"/v1/chat/completions", RouteKind::kChatCompletions, true},
                                  {"/v1/models", RouteKind::kModels, false},
                                  {"/health", RouteKind::kHealth, false},
                                  {"/metrics", RouteKind::kMetrics, false},
                                  {"/admin/cluster", RouteKind::kAdminCluster, false},
                                  {"/admin/timeline", RouteKind::kAdminTimeline, false},
                                  {"/admin/instances", RouteKind::kAdminAddInstance, true}};
constexpr RouteEntry kRemoveInstance = {"/admin/instances/", RouteKind::kAdminRemoveInstance, false, true};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded; nullopt for a broken escape or a control byte.
std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
    out += c;
  }
  return out;
}

ApiError error(int status, std::string message, std::string code) {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = "invalid_request_error";
  e.code = std::move(code);
  return e;
}

// Shown back to the client in messages: printable ASCII, at most 200 bytes.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 200) out += "...";
  return out;
}

}  // namespace

std::variant<Route, RouteRejection> route_request(std::string_view method, std::string_view target,
                                                  std::optional<std::string_view> authorization,
                                                  std::string_view api_key) {
  const std::string_view path = target.substr(0, target.find('?'));
  const RouteEntry* entry = nullptr;
  for (const RouteEntry& r : kRoutes) {
    if (r.path == path) entry = &r;
  }
  std::string name;
  if (!entry && path.starts_with(kRemoveInstance.path)) {
    entry = &kRemoveInstance;
    std::optional<std::string> decoded = percent_decode(path.substr(kRemoveInstance.path.size()));
    if (!decoded || decoded->empty()) {
      return RouteRejection{error(400, fmt::format("bad instance name in {}", printable(path)), "invalid_instance_name"),
                            ""};
    }
    name = std::move(*decoded);
  }
  if (!entry) {
    return RouteRejection{error(404, fmt::format("no route for {} {}", printable(method), printable(path)), "not_found"),
                          ""};
  }
  const bool ok = entry->del ? method == "DELETE" : entry->post ? method == "POST" : (method == "GET" || method == "HEAD");
  if (!ok) {
    const std::string allow = entry->del ? "DELETE" : entry->post ? "POST" : "GET, HEAD";
    return RouteRejection{error(405,
                                fmt::format("method {} is not allowed on {}; use {}", printable(method), path, allow),
                                "method_not_allowed"),
                          "Allow: " + allow + "\r\n"};
  }
  if ((path.starts_with("/v1/") || path.starts_with("/admin/")) && !api_key.empty()) {
    const std::string expected = "Bearer " + std::string(api_key);
    if (!authorization || *authorization != expected) {
      return RouteRejection{error(401,
                                  authorization ? "incorrect API key provided"
                                                : "missing API key: send the header 'Authorization: Bearer <key>'",
                                  "invalid_api_key"),
                            "WWW-Authenticate: Bearer\r\n"};
    }
  }
  return Route{entry->kind, method == "HEAD", std::move(name)};
}

std::optional<ApiError> check_prompt_bytes(int64_t prompt_bytes, int32_t max_context, int32_t max_token_bytes,
                                           std::string_view param) {
  // At least ceil(bytes / max_token_bytes) tokens, and one completion token must still fit.
  const int64_t per_token = std::max<int64_t>(1, max_token_bytes);
  const int64_t min_tokens = (prompt_bytes + per_token - 1) / per_token;
  if (min_tokens <= static_cast<int64_t>(max_context) - 1) return std::nullopt;
  return bad_request(fmt::format("This model's maximum context length is {} tokens. However, the {} is {} bytes long, "
                                 "which encodes to at least {} tokens (no token covers more than {} bytes). Please "
                                 "reduce the length of the {}.",
                                 max_context, param, prompt_bytes, min_tokens, per_token, param),
                     std::string(param));
}

}  // namespace ecoserve::server
