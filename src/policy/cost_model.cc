#include "policy/cost_model.h"

#include <algorithm>

namespace ecoserve::policy {

double CostModel::prefill_seconds(int32_t tokens, int32_t cached_tokens, int32_t chunk_size) const {
  int32_t pos = std::clamp(cached_tokens, 0, std::max(tokens - 1, 0));  // the last token always runs
  double total = 0.0;
  while (pos < tokens) {
    const int32_t n = chunk_size > 0 ? std::min(chunk_size, tokens - pos) : tokens - pos;
    total += step_seconds(StepShape{.prefill_seqs = 1, .prefill_tokens = n, .prefill_context_tokens = pos});
    pos += n;
  }
  return total;
}

}  // namespace ecoserve::policy
