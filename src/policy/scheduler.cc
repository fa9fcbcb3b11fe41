#include "policy/scheduler.h"

#include <algorithm>

namespace ecoserve::policy {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kPrefillDone: return "prefill_done";
  }
  return "unknown";
}

struct Scheduler::Request {
  RequestId id;
  int32_t priority = 0;
  TimePoint arrival{};
  std::uint64_t seq_no = 0;
  SamplingParams sampling;
  std::uint64_t seed = 0;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int32_t prompt_len = 0;
  int32_t num_computed = 0;
  std::vector<BlockId> blocks;  // device blocks (running) or host blocks (swapped)
  std::vector<kv::BlockHash> hashes;  // keys of the full blocks of `tokens` (prefix caching on)
  int32_t num_registered = 0;         // leading blocks already offered to the prefix cache
  RequestState state = RequestState::kWaiting;
  bool aborted = false;
  bool suspended = false;  // taken out of every queue for a migration's stop-and-copy
  bool in_flight = false;
  bool awaiting_sample = false;
  bool has_pending_finish = false;
  FinishReason pending_finish = FinishReason::kStop;
  std::uint64_t preempted_at_step = ~std::uint64_t{0};
  int32_t num_cached_prompt_tokens = -1;  // -1 until first admitted
  TimePoint first_token_time{};  // see RequestView
  TimePoint last_token_time{};
  Duration slo_ttft{};
  Duration slo_tpot{};

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_generated() const { return num_tokens() - prompt_len; }
};

Scheduler::~Scheduler() = default;

Status Scheduler::validate(const Options& o) {
  if (o.block_size < 1) return invalid_argument_error("block_size must be at least 1, got {}", o.block_size);
  if (o.num_blocks < 1) return invalid_argument_error("num_blocks must be at least 1, got {}", o.num_blocks);
  if (o.num_host_blocks < 0) {
    return invalid_argument_error("num_host_blocks must be >= 0, got {}", o.num_host_blocks);
  }
  if (o.max_model_len < 0) {
    return invalid_argument_error("max_model_len must be >= 0 (0 = no limit), got {}", o.max_model_len);
  }
  return ok_status();
}

StatusOr<std::unique_ptr<Scheduler>> Scheduler::create(Options options, std::unique_ptr<InstancePolicy> policy) {
  ECO_RETURN_IF_ERROR(validate(options));
  if (policy == nullptr) return invalid_argument_error("scheduler needs an instance policy");
  if (policy->options().watermark_blocks >= options.num_blocks) {
    return invalid_argument_error("watermark_blocks ({}) must be below num_blocks ({})",
                                  policy->options().watermark_blocks, options.num_blocks);
  }
  return std::make_unique<Scheduler>(std::move(options), std::move(policy));
}

Scheduler::Scheduler(Options options, std::unique_ptr<InstancePolicy> policy)
    : options_(std::move(options)),
      policy_(std::move(policy)),
      device_(options_.num_blocks),
      cache_(&device_, options_.block_size),
      host_(options_.num_host_blocks) {
  ECO_CHECK(policy_ != nullptr);
  const Status st = validate(options_);
  ECO_CHECK_MSG(st.ok(), "{}", st.to_string());
}

bool Scheduler::before(const Request* a, const Request* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->arrival != b->arrival) return a->arrival < b->arrival;
  return a->seq_no < b->seq_no;
}

void Scheduler::insert_sorted(std::vector<Request*>& queue, Request* r) {
  queue.insert(std::upper_bound(queue.begin(), queue.end(), r, before), r);
}

void Scheduler::remove_from(std::vector<Request*>& queue, Request* r) {
  auto range = std::equal_range(queue.begin(), queue.end(), r, before);
  auto it = std::find(range.first, range.second, r);
  ECO_CHECK_MSG(it != range.second, "request {} not in its queue", r->id.value);
  queue.erase(it);
}

double Scheduler::kv_usage() const {
  if (cache_.num_blocks() == 0) return 0.0;
  return static_cast<double>(cache_.num_in_use()) / cache_.num_blocks();
}

