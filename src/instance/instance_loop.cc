#include "instance/instance_loop.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "policy/make_instance_policy.h"
#include "policy/scheduler.h"

namespace ecoserve::instance {

namespace {

struct Incoming {
  GenerationRequest request;
  EventSink sink;
  TimePoint arrival;
};

struct Tracked {
  EventSink sink;
  TimePoint arrival;
  TimePoint scheduled{};
  bool was_scheduled = false;
  int32_t prompt_tokens = 0;
};

// Exponential moving average with a fixed weight (recent steps dominate).
void ema(double& acc, double v, int64_t n) { acc = n <= 1 ? v : 0.9 * acc + 0.1 * v; }

}  // namespace

struct InstanceLoop::Impl {
  std::unique_ptr<engine::ModelRunner> runner;
  InstanceOptions options;
  const Clock* clock = nullptr;
  std::unique_ptr<policy::Scheduler> scheduler;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Incoming> incoming;
  std::vector<RequestId> cancels;
  bool stopping = false;
  bool draining = false;
  int32_t queued = 0;  // incoming + the scheduler's waiting (under mu)
  InstanceStatus snapshot;
  std::thread thread;
  bool started = false;

  // Loop-thread state.
  std::unordered_map<RequestId, Tracked> tracked;
  std::mt19937_64 seed_rng{0x5eed};

  void run();
  void admit(std::deque<Incoming>& batch);
  void emit_final(RequestId id, const std::string& reason, const policy::FinishedInfo* info, const std::string& error);
  void publish(bool running_flag);
};

InstanceLoop::InstanceLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

InstanceLoop::~InstanceLoop() { stop(); }

StatusOr<std::unique_ptr<InstanceLoop>> InstanceLoop::create(std::unique_ptr<engine::ModelRunner> runner,
                                                             const InstanceOptions& options, const Clock* clock) {
  if (!runner) return invalid_argument_error("instance: no engine");
  if (!clock) return invalid_argument_error("instance: no clock");
  policy::PolicyOptions po;
  po.max_num_seqs = options.max_num_seqs;
  po.max_num_batched_tokens = options.max_num_batched_tokens;
  po.chunk_size = options.chunk_size;
  if (options.policy != "prefill-first" && options.policy != "chunked") {
    return invalid_argument_error("instance: unknown policy '{}' (prefill-first, chunked)", options.policy);
  }
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<policy::InstancePolicy> pol, policy::make_instance_policy(options.policy, po));
  policy::Scheduler::Options so;
  so.block_size = runner->block_size();
  so.num_blocks = runner->num_kv_blocks();
  so.num_host_blocks = runner->num_host_blocks();
  if (options.preemption_mode == "swap") {
    so.preemption_mode = policy::PreemptionMode::kSwap;
  } else if (options.preemption_mode != "recompute") {
    return invalid_argument_error("instance: unknown preemption mode '{}' (recompute, swap)", options.preemption_mode);
  }
  so.enable_prefix_caching = options.enable_prefix_caching;
  so.max_model_len = runner->max_context();
  const model::Tokenizer& tok = runner->model().tokenizer();
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_eog(id)) so.eog_token_ids.push_back(id);
  }
  auto impl = std::make_unique<Impl>();
  ECO_ASSIGN_OR_RETURN(impl->scheduler, policy::Scheduler::create(so, std::move(pol)));
  impl->runner = std::move(runner);
  impl->options = options;
  impl->clock = clock;
  impl->snapshot.last_heartbeat = clock->now();
  return std::unique_ptr<InstanceLoop>(new InstanceLoop(std::move(impl)));
}

void InstanceLoop::start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started) return;
  impl_->started = true;
  impl_->snapshot.running = true;
  impl_->snapshot.last_heartbeat = impl_->clock->now();
  impl_->thread = std::thread([this] { impl_->run(); });
}

void InstanceLoop::begin_drain() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->draining = true;
}

bool InstanceLoop::idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->queued == 0 && impl_->snapshot.num_running == 0 && impl_->snapshot.num_swapped == 0 &&
         impl_->incoming.empty();
}

void InstanceLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  // Requests never seen by the loop thread still get their final event.
  std::deque<Incoming> left;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    left.swap(impl_->incoming);
    impl_->snapshot.running = false;
  }
  for (auto& in : left) {
    TokenEvent ev;
    ev.id = in.request.id;
    ev.finished = true;
    ev.finish_reason = "abort";
    ev.prompt_tokens = static_cast<int32_t>(in.request.prompt.size());
    in.sink(ev);
  }
}

