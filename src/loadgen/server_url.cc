#include "loadgen/server_url.h"

#include <algorithm>

namespace ecoserve::loadgen {

StatusOr<Endpoint> parse_endpoint(std::string_view name) {
  if (name == "completions") return Endpoint::kCompletions;
  if (name == "chat" || name == "chat-completions") return Endpoint::kChat;
  return invalid_argument_error("unknown --endpoint '{}': expected completions or chat", name);
}

std::string_view endpoint_name(Endpoint e) { return e == Endpoint::kChat ? "chat" : "completions"; }

StatusOr<ServerUrl> ServerUrl::parse(std::string_view url) {
  constexpr std::string_view kHttp = "http://";
  if (url.rfind("https://", 0) == 0)
    return invalid_argument_error("--url '{}': https is not supported (use http://)", url);
  if (url.rfind(kHttp, 0) != 0)
    return invalid_argument_error("--url '{}': must start with http://", url);
  std::string_view rest = url.substr(kHttp.size());
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.empty()) return invalid_argument_error("--url '{}': missing host", url);
  ServerUrl u;
  if (authority.front() == '[') {  // [ipv6]:port
    auto close = authority.find(']');
    if (close == std::string_view::npos) return invalid_argument_error("--url '{}': bad IPv6 host", url);
    u.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty()) {
      if (authority.front() != ':') return invalid_argument_error("--url '{}': bad port", url);
      u.port = std::string(authority.substr(1));
    }
  } else {
    auto colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
  }
  if (u.host.empty()) return invalid_argument_error("--url '{}': missing host", url);
  if (u.port.empty() || !std::all_of(u.port.begin(), u.port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      u.port.size() > 5 || std::stoi(u.port) > 65535 || std::stoi(u.port) == 0)
    return invalid_argument_error("--url '{}': bad port '{}'", url, u.port);
  std::string p(path);
  while (!p.empty() && p.back() == '/') p.pop_back();
  u.prefix = p;
  return u;
}

std::string ServerUrl::target(Endpoint endpoint) const {
  std::string base = prefix;
  if (base.size() < 3 || base.compare(base.size() - 3, 3, "/v1") != 0) base += "/v1";
  return base + (endpoint == Endpoint::kChat ? "/chat/completions" : "/completions");
}

}  // namespace ecoserve::loadgen