Scheduler::TokenLoad Scheduler::token_load() const {
  TokenLoad load;
  for (const Request* r : waiting_) load.waiting_tokens += r->num_tokens() - r->num_computed;
  for (const Request* r : running_) load.running_tokens += r->num_tokens();
  for (const Request* r : swapped_) load.running_tokens += r->num_tokens();
  return load;
}

std::span<const int32_t> Scheduler::output_tokens(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return {};
  const Request& r = *it->second;
  return std::span<const int32_t>(r.tokens).subspan(r.prompt_len);
}

std::unique_ptr<Scheduler::Request> Scheduler::new_request(RequestSpec&& spec) {
  auto r = std::make_unique<Request>();
  r->id = spec.id;
  r->priority = spec.priority;
  r->arrival = spec.arrival;
  r->seq_no = next_seq_no_++;
  r->sampling = std::move(spec.sampling);
  r->seed = spec.seed;
  r->slo_ttft = spec.slo_ttft;
  r->slo_tpot = spec.slo_tpot;
  r->first_token_time = r->last_token_time = spec.first_token_time;
  r->prompt_len = static_cast<int32_t>(spec.prompt.size());
  r->tokens = std::move(spec.prompt);
  r->tokens.reserve(r->tokens.size() + std::min(r->sampling.max_tokens, 4096));
  return r;
}

Status Scheduler::add_request(RequestSpec spec) {
  if (policy_->role() == InstanceRole::kDecode) {
    return failed_precondition_error("request {}: a decode instance takes requests with computed KV only",
                                     spec.id.value);
  }
  const auto prompt_len = static_cast<int64_t>(spec.prompt.size());
  if (prompt_len == 0) return invalid_argument_error("request {}: empty prompt", spec.id.value);
  if (spec.sampling.max_tokens < 1) {
    return invalid_argument_error("request {}: max_tokens {} must be at least 1", spec.id.value,
                                  spec.sampling.max_tokens);
  }
  if (options_.max_model_len > 0 && prompt_len >= options_.max_model_len) {
    return invalid_argument_error("request {}: prompt of {} tokens leaves no room under max_model_len {}",
                                  spec.id.value, prompt_len, options_.max_model_len);
  }
  const int32_t need = kv::blocks_for_tokens(prompt_len + 1, options_.block_size);
  if (need > options_.num_blocks) {
    return invalid_argument_error("request {}: prompt of {} tokens needs {} KV blocks, the cache has {}",
                                  spec.id.value, prompt_len, need, options_.num_blocks);
  }
  if (requests_.count(spec.id) || held_.count(spec.id)) {
    return already_exists_error("request {} already exists", spec.id.value);
  }
  std::unique_ptr<Request> r = new_request(std::move(spec));
  if (options_.enable_prefix_caching) kv::PrefixCache::extend_hashes(r->tokens, options_.block_size, &r->hashes);
  Request* p = r.get();
  requests_.emplace(p->id, std::move(r));
  insert_sorted(waiting_, p);
  return ok_status();
}

Status Scheduler::check_computed(const RequestSpec& spec, int64_t num_generated) const {
  const auto prompt_len = static_cast<int64_t>(spec.prompt.size());
  if (prompt_len == 0) return invalid_argument_error("request {}: empty prompt", spec.id.value);
  if (num_generated < 1) {
    return invalid_argument_error("request {}: a computed request needs its first sampled token", spec.id.value);
  }
  if (spec.sampling.max_tokens <= num_generated) {
    return failed_precondition_error("request {}: already has {} of max_tokens {} tokens", spec.id.value,
                                     num_generated, spec.sampling.max_tokens);
  }
  const int64_t num_tokens = prompt_len + num_generated;
  if (options_.max_model_len > 0 && num_tokens >= options_.max_model_len) {
    return invalid_argument_error("request {}: {} tokens leave no room under max_model_len {}", spec.id.value,
                                  num_tokens, options_.max_model_len);
  }
  if (kv::blocks_for_tokens(num_tokens + 1, options_.block_size) > options_.num_blocks) {
    return invalid_argument_error("request {}: {} tokens do not fit a KV cache of {} blocks", spec.id.value,
                                  num_tokens, options_.num_blocks);
  }
  if (requests_.count(spec.id)) return already_exists_error("request {} already exists", spec.id.value);
  return ok_status();
}

