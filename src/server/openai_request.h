// Parsing and validation of OpenAI /v1/completions and /v1/chat/completions
// request bodies into a typed CompletionRequest. Pure functions (no model, no
// I/O): every malformed, mistyped or out-of-range field gives an ApiError (400)
// naming the field. Checks that need the model (served name, context length)
// are done by the server afterwards.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/sampling_params.h"
#include "server/api_error.h"
#include "server/chat_template.h"

namespace ecoserve::server {

enum class Endpoint { kCompletions, kChatCompletions };

inline constexpr int32_t kMaxChoices = 64;       // largest accepted `n`
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr int32_t kMaxStopStrings = 16;

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;                       // "" when absent
  // Completions: the prompt as text, or as token ids when given as integers.
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  // Chat: the conversation.
  std::vector<ChatMessage> messages;

  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  int32_t n = 1;
  std::vector<std::string> stop;           // stop strings (never emitted)
  std::optional<int32_t> max_tokens;       // max_tokens / max_completion_tokens; nullopt = default
  bool has_seed = false;
  int64_t seed = 0;
  bool logprobs = false;                   // return logprobs of chosen tokens
  int32_t top_logprobs = 0;                // alternatives per token
  // vLLM's field: a lower value is served earlier (default 0). Under llumnix a
  // negative value is the "high" class (headroom, migrated last).
  int32_t priority = 0;
  // Extensions: this request's SLOs in ms (0 = the server's --slo-ttft-ms /
  // --slo-tpot-ms), read by the time-aware strategies (padg).
  float slo_ttft_ms = 0.0f;
  float slo_tpot_ms = 0.0f;
  bool echo = false;
  // Sampling fields (max_tokens, seed, logprobs are filled in by the server per choice).
  SamplingParams sampling;
};

// Parses `body` (JSON text) for `endpoint`. On error returns the ApiError (400).
std::variant<CompletionRequest, ApiError> parse_completion_request(std::string_view body, Endpoint endpoint);

}  // namespace ecoserve::server
