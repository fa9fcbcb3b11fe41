// Plain types of a serving instance, shared by InstanceCore, InstanceLoop, the
// cluster layer and the HTTP server: what a request asks for, the events it
// produces, and an instance's status. No engine or model types. Plain data in
// base/ (namespace instance) so transport/, below instance/, can carry them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/sampling_params.h"

namespace ecoserve::instance {

struct GenerationRequest {
  RequestId id;
  std::vector<int32_t> prompt;  // token ids, BOS included when wanted
  SamplingParams sampling;      // max_tokens, stop ids, seed, logprobs...
  int32_t priority = 0;         // higher runs first under pressure
  // SLOs (zero = none): time to first token, and mean time per output token after
  // it. Time-aware policies (padg) read them; the others ignore them.
  Duration slo_ttft{};
  Duration slo_tpot{};
};

// One event per generated token, plus the final one.
struct TokenEvent {
  RequestId id;
  int32_t token = -1;  // -1 on a final event that carries no token
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  bool finished = false;
  std::string finish_reason;         // "stop" | "length" | "abort" | "error" (final event only)
  std::string error;                 // when finish_reason == "error"
  int32_t prompt_tokens = 0;         // on the final event
  int32_t cached_prompt_tokens = 0;  // prefix-cache hit, on the final event
  TimePoint scheduled_time;          // when the request was first scheduled (queue time = this - arrival)
};

using EventSink = std::function<void(const TokenEvent&)>;

// Live migration (llumnix). What the source hands over at stop-and-copy: the
// request as submitted, with the sampling seed in use fixed (every later draw is
// a function of (seed, output index)), the tokens generated so far and its times.
// Stop strings and detokenization live in the HTTP server, in front of the router,
// so they never move.
struct MigrationHandover {
  GenerationRequest request;           // sampling.seed / has_seed: the seed in use
  std::vector<int32_t> output_tokens;  // generated so far, all already sent to the client
  TimePoint arrival{};                 // when the source queued it
  TimePoint scheduled{};               // when it was first scheduled (queue time)
  TimePoint first_token_time{};
  int32_t num_cached_prompt_tokens = 0;
};

// One stage of a migration's KV copy: the KV of positions [begin, end) of the
// request (an Executor::export_kv blob; empty when begin == end), taken when the
// request had num_tokens tokens. The last stage (stop-and-copy) has `last` set and
// carries the handover; the request is then suspended at the source.
// The source side of one stage before its copy (InstanceCore::migrate_out_begin):
// the pinned blocks to read positions [begin, end) from, and for the last stage the
// handover. Plain data.
struct MigrationSource {
  RequestId id;
  std::vector<BlockId> blocks;  // pinned until migrate_out_unpin
  int32_t begin = 0;
  int32_t end = 0;
  int32_t num_tokens = 0;
  bool last = false;
  MigrationHandover handover;
};

struct MigrationChunk {
  std::vector<uint8_t> kv;
  int32_t begin = 0;
  int32_t end = 0;
  int32_t num_tokens = 0;
  bool last = false;
  MigrationHandover handover;  // when last
};

struct InstanceStatus {
  int32_t num_waiting = 0;
  int32_t num_running = 0;
  int32_t num_swapped = 0;
  // llumnix: requests suspended here for a migration's stop-and-copy, plus
  // migrations arriving here (blocks reserved, not yet committed).
  int32_t num_migrating = 0;
  double kv_usage = 0.0;     // fraction of KV blocks in use (cached-but-free blocks count as free)
  int64_t num_waiting_tokens = 0;  // prompt tokens still to compute in the waiting queue
  int64_t num_running_tokens = 0;  // context tokens of running and swapped requests
  int32_t num_free_blocks = 0;     // allocatable device blocks (free + evictable cached)
  int32_t num_total_blocks = 0;
  int32_t block_size = 0;          // tokens per KV block
  TimePoint last_heartbeat;  // the loop thread's last pass (idle or busy)
  // Whether a step is executing and when it began. The loop beats between steps
  // only, so a long step (a big prefill chunk on a CPU) leaves an old heartbeat
  // without a hung loop: see loop_alive().
  bool in_step = false;
  TimePoint step_started{};
  bool running = false;      // loop thread alive and not stopped
  int64_t steps = 0;
  double last_step_seconds = 0.0;
  double mean_step_seconds = 0.0;  // recent
  double mean_plan_seconds = 0.0;  // recent scheduler time per step
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t prefix_cache_queries = 0;  // tokens
  int64_t prefix_cache_hits = 0;     // tokens
  int64_t preemptions = 0;
  // Phase of a policy that alternates prefill and decode (padg): 0 mixed, 1
  // prefill, 2 decode (policy::InstancePhase), when it last switched, and how often.
  int32_t phase = 0;
  TimePoint last_phase_switch{};
  int64_t phase_switches = 0;
};

// Whether an instance's loop is alive at `now`: running, and either it beat
// within heartbeat_timeout or it is in a step that began within step_timeout. A
// step past step_timeout is a hung engine; a step short of it is work, however
// old the last beat (the router, /health and the readiness probe all judge so).
inline bool loop_alive(const InstanceStatus& s, TimePoint now, Duration heartbeat_timeout, Duration step_timeout) {
  if (!s.running) return false;
  if (s.in_step) return now - s.step_started <= step_timeout;
  return now - s.last_heartbeat <= heartbeat_timeout;
}

// Measurements of one step, for metrics and the scheduler-overhead benchmark.
struct StepStats {
  double plan_seconds = 0.0;     // Scheduler::schedule()
  double execute_seconds = 0.0;  // Executor::execute()
  int32_t num_seqs = 0;
  int64_t num_tokens = 0;  // tokens through the forward pass
  int32_t num_prefill_seqs = 0;
  int32_t num_decode_seqs = 0;
};
using StepObserver = std::function<void(const StepStats&)>;

// One executed step, for timelines (GET /admin/timeline, `ecoserve timeline`).
struct StepRecord {
  TimePoint start;            // when planning began
  double seconds = 0.0;       // plan + execute
  int32_t num_prefill_seqs = 0;
  int32_t num_decode_seqs = 0;
  int64_t num_prefill_tokens = 0;  // prompt tokens computed
  int64_t num_decode_tokens = 0;   // the rest of the step's tokens
  int32_t phase = 0;               // the instance's phase after the step (InstanceStatus::phase)
};

}  // namespace ecoserve::instance