StatusOr<std::vector<BlockId>> Scheduler::add_computed_request(RequestSpec spec,
                                                               std::span<const int32_t> output_tokens) {
  ECO_RETURN_IF_ERROR(check_computed(spec, static_cast<int64_t>(output_tokens.size())));
  if (held_.count(spec.id)) return already_exists_error("request {} already exists", spec.id.value);
  const int32_t num_computed =
      static_cast<int32_t>(spec.prompt.size() + output_tokens.size()) - 1;
  const int32_t need = kv::blocks_for_tokens(num_computed, options_.block_size);
  if (need > cache_.num_free()) {
    return resource_exhausted_error("request {}: needs {} KV blocks, {} free", spec.id.value, need,
                                    cache_.num_free());
  }
  std::unique_ptr<Request> r = new_request(std::move(spec));
  r->tokens.insert(r->tokens.end(), output_tokens.begin(), output_tokens.end());
  r->num_computed = num_computed;
  r->num_cached_prompt_tokens = 0;
  const Status allocated = cache_.allocate_n(need, &r->blocks);  // fits: checked above
  ECO_CHECK(allocated.ok());
  r->state = RequestState::kRunning;
  if (options_.enable_prefix_caching) {
    kv::PrefixCache::extend_hashes(r->tokens, options_.block_size, &r->hashes);
    register_computed_blocks(*r);
  }
  std::vector<BlockId> table = r->blocks;
  Request* p = r.get();
  requests_.emplace(p->id, std::move(r));
  insert_sorted(running_, p);
  return table;
}

StatusOr<Scheduler::KvExtent> Scheduler::running_kv(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) return not_found_error("request {} is not on this instance", id.value);
  const Request& r = *it->second;
  if (r.aborted) return failed_precondition_error("request {} is finishing", id.value);
  if (r.suspended) return failed_precondition_error("request {} is suspended for migration", id.value);
  if (r.state != RequestState::kRunning) {
    return failed_precondition_error("request {} is not running (preempted or queued)", id.value);
  }
  return KvExtent{r.blocks, r.num_computed, r.num_tokens()};
}

StatusOr<SuspendedRequest> Scheduler::suspend(RequestId id) {
  ECO_CHECK_MSG(!step_in_flight_, "suspend() with a step in flight");
  ECO_ASSIGN_OR_RETURN(KvExtent extent, running_kv(id));
  Request& r = *requests_.at(id);
  if (r.num_generated() < 1 || extent.num_computed != extent.num_tokens - 1) {
    return failed_precondition_error("request {} is still computing its prompt", id.value);
  }
  SuspendedRequest out;
  out.spec.id = r.id;
  out.spec.prompt.assign(r.tokens.begin(), r.tokens.begin() + r.prompt_len);
  out.spec.sampling = r.sampling;
  out.spec.priority = r.priority;
  out.spec.arrival = r.arrival;
  out.spec.seed = r.seed;
  out.spec.slo_ttft = r.slo_ttft;
  out.spec.slo_tpot = r.slo_tpot;
  out.spec.first_token_time = r.first_token_time;
  out.output_tokens.assign(r.tokens.begin() + r.prompt_len, r.tokens.end());
  out.num_computed = r.num_computed;
  out.num_cached_prompt_tokens = std::max(0, r.num_cached_prompt_tokens);
  out.blocks = r.blocks;
  remove_from(running_, &r);
  r.suspended = true;
  ++num_suspended_;
  return out;
}

