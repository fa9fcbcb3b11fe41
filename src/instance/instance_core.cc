#include "instance/instance_core.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "policy/make_instance_policy.h"

namespace ecoserve::instance {

StatusOr<std::unique_ptr<InstanceCore>> InstanceCore::create(const InstanceCoreOptions& options,
                                                             const Executor& geometry) {
  policy::PolicyOptions po;
  po.max_num_seqs = options.max_num_seqs;
  po.max_num_batched_tokens = options.max_num_batched_tokens;
  po.chunk_size = options.chunk_size;
  StatusOr<std::unique_ptr<policy::InstancePolicy>> made = policy::make_instance_policy(options.policy, po, options.cost_model);
  if (!made.ok()) return made.status().with_prefix("instance");
  std::unique_ptr<policy::InstancePolicy> pol = std::move(*made);
  policy::Scheduler::Options so;
  so.block_size = geometry.block_size();
  so.num_blocks = geometry.num_kv_blocks();
  so.num_host_blocks = geometry.num_host_blocks();
  if (options.preemption_mode == "swap") {
    so.preemption_mode = policy::PreemptionMode::kSwap;
  } else if (options.preemption_mode != "recompute") {
    return invalid_argument_error("instance: unknown preemption mode '{}' (recompute, swap)", options.preemption_mode);
  }
  so.enable_prefix_caching = options.enable_prefix_caching;
  so.max_model_len = geometry.max_context();
  so.eog_token_ids = options.eog_token_ids;
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<policy::Scheduler> scheduler, policy::Scheduler::create(so, std::move(pol)));
  return std::unique_ptr<InstanceCore>(new InstanceCore(std::move(scheduler), options, geometry.max_context()));
}

InstanceCore::InstanceCore(std::unique_ptr<policy::Scheduler> scheduler, const InstanceCoreOptions& options,
                           int32_t max_context)
    : scheduler_(std::move(scheduler)), options_(options), max_context_(max_context), seed_rng_(options.seed) {}

Status check_context(int64_t prompt_tokens, int64_t max_tokens, int32_t max_context) {
  const int64_t need = prompt_tokens + max_tokens;
  if (need <= max_context) return ok_status();
  return invalid_argument_error(
      "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the prompt, {} "
      "for the completion). Please reduce the prompt or max_tokens.",
      max_context, need, prompt_tokens, max_tokens);
}

Status InstanceCore::validate(const GenerationRequest& request) const {
  if (request.prompt.empty()) return invalid_argument_error("the prompt has no tokens");
  ECO_RETURN_IF_ERROR(check_context(static_cast<int64_t>(request.prompt.size()), request.sampling.max_tokens,
                                    max_context_));
  if (options_.vocab_size > 0) {
    for (int32_t t : request.prompt) {
      if (t < 0 || t >= options_.vocab_size) {
        return invalid_argument_error("prompt token id {} is outside the vocabulary of {}", t, options_.vocab_size);
      }
    }
  }
  return ok_status();
}

void InstanceCore::emit_final(RequestId id, const std::string& reason, const policy::FinishedInfo* info,
                              const std::string& error) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return;
  TokenEvent ev;
  ev.id = id;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = info ? info->num_prompt_tokens : it->second.prompt_tokens;
  ev.cached_prompt_tokens = info ? info->num_cached_prompt_tokens : 0;
  ev.scheduled_time = it->second.was_scheduled ? it->second.scheduled : it->second.arrival;
  EventSink sink = std::move(it->second.sink);
  tracked_.erase(it);
  sink(ev);
}

void InstanceCore::add_request(GenerationRequest request, EventSink sink, TimePoint arrival) {
  policy::RequestSpec spec;
  spec.id = request.id;
  spec.prompt = std::move(request.prompt);
  spec.sampling = std::move(request.sampling);
  spec.priority = request.priority;
  spec.slo_ttft = request.slo_ttft;
  spec.slo_tpot = request.slo_tpot;
  spec.arrival = arrival;
  spec.seed = spec.sampling.has_seed ? spec.sampling.seed : seed_rng_();
  const int32_t prompt_tokens = static_cast<int32_t>(spec.prompt.size());
  if (tracked_.count(spec.id)) {
    TokenEvent ev;
    ev.id = spec.id;
    ev.finished = true;
    ev.finish_reason = "error";
    ev.error = "a request with this id is already running";
    ev.prompt_tokens = prompt_tokens;
    ev.scheduled_time = arrival;
    sink(ev);
    return;
  }
  tracked_[spec.id] = Tracked{std::move(sink), arrival, {}, false, prompt_tokens};
  const RequestId id = spec.id;
  Status s = scheduler_->add_request(std::move(spec));
  if (!s.ok()) emit_final(id, "error", nullptr, s.message());
}

