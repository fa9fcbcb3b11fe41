#include "instance/instance_core.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "policy/make_instance_policy.h"

namespace ecoserve::instance {

StatusOr<std::unique_ptr<InstanceCore>> InstanceCore::create(const InstanceCoreOptions& options,
                                                             const Executor& geometry) {
  if (options.policy != "prefill-first" && options.policy != "chunked") {
    return invalid_argument_error("instance: unknown policy '{}' (prefill-first, chunked)", options.policy);
  }
  policy::PolicyOptions po;
  po.max_num_seqs = options.max_num_seqs;
  po.max_num_batched_tokens = options.max_num_batched_tokens;
  po.chunk_size = options.chunk_size;
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<policy::InstancePolicy> pol, policy::make_instance_policy(options.policy, po));
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

Status InstanceCore::validate(const GenerationRequest& request) const {
  if (request.prompt.empty()) return invalid_argument_error("the prompt has no tokens");
  const int64_t need = static_cast<int64_t>(request.prompt.size()) + request.sampling.max_tokens;
  if (need > max_context_) {
    return invalid_argument_error(
        "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the prompt, {} "
        "for the completion). Please reduce the prompt or max_tokens.",
        max_context_, need, request.prompt.size(), request.sampling.max_tokens);
  }
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
  for (RequestId id : ids) any |= scheduler_->abort(id);
  if (!any) return;
  for (const auto& f : scheduler_->on_step_done({})) emit_final(f.id, "abort", &f, "");
}

void InstanceCore::abort_all() {
  std::vector<RequestId> ids;
  ids.reserve(tracked_.size());
  for (const auto& [id, t] : tracked_) ids.push_back(id);
  abort(ids);
  // Requests the scheduler no longer knows (none expected) still get their final event.
  for (RequestId id : ids) emit_final(id, "abort", nullptr, "");
}

StepReport InstanceCore::step(TimePoint now, Executor& executor) {
  StepReport report;
  if (!scheduler_->has_unfinished()) return report;
  StepPlan plan = scheduler_->schedule(now);
  if (plan.empty()) return report;  // nothing fits right now (e.g. every block held)
  report.ran = true;
  for (const auto& s : plan.seqs) {
    auto it = tracked_.find(s.id);
    if (it != tracked_.end() && !it->second.was_scheduled) {
      it->second.was_scheduled = true;
      it->second.scheduled = now;
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
  std::unordered_map<RequestId, const SeqOutput*> by_id;
  if (out.ok()) {
    for (const auto& o : out->seqs) {
      if (o.token < 0) continue;
      sampled_.push_back(policy::SampledToken{o.id, o.token});
      by_id[o.id] = &o;
    }
  } else {
    report.error = out.status();
    spdlog::error("instance: step failed: {}", out.status().message());
    for (const auto& s : plan.seqs) scheduler_->abort(s.id);
  }
  std::vector<policy::FinishedInfo> finished = scheduler_->on_step_done(sampled_);
  std::unordered_map<RequestId, const policy::FinishedInfo*> fin;
  for (const auto& f : finished) fin[f.id] = &f;
  for (const auto& st : sampled_) {
    auto f = fin.find(st.id);
    // A stop token or end-of-generation token ends the request without being emitted.
    if (f != fin.end() && f->second->reason == policy::FinishReason::kStop) continue;
    auto it = tracked_.find(st.id);
    if (it == tracked_.end()) continue;
    const SeqOutput* o = by_id[st.id];
    TokenEvent ev;
    ev.id = st.id;
    ev.token = st.token;
    ev.logprob = o->logprob;
    ev.top_logprobs = o->top_logprobs;
    ev.scheduled_time = it->second.scheduled;
    it->second.sink(ev);
    ++report.generated_tokens;
  }
  for (const auto& f : finished) {
    const std::string reason(policy::finish_reason_name(f.reason));
    emit_final(f.id, out.ok() ? reason : "error", &f, out.ok() ? "" : out.status().message());
  }
  prompt_tokens_total_ += report.prompt_tokens;
  generation_tokens_total_ += report.generated_tokens;
  return report;
}

void InstanceCore::fill_status(InstanceStatus& status) const {
  status.num_waiting = scheduler_->num_waiting();
  status.num_running = scheduler_->num_running();
  status.num_swapped = scheduler_->num_swapped();
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
}

}  // namespace ecoserve::instance