Status Scheduler::resume(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second->suspended) {
    return not_found_error("request {} is not suspended here", id.value);
  }
  Request& r = *it->second;
  r.suspended = false;
  --num_suspended_;
  insert_sorted(running_, &r);
  return ok_status();
}

Status Scheduler::drop_suspended(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second->suspended) {
    return not_found_error("request {} is not suspended here", id.value);
  }
  Request& r = *it->second;
  release_blocks(r);
  erase(r);
  return ok_status();
}

void Scheduler::pin(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) cache_.share(b);
}

void Scheduler::unpin(std::span<const BlockId> blocks) {
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) cache_.release(*b);
}

StatusOr<std::span<const BlockId>> Scheduler::reserve_blocks(RequestId id, int32_t num_tokens) {
  if (requests_.count(id)) return already_exists_error("request {} already runs here", id.value);
  if (num_tokens < 0) return invalid_argument_error("request {}: cannot reserve {} tokens", id.value, num_tokens);
  const int32_t need = kv::blocks_for_tokens(num_tokens, options_.block_size);
  std::vector<BlockId>& table = held_[id];
  const int32_t more = need - static_cast<int32_t>(table.size());
  if (more > cache_.num_free()) {
    if (table.empty()) held_.erase(id);
    return resource_exhausted_error("request {}: needs {} more KV blocks, {} free", id.value, more,
                                    cache_.num_free());
  }
  const Status allocated = cache_.allocate_n(more, &table);  // fits: checked above
  ECO_CHECK(allocated.ok());
  return std::span<const BlockId>(table);
}

Status Scheduler::adopt_reserved(RequestSpec spec, std::span<const int32_t> output_tokens,
                                 int32_t num_cached_prompt_tokens) {
  auto h = held_.find(spec.id);
  if (h == held_.end()) return not_found_error("no blocks reserved for request {}", spec.id.value);
  ECO_RETURN_IF_ERROR(check_computed(spec, static_cast<int64_t>(output_tokens.size())));
  const int32_t num_computed = static_cast<int32_t>(spec.prompt.size() + output_tokens.size()) - 1;
  ECO_RETURN_IF_ERROR(reserve_blocks(spec.id, num_computed).status());
  std::unique_ptr<Request> r = new_request(std::move(spec));
  r->tokens.insert(r->tokens.end(), output_tokens.begin(), output_tokens.end());
  r->num_computed = num_computed;
  r->num_cached_prompt_tokens = num_cached_prompt_tokens;
  r->blocks = std::move(h->second);
  held_.erase(h);
  r->state = RequestState::kRunning;
  if (options_.enable_prefix_caching) {
    kv::PrefixCache::extend_hashes(r->tokens, options_.block_size, &r->hashes);
    register_computed_blocks(*r);
  }
  Request* p = r.get();
  requests_.emplace(p->id, std::move(r));
  insert_sorted(running_, p);
  return ok_status();
}

bool Scheduler::abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    auto h = held_.find(id);
    if (h == held_.end()) return false;
    (void)release_held(id);
    return true;
  }
  Request& r = *it->second;
  if (r.aborted) return true;
  r.aborted = true;
  if (!r.in_flight) finish(r, FinishReason::kAbort, pending_finished_);
  return true;
}

Status Scheduler::release_held(RequestId id) {
  auto it = held_.find(id);
  if (it == held_.end()) return not_found_error("no blocks held for request {}", id.value);
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) cache_.release(*b);
  held_.erase(it);
  return ok_status();
}

int32_t Scheduler::max_prefix_blocks(const Request& r) const {
  // Never the last token: it must run to produce a logit.
  return (r.num_tokens() - 1) / options_.block_size;
}

