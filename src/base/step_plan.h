// StepPlan: everything the engine needs to run one forward pass, and nothing else.
//
// A plan lists the sequences that run this step. Each sequence contributes a run
// of new tokens (a prefill chunk of any length, continuing after the tokens it
// already has in the KV cache, or a single decode token). The engine executes
// all of them as one batched forward pass (Orca's selective batching) and samples
// a next token for the sequences marked `sample`.
//
// Policies decide *which* sequences and *how many* tokens; the instance scheduler
// (which owns the requests' tokens and block tables) fills in the token ids and
// block tables. The simulator only looks at the counts. Plain data; no behaviour.
// Lives in base/ because policy/ (which builds plans) and engine/ (which runs
// them) stand side by side and neither includes the other.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/ids.h"
#include "base/sampling_params.h"

namespace ecoserve {

struct SeqStep {
  RequestId id;
  // Tokens of this sequence already in the KV cache: the position of tokens[0].
  int32_t num_computed = 0;
  // New tokens to run this step, at positions num_computed, num_computed+1, ...
  std::vector<int32_t> tokens;
  // Physical KV blocks of the sequence in order; must cover num_computed + tokens.size().
  std::vector<BlockId> block_table;
  // Sample a next token after the last of `tokens` (the chunk ends the prompt, or decode).
  bool sample = false;
  // Also return the full logits row of the last token (tests, logprob debugging).
  bool return_logits = false;
  // Used when sample is true.
  const SamplingParams* sampling = nullptr;
  // Prompt and generated tokens so far, for penalties. Must stay valid during execute().
  std::span<const int32_t> prompt_tokens;
  std::span<const int32_t> output_tokens;
  // Seed of this request's sampler; the draw for output index k uses (seed, k), so
  // a request's samples do not depend on what else is in the batch.
  std::uint64_t seed = 0;
};

// Copy the KV contents of one block into another (copy-on-write of a shared partial block).
struct BlockCopy {
  BlockId src;
  BlockId dst;
};

struct StepPlan {
  std::vector<SeqStep> seqs;
  // Applied before the forward pass.
  std::vector<BlockCopy> copies;
  // Requests preempted by this plan (their blocks are already released by the scheduler).
  std::vector<RequestId> preempted;
  // Swap preemption (policy::Scheduler, PreemptionMode::kSwap). Host blocks are ids in
  // a separate host pool [0, num_host_blocks). Order for the engine: first every
  // swap_out copy (src = device block, dst = host block; the device blocks may be
  // reused by this very plan), then every swap_in copy (src = host block, dst =
  // device block), then `copies`, then the forward pass.
  std::vector<BlockCopy> swap_out;
  std::vector<BlockCopy> swap_in;

  int64_t num_tokens() const {
    int64_t n = 0;
    for (const auto& s : seqs) n += static_cast<int64_t>(s.tokens.size());
    return n;
  }
  bool empty() const { return seqs.empty() && copies.empty() && swap_out.empty() && swap_in.empty(); }
};

// What an Executor returns for one sequence of the plan.
struct SeqOutput {
  RequestId id;
  int32_t token = -1;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  std::vector<float> logits;  // when SeqStep::return_logits (before penalties)
};

struct StepOutput {
  // In plan order, one per sequence with sample or return_logits set (token -1 when
  // only logits were asked for).
  std::vector<SeqOutput> seqs;
};

}  // namespace ecoserve