void InstanceCore::abort(std::span<const RequestId> ids) {
  bool any = false;
  for (RequestId id : ids) {
    // Still waiting for its KV: it never reached the scheduler.
    for (auto it = remote_waiting_.begin(); it != remote_waiting_.end(); ++it) {
      if (it->request.id == id) {
        remote_waiting_.erase(it);
        emit_final(id, "abort", nullptr, "");
        break;
      }
    }
    if (held_.erase(id) || migrating_in_.erase(id)) {
      (void)scheduler_->release_held(id);
      continue;
    }
    any |= scheduler_->abort(id);
  }
  if (!any) return;
  for (const auto& f : scheduler_->on_step_done({})) emit_final(f.id, "abort", &f, "");
}

void InstanceCore::abort_all() {
  std::vector<RequestId> reserved;
  for (const auto& [id, n] : migrating_in_) reserved.push_back(id);
  for (RequestId id : reserved) migrate_in_cancel(id);
  std::vector<RequestId> ids;
  ids.reserve(tracked_.size() + held_.size());
  for (const auto& [id, t] : tracked_) ids.push_back(id);
  for (const auto& [id, h] : held_) ids.push_back(id);
  abort(ids);
  // Requests the scheduler no longer knows (none expected) still get their final event.
  for (RequestId id : ids) emit_final(id, "abort", nullptr, "");
}

StatusOr<std::vector<uint8_t>> InstanceCore::export_held(RequestId id, const Executor& executor) const {
  auto it = held_.find(id);
  if (it == held_.end()) return not_found_error("no KV held for request {}", id.value);
  return executor.export_kv(it->second.blocks, 0, it->second.num_tokens);
}

Status InstanceCore::release_held(RequestId id) {
  if (!held_.erase(id)) return not_found_error("no KV held for request {}", id.value);
  return scheduler_->release_held(id);
}

void InstanceCore::add_prefilled_request(GenerationRequest request, std::vector<int32_t> output_tokens,
                                         std::vector<uint8_t> kv, EventSink sink, TimePoint arrival) {
  const RequestId id = request.id;
  const int32_t prompt_tokens = static_cast<int32_t>(request.prompt.size());
  if (tracked_.count(id)) {
    TokenEvent ev;
    ev.id = id;
    ev.finished = true;
    ev.finish_reason = "error";
    ev.error = "a request with this id is already running";
    ev.prompt_tokens = prompt_tokens;
    sink(ev);
    return;
  }
  tracked_[id] = Tracked{std::move(sink), arrival, {}, false, prompt_tokens};
  remote_waiting_.push_back(RemoteWaiting{std::move(request), std::move(output_tokens), std::move(kv), arrival});
}

void InstanceCore::admit_remote(Executor& executor) {
  while (!remote_waiting_.empty()) {
    RemoteWaiting& w = remote_waiting_.front();
    const RequestId id = w.request.id;
    policy::RequestSpec spec;
    spec.id = id;
    spec.prompt = w.request.prompt;
    spec.sampling = w.request.sampling;
    spec.priority = w.request.priority;
    spec.slo_ttft = w.request.slo_ttft;
    spec.slo_tpot = w.request.slo_tpot;
    spec.arrival = w.arrival;
    spec.seed = spec.sampling.has_seed ? spec.sampling.seed : seed_rng_();
    StatusOr<std::vector<BlockId>> table = scheduler_->add_computed_request(std::move(spec), w.output_tokens);
    if (!table.ok() && table.status().code() == StatusCode::kResourceExhausted) return;  // wait for free blocks, in order
    if (!table.ok()) {
      const std::string msg = table.status().message();
      remote_waiting_.pop_front();
      emit_final(id, "error", nullptr, msg);
      continue;
    }
    StatusOr<int32_t> loaded = executor.import_kv(w.kv, *table);
    // Every position but the last sampled token's is computed elsewhere.
    const int32_t expected =
        static_cast<int32_t>(w.request.prompt.size()) + static_cast<int32_t>(w.output_tokens.size()) - 1;
    remote_waiting_.pop_front();  // `w` is gone from here on
    if (!loaded.ok() || *loaded != expected) {
      const std::string msg = loaded.ok() ? fmt::format("the transferred KV holds {} tokens, {} expected", *loaded,
                                                        expected)
                                          : "loading the transferred KV failed: " + loaded.status().message();
      scheduler_->abort(id);
      for (const auto& f : scheduler_->on_step_done({})) {
        if (f.id != id) emit_final(f.id, "abort", &f, "");
      }
      emit_final(id, "error", nullptr, msg);
      continue;
    }
  }
}

