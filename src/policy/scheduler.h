// Scheduler: the requests, KV blocks and prefix cache of one instance, driven by an
// InstancePolicy (the vLLM-style scheduler core).
//
// Owns every request of the instance (waiting queue, running set, swapped set;
// each with its prompt and generated tokens, block table, priority, arrival time,
// sampling params and seed), a device kv::BlockAllocator with its kv::PrefixCache,
// a host kv::BlockAllocator for swapped-out blocks, and the policy.
//
// One step is:
//   StepPlan plan = scheduler.schedule(now);      // policy decides, scheduler allocates
//   ... the engine executes `plan` (swap_out, swap_in, copies, forward) ...
//   auto finished = scheduler.on_step_done(outputs);  // sampled tokens come back
// schedule() and on_step_done() strictly alternate whenever the plan is not
// empty(); the spans and pointers in the plan stay valid until on_step_done().
// on_step_done({}) may also be called with no step in flight, to collect aborts.
//
// Guarantees:
//  - A newly admitted request first takes its prefix-cache hit (whole blocks,
//    never the last token, so there is always a logit to sample): its
//    num_computed starts at the cached token count.
//  - Preemption by recompute releases the blocks and requeues the request in
//    schedule order (ahead of later arrivals of its priority); it later re-runs
//    prompt + generated tokens as a prefill. Preemption by swap moves the blocks
//    to the host pool (plan.swap_out pairs) and back on resume (plan.swap_in);
//    when the host pool is full it falls back to recompute.
//  - A new request whose next full block is being prefilled by another request in
//    the same step (n > 1 siblings, a common system prompt) is put off by one step,
//    so it then hits that block instead of computing a private copy.
//  - Full blocks are registered in the prefix cache once computed; finished
//    requests release their blocks (cached blocks stay hit-able in the LRU).
//  - Queues are kept sorted, so schedule() is O(running + waiting head + blocks of
//    running requests) plus the plan's tokens, with buffers reused across steps.
// Time comes in as arguments; no clock, no threads. Not thread-safe: owned by the
// instance loop's thread (other threads talk to it through that loop's queue).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "kv/block_allocator.h"
#include "kv/prefix_cache.h"
#include "policy/instance_policy.h"
#include "base/sampling_params.h"
#include "base/step_plan.h"

namespace ecoserve::policy {

enum class PreemptionMode : uint8_t { kRecompute, kSwap };

enum class FinishReason : uint8_t {
  kStop,         // a stop token id or an end-of-generation token
  kLength,       // max_tokens, max_model_len, or the whole KV cache
  kAbort,        // abort() (client gone)
  kPrefillDone,  // prefill instance: prompt computed and first token sampled; blocks held
};
// "stop", "length", "abort", "prefill_done".
std::string_view finish_reason_name(FinishReason reason);

struct RequestSpec {
  RequestId id;
  std::vector<int32_t> prompt;  // token ids, not empty
  SamplingParams sampling;
  int32_t priority = 0;  // higher = more important
  TimePoint arrival{};
  std::uint64_t seed = 0;  // the sampler seed of this request (SeqStep::seed)
  Duration slo_ttft{};     // SLOs (zero = none), carried into RequestView
  Duration slo_tpot{};
  // add_computed_request only: when the first output token was produced elsewhere
  // (zero = the `now` of the next schedule()).
  TimePoint first_token_time{};
};

struct SampledToken {
  RequestId id;
  int32_t token = 0;
};

struct FinishedInfo {
  RequestId id;
  FinishReason reason = FinishReason::kStop;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  // Prompt tokens served from the prefix cache at the first admission.
  int32_t num_cached_prompt_tokens = 0;
  // kPrefillDone only: the request's device blocks, held until release_held().
  std::vector<BlockId> held_blocks;
};

// A request taken out of scheduling for the stop-and-copy stage of a live
// migration (Scheduler::suspend): everything another instance needs to continue
// it exactly — its identity and sampling (the seed fixes every later draw), its
// tokens, and where its KV sits here.
struct SuspendedRequest {
  RequestSpec spec;                    // prompt, sampling, priority, arrival, seed, SLOs, first_token_time
  std::vector<int32_t> output_tokens;  // generated so far (the last one's KV is not computed yet)
  int32_t num_computed = 0;            // positions with KV: prompt + outputs - 1
  int32_t num_cached_prompt_tokens = 0;
  std::vector<BlockId> blocks;         // its device blocks here, still held
};

class Scheduler {
 public:
  struct Options {
    int32_t block_size = 16;
    int32_t num_blocks = 1024;      // device KV blocks
    int32_t num_host_blocks = 0;    // host swap pool (kSwap); 0 = swap always falls back to recompute
    PreemptionMode preemption_mode = PreemptionMode::kRecompute;
    bool enable_prefix_caching = true;
    int32_t max_model_len = 0;      // prompt + output tokens at most; 0 = no limit
    // End-of-generation token ids (EOS, EOT, ...): finish with "stop" unless ignore_eos.
    std::vector<int32_t> eog_token_ids;
  };

