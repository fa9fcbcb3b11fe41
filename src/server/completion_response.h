// CompletionJob: the response state of one /v1/completions or
// /v1/chat/completions request (its n choices, their incremental text and
// logprobs), and the OpenAI-shaped JSON built from it: streaming chunks, the
// usage object, the final non-streaming body. Plain state + pure formatting,
// no I/O; one job belongs to one connection (not thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/ids.h"
#include "base/instance_types.h"
#include "model/tokenizer.h"
#include "server/text_stream.h"

namespace ecoserve::server {

// One choice of a generation request.
struct CompletionChoice {
  RequestId id;
  std::unique_ptr<TextStream> text;
  bool done = false;
  std::string finish_reason;
  bool has_first = false;
  TimePoint first_token_time;
  TimePoint last_token_time;
  // Logprobs (non-streaming: accumulated; streaming: per chunk).
  nlohmann::json lp_tokens = nlohmann::json::array(), lp_token_logprobs = nlohmann::json::array(),
                 lp_top = nlohmann::json::array(), lp_offsets = nlohmann::json::array(),
                 lp_content = nlohmann::json::array();
};

struct CompletionJob {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::string id;        // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;   // Unix seconds
  std::string model;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  TimePoint arrival;
  uint64_t base_id = 0;  // choice i has RequestId(base_id + i)
  std::vector<CompletionChoice> choices;
  int32_t remaining = 0;  // choices not done yet
  bool responded = false; // final response enqueued (or abandoned)
};

// One streaming chunk for choice `index`: `delta_or_text` is the chat delta
// object or the completion text.
nlohmann::json chunk_json(const CompletionJob& job, int32_t index, const nlohmann::json& delta_or_text,
                          const nlohmann::json& logprobs, const nlohmann::json& finish_reason);
// {"prompt_tokens", "completion_tokens", "total_tokens"[, "prompt_tokens_details"]}.
nlohmann::json usage_json(const CompletionJob& job);
// The last streaming chunk when stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const CompletionJob& job);
// Records the token of `ev` (and its alternatives) in the choice's logprobs.
void add_logprobs(const model::Tokenizer& tok, const CompletionJob& job, CompletionChoice& c,
                  const instance::TokenEvent& ev, size_t text_offset);
// The logprobs gathered since the last call (null when not requested), and clears them.
nlohmann::json take_logprobs(const CompletionJob& job, CompletionChoice& c);
// The non-streaming response body (consumes the choices' logprobs).
nlohmann::json final_response_json(CompletionJob& job);

}  // namespace ecoserve::server