StepReport InstanceCore::step(TimePoint now, Executor& executor) {
  StepReport report;
  admit_remote(executor);
  if (!scheduler_->has_unfinished()) return report;
  StepPlan plan = scheduler_->schedule(now);
  report.phase = static_cast<int32_t>(scheduler_->policy().phase());
  if (plan.empty()) return report;  // nothing fits right now (e.g. every block held)
  report.ran = true;
  step_tracked_.clear();
  for (const auto& s : plan.seqs) {
    auto it = tracked_.find(s.id);
    Tracked* t = it != tracked_.end() ? &it->second : nullptr;
    step_tracked_.push_back(t);
    if (t != nullptr && !t->was_scheduled) {
      t->was_scheduled = true;
      t->scheduled = now;
    }
    const int64_t prompt_len = static_cast<int64_t>(s.prompt_tokens.size());
    const int64_t end = std::min<int64_t>(s.num_computed + static_cast<int64_t>(s.tokens.size()), prompt_len);
    report.prompt_tokens += std::max<int64_t>(0, end - s.num_computed);
    const bool decode = s.num_computed >= static_cast<int32_t>(s.prompt_tokens.size());
    (decode ? report.num_decode_seqs : report.num_prefill_seqs)++;
  }
  report.num_seqs = static_cast<int32_t>(plan.seqs.size());
  report.num_tokens = plan.num_tokens();

  StatusOr<StepOutput> out = executor.execute(plan);
  sampled_.clear();
  sampled_out_.clear();
  if (out.ok()) {
    for (const auto& o : out->seqs) {
      if (o.token < 0) continue;
      sampled_.push_back(policy::SampledToken{o.id, o.token});
      sampled_out_.push_back(&o);
    }
  } else {
    report.error = out.status();
    spdlog::error("instance: step failed: {}", out.status().message());
    for (const auto& s : plan.seqs) scheduler_->abort(s.id);
  }
  std::vector<policy::FinishedInfo> finished = scheduler_->on_step_done(sampled_);
  // Requests ended by a stop or end-of-generation token: that token is not emitted.
  stopped_.clear();
  for (const auto& f : finished) {
    if (f.reason == policy::FinishReason::kStop) stopped_.push_back(f.id.value);
  }
  std::sort(stopped_.begin(), stopped_.end());
  // Outputs come in plan order: each one's Tracked (found above, per plan sequence;
  // no request was added or ended since) is searched from where the last was found.
  size_t cursor = 0;
  for (size_t i = 0; i < sampled_.size(); ++i) {
    const policy::SampledToken& st = sampled_[i];
    if (!stopped_.empty() && std::binary_search(stopped_.begin(), stopped_.end(), st.id.value)) continue;
    Tracked* t = nullptr;
    const size_t n_seqs = plan.seqs.size();
    for (size_t n = 0; n < n_seqs; ++n) {
      const size_t k = cursor + n < n_seqs ? cursor + n : cursor + n - n_seqs;
      if (plan.seqs[k].id == st.id) {
        t = step_tracked_[k];
        cursor = k + 1;
        break;
      }
    }
    if (t == nullptr) {  // not a sequence of the plan (an executor's extra output)
      auto it = tracked_.find(st.id);
      if (it == tracked_.end()) continue;
      t = &it->second;
    }
    const SeqOutput* o = sampled_out_[i];
    TokenEvent ev;
    ev.id = st.id;
    ev.token = st.token;
    ev.logprob = o->logprob;
    ev.top_logprobs = o->top_logprobs;
    ev.scheduled_time = t->scheduled;
    t->sink(ev);
    ++report.generated_tokens;
  }
  for (const auto& f : finished) {
    if (f.reason == policy::FinishReason::kPrefillDone && !f.held_blocks.empty()) {
      held_[f.id] = Held{f.held_blocks, f.num_prompt_tokens};
    }
    const std::string reason(policy::finish_reason_name(f.reason));
    emit_final(f.id, out.ok() ? reason : "error", &f, out.ok() ? "" : out.status().message());
  }
  scheduler_->recycle(std::move(plan));
  prompt_tokens_total_ += report.prompt_tokens;
  generation_tokens_total_ += report.generated_tokens;
  return report;
}