  // INVALID_ARGUMENT naming the bad field (block_size, num_blocks >= 1; num_host_blocks,
  // max_model_len >= 0).
  static Status validate(const Options& options);
  // Validates first: use this for options that come from users.
  static StatusOr<std::unique_ptr<Scheduler>> create(Options options, std::unique_ptr<InstancePolicy> policy);
  // Options must be valid (validate()); broken ones abort.
  Scheduler(Options options, std::unique_ptr<InstancePolicy> policy);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a new request. INVALID_ARGUMENT for an empty prompt, max_tokens < 1, a
  // prompt over max_model_len or over the whole KV cache; ALREADY_EXISTS for a
  // known id; FAILED_PRECONDITION on a decode instance (use add_computed_request).
  Status add_request(RequestSpec spec);
  // Adds a request whose KV for all but the last of prompt + output_tokens is
  // already computed elsewhere (disaggregated decode, migration): allocates the
  // blocks and returns the block table, which the caller must fill before the next
  // schedule(). output_tokens holds at least the first sampled token.
  // RESOURCE_EXHAUSTED when the blocks are not free right now.
  StatusOr<std::vector<BlockId>> add_computed_request(RequestSpec spec, std::span<const int32_t> output_tokens);
  // Client gone. Frees the request's blocks now, or after the step in flight; its
  // FinishedInfo (kAbort) is returned by the next on_step_done(). False if unknown.
  bool abort(RequestId id);
  // Frees the blocks held for a kPrefillDone request. NOT_FOUND if none held.
  Status release_held(RequestId id);

  // --- Live migration (llumnix) ---
  // Source side. Between steps only (no step in flight).
  // Where a running request's KV is: its device blocks and how many positions hold
  // KV. NOT_FOUND when unknown; FAILED_PRECONDITION when it is not running now
  // (queued, preempted, swapped, suspended) or aborted.
  struct KvExtent {
    std::span<const BlockId> blocks;  // valid until the next schedule()/abort()
    int32_t num_computed = 0;
    int32_t num_tokens = 0;  // prompt + generated
  };
  StatusOr<KvExtent> running_kv(RequestId id) const;
  // Stop-and-copy: takes a running request that is between decode tokens (every
  // position but the last sampled token's computed) out of scheduling. It keeps its
  // blocks and its place in requests until resume() or drop_suspended(); abort()
  // still finishes it. Errors as running_kv(), and FAILED_PRECONDITION while it
  // still has prompt to compute.
  StatusOr<SuspendedRequest> suspend(RequestId id);
  // Puts a suspended request back into the running set (the migration failed).
  Status resume(RequestId id);
  // Frees a suspended request's blocks and forgets it, with no FinishedInfo (the
  // migration committed: it lives on elsewhere).
  Status drop_suspended(RequestId id);
  int32_t num_suspended() const { return num_suspended_; }
  // Pins device blocks (one more reference each) so that they are neither reused
  // nor evicted while another thread copies their contents, even when their
  // request is preempted, finished or aborted meanwhile; unpin() drops the
  // reference. For migration copies that overlap with the next steps.
  void pin(std::span<const BlockId> blocks);
  void unpin(std::span<const BlockId> blocks);
  // Destination side. Reserves device blocks for request `id` to hold positions
  // [0, num_tokens) (growing an earlier reservation; never shrinking it) and
  // returns the reserved table. RESOURCE_EXHAUSTED when the blocks are not free;
  // ALREADY_EXISTS when `id` is a live request here. Reserved blocks count as used
  // and are freed by release_held() (or abort()).
  StatusOr<std::span<const BlockId>> reserve_blocks(RequestId id, int32_t num_tokens);
  // Turns the reservation of spec.id into a running request whose positions
  // [0, prompt + output_tokens - 1) hold KV (loaded by the caller into the reserved
  // blocks): it decodes from the next schedule(). Grows the reservation if it is
  // short (RESOURCE_EXHAUSTED when it cannot; the reservation stays).
  // NOT_FOUND without a reservation; the checks of add_computed_request otherwise.
  Status adopt_reserved(RequestSpec spec, std::span<const int32_t> output_tokens, int32_t num_cached_prompt_tokens);

