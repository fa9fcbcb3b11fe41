// BatchBuilder: the budget bookkeeping shared by the instance policies.
//
// Tracks, while a policy walks an InstanceView, the remaining token budget, the
// sequence slots, and the free KV blocks (InstanceView's accounting rules), and
// applies vLLM's preemption order: the victim is always the last running request
// in schedule order (lowest priority, latest arrival) that is still alive, so the
// preempted requests form a suffix of view.running. A victim that was already
// scheduled this step is unscheduled and its tokens and blocks refunded.
// Used inside one plan() call (not copyable); borrows the view. Its bookkeeping
// lives in a small buffer inside the builder (the heap only for large batches),
// so planning a step allocates nothing but the decision.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <vector>

#include "policy/instance_policy.h"

namespace ecoserve::policy {

class BatchBuilder {
 public:
  BatchBuilder(const InstanceView& view, const PolicyOptions& options);
  BatchBuilder(const BatchBuilder&) = delete;
  BatchBuilder& operator=(const BatchBuilder&) = delete;

  int32_t token_budget() const { return token_budget_; }
  // Nothing scheduled so far (no tokens).
  bool empty() const { return scheduled_tokens_ == 0; }
  bool any_preempted() const { return !preempt_.empty(); }
  // view.running[0, alive_end()) are not preempted.
  size_t alive_end() const { return alive_end_; }
  bool has_seq_slot() const { return num_running_ < options_.max_num_seqs; }

  // Runs view.running[i] for n tokens (n <= token_budget()). When blocks are short,
  // a prefill is first shortened to what fits; otherwise later running requests
  // are preempted (last first), and running[i] itself when none is left (then
  // false). Returns whether it was scheduled.
  bool schedule_running(size_t i, int32_t n);
  // One token for each running decode, in schedule order, while the budget lasts.
  void schedule_running_decodes();
  // Admits a swapped or waiting request for n tokens (n <= token_budget()) if a
  // sequence slot and blocks (plus the watermark) allow; to get blocks it may
  // preempt running requests of strictly lower priority, only when that suffices.
  bool admit(const RequestView& r, int32_t n);

  PolicyDecision finish();

 private:
  struct Slot {
    RequestId id;
    int32_t num_tokens;
    int32_t new_blocks;
    bool cancelled;
  };
  int32_t blocks_for(int64_t tokens) const;
  void preempt_running(size_t j);

  const InstanceView& view_;
  PolicyOptions options_;
  int32_t token_budget_;
  int32_t free_blocks_;
  int32_t num_running_;    // alive running + admitted
  int32_t num_scheduled_ = 0;
  int64_t scheduled_tokens_ = 0;
  size_t alive_end_;
  alignas(std::max_align_t) std::array<std::byte, 2048> arena_;
  std::pmr::monotonic_buffer_resource resource_{arena_.data(), arena_.size()};
  std::pmr::vector<Slot> slots_{&resource_};
  std::pmr::vector<int32_t> slot_of_running_{&resource_};  // index into slots_, or -1
  std::vector<RequestId> preempt_;
};

// The decode-first chunked plan shared by ChunkedPrefillPolicy (all passes),
// PrefillOnlyPolicy (run_decodes = false) and DecodeOnlyPolicy
// (admit_fresh_prompts = false): decodes, then partial prefills, then swapped
// requests (if nothing was preempted), then waiting ones (if none is left
// swapped), each chunk at most options.chunk_size tokens (0 = budget only).
PolicyDecision plan_decode_first(const InstanceView& view, const PolicyOptions& options, bool run_decodes,
                                 bool admit_fresh_prompts);

}  // namespace ecoserve::policy