void Scheduler::build_view() {
  view_.clear();
  view_.block_size = options_.block_size;
  view_.num_total_blocks = cache_.num_blocks();
  view_.num_free_blocks = cache_.num_free();
  view_.num_waiting_total = static_cast<int32_t>(waiting_.size());
  view_.phase = policy_->phase();
  view_.last_phase_switch = policy_->last_phase_switch();
  auto base = [](const Request& r) {
    RequestView v;
    v.id = r.id;
    v.priority = r.priority;
    v.arrival = r.arrival;
    v.prompt_len = r.prompt_len;
    v.num_generated = r.num_generated();
    v.state = r.state;
    v.first_token_time = r.first_token_time;
    v.last_token_time = r.last_token_time;
    v.slo_ttft = r.slo_ttft;
    v.slo_tpot = r.slo_tpot;
    return v;
  };
  for (const Request* r : running_) {
    RequestView v = base(*r);
    v.num_computed = r->num_computed;
    v.num_blocks = static_cast<int32_t>(r->blocks.size());
    if (cache_.num_shared() == 0) {  // no block has a second user: all of r's are its own
      v.num_exclusive_blocks = v.num_blocks;
    } else {
      for (BlockId b : r->blocks) v.num_exclusive_blocks += cache_.user_refcount(b) == 1 ? 1 : 0;
    }
    view_.running.push_back(v);
  }
  for (const Request* r : swapped_) {
    RequestView v = base(*r);
    v.num_computed = r->num_computed;
    v.num_blocks = static_cast<int32_t>(r->blocks.size());
    view_.swapped.push_back(v);
  }
  // Only the head that could be admitted this step: the free sequence slots, plus the
  // slots of running requests that the first waiting request outranks (priority preemption).
  size_t head = 0;
  if (!waiting_.empty()) {
    size_t outranked = 0;
    const int32_t top = waiting_.front()->priority;
    for (auto it = running_.rbegin(); it != running_.rend() && (*it)->priority < top; ++it) outranked++;
    const auto free_slots =
        static_cast<size_t>(std::max<int64_t>(0, int64_t{policy_->options().max_num_seqs} - num_running()));
    head = std::min(waiting_.size(), free_slots + outranked);
  }
  for (size_t i = 0; i < head; ++i) {
    const Request* r = waiting_[i];
    RequestView v = base(*r);
    if (options_.enable_prefix_caching) {
      const auto m = cache_.match(r->hashes, r->tokens, max_prefix_blocks(*r));
      v.num_cached_tokens = m.num_blocks * options_.block_size;
      v.num_cached_evictable_blocks = m.num_evictable;
    }
    view_.waiting.push_back(v);
  }
}

void Scheduler::release_blocks(Request& r) {
  if (r.state == RequestState::kSwapped) {
    for (auto b = r.blocks.rbegin(); b != r.blocks.rend(); ++b) host_.release(*b);
  } else {
    // Tail first, so that the LRU evicts a chain from its end.
    for (auto b = r.blocks.rbegin(); b != r.blocks.rend(); ++b) cache_.release(*b);
  }
  r.blocks.clear();
  r.num_registered = 0;
}

void Scheduler::preempt(Request& r, StepPlan& plan) {
  remove_from(running_, &r);
  const auto n = static_cast<int32_t>(r.blocks.size());
  if (options_.preemption_mode == PreemptionMode::kSwap && n > 0 && host_.num_free() >= n) {
    auto host = *host_.allocate_n(n);
    for (int32_t i = 0; i < n; ++i) plan.swap_out.push_back(BlockCopy{r.blocks[i], host[i]});
    for (int32_t i = n - 1; i >= 0; --i) cache_.release(r.blocks[i]);
    r.blocks = std::move(host);
    r.num_registered = 0;
    r.state = RequestState::kSwapped;
    insert_sorted(swapped_, &r);
  } else {
    release_blocks(r);
    r.num_computed = 0;
    r.state = RequestState::kWaiting;
    insert_sorted(waiting_, &r);
  }
  plan.preempted.push_back(r.id);
  num_preemptions_++;
}