  StepPlan schedule(TimePoint now);
  std::vector<FinishedInfo> on_step_done(std::span<const SampledToken> outputs);
  // Gives an executed plan back so the next schedule() reuses its storage (the
  // per-sequence token and block-table vectors keep their capacity): no
  // allocation per sequence per step. Optional; call after on_step_done().
  void recycle(StepPlan&& plan);

  // Status snapshot.
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_swapped() const { return static_cast<int32_t>(swapped_.size()); }
  int32_t num_held() const { return static_cast<int32_t>(held_.size()); }
  bool has_unfinished() const { return !running_.empty() || !waiting_.empty() || !swapped_.empty(); }
  // Device blocks in use by requests (cached-but-evictable blocks count as free), in [0, 1].
  double kv_usage() const;
  int32_t num_free_blocks() const { return cache_.num_free(); }
  int32_t num_free_host_blocks() const { return host_.num_free(); }
  int64_t prefix_cache_query_tokens() const { return cache_.query_tokens(); }
  int64_t prefix_cache_hit_tokens() const { return cache_.hit_tokens(); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Admissions put off by one step to share a block another request was computing.
  int64_t num_deferred_admissions() const { return num_deferred_; }
  const Options& options() const { return options_; }
  const InstancePolicy& policy() const { return *policy_; }
  // The view the policy saw in the last schedule() (tests, debugging).
  const InstanceView& last_view() const { return view_; }
  // Tokens still to compute in the waiting queue, and the context (prompt +
  // generated) of the running and swapped requests: the load a router balances.
  // O(requests).
  struct TokenLoad {
    int64_t waiting_tokens = 0;
    int64_t running_tokens = 0;
  };
  TokenLoad token_load() const;
  // Generated tokens of a live request (empty span when unknown).
  std::span<const int32_t> output_tokens(RequestId id) const;

 private:
  struct Request;
  struct InFlight {
    Request* req;
    int32_t num_tokens;
    bool sample;
  };
  // schedule(): a run taken in pass A, set up in pass B.
  struct Pending {
    Request* r;
    int32_t num_tokens;
    int32_t hit_blocks;
  };

  static bool before(const Request* a, const Request* b);
  void insert_sorted(std::vector<Request*>& queue, Request* r);
  void remove_from(std::vector<Request*>& queue, Request* r);
  // A fresh Request from an already validated spec: identity, sampling, prompt
  // (tokens reserved for up to 4096 outputs); no blocks, state kWaiting.
  std::unique_ptr<Request> new_request(RequestSpec&& spec);
  void build_view();
  int32_t max_prefix_blocks(const Request& r) const;
  void release_blocks(Request& r);
  void preempt(Request& r, StepPlan& plan);
  bool setup_run(Request& r, int32_t num_tokens, StepPlan& plan);
  void register_computed_blocks(Request& r);
  void append_token(Request& r, int32_t token);
  bool finish_reason(const Request& r, int32_t token, FinishReason* reason) const;
  void finish(Request& r, FinishReason reason, std::vector<FinishedInfo>& out);
  void erase(Request& r);
  // The checks add_computed_request and adopt_reserved share: OK or the error.
  Status check_computed(const RequestSpec& spec, int64_t num_generated) const;

  Options options_;
  std::unique_ptr<InstancePolicy> policy_;
  kv::BlockAllocator device_;
  kv::PrefixCache cache_;
  kv::BlockAllocator host_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<Request*> waiting_, running_, swapped_;  // each sorted by before()
  std::unordered_map<RequestId, std::vector<BlockId>> held_;
  std::vector<InFlight> in_flight_;
  bool step_in_flight_ = false;
  StepPlan spare_plan_;               // recycle(): storage for the next schedule()
  std::vector<std::vector<int32_t>> spare_tokens_;  // recycled SeqStep::tokens (capacity kept)
  std::vector<std::vector<BlockId>> spare_tables_;  // recycled SeqStep::block_table
  int32_t num_suspended_ = 0;
  std::vector<FinishedInfo> pending_finished_;  // aborts not yet reported
  std::uint64_t next_seq_no_ = 0;
  std::uint64_t step_no_ = 0;
  TimePoint step_time_{};  // `now` of the last schedule(): the time of the tokens it produces
  int64_t num_deferred_ = 0;
  std::vector<kv::BlockHash> computing_;  // schedule() scratch: blocks being prefilled this step
  std::vector<Pending> pending_;          // schedule() scratch
  int64_t num_preemptions_ = 0;
  InstanceView view_;
};

}  // namespace ecoserve::policy
