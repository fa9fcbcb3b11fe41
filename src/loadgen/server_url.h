// ServerUrl: where `ecoserve bench` sends requests. Only plain http:// is supported
// (no TLS). "http://host:port[/prefix]"; the OpenAI paths are appended to the prefix,
// and a prefix that already ends in "/v1" is not doubled.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace ecoserve::loadgen {

enum class Endpoint { kCompletions, kChat };
StatusOr<Endpoint> parse_endpoint(std::string_view name);
std::string_view endpoint_name(Endpoint e);

struct ServerUrl {
  std::string host;
  std::string port = "80";
  std::string prefix;  // without trailing '/'

  static StatusOr<ServerUrl> parse(std::string_view url);
  // "/v1/completions" or "/v1/chat/completions" under the prefix.
  std::string target(Endpoint endpoint) const;
  std::string to_string() const { return "http://" + host + ":" + port + prefix; }
};

}  // namespace ecoserve::loadgen
