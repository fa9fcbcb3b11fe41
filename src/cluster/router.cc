#include "cluster/router.h"

#include <algorithm>

#include "kv/prefix_cache.h"

namespace ecoserve::cluster {

StatusOr<std::unique_ptr<Router>> Router::create(std::vector<std::unique_ptr<GenerationBackend>> instances,
                                                 const RouterOptions& options, const Clock* clock) {
  if (instances.empty()) return invalid_argument_error("router: no instances");
  if (!clock) return invalid_argument_error("router: no clock");
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<policy::RouterPolicy> policy,
                       policy::make_router_policy(options.router, options.policy));
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!instances[i]) return invalid_argument_error("router: instance {} is null", i);
    if (instances[i]->max_context() != instances[0]->max_context()) {
      return invalid_argument_error("router: instance {} has a context of {} tokens, instance 0 of {}", i,
                                    instances[i]->max_context(), instances[0]->max_context());
    }
  }
  std::vector<Member> members;
  for (size_t i = 0; i < instances.size(); ++i) {
    Member m;
    m.backend = std::move(instances[i]);
    m.name = std::to_string(i);
    members.push_back(std::move(m));
  }
  return std::unique_ptr<Router>(new Router(std::move(members), options, clock, std::move(policy)));
}

Router::Router(std::vector<Member> members, const RouterOptions& options, const Clock* clock,
               std::unique_ptr<policy::RouterPolicy> policy)
    : members_(std::move(members)), options_(options), clock_(clock), policy_(std::move(policy)) {
  model_ = members_[0].backend->model();
  max_context_ = members_[0].backend->max_context();
  const int32_t bs = members_[0].backend->status().block_size;
  block_size_ = bs > 0 ? bs : 16;
}

Router::~Router() { stop(); }

void Router::start() {
  for (Member& m : members_) m.backend->start();
}

bool Router::healthy(const instance::InstanceStatus& s, TimePoint now) const {
  return s.running && now - s.last_heartbeat <= options_.heartbeat_timeout;
}

Status Router::submit(instance::GenerationRequest request, instance::EventSink sink) {
  if (!sink) return invalid_argument_error("no event sink");
  if (request.prompt.empty()) return invalid_argument_error("the prompt has no tokens");
  const int64_t need = static_cast<int64_t>(request.prompt.size()) + request.sampling.max_tokens;
  if (need > max_context_) {
    return invalid_argument_error(
        "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the prompt, {} "
        "for the completion). Please reduce the prompt or max_tokens.",
        max_context_, need, request.prompt.size(), request.sampling.max_tokens);
  }
  // Snapshots are read outside the lock (each takes its instance's own lock).
  std::vector<instance::InstanceStatus> snaps;
  snaps.reserve(members_.size());
  for (const Member& m : members_) snaps.push_back(m.backend->status());
  const TimePoint now = clock_->now();

  std::unique_lock<std::mutex> lock(mu_);
  if (draining_) return unavailable_error("the server is shutting down");
  const TimePoint t0 = clock_->now();
  view_.instances.resize(members_.size());
  int32_t unhealthy = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    const Member& m = members_[i];
    const instance::InstanceStatus& s = snaps[i];
    policy::InstanceLoad& l = view_.instances[i];
    l = policy::InstanceLoad{};
    l.id = InstanceId(static_cast<int32_t>(i));
    l.role = policy::InstanceRole::kMixed;
    l.healthy = healthy(s, now);
    unhealthy += l.healthy ? 0 : 1;
    l.num_waiting = m.waiting;
    l.num_running = m.running;
    l.num_waiting_tokens = m.waiting_tokens;
    l.num_running_tokens = m.running_tokens;
    l.num_free_blocks = s.num_free_blocks;
    l.num_total_blocks = s.num_total_blocks;
    l.max_num_seqs = 0;
    l.block_size = block_size_;
  }
  hashes_.clear();
  kv::PrefixCache::extend_hashes(request.prompt, block_size_, &hashes_);
  policy::RouteRequest rr;
  rr.prompt_len = static_cast<int32_t>(request.prompt.size());
  rr.max_tokens = request.sampling.max_tokens;
  rr.priority = request.priority;
  rr.block_hashes = hashes_;
  const std::optional<InstanceId> target = policy_->route(view_, rr);
  stats_.route_seconds_total += to_seconds(clock_->now() - t0);
  stats_.unhealthy_instances = unhealthy;
  if (!target) {
    ++stats_.rejected;
    return unavailable_error("no healthy instance can take the request ({} of {} unhealthy)", unhealthy,
                             members_.size());
  }
  const size_t idx = static_cast<size_t>(target->value);
  Member& m = members_[idx];
  const RequestId id = request.id;
  const int32_t prompt_tokens = rr.prompt_len;
  in_flight_[id] = InFlight{idx, prompt_tokens, 0};
  m.waiting++;
  m.waiting_tokens += prompt_tokens;
  ++stats_.routed;
  lock.unlock();

  // The instance calls the wrapper on its thread: account, then pass the event on.
  Status s = m.backend->submit(std::move(request), [this, sink = std::move(sink)](const instance::TokenEvent& ev) {
    on_event(ev);
    sink(ev);
  });
  if (!s.ok()) {
    std::lock_guard<std::mutex> relock(mu_);
    auto it = in_flight_.find(id);
    if (it != in_flight_.end()) {
      m.waiting--;
      m.waiting_tokens -= prompt_tokens;
      in_flight_.erase(it);
    }
    --stats_.routed;
  }
  return s;
}

