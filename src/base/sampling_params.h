// Per-request sampling parameters (OpenAI / vLLM semantics) and the logprob of a
// token. Plain data shared by policy/ (which carries them) and engine/ (which samples).
#pragma once

#include <cstdint>
#include <vector>

namespace ecoserve {

struct SamplingParams {
  float temperature = 1.0f;          // 0 = greedy (argmax)
  int32_t top_k = 0;                 // 0 = off
  float top_p = 1.0f;                // 1 = off
  float min_p = 0.0f;                // 0 = off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;   // 1 = off; over prompt and output tokens (CTRL-style)
  float frequency_penalty = 0.0f;    // over output tokens: logit -= f * count
  float presence_penalty = 0.0f;     // over output tokens: logit -= p * (count > 0)
  std::uint64_t seed = 0;            // with the token's output index, fixes the draw
  bool has_seed = false;             // false: the instance picks a random seed at admission
  int32_t top_logprobs = 0;          // how many alternatives to return (0..20)
  bool logprobs = false;             // return the chosen token's logprob
  int32_t max_tokens = 16;           // generated tokens at most
  std::vector<int32_t> stop_token_ids;  // besides the model's end-of-generation tokens
  bool ignore_eos = false;
};

// One token and its log-probability (a sampled token's alternatives).
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

}  // namespace ecoserve