StatusOr<MigrationSource> InstanceCore::migrate_out_begin(RequestId id, int32_t begin, bool stop) {
  auto t = tracked_.find(id);
  if (t == tracked_.end()) return not_found_error("request {} is not on this instance", id.value);
  ECO_ASSIGN_OR_RETURN(policy::Scheduler::KvExtent extent, scheduler_->running_kv(id));
  if (begin < 0 || begin > extent.num_computed) {
    return invalid_argument_error("request {}: copy from position {} but {} are computed", id.value, begin,
                                  extent.num_computed);
  }
  MigrationSource src;
  src.id = id;
  src.begin = begin;
  src.end = extent.num_computed;
  src.num_tokens = extent.num_tokens;
  src.blocks.assign(extent.blocks.begin(), extent.blocks.end());
  if (stop) {
    ECO_ASSIGN_OR_RETURN(policy::SuspendedRequest s, scheduler_->suspend(id));
    src.last = true;
    MigrationHandover& h = src.handover;
    h.request.id = id;
    h.request.prompt = std::move(s.spec.prompt);
    h.request.sampling = std::move(s.spec.sampling);
    h.request.sampling.seed = s.spec.seed;
    h.request.sampling.has_seed = true;
    h.request.priority = s.spec.priority;
    h.request.slo_ttft = s.spec.slo_ttft;
    h.request.slo_tpot = s.spec.slo_tpot;
    h.output_tokens = std::move(s.output_tokens);
    h.arrival = t->second.arrival;
    h.scheduled = t->second.was_scheduled ? t->second.scheduled : t->second.arrival;
    h.first_token_time = s.spec.first_token_time;
    h.num_cached_prompt_tokens = s.num_cached_prompt_tokens;
  }
  scheduler_->pin(src.blocks);
  return src;
}

StatusOr<MigrationChunk> InstanceCore::export_source(const MigrationSource& source, const Executor& executor) {
  MigrationChunk chunk;
  chunk.begin = source.begin;
  chunk.end = source.end;
  chunk.num_tokens = source.num_tokens;
  chunk.last = source.last;
  if (source.last) chunk.handover = source.handover;
  if (chunk.end > chunk.begin) {
    ECO_ASSIGN_OR_RETURN(chunk.kv, executor.export_kv(source.blocks, chunk.begin, chunk.end));
  }
  return chunk;
}

void InstanceCore::migrate_out_unpin(const MigrationSource& source) { scheduler_->unpin(source.blocks); }

StatusOr<MigrationChunk> InstanceCore::migrate_out_copy(RequestId id, int32_t begin, const Executor& executor) {
  ECO_ASSIGN_OR_RETURN(MigrationSource src, migrate_out_begin(id, begin, /*stop=*/false));
  StatusOr<MigrationChunk> chunk = export_source(src, executor);
  migrate_out_unpin(src);
  return chunk;
}

StatusOr<MigrationChunk> InstanceCore::migrate_out_stop(RequestId id, int32_t begin, const Executor& executor) {
  ECO_ASSIGN_OR_RETURN(policy::Scheduler::KvExtent extent, scheduler_->running_kv(id));
  if (extent.num_computed != extent.num_tokens - 1) {
    return failed_precondition_error("request {} is still computing its prompt", id.value);
  }
  ECO_ASSIGN_OR_RETURN(MigrationSource src, migrate_out_begin(id, begin, /*stop=*/true));
  StatusOr<MigrationChunk> chunk = export_source(src, executor);
  migrate_out_unpin(src);
  if (!chunk.ok()) (void)scheduler_->resume(id);
  return chunk;
}

Status InstanceCore::migrate_out_finish(RequestId id, bool committed) {
  if (!committed) return scheduler_->resume(id);
  ECO_RETURN_IF_ERROR(scheduler_->drop_suspended(id));
  tracked_.erase(id);  // the destination emits its events from here on
  return ok_status();
}