Status InstanceLoop::submit(GenerationRequest request, EventSink sink) {
  const engine::ModelRunner& r = *impl_->runner;
  if (request.prompt.empty()) return invalid_argument_error("the prompt has no tokens");
  const int64_t need = static_cast<int64_t>(request.prompt.size()) + request.sampling.max_tokens;
  if (need > r.max_context()) {
    return invalid_argument_error(
        "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the prompt, {} "
        "for the completion). Please reduce the prompt or max_tokens.",
        r.max_context(), need, request.prompt.size(), request.sampling.max_tokens);
  }
  const int32_t vocab = r.model().config().n_vocab;
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= vocab) return invalid_argument_error("prompt token id {} is outside the vocabulary of {}", t, vocab);
  }
  if (!sink) return invalid_argument_error("no event sink");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping || impl_->draining) return unavailable_error("the server is shutting down");
    if (impl_->queued >= impl_->options.max_waiting) {
      return resource_exhausted_error("the waiting queue is full ({} requests); retry later", impl_->options.max_waiting);
    }
    impl_->queued++;
    impl_->incoming.push_back(Incoming{std::move(request), std::move(sink), impl_->clock->now()});
  }
  impl_->cv.notify_one();
  return ok_status();
}

void InstanceLoop::cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->cancels.push_back(id);
  }
  impl_->cv.notify_one();
}

InstanceStatus InstanceLoop::status() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->snapshot;
}

const engine::ModelRunner& InstanceLoop::runner() const { return *impl_->runner; }
const InstanceOptions& InstanceLoop::options() const { return impl_->options; }

void InstanceLoop::Impl::emit_final(RequestId id, const std::string& reason, const policy::FinishedInfo* info,
                                    const std::string& error) {
  auto it = tracked.find(id);
  if (it == tracked.end()) return;
  TokenEvent ev;
  ev.id = id;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = info ? info->num_prompt_tokens : it->second.prompt_tokens;
  ev.cached_prompt_tokens = info ? info->num_cached_prompt_tokens : 0;
  ev.scheduled_time = it->second.was_scheduled ? it->second.scheduled : it->second.arrival;
  EventSink sink = std::move(it->second.sink);
  tracked.erase(it);
  sink(ev);
}

void InstanceLoop::Impl::admit(std::deque<Incoming>& batch) {
  for (auto& in : batch) {
    policy::RequestSpec spec;
    spec.id = in.request.id;
    spec.prompt = std::move(in.request.prompt);
    spec.sampling = std::move(in.request.sampling);
    spec.priority = in.request.priority;
    spec.arrival = in.arrival;
    spec.seed = spec.sampling.has_seed ? spec.sampling.seed : seed_rng();
    const int32_t prompt_tokens = static_cast<int32_t>(spec.prompt.size());
    tracked[spec.id] = Tracked{std::move(in.sink), in.arrival, {}, false, prompt_tokens};
    Status s = scheduler->add_request(std::move(spec));
    if (!s.ok()) emit_final(in.request.id, "error", nullptr, s.message());
  }
}

void InstanceLoop::Impl::publish(bool running_flag) {
  std::lock_guard<std::mutex> lock(mu);
  snapshot.running = running_flag;
  snapshot.last_heartbeat = clock->now();
  snapshot.num_waiting = scheduler->num_waiting() + static_cast<int32_t>(incoming.size());
  snapshot.num_running = scheduler->num_running();
  snapshot.num_swapped = scheduler->num_swapped();
  snapshot.kv_usage = scheduler->kv_usage();
  snapshot.prefix_cache_queries = scheduler->prefix_cache_query_tokens();
  snapshot.prefix_cache_hits = scheduler->prefix_cache_hit_tokens();
  snapshot.preemptions = scheduler->num_preemptions();
  queued = snapshot.num_waiting;
}