bool Scheduler::setup_run(Request& r, int32_t num_tokens, StepPlan& plan) {
  const int32_t n = std::min(num_tokens, r.num_tokens() - r.num_computed);
  if (n <= 0) return false;
  const int32_t bs = options_.block_size;
  const int32_t total = kv::blocks_for_tokens(int64_t{r.num_computed} + n, bs);
  if (r.state == RequestState::kSwapped) {
    if (total > cache_.num_free()) return false;
    // One run for the blocks coming back and the ones the step adds; host block i
    // goes to device block i.
    std::vector<BlockId> device;
    device.reserve(total);
    const Status allocated = cache_.allocate_n(total, &device);
    ECO_CHECK(allocated.ok());
    for (std::size_t i = 0; i < r.blocks.size(); ++i) {
      plan.swap_in.push_back(BlockCopy{r.blocks[i], device[i]});
      host_.release(r.blocks[i]);
    }
    r.blocks = std::move(device);
    r.num_registered = 0;
    remove_from(swapped_, &r);
    r.state = RequestState::kRunning;
    insert_sorted(running_, &r);
  } else {
    const int32_t need = std::max(0, total - static_cast<int32_t>(r.blocks.size()));
    if (need > cache_.num_free()) return false;
    const Status allocated = cache_.allocate_n(need, &r.blocks);
    ECO_CHECK(allocated.ok());
    if (r.state == RequestState::kWaiting) {
      remove_from(waiting_, &r);
      r.state = RequestState::kRunning;
      insert_sorted(running_, &r);
    }
  }
  if (options_.enable_prefix_caching) {  // the blocks this run completes are registered after the step
    const auto from = static_cast<size_t>(r.num_computed / bs);
    const size_t upto = std::min({static_cast<size_t>((r.num_computed + n) / bs), r.hashes.size(), r.blocks.size()});
    if (upto > from) {
      cache_.prefetch_chain(std::span<const kv::BlockHash>(r.hashes).subspan(from, upto - from),
                            std::span<const BlockId>(r.blocks).subspan(from, upto - from));
    }
  }
  SeqStep s;
  if (!spare_tokens_.empty()) {  // reuse a recycled sequence's vectors
    s.tokens = std::move(spare_tokens_.back());
    s.block_table = std::move(spare_tables_.back());
    spare_tokens_.pop_back();
    spare_tables_.pop_back();
  }
  s.id = r.id;
  s.num_computed = r.num_computed;
  s.tokens.assign(r.tokens.begin() + r.num_computed, r.tokens.begin() + r.num_computed + n);
  s.block_table.assign(r.blocks.begin(), r.blocks.end());
  s.sample = r.num_computed + n == r.num_tokens();
  s.sampling = &r.sampling;
  s.prompt_tokens = std::span<const int32_t>(r.tokens).first(r.prompt_len);
  s.output_tokens = std::span<const int32_t>(r.tokens).subspan(r.prompt_len);
  s.seed = r.seed;
  in_flight_.push_back(InFlight{&r, n, s.sample});
  r.in_flight = true;
  plan.seqs.push_back(std::move(s));
  return true;
}

void Scheduler::recycle(StepPlan&& plan) {
  for (SeqStep& s : plan.seqs) {
    if (spare_tokens_.size() >= 4096) break;
    spare_tokens_.push_back(std::move(s.tokens));
    spare_tables_.push_back(std::move(s.block_table));
  }
  plan.seqs.clear();
  plan.copies.clear();
  plan.preempted.clear();
  plan.swap_out.clear();
  plan.swap_in.clear();
  spare_plan_ = std::move(plan);
}