Status InstanceCore::migrate_in_reserve(RequestId id, int32_t num_tokens) {
  if (tracked_.count(id)) return already_exists_error("request {} already runs here", id.value);
  ECO_RETURN_IF_ERROR(scheduler_->reserve_blocks(id, num_tokens).status());
  migrating_in_.try_emplace(id, 0);
  return ok_status();
}

Status InstanceCore::migrate_in_load(RequestId id, const MigrationChunk& chunk, Executor& executor) {
  auto it = migrating_in_.find(id);
  if (it == migrating_in_.end()) return not_found_error("no migration of request {} is arriving here", id.value);
  if (chunk.begin != it->second || chunk.end < chunk.begin) {
    return invalid_argument_error("request {}: stage [{}, {}) does not follow the {} positions loaded", id.value,
                                  chunk.begin, chunk.end, it->second);
  }
  if (chunk.end == chunk.begin) return ok_status();
  ECO_ASSIGN_OR_RETURN(std::span<const BlockId> table, scheduler_->reserve_blocks(id, chunk.end));
  ECO_ASSIGN_OR_RETURN(int32_t loaded, executor.import_kv(chunk.kv, table));
  if (loaded != chunk.end - chunk.begin) {
    return invalid_argument_error("request {}: the stage holds {} positions, {} expected", id.value, loaded,
                                  chunk.end - chunk.begin);
  }
  it->second = chunk.end;
  return ok_status();
}

Status InstanceCore::migrate_in_commit(const MigrationChunk& last, EventSink sink, Executor& executor) {
  const MigrationHandover& h = last.handover;
  const RequestId id = h.request.id;
  if (!last.last) return invalid_argument_error("request {}: commit needs the stop-and-copy stage", id.value);
  ECO_RETURN_IF_ERROR(migrate_in_load(id, last, executor));
  const int32_t computed =
      static_cast<int32_t>(h.request.prompt.size()) + static_cast<int32_t>(h.output_tokens.size()) - 1;
  if (migrating_in_.at(id) != computed) {
    return invalid_argument_error("request {}: {} positions arrived, the request has {}", id.value,
                                  migrating_in_.at(id), computed);
  }
  policy::RequestSpec spec;
  spec.id = id;
  spec.prompt = h.request.prompt;
  spec.sampling = h.request.sampling;
  spec.priority = h.request.priority;
  spec.arrival = h.arrival;
  spec.seed = h.request.sampling.seed;
  spec.slo_ttft = h.request.slo_ttft;
  spec.slo_tpot = h.request.slo_tpot;
  spec.first_token_time = h.first_token_time;
  ECO_RETURN_IF_ERROR(scheduler_->adopt_reserved(std::move(spec), h.output_tokens, h.num_cached_prompt_tokens));
  migrating_in_.erase(id);
  tracked_[id] = Tracked{std::move(sink), h.arrival, h.scheduled, true, static_cast<int32_t>(h.request.prompt.size())};
  return ok_status();
}

void InstanceCore::migrate_in_cancel(RequestId id) {
  if (!migrating_in_.erase(id)) return;
  (void)scheduler_->release_held(id);
}

void InstanceCore::fill_status(InstanceStatus& status) const {
  status.num_waiting = scheduler_->num_waiting() + static_cast<int32_t>(remote_waiting_.size());
  status.num_running = scheduler_->num_running();
  status.num_swapped = scheduler_->num_swapped();
  status.num_migrating = scheduler_->num_suspended() + static_cast<int32_t>(migrating_in_.size());
  status.kv_usage = scheduler_->kv_usage();
  const policy::Scheduler::TokenLoad load = scheduler_->token_load();
  status.num_waiting_tokens = load.waiting_tokens;
  status.num_running_tokens = load.running_tokens;
  status.num_free_blocks = scheduler_->num_free_blocks();
  status.num_total_blocks = scheduler_->options().num_blocks;
  status.block_size = scheduler_->options().block_size;
  status.prefix_cache_queries = scheduler_->prefix_cache_query_tokens();
  status.prefix_cache_hits = scheduler_->prefix_cache_hit_tokens();
  status.preemptions = scheduler_->num_preemptions();
  status.prompt_tokens_total = prompt_tokens_total_;
  status.generation_tokens_total = generation_tokens_total_;
  const policy::InstancePolicy& pol = scheduler_->policy();
  status.phase = static_cast<int32_t>(pol.phase());
  status.last_phase_switch = pol.last_phase_switch();
  status.phase_switches = pol.num_phase_switches();
}

}  // namespace ecoserve::instance
