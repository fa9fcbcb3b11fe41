// Cost profiler: measures a CostProfile (base/cost_profile.h) with the real
// engine, and reads and writes it as JSON.
//
// measure_cost_profile() runs prefill-only steps (one sequence, a doubling grid
// of chunk lengths, at a few contexts) and decode-only steps (a doubling grid of
// batch sizes at a few contexts) through ModelRunner::execute and records the
// median of `repeats` runs of each. The contexts are real: before a context's
// points run, its prefix is prefilled once (untimed) and, for decode, copied into
// every sequence's own blocks, so attention reads as many distinct KV bytes as a
// served batch would. It overwrites the runner's KV blocks [0, cost_profile_blocks_needed)
// and must be the runner's only user while it runs (not a serving runner).
//
// Also the building blocks of other engine measurements (`ecoserve profile
// engine`): synthetic plans, context filling, and timing a step by a Clock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/cost_profile.h"
#include "base/status.h"
#include "base/step_plan.h"
#include "engine/model_runner.h"

namespace ecoserve::engine {

struct CostProfilerOptions {
  const Clock* clock = nullptr;           // required: times every step (SteadyClock live)
  // Prefill grid: chunk lengths min, 2*min, 4*min, ... and max itself, at each context.
  // Empty contexts: 0, 1/4 and 1/2 of the runner's max_context.
  int32_t min_prefill_tokens = 16;
  int32_t max_prefill_tokens = 512;
  std::vector<int32_t> prefill_contexts;
  // Decode grid: batch 1, 2, 4, ... and max_batch itself, at each context.
  // Empty contexts: 32, 1/4 and 1/2 of the runner's max_context.
  int32_t max_batch = 32;
  std::vector<int32_t> decode_contexts;
  int32_t repeats = 3;                    // runs per point; the median is recorded
  // Grid points whose context + tokens exceed the runner's max_context are left
  // out, and so is a prefill context left with a single chunk length (a row of one
  // point would say nothing about how time grows with tokens).
  std::string model_id;                   // copied into the profile; empty: the model's name
  std::string machine;                    // copied into the profile; empty: cpu_model_name()
  std::uint32_t seed = 1234;              // of the random prompt tokens
  // Called with one line (no newline) before each group of points and at the end.
  std::function<void(const std::string&)> on_progress;
};

// The contexts measured for a runner of `max_context` tokens (before points that
// do not fit are left out): the options' own, or the defaults described above.
std::vector<int32_t> cost_profile_prefill_contexts(const CostProfilerOptions& options, int32_t max_context);
std::vector<int32_t> cost_profile_decode_contexts(const CostProfilerOptions& options, int32_t max_context);

// KV blocks of `block_size` tokens the grid of `options` needs, for a runner whose
// max_context is `max_context` (points that do not fit the context are skipped).
int32_t cost_profile_blocks_needed(const CostProfilerOptions& options, int32_t block_size, int32_t max_context);

// INVALID_ARGUMENT for bad options (no clock, repeats < 1, a negative context, an empty grid, a runner
// with fewer KV blocks than cost_profile_blocks_needed); errors of execute() as is.
StatusOr<CostProfile> measure_cost_profile(ModelRunner& runner, const CostProfilerOptions& options);

// Measures `model` on a runner of its own, sized for the grid (threads, block size
// and KV type as `engine` says; its KV size is ignored). For a server that has no
// profile yet; errors as measure_cost_profile and ModelRunner::create.
StatusOr<CostProfile> measure_cost_profile(std::shared_ptr<const model::LlamaModel> model,
                                           const EngineOptions& engine, const CostProfilerOptions& options);

// A small grid for a profile measured at server start-up (about a tenth of the
// default's steps): prefill chunks 16..max_prefill (at most 256), decode batches
// 1..8, one run per point. Points are noisier than `ecoserve profile cost`'s.
CostProfilerOptions quick_cost_profiler_options(const Clock* clock, int32_t max_prefill);

// JSON: {"version": 1, "model_id", "machine", "threads", "kv_cache_dtype",
//        "prefill": [{"tokens", "context", "seconds"}...], "decode": [{"batch", "context", "seconds"}...]}.
// Doubles are written in their shortest exact form: from_json(to_json(p)) == p.
std::string cost_profile_to_json(const CostProfile& profile);
// INVALID_ARGUMENT naming the field for malformed JSON, a missing required field
// (model_id, prefill, decode) or a wrong-typed / out-of-range value. The tables'
// order and values are not checked here (policy::ProfiledCostModel::create does).
StatusOr<CostProfile> cost_profile_from_json(std::string_view json);

// Writes the JSON to `path` (through a temporary file renamed into place).
Status save_cost_profile(const CostProfile& profile, const std::string& path);
// NOT_FOUND when the file is missing; INVALID_ARGUMENT (prefixed by the path) when
// it is not a cost profile.
StatusOr<CostProfile> load_cost_profile(const std::string& path);
// Where `ecoserve profile cost` saves the profile of model file FILE: "FILE.profile.json".
std::string default_cost_profile_path(const std::string& model_path);

// "NAME:BYTES" of a model file (as transport::InstanceInfo::model_id); "NAME:?"
// when its size cannot be read.
std::string model_file_id(const std::string& model_path);
// The CPU's model name from /proc/cpuinfo, or "" when unknown.
std::string cpu_model_name();

// ---- Building blocks of engine measurements ----

// A step of `batch` synthetic sequences (ids 1..batch; sequence i owns KV blocks
// [i * blocks_per_seq, (i + 1) * blocks_per_seq)), each running `tokens` random
// ids in [3, vocab) after `context` computed positions and sampling (greedy) after
// the last. blocks_per_seq must cover context + tokens.
StepPlan synthetic_step(int32_t batch, int32_t context, int32_t tokens, int32_t blocks_per_seq, int32_t vocab,
                        std::mt19937& rng);
// How many positions fill_synthetic_context prefills by default; the rest are copies.
inline constexpr int32_t kFillPrefillTokens = 512;
// Gives positions [0, context) of every sequence of such a layout real KV: prefills
// sequence 0's first prefill_tokens positions (rounded up to whole blocks, at most
// context) in one pass, copies those blocks cyclically over the rest of its context
// (block b holds block b mod n's values, n the prefilled blocks), then copies its
// blocks to the other sequences. Untimed set-up: every position has its own memory,
// as in a real batch, so a step reads what it would (with a shared prefix attention
// would read less); only the values repeat, which no kernel's speed depends on. A 32k
// context is filled in seconds rather than the minutes a 32k-token prefill takes.
Status fill_synthetic_context(ModelRunner& runner, int32_t batch, int32_t context, int32_t blocks_per_seq,
                              std::mt19937& rng, int32_t prefill_tokens = kFillPrefillTokens);
// Seconds one execute() of `plan` takes by `clock` (its output is discarded).
StatusOr<double> time_step(ModelRunner& runner, const StepPlan& plan, const Clock& clock);
// The median of `repeats` (>= 1) such timings.
StatusOr<double> median_step_seconds(ModelRunner& runner, const StepPlan& plan, const Clock& clock,
                                     int32_t repeats);

}  // namespace ecoserve::engine