StepPlan Scheduler::schedule(TimePoint now) {
  ECO_CHECK_MSG(!step_in_flight_, "schedule() before on_step_done() of the previous step");
  StepPlan plan = std::move(spare_plan_);  // empty vectors, capacity kept (recycle())
  spare_plan_ = StepPlan{};
  step_time_ = now;
  for (Request* r : running_) {  // computed requests added since the last step
    if (r->first_token_time == TimePoint{} && r->num_generated() > 0) r->first_token_time = r->last_token_time = now;
  }
  build_view();
  const PolicyDecision d = policy_->plan(view_, now);
  const std::uint64_t step = ++step_no_;

  for (RequestId id : d.preempt) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Request& r = *it->second;
    if (r.state != RequestState::kRunning || r.aborted) continue;
    preempt(r, plan);
    r.preempted_at_step = step;
  }

  // Pass A: newly admitted requests take their prefix-cache hits before any
  // allocation can evict them. Pass B: blocks and plan entries, in batch order.
  std::vector<Pending>& pending = pending_;
  pending.clear();
  for (const RunDecision& run : d.runs) {
    auto it = requests_.find(run.id);
    if (it == requests_.end() || run.num_tokens <= 0) continue;
    Request& r = *it->second;
    if (r.aborted || r.in_flight || r.preempted_at_step == step) continue;
    int32_t hits = 0;
    if (options_.enable_prefix_caching) {
      if (r.state == RequestState::kWaiting) {
        hits = cache_.acquire(r.hashes, r.tokens, max_prefix_blocks(r), &r.blocks);
        r.num_computed = hits * options_.block_size;
        // Another run of this step is computing the block this one would compute
        // next (n > 1 siblings, a shared system prompt): wait one step and hit it.
        const int32_t next = hits;
        if (next < max_prefix_blocks(r) &&
            std::find(computing_.begin(), computing_.end(), r.hashes[next]) != computing_.end()) {
          release_blocks(r);
          r.num_computed = 0;
          num_deferred_++;
          continue;
        }
      }
      const auto next = static_cast<size_t>(r.num_computed / options_.block_size);
      if (r.num_tokens() - r.num_computed > 1 && next < r.hashes.size()) computing_.push_back(r.hashes[next]);
    }
    r.in_flight = true;  // marks "taken" against duplicate runs; reset below
    pending.push_back(Pending{&r, run.num_tokens, hits});
  }
  computing_.clear();
  for (const Pending& p : pending) {
    Request& r = *p.r;
    r.in_flight = false;
    const bool was_waiting = r.state == RequestState::kWaiting;
    const int32_t query_tokens = r.num_tokens();
    if (setup_run(r, p.num_tokens, plan)) {
      if (was_waiting) {
        if (options_.enable_prefix_caching) {
          cache_.record_query(query_tokens, int64_t{p.hit_blocks} * options_.block_size);
        }
        if (r.num_cached_prompt_tokens < 0) {
          r.num_cached_prompt_tokens = std::min(r.prompt_len, p.hit_blocks * options_.block_size);
        }
        r.num_registered = p.hit_blocks;
      }
    } else if (was_waiting) {
      release_blocks(r);
      r.num_computed = 0;
    }
  }
  step_in_flight_ = !plan.empty();
  return plan;
}

void Scheduler::register_computed_blocks(Request& r) {
  if (!options_.enable_prefix_caching) return;
  const int32_t bs = options_.block_size;
  const int32_t upto = std::min({r.num_computed / bs, static_cast<int32_t>(r.hashes.size()),
                                 static_cast<int32_t>(r.blocks.size())});
  if (upto > r.num_registered) {
    const auto from = static_cast<size_t>(r.num_registered);
    const auto n = static_cast<size_t>(upto - r.num_registered);
    cache_.insert_chain(std::span<const kv::BlockHash>(r.hashes).subspan(from, n),
                        std::span<const BlockId>(r.blocks).subspan(from, n),
                        std::span<const int32_t>(r.tokens).subspan(from * bs, n * bs));
  }
  r.num_registered = std::max(r.num_registered, upto);
}

void Scheduler::append_token(Request& r, int32_t token) {
  if (r.num_generated() == 0) r.first_token_time = step_time_;
  r.last_token_time = step_time_;
  r.tokens.push_back(token);
  if (options_.enable_prefix_caching) kv::PrefixCache::extend_hashes(r.tokens, options_.block_size, &r.hashes);
}

