#include "server/sse.h"

#include <fmt/format.h>

#include "server/api_error.h"

namespace ecoserve::server {

std::string sse_event(const nlohmann::json& payload) { return "data: " + dump_json(payload) + "\n\n"; }

std::string http_chunk(std::string_view data) {
  if (data.empty()) return {};
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

}  // namespace ecoserve::server
