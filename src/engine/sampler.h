// Sampling one next token from a row of logits.
//
// Order (vLLM's): repetition penalty (prompt + output tokens; logit / p if > 0
// else * p), frequency and presence penalties (output tokens), then greedy when
// temperature == 0, else temperature, top-k, top-p, min-p, and a draw.
// The draw is a pure function of (seed, output index = output_tokens.size()), so
// a request's tokens do not depend on what else is batched with it.
// Logprobs are log-softmax of the logits after penalties, before temperature and
// truncation (the model's distribution as the request sees it); they are computed
// only when params.logprobs or params.top_logprobs > 0 (else logprob is 0), and
// top_logprobs is capped at 20. Penalty-list ids outside the vocabulary are ignored.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/sampling_params.h"

namespace ecoserve::engine {

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;                    // of `token`
  std::vector<TokenLogprob> top_logprobs;  // params.top_logprobs most likely, descending
};

// `logits` is modified in place (penalties, temperature).
SampleResult sample_token(std::span<float> logits, const SamplingParams& params,
                          std::span<const int32_t> prompt_tokens,
                          std::span<const int32_t> output_tokens, uint64_t seed);

// Uniform double in [0, 1) from (seed, index): splitmix64-based, platform-independent.
double uniform_from(uint64_t seed, uint64_t index);

}  // namespace ecoserve::engine
