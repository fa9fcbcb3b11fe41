#include "policy/cost_model.h"

#include <algorithm>
#include <cmath>

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

SloTargets derive_slos(const CostModel& model, const SloRule& rule) {
  const auto prompt = static_cast<int32_t>(std::max(1.0, std::round(rule.mean_prompt_tokens)));
  const auto context = static_cast<int64_t>(std::max(1.0, std::round(rule.mean_prompt_tokens + rule.mean_output_tokens / 2)));
  SloTargets t;
  t.ttft_seconds = rule.ttft_factor * model.prefill_seconds(prompt, 0, rule.chunk_size);
  t.tpot_seconds = rule.tpot_factor * model.step_seconds(StepShape{.decode_seqs = 1, .decode_context_tokens = context});
  return t;
}

SloTargets padg_default_slos(const CostModel& model, int32_t max_context, int32_t chunk_size) {
  SloTargets t;
  t.tpot_seconds = 5.0 * model.step_seconds(StepShape{.decode_seqs = 1, .decode_context_tokens = max_context / 4});
  t.ttft_seconds = std::max(1.0, 5.0 * model.prefill_seconds(max_context / 2, 0, chunk_size));
  return t;
}

}  // namespace ecoserve::policy
