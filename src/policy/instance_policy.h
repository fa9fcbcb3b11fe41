// InstancePolicy: the per-step batching decision of one instance, as a pure function.
//
// plan(view, now) looks at a read-only InstanceView (the instance's requests with
// their token counts and KV blocks, and the free blocks) and returns a
// PolicyDecision: which requests run this step with how many new tokens, and
// which running requests to preempt to make room. It owns no requests and no
// blocks; policy::Scheduler applies the decision (allocates blocks, fills the
// StepPlan). The simulator calls the same policies. Implementations are
// stateless or keep only their own small state; they never read a clock (time
// comes in as `now`) and are called from one thread at a time.
//
// Block accounting used by every policy (and mirrored exactly by Scheduler):
//   running/swapped request r running n tokens needs
//       blocks_for(r.num_computed + n) - (r.state == kRunning ? r.num_blocks : 0)
//   new device blocks; a waiting request with a prefix-cache hit of
//   r.num_cached_tokens (whole blocks) needs
//       blocks_for(r.num_cached_tokens + n) - cached_blocks + r.num_cached_evictable_blocks
//   (taking an evictable cached block removes it from the free count);
//   preempting running request r frees r.num_exclusive_blocks.
// The accounting is conservative (it may under-count freed blocks, never over-count).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"

namespace ecoserve::policy {

enum class RequestState : uint8_t {
  kWaiting,  // not in the KV cache (new, or preempted by recompute)
  kRunning,  // holds device blocks (prefill in progress or decoding)
  kSwapped,  // preempted by swap: its KV sits in host blocks
};

struct RequestView {
  RequestId id;
  int32_t priority = 0;  // higher = more important
  TimePoint arrival{};
  int32_t prompt_len = 0;
  int32_t num_generated = 0;  // output tokens so far
  // Tokens whose KV is present (in device blocks when running, host blocks when swapped;
  // 0 when waiting).
  int32_t num_computed = 0;
  // Waiting only: prefix-cache hit (whole blocks, never the last token) and how many of
  // those blocks are currently evictable.
  int32_t num_cached_tokens = 0;
  int32_t num_cached_evictable_blocks = 0;
  // Blocks held: device blocks when running, host blocks when swapped, 0 when waiting.
  int32_t num_blocks = 0;
  // Running only: blocks that preempting this request would free (not shared).
  int32_t num_exclusive_blocks = 0;
  RequestState state = RequestState::kWaiting;
  // Times of the first and the latest output token (zero before the first). A
  // token's time is the start of the step that produced it (the `now` of that
  // step's plan), so elapsed times measured from it are conservative by up to one
  // step. A request whose first token came from elsewhere (disaggregated decode,
  // migration) carries the time the sender reported.
  TimePoint first_token_time{};
  TimePoint last_token_time{};
  // Its SLOs (zero = none): time to first token, and time per output token after it.
  Duration slo_ttft{};
  Duration slo_tpot{};

  int32_t num_tokens() const { return prompt_len + num_generated; }
  // Where the next run starts: num_computed, or the cached prefix when waiting.
  int32_t start() const { return state == RequestState::kWaiting ? num_cached_tokens : num_computed; }
  int32_t num_uncomputed() const { return num_tokens() - start(); }
  // One token left to run after at least one sampled token: a decode step.
  bool is_decode() const { return num_generated > 0 && num_uncomputed() == 1; }
  bool has_first_token() const { return num_generated > 0 && first_token_time != TimePoint{}; }
  // EcoServe's saved TPOT: how far the request is ahead of its TPOT SLO at `now`,
  //   saved = L x SLO_TPOT - (now - first_token_time),  L = tokens generated so far,
  // i.e. how long it could wait for its next token and still average SLO_TPOT.
  // Negative when behind. Zero for a request without a first token or a TPOT SLO.
  Duration saved_tpot(TimePoint now) const {
    if (!has_first_token() || slo_tpot <= Duration::zero()) return Duration::zero();
    return num_generated * slo_tpot - (now - first_token_time);
  }
};

// What an instance is doing, for policies that separate prefill and decode in time
// (padg's TemporalPolicy). Policies that mix them are always kMixed.
enum class InstancePhase : uint8_t { kMixed, kPrefill, kDecode };
const char* phase_name(InstancePhase phase);

// Read-only snapshot given to InstancePolicy::plan. Each list is in schedule
// order: priority descending, then arrival ascending (then submission order).
struct InstanceView {
  std::vector<RequestView> running;
  std::vector<RequestView> swapped;
  // Head of the waiting queue: the requests that could be admitted this step (as many
  // as the free sequence slots plus the running requests the first waiting one
  // outranks); num_waiting_total counts all.
  std::vector<RequestView> waiting;
  int32_t num_waiting_total = 0;
  int32_t num_free_blocks = 0;   // allocatable device blocks: free + evictable cached
  int32_t num_total_blocks = 0;
  int32_t block_size = 16;
  // The instance's phase as its policy last left it, and when it last switched
  // (filled from InstancePolicy::phase()/last_phase_switch()).
  InstancePhase phase = InstancePhase::kMixed;
  TimePoint last_phase_switch{};

  void clear() {
    running.clear();
    swapped.clear();
    waiting.clear();
    num_waiting_total = num_free_blocks = num_total_blocks = 0;
  }
};

struct RunDecision {
  RequestId id;
  int32_t num_tokens = 0;  // new tokens this step (a prefill chunk, or 1 for decode)
  friend bool operator==(const RunDecision&, const RunDecision&) = default;
};

struct PolicyDecision {
  // Requests to run, in batch order: running ones, then resumed swapped ones, then
  // newly admitted waiting ones.
  std::vector<RunDecision> runs;
  // Running requests to preempt before the runs are set up, in preemption order
  // (by recompute or swap: Scheduler::Options::preemption_mode).
  std::vector<RequestId> preempt;
};

struct PolicyOptions {
  int32_t max_num_seqs = 256;             // running requests at most
  int32_t max_num_batched_tokens = 2048;  // new tokens per step at most
  // Prefill tokens per request per step at most (chunked/prefill-only/decode-only policies);
  // 0 = only the token budget limits.
  int32_t chunk_size = 0;
  // Admissions (new or resumed requests) must leave this many blocks free, so that
  // the running decodes do not need preemption right away.
  int32_t watermark_blocks = 0;
};

// What an instance does with a request after its prefill.
enum class InstanceRole : uint8_t {
  kMixed,    // prefill and decode (nodg)
  kPrefill,  // requests leave after prefill (+ first token) with their KV held for transfer
  kDecode,   // requests arrive with their prompt's KV already computed
};

class InstancePolicy {
 public:
  virtual ~InstancePolicy() = default;
  virtual PolicyDecision plan(const InstanceView& view, TimePoint now) = 0;
  virtual InstanceRole role() const { return InstanceRole::kMixed; }
  virtual std::string_view name() const = 0;
  virtual const PolicyOptions& options() const = 0;
  // Phase state of policies that alternate prefill and decode phases (the phase
  // the last plan() left the instance in, and the `now` of the plan that switched
  // to it); kMixed for the others.
  virtual InstancePhase phase() const { return InstancePhase::kMixed; }
  virtual TimePoint last_phase_switch() const { return TimePoint{}; }
  // Phase switches so far (for metrics and timelines).
  virtual int64_t num_phase_switches() const { return 0; }
};

}  // namespace ecoserve::policy
