#include "policy/batch_builder.h"

#include <algorithm>

#include "base/status.h"

namespace ecoserve::policy {

BatchBuilder::BatchBuilder(const InstanceView& view, const PolicyOptions& options)
    : view_(view),
      options_(options),
      token_budget_(options.max_num_batched_tokens),
      free_blocks_(view.num_free_blocks),
      num_running_(static_cast<int32_t>(view.running.size())),
      alive_end_(view.running.size()) {
  slot_of_running_.assign(view.running.size(), -1);
  slots_.reserve(view.running.size() + view.waiting.size() + view.swapped.size());
}

int32_t BatchBuilder::blocks_for(int64_t tokens) const {
  return static_cast<int32_t>((tokens + view_.block_size - 1) / view_.block_size);
}

void BatchBuilder::preempt_running(size_t j) {
  ECO_CHECK(j + 1 == alive_end_);
  const RequestView& v = view_.running[j];
  free_blocks_ += v.num_exclusive_blocks;
  if (slot_of_running_[j] >= 0) {
    Slot& s = slots_[slot_of_running_[j]];
    s.cancelled = true;
    token_budget_ += s.num_tokens;
    scheduled_tokens_ -= s.num_tokens;
    free_blocks_ += s.new_blocks;
    num_scheduled_--;
    slot_of_running_[j] = -1;
  }
  preempt_.push_back(v.id);
  num_running_--;
  alive_end_--;
}

void BatchBuilder::schedule_running_decodes() {
  for (size_t i = 0; i < alive_end_; ++i) {
    if (!view_.running[i].is_decode()) continue;
    if (token_budget_ == 0) break;
    schedule_running(i, 1);
  }
}

bool BatchBuilder::schedule_running(size_t i, int32_t n) {
  if (i >= alive_end_ || n <= 0 || n > token_budget_ || slot_of_running_[i] >= 0) return false;
  if (num_scheduled_ >= options_.max_num_seqs) return false;
  const RequestView& r = view_.running[i];
  int32_t need = std::max(0, blocks_for(int64_t{r.num_computed} + n) - r.num_blocks);
  if (need > free_blocks_ && !r.is_decode()) {
    // Shorten the prefill chunk to the blocks at hand before preempting anybody.
    const int64_t fits = int64_t{r.num_blocks + free_blocks_} * view_.block_size - r.num_computed;
    if (fits > 0) {
      n = static_cast<int32_t>(std::min<int64_t>(n, fits));
      need = std::max(0, blocks_for(int64_t{r.num_computed} + n) - r.num_blocks);
    }
  }
  while (need > free_blocks_) {
    if (alive_end_ - 1 > i) {
      preempt_running(alive_end_ - 1);
    } else {
      preempt_running(i);
      return false;
    }
  }
  free_blocks_ -= need;
  token_budget_ -= n;
  scheduled_tokens_ += n;
  num_scheduled_++;
  slot_of_running_[i] = static_cast<int32_t>(slots_.size());
  slots_.push_back(Slot{r.id, n, need, false});
  return true;
}

bool BatchBuilder::admit(const RequestView& r, int32_t n) {
  if (n <= 0 || n > token_budget_ || !has_seq_slot() || num_scheduled_ >= options_.max_num_seqs) return false;
  int32_t need;
  if (r.state == RequestState::kWaiting) {
    const int32_t cached_blocks = r.num_cached_tokens / view_.block_size;
    need = blocks_for(int64_t{r.num_cached_tokens} + n) - cached_blocks + r.num_cached_evictable_blocks;
  } else {
    need = blocks_for(int64_t{r.num_computed} + n);
  }
  const int32_t want = need + options_.watermark_blocks;
  if (want > free_blocks_) {
    // Priority preemption: only lower-priority running requests, and only if it suffices.
    int32_t freeable = 0;
    size_t k = alive_end_;
    while (k > 0 && view_.running[k - 1].priority < r.priority && free_blocks_ + freeable < want) {
      --k;
      const Slot* s = slot_of_running_[k] >= 0 ? &slots_[slot_of_running_[k]] : nullptr;
      freeable += view_.running[k].num_exclusive_blocks + (s ? s->new_blocks : 0);
    }
    if (free_blocks_ + freeable < want) return false;
    while (alive_end_ > k) preempt_running(alive_end_ - 1);
  }
  free_blocks_ -= need;
  token_budget_ -= n;
  scheduled_tokens_ += n;
  num_scheduled_++;
  num_running_++;
  slots_.push_back(Slot{r.id, n, need, false});
  return true;
}

PolicyDecision BatchBuilder::finish() {
  PolicyDecision d;
  d.runs.reserve(slots_.size());
  for (const Slot& s : slots_) {
    if (!s.cancelled) d.runs.push_back(RunDecision{s.id, s.num_tokens});
  }
  d.preempt = std::move(preempt_);
  return d;
}

}  // namespace ecoserve::policy

namespace ecoserve::policy {

PolicyDecision plan_decode_first(const InstanceView& view, const PolicyOptions& options, bool run_decodes,
                                 bool admit_fresh_prompts) {
  BatchBuilder b(view, options);
  auto chunk = [&](const RequestView& r) {
    int32_t n = std::min(r.num_uncomputed(), b.token_budget());
    if (options.chunk_size > 0) n = std::min(n, options.chunk_size);
    return n;
  };
  if (run_decodes) {
    b.schedule_running_decodes();
  }
  for (size_t i = 0; i < b.alive_end(); ++i) {
    const RequestView& r = view.running[i];
    if (r.is_decode()) continue;
    if (b.token_budget() == 0) break;
    const int32_t n = chunk(r);
    if (n > 0) b.schedule_running(i, n);
  }
  size_t resumed = 0;
  if (!b.any_preempted()) {
    for (const RequestView& r : view.swapped) {
      if (!run_decodes && r.is_decode()) break;
      const int32_t n = r.is_decode() ? std::min(1, b.token_budget()) : chunk(r);
      if (n <= 0 || !b.admit(r, n)) break;
      resumed++;
    }
  }
  if (resumed == view.swapped.size()) {
    for (const RequestView& r : view.waiting) {
      if (!admit_fresh_prompts && r.num_generated == 0) continue;
      const int32_t n = chunk(r);
      if (n <= 0 || !b.admit(r, n)) break;
    }
  }
  return b.finish();
}

}  // namespace ecoserve::policy
