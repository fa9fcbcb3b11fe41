// Routing of one parsed HTTP request before any handler runs: the path, the
// method and the API key decide which handler answers, or which error does.
// Pure functions on strings (no socket, no Beast types), so the request path
// can be unit-tested and fuzzed without a connection (fuzz/http_request_fuzz.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace ecoserve::server {

enum class RouteKind {
  kCompletions,
  kChatCompletions,
  kModels,
  kHealth,
  kMetrics,
  kAdminCluster,
  kAdminTimeline,
  kAdminAddInstance,     // POST /admin/instances
  kAdminRemoveInstance,  // DELETE /admin/instances/{name}
};

struct Route {
  RouteKind kind = RouteKind::kHealth;
  bool head_only = false;  // HEAD on a GET route: answer headers only
  std::string name;        // kAdminRemoveInstance: the instance, percent-decoded
  bool generation() const { return kind == RouteKind::kCompletions || kind == RouteKind::kChatCompletions; }
  Endpoint endpoint() const {
    return kind == RouteKind::kChatCompletions ? Endpoint::kChatCompletions : Endpoint::kCompletions;
  }
};

// An answer that ends the request before a handler: the error and any extra
// header lines ("Name: value\r\n"), e.g. Allow on 405 or WWW-Authenticate on 401.
struct RouteRejection {
  ApiError error;
  std::string extra_headers;
};

// `method` as sent ("GET", "POST", ...), `target` the request target (query
// ignored), `authorization` the Authorization header if any, `api_key` the
// server's key ("" = none required). Unknown path -> 404; wrong method -> 405
// with Allow; /v1/* and /admin/* without the right "Bearer <key>" -> 401.
// /admin/instances/{name}: DELETE only; {name} is percent-decoded (a remote
// instance's name is its address: tcp%3A%2F%2FHOST%3APORT); a bad escape or an
// empty name is a 400.
std::variant<Route, RouteRejection> route_request(std::string_view method, std::string_view target,
                                                  std::optional<std::string_view> authorization,
                                                  std::string_view api_key);

// Checks, before tokenizing, that a prompt of `prompt_bytes` bytes can fit in
// `max_context` tokens: no token covers more than `max_token_bytes` input bytes,
// so a longer prompt needs more than max_context - 1 tokens. 400 naming `param`.
std::optional<ApiError> check_prompt_bytes(int64_t prompt_bytes, int32_t max_context, int32_t max_token_bytes,
                                           std::string_view param);

}  // namespace ecoserve::server
