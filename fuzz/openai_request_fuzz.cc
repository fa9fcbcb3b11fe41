// Fuzz target: server::parse_completion_request on arbitrary request bodies, for
// both endpoints. It must never throw (an exception out of it would end the
// server) and must answer either a request within the documented limits or a
// 400 whose JSON body can be sent (valid JSON even when the body held bad UTF-8).
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace {

using ecoserve::server::ApiError;
using ecoserve::server::CompletionRequest;
using ecoserve::server::Endpoint;

void check_error(const ApiError& e) {
  FUZZ_CHECK(e.http_status == 400, e.message);
  FUZZ_CHECK(!e.message.empty());
  FUZZ_CHECK(e.type == "invalid_request_error", e.type);
  const std::string wire = ecoserve::server::dump_json(e.to_json());
  const nlohmann::json back = nlohmann::json::parse(wire, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!back.is_discarded() && back.contains("error"), wire);
}

void check_request(const CompletionRequest& r, Endpoint endpoint) {
  using ecoserve::server::kMaxChoices;
  using ecoserve::server::kMaxStopStrings;
  using ecoserve::server::kMaxTopLogprobs;
  FUZZ_CHECK(r.endpoint == endpoint);
  FUZZ_CHECK(r.n >= 1 && r.n <= kMaxChoices);
  FUZZ_CHECK(r.stop.size() <= static_cast<size_t>(kMaxStopStrings));
  for (const std::string& s : r.stop) FUZZ_CHECK(!s.empty());
  FUZZ_CHECK(!r.max_tokens || *r.max_tokens >= 1);
  FUZZ_CHECK(r.top_logprobs >= 0 && r.top_logprobs <= kMaxTopLogprobs);
  if (endpoint == Endpoint::kChatCompletions) {
    FUZZ_CHECK(!r.messages.empty());
    for (const auto& m : r.messages) FUZZ_CHECK(!m.role.empty() && m.role != "developer", m.role);
    FUZZ_CHECK(r.top_logprobs == 0 || r.logprobs);
  } else {
    FUZZ_CHECK(r.messages.empty());
    FUZZ_CHECK(r.prompt_is_tokens ? r.prompt.empty() : !r.prompt.empty());
    FUZZ_CHECK(r.prompt_is_tokens || r.prompt_tokens.empty());
    for (int32_t t : r.prompt_tokens) FUZZ_CHECK(t >= 0);
    FUZZ_CHECK(!r.echo);
  }
  const auto& s = r.sampling;
  FUZZ_CHECK(std::isfinite(s.temperature) && s.temperature >= 0 && s.temperature <= 100);
  FUZZ_CHECK(s.top_p > 0 && s.top_p <= 1);
  FUZZ_CHECK(s.top_k >= 0);
  FUZZ_CHECK(s.min_p >= 0 && s.min_p <= 1);
  FUZZ_CHECK(s.frequency_penalty >= -2 && s.frequency_penalty <= 2);
  FUZZ_CHECK(s.presence_penalty >= -2 && s.presence_penalty <= 2);
  FUZZ_CHECK(s.repetition_penalty > 0 && s.repetition_penalty <= 10);
  for (int32_t t : s.stop_token_ids) FUZZ_CHECK(t >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (Endpoint endpoint : {Endpoint::kCompletions, Endpoint::kChatCompletions}) {
    auto parsed = ecoserve::server::parse_completion_request(body, endpoint);
    if (const auto* e = std::get_if<ApiError>(&parsed)) {
      check_error(*e);
    } else {
      check_request(std::get<CompletionRequest>(parsed), endpoint);
    }
  }
  return 0;
}