void InstanceLoop::Impl::run() {
  std::vector<policy::SampledToken> sampled;
  while (true) {
    std::deque<Incoming> batch;
    std::vector<RequestId> to_cancel;
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!stopping && incoming.empty() && cancels.empty() && !scheduler->has_unfinished()) {
        cv.wait_for(lock, options.idle_heartbeat);
      }
      if (stopping) break;
      batch.swap(incoming);
      to_cancel.swap(cancels);
    }
    admit(batch);
    for (RequestId id : to_cancel) scheduler->abort(id);
    if (!to_cancel.empty()) {
      for (const auto& f : scheduler->on_step_done({})) emit_final(f.id, "abort", &f, "");
    }
    if (!scheduler->has_unfinished()) {
      publish(true);
      continue;
    }
    const TimePoint t0 = clock->now();
    policy::StepPlan plan = scheduler->schedule(t0);
    const TimePoint t1 = clock->now();
    if (plan.empty()) {
      // Nothing fits right now (e.g. all blocks held): beat and wait for a change.
      publish(true);
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5));
      continue;
    }
    for (const auto& s : plan.seqs) {
      auto it = tracked.find(s.id);
      if (it != tracked.end() && !it->second.was_scheduled) {
        it->second.was_scheduled = true;
        it->second.scheduled = t1;
      }
    }
    StatusOr<engine::StepOutput> out = runner->execute(plan);
    const TimePoint t2 = clock->now();
    sampled.clear();
    std::unordered_map<RequestId, const engine::SeqOutput*> by_id;
    if (out.ok()) {
      for (const auto& o : out->seqs) {
        if (o.token < 0) continue;
        sampled.push_back(policy::SampledToken{o.id, o.token});
        by_id[o.id] = &o;
      }
    } else {
      spdlog::error("instance: step failed: {}", out.status().message());
      for (const auto& s : plan.seqs) scheduler->abort(s.id);
    }
    std::vector<policy::FinishedInfo> finished = scheduler->on_step_done(sampled);
    std::unordered_map<RequestId, const policy::FinishedInfo*> fin;
    for (const auto& f : finished) fin[f.id] = &f;
    int64_t generated = 0;
    for (const auto& st : sampled) {
      auto f = fin.find(st.id);
      // A stop token or end-of-generation token ends the request without being emitted.
      if (f != fin.end() && f->second->reason == policy::FinishReason::kStop) continue;
      auto it = tracked.find(st.id);
      if (it == tracked.end()) continue;
      const engine::SeqOutput* o = by_id[st.id];
      TokenEvent ev;
      ev.id = st.id;
      ev.token = st.token;
      ev.logprob = o->logprob;
      ev.top_logprobs = o->top_logprobs;
      ev.scheduled_time = it->second.scheduled;
      it->second.sink(ev);
      ++generated;
    }
    for (const auto& f : finished) {
      const std::string reason(policy::finish_reason_name(f.reason));
      emit_final(f.id, out.ok() ? reason : "error", &f, out.ok() ? "" : out.status().message());
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      snapshot.steps++;
      snapshot.last_step_seconds = to_seconds(t2 - t1);
      ema(snapshot.mean_step_seconds, to_seconds(t2 - t1), snapshot.steps);
      ema(snapshot.mean_plan_seconds, to_seconds(t1 - t0), snapshot.steps);
      for (const auto& s : plan.seqs) {
        // Prompt tokens computed this step (a recomputed request counts again, like vLLM).
        const int64_t prompt_len = static_cast<int64_t>(s.prompt_tokens.size());
        const int64_t end = std::min<int64_t>(s.num_computed + static_cast<int64_t>(s.tokens.size()), prompt_len);
        snapshot.prompt_tokens_total += std::max<int64_t>(0, end - s.num_computed);
      }
      snapshot.generation_tokens_total += generated;
    }
    if (options.on_step) {
      StepStats st;
      st.plan_seconds = to_seconds(t1 - t0);
      st.execute_seconds = to_seconds(t2 - t1);
      st.num_seqs = static_cast<int32_t>(plan.seqs.size());
      st.num_tokens = plan.num_tokens();
      for (const auto& s : plan.seqs) {
        const bool decode = s.num_computed >= static_cast<int32_t>(s.prompt_tokens.size());
        (decode ? st.num_decode_seqs : st.num_prefill_seqs)++;
      }
      options.on_step(st);
    }
    publish(true);
  }
  // Stopping: every request still known gets its final event.
  std::vector<RequestId> ids;
  for (const auto& [id, t] : tracked) ids.push_back(id);
  for (RequestId id : ids) emit_final(id, "abort", nullptr, "");
  publish(false);
}

}  // namespace ecoserve::instance
