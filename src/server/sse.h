// Server-sent events framing for OpenAI streaming responses, and HTTP/1.1
// chunked transfer-encoding frames that carry them. Pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ecoserve::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// "data: {json}\n\n".
std::string sse_event(const nlohmann::json& payload);
// One HTTP chunk: "<hex size>\r\n<data>\r\n" ("" for empty data: use kLastChunk to end).
std::string http_chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace ecoserve::server