bool Scheduler::finish_reason(const Request& r, int32_t token, FinishReason* reason) const {
  const auto& stop = r.sampling.stop_token_ids;
  if (std::find(stop.begin(), stop.end(), token) != stop.end()) {
    *reason = FinishReason::kStop;
    return true;
  }
  if (!r.sampling.ignore_eos) {
    const auto& eog = options_.eog_token_ids;
    if (std::find(eog.begin(), eog.end(), token) != eog.end()) {
      *reason = FinishReason::kStop;
      return true;
    }
  }
  const int64_t capacity = int64_t{options_.num_blocks} * options_.block_size;
  if (r.num_generated() >= r.sampling.max_tokens ||
      (options_.max_model_len > 0 && r.num_tokens() >= options_.max_model_len) || r.num_tokens() >= capacity) {
    *reason = FinishReason::kLength;
    return true;
  }
  if (policy_->role() == InstanceRole::kPrefill) {
    *reason = FinishReason::kPrefillDone;
    return true;
  }
  return false;
}

void Scheduler::finish(Request& r, FinishReason reason, std::vector<FinishedInfo>& out) {
  FinishedInfo info;
  info.id = r.id;
  info.reason = reason;
  info.num_prompt_tokens = r.prompt_len;
  info.num_output_tokens = r.num_generated();
  info.num_cached_prompt_tokens = std::max(0, r.num_cached_prompt_tokens);
  if (reason == FinishReason::kPrefillDone && r.state == RequestState::kRunning) {
    info.held_blocks = r.blocks;
    held_.emplace(r.id, std::move(r.blocks));
    r.blocks.clear();
  } else {
    release_blocks(r);
  }
  out.push_back(std::move(info));
  erase(r);
}

void Scheduler::erase(Request& r) {
  if (r.suspended) {
    --num_suspended_;
    requests_.erase(r.id);  // destroys r
    return;
  }
  switch (r.state) {
    case RequestState::kWaiting: remove_from(waiting_, &r); break;
    case RequestState::kRunning: remove_from(running_, &r); break;
    case RequestState::kSwapped: remove_from(swapped_, &r); break;
  }
  requests_.erase(r.id);  // destroys r
}

std::vector<FinishedInfo> Scheduler::on_step_done(std::span<const SampledToken> outputs) {
  std::vector<FinishedInfo> out = std::move(pending_finished_);
  pending_finished_.clear();
  if (!step_in_flight_) return out;
  step_in_flight_ = false;

  for (const InFlight& f : in_flight_) {
    Request& r = *f.req;
    r.in_flight = false;
    r.num_computed += f.num_tokens;
    r.awaiting_sample = f.sample;
  }
  // Outputs come in plan order: find each one's request among the step's runs from
  // where the last one was found. Only runs await a sample, so an id that is not
  // among them is skipped, as a lookup in requests_ would skip it.
  size_t cursor = 0;
  for (const SampledToken& o : outputs) {
    Request* found = nullptr;
    for (size_t n = 0; n < in_flight_.size(); ++n) {
      const size_t k = cursor + n < in_flight_.size() ? cursor + n : cursor + n - in_flight_.size();
      if (in_flight_[k].req->id == o.id) {
        found = in_flight_[k].req;
        cursor = k + 1;
        break;
      }
    }
    if (found == nullptr) continue;
    Request& r = *found;
    if (r.aborted || !r.awaiting_sample) continue;
    r.awaiting_sample = false;
    append_token(r, o.token);
    FinishReason reason;
    if (finish_reason(r, o.token, &reason)) {
      r.has_pending_finish = true;
      r.pending_finish = reason;
    }
  }
  for (const InFlight& f : in_flight_) {
    Request& r = *f.req;
    if (r.aborted) {
      finish(r, FinishReason::kAbort, out);
      continue;
    }
    if (r.awaiting_sample) {
      // The engine returned no token: run the last token again next step.
      r.awaiting_sample = false;
      r.num_computed -= 1;
    }
    register_computed_blocks(r);
    if (r.has_pending_finish) finish(r, r.pending_finish, out);
  }
  in_flight_.clear();
  return out;
}

}  // namespace ecoserve::policy
