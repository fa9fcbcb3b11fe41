// Generator: runs one sequence to completion on a ModelRunner (prefill in chunks,
// then decode), for `ecoserve generate`, profiling and tests.
//
// It allocates the runner's KV blocks with its own kv::BlockAllocator, so it must
// be the runner's only user while generate() runs; blocks are released before
// returning. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/model_runner.h"
#include "base/sampling_params.h"

namespace ecoserve::engine {

struct GenerateOptions {
  SamplingParams sampling;  // max_tokens, stop ids, seed, ...
  int32_t prefill_chunk = 512;      // prompt tokens per forward pass
};

struct GenerateResult {
  std::vector<int32_t> tokens;      // generated ids (without a final end-of-generation token)
  std::string finish_reason;        // "stop" (EOG or stop id), "length", or "callback"
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

class Generator {
 public:
  explicit Generator(ModelRunner& runner) : runner_(runner) {}

  // on_token(id) is called for each generated token as it is produced; returning
  // false stops generation. INVALID_ARGUMENT when the prompt is empty or prompt +
  // max_tokens exceeds the runner's context.
  StatusOr<GenerateResult> generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                    const std::function<bool(int32_t)>& on_token = {});

 private:
  ModelRunner& runner_;
};

}  // namespace ecoserve::engine
