// CostModel: predicted duration of an instance's steps, for policies that check
// time constraints (EcoServe's TTFT/TPOT checks in padg routing and
// TemporalPolicy) and for the simulator's executors. Pure and deterministic: a
// prediction depends only on the step's shape, never on a clock. Implementations:
// ProfiledCostModel (a table measured on this machine by `ecoserve profile cost`);
// the simulator issue adds GPU models behind the same interface.
// Thread-safety: const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace ecoserve::policy {

// The shape of one forward pass.
struct StepShape {
  int32_t prefill_seqs = 0;            // sequences running a prefill chunk
  int32_t prefill_tokens = 0;          // new tokens of those chunks, summed
  int64_t prefill_context_tokens = 0;  // positions before each chunk (cached/computed prefix), summed
  int32_t decode_seqs = 0;             // sequences decoding one token each
  int64_t decode_context_tokens = 0;   // KV tokens those decodes attend to, summed
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Seconds for one step of this shape (0 for an empty step).
  virtual double step_seconds(const StepShape& shape) const = 0;
  // Seconds to prefill a prompt of `tokens` tokens of which the first
  // `cached_tokens` are already in the KV cache (a prefix-cache hit), run alone
  // in chunks of at most `chunk_size` tokens (0 = one chunk).
  virtual double prefill_seconds(int32_t tokens, int32_t cached_tokens, int32_t chunk_size = 0) const;
  virtual std::string_view name() const = 0;
};

// SLOs the way EcoServe's Table 4 sets them, relative to the model's speed on the
// hardware: a TTFT SLO of `ttft_factor` x the prefill of a mean prompt (run alone,
// in chunks of `chunk_size`), and a TPOT SLO of `tpot_factor` x a batch-1 decode
// step at the mean context (the prompt plus half the output).
struct SloRule {
  double mean_prompt_tokens = 0.0;
  double mean_output_tokens = 0.0;
  double ttft_factor = 5.0;
  double tpot_factor = 5.0;
  int32_t chunk_size = 512;
};
struct SloTargets {
  double ttft_seconds = 0.0;
  double tpot_seconds = 0.0;
};
SloTargets derive_slos(const CostModel& model, const SloRule& rule);

// The SLOs a padg deployment gives requests that bring none (`serve --strategy padg`
// without --slo-ttft-ms/--slo-tpot-ms, and `simulate` alike): TPOT 5x a batch-1
// decode step at a quarter of the context; TTFT 5x the prefill of half the context
// in chunks of `chunk_size`, at least 1 s.
SloTargets padg_default_slos(const CostModel& model, int32_t max_context, int32_t chunk_size);

}  // namespace ecoserve::policy