void Router::on_event(const instance::TokenEvent& ev) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(ev.id);
  if (it == in_flight_.end()) return;
  InFlight& f = it->second;
  Member& m = members_[f.member];
  const bool was_waiting = f.generated == 0;
  if (ev.token >= 0) {
    if (was_waiting) {
      m.waiting--;
      m.waiting_tokens -= f.prompt_tokens;
      m.running++;
      m.running_tokens += f.prompt_tokens;
    }
    f.generated++;
    m.running_tokens++;
  }
  if (ev.finished) {
    if (f.generated == 0) {
      m.waiting--;
      m.waiting_tokens -= f.prompt_tokens;
    } else {
      m.running--;
      m.running_tokens -= f.prompt_tokens + f.generated;
    }
    in_flight_.erase(it);
  }
}

void Router::cancel(RequestId id) {
  size_t idx = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    idx = it->second.member;
  }
  members_[idx].backend->cancel(id);
}

instance::InstanceStatus Router::status() const {
  instance::InstanceStatus total;
  double kv = 0.0;
  const TimePoint now = clock_->now();
  for (const Member& m : members_) {
    const instance::InstanceStatus s = m.backend->status();
    total.num_waiting += s.num_waiting;
    total.num_running += s.num_running;
    total.num_swapped += s.num_swapped;
    total.num_waiting_tokens += s.num_waiting_tokens;
    total.num_running_tokens += s.num_running_tokens;
    total.num_free_blocks += s.num_free_blocks;
    total.num_total_blocks += s.num_total_blocks;
    total.block_size = s.block_size;
    kv += s.kv_usage;
    if (healthy(s, now)) {
      total.running = true;
      total.last_heartbeat = std::max(total.last_heartbeat, s.last_heartbeat);
    }
    total.steps += s.steps;
    total.last_step_seconds = std::max(total.last_step_seconds, s.last_step_seconds);
    total.mean_step_seconds += s.mean_step_seconds / static_cast<double>(members_.size());
    total.mean_plan_seconds += s.mean_plan_seconds / static_cast<double>(members_.size());
    total.prompt_tokens_total += s.prompt_tokens_total;
    total.generation_tokens_total += s.generation_tokens_total;
    total.prefix_cache_queries += s.prefix_cache_queries;
    total.prefix_cache_hits += s.prefix_cache_hits;
    total.preemptions += s.preemptions;
  }
  total.kv_usage = kv / static_cast<double>(members_.size());
  if (!total.running) {
    // No healthy instance: report the newest heartbeat anyway (for the /health message).
    for (const Member& m : members_) total.last_heartbeat = std::max(total.last_heartbeat, m.backend->status().last_heartbeat);
  }
  return total;
}

std::vector<InstanceReport> Router::instances() const {
  std::vector<InstanceReport> out;
  const TimePoint now = clock_->now();
  for (const Member& m : members_) {
    for (InstanceReport r : m.backend->instances()) {
      r.name = m.name;
      r.healthy = healthy(r.status, now);
      out.push_back(std::move(r));
    }
  }
  return out;
}

void Router::begin_drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }
  for (Member& m : members_) m.backend->begin_drain();
}

bool Router::idle() const {
  for (const Member& m : members_) {
    if (!m.backend->idle()) return false;
  }
  return true;
}

void Router::stop() {
  for (Member& m : members_) m.backend->stop();
}

ClusterStats Router::cluster_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ecoserve::cluster
