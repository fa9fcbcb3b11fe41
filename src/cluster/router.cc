#include "cluster/router.h"

#include <algorithm>
#include <chrono>

#include "policy/freeness.h"
#include "policy/freeness_router.h"
#include "instance/instance_core.h"
#include "base/log.h"
#include "kv/prefix_cache.h"

namespace ecoserve::cluster {

StatusOr<std::unique_ptr<Router>> Router::create(std::vector<std::unique_ptr<GenerationBackend>> instances,
                                                 const RouterOptions& options, const Clock* clock) {
  if (instances.empty()) return invalid_argument_error("router: no instances");
  if (!clock) return invalid_argument_error("router: no clock");
  if (options.strategy != "nodg" && options.strategy != "fudg" && options.strategy != "padg" &&
      options.strategy != "llumnix") {
    return invalid_argument_error("router: unknown strategy '{}' (nodg, fudg, padg, llumnix)", options.strategy);
  }
  if (options.strategy == "llumnix") {
    ECO_RETURN_IF_ERROR(policy::validate(options.migration));
    if (options.migrate_interval < Duration::zero()) return invalid_argument_error("router: negative migrate interval");
    if (options.migrate_max_stages < 1) {
      return invalid_argument_error("router: migrate_max_stages must be at least 1, got {}", options.migrate_max_stages);
    }
    if (options.migrate_last_stage_tokens < 0) return invalid_argument_error("router: negative migrate_last_stage_tokens");
    if (options.scale_by_freeness) {
      ECO_RETURN_IF_ERROR(policy::validate(options.freeness_scaling));
      if (!options.make_instance) return invalid_argument_error("router: scaling needs a way to make instances");
    }
  }
  if (options.strategy == "padg") {
    if (!options.cost_model) return invalid_argument_error("router: padg needs a cost model (a profile)");
    ECO_RETURN_IF_ERROR(policy::validate(options.mitosis));
  }
  if (options.autoscale) {
    ECO_RETURN_IF_ERROR(policy::validate(options.autoscale_policy));
    if (options.autoscale_min < 1 || options.autoscale_max < options.autoscale_min ||
        options.autoscale_window <= Duration::zero()) {
      return invalid_argument_error("router: autoscaling needs 1 <= min ({}) <= max ({}) and a positive window",
                                    options.autoscale_min, options.autoscale_max);
    }
    if (!options.make_instance) return invalid_argument_error("router: autoscaling needs a way to make instances");
    if (options.strategy == "fudg") return invalid_argument_error("router: autoscaling is not supported under fudg");
  }
  if (options.strategy == "fudg" &&
      (options.num_prefill_instances < 1 || options.num_prefill_instances >= static_cast<int32_t>(instances.size()))) {
    return invalid_argument_error("router: fudg needs at least one prefill and one decode instance ({} prefill of {})",
                                  options.num_prefill_instances, instances.size());
  }
  std::unique_ptr<policy::RouterPolicy> policy;
  if (options.strategy == "padg") {
    policy = std::make_unique<policy::PadgRouter>(options.padg, options.cost_model);
  } else if (options.router == "freeness") {
    policy = std::make_unique<policy::FreenessRouter>(options.migration.freeness);
  } else {
    ECO_ASSIGN_OR_RETURN(policy, policy::make_router_policy(options.router, options.policy));
  }
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!instances[i]) return invalid_argument_error("router: instance {} is null", i);
    if (instances[i]->max_context() != instances[0]->max_context()) {
      return invalid_argument_error("router: instance {} has a context of {} tokens, instance 0 of {}", i,
                                    instances[i]->max_context(), instances[0]->max_context());
    }
  }
  if (options.max_instances < static_cast<int32_t>(instances.size())) {
    return invalid_argument_error("router: {} instances, at most max_instances = {}", instances.size(),
                                  options.max_instances);
  }
  return std::unique_ptr<Router>(new Router(std::move(instances), options, clock, std::move(policy)));
}

namespace {

// Remote instances go by their address; embedded ones by their slot.
std::string member_name(const GenerationBackend& backend, size_t slot) {
  const std::vector<InstanceReport> reports = backend.instances();
  return !reports.empty() && reports[0].name.find("://") != std::string::npos ? reports[0].name : std::to_string(slot);
}

}  // namespace

Router::Router(std::vector<std::unique_ptr<GenerationBackend>> instances, const RouterOptions& options,
               const Clock* clock, std::unique_ptr<policy::RouterPolicy> policy)
    : options_(options), clock_(clock), policy_(std::move(policy)) {
  const size_t capacity = static_cast<size_t>(std::max<int32_t>(1, options_.max_instances));
  members_ = std::make_unique<Member[]>(capacity);
  ready_ = std::make_unique<std::atomic<bool>[]>(capacity);
  probes_ = std::make_unique<Probe[]>(capacity);
  model_ = instances[0]->model();
  max_context_ = instances[0]->max_context();
  const int32_t bs = instances[0]->status().block_size;
  block_size_ = bs > 0 ? bs : 16;
  if (padg()) padg_ = static_cast<policy::PadgRouter*>(policy_.get());
  if (llumnix()) {
    planner_.emplace(options_.migration);
    if (options_.scale_by_freeness) freeness_scaler_.emplace(options_.freeness_scaling);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < instances.size(); ++i) {
    policy::InstanceRole role = policy::InstanceRole::kMixed;
    if (fudg()) {
      role = static_cast<int32_t>(i) < options_.num_prefill_instances ? policy::InstanceRole::kPrefill
                                                                      : policy::InstanceRole::kDecode;
    }
    const std::string name = member_name(*instances[i], i);
    add_slot(std::move(instances[i]), name, role);
  }
}

void Router::add_slot(std::unique_ptr<GenerationBackend> backend, const std::string& name, policy::InstanceRole role) {
  const size_t i = size();
  Member& m = members_[i];
  {
    std::lock_guard<std::mutex> lock(backends_mu_);
    m.backend = std::move(backend);
  }
  m.name = name;
  m.role = role;
  ready_[i].store(true);
  probes_[i].last = clock_->now();
  probes_[i].ever = true;
  if (padg()) {
    // The macro instances the mitosis rules make of the instances added one by one.
    const TimePoint t0 = clock_->now();
    StatusOr<policy::ScalePlan> plan = policy::plan_add(layout_, InstanceId(static_cast<int32_t>(i)), options_.mitosis);
    ECO_CHECK_MSG(plan.ok(), "{}", plan.status().to_string());
    const Status applied = policy::apply(layout_, *plan);
    ECO_CHECK_MSG(applied.ok(), "{}", applied.to_string());
    publish_layout();
    note_layout_change(t0);
  }
  size_.store(i + 1, std::memory_order_release);
}

std::shared_ptr<GenerationBackend> Router::backend(size_t i) const {
  std::lock_guard<std::mutex> lock(backends_mu_);
  return members_[i].backend;
}

instance::InstanceStatus Router::status_of(size_t i) const {
  std::shared_ptr<GenerationBackend> b = backend(i);
  return b ? b->status() : instance::InstanceStatus{};  // removed: not running
}

void Router::publish_layout() {
  std::vector<std::vector<InstanceId>> groups;
  for (const policy::MacroGroup& g : layout_.macros) groups.push_back(g.members);
  padg_->set_layout(std::move(groups));
  stats_.macros.clear();
  for (const policy::MacroGroup& g : layout_.macros) {
    MacroReport r;
    r.id = g.id.value;
    for (InstanceId id : g.members) r.members.push_back(members_[static_cast<size_t>(id.value)].name);
    stats_.macros.push_back(std::move(r));
  }
}

void Router::note_layout_change(TimePoint start) {
  ++stats_.layout_changes;
  stats_.last_layout_change_seconds = to_seconds(clock_->now() - start);
  spdlog::info("router: macro instances now {} (layout changed in {:.0f} us)", layout_summary(),
               stats_.last_layout_change_seconds * 1e6);
}

std::string Router::layout_summary() const {
  std::string text;
  for (const MacroReport& m : stats_.macros) {
    text += text.empty() ? "[" : " [";
    for (size_t k = 0; k < m.members.size(); ++k) text += (k ? " " : "") + m.members[k];
    text += "]";
  }
  return text;
}

StatusOr<std::string> Router::add_instance(const std::string& address) {
  if (!options_.make_instance) return GenerationBackend::add_instance(address);
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<GenerationBackend> instance, options_.make_instance(address));
  return add_member(std::move(instance));
}

StatusOr<std::string> Router::add_member(std::unique_ptr<GenerationBackend> instance) {
  if (!instance) return invalid_argument_error("router: no instance");
  if (fudg()) return failed_precondition_error("adding instances is not supported under fudg (its roles are fixed)");
  if (instance->max_context() != max_context_) {
    return invalid_argument_error("the new instance has a context of {} tokens, the others {}", instance->max_context(),
                                  max_context_);
  }
  bool started = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stopping_) return failed_precondition_error("the server is shutting down");
    if (size() >= static_cast<size_t>(options_.max_instances)) {
      return invalid_argument_error("the router has room for {} instances over its life", options_.max_instances);
    }
    started = started_;
  }
  // Started before it is published: the first request it gets finds it running.
  if (started) instance->start();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || size() >= static_cast<size_t>(options_.max_instances)) {
    instance->stop();
    return failed_precondition_error("the router stopped or filled up while the instance started");
  }
  const std::string name = member_name(*instance, size());
  add_slot(std::move(instance), name, policy::InstanceRole::kMixed);
  ++stats_.instances_added;
  spdlog::info("router: instance {} added ({} active)", name, size());
  return name;
}

Status Router::remove_instance(const std::string& name) {
  if (fudg()) return failed_precondition_error("removing instances is not supported under fudg (its roles are fixed)");
  std::lock_guard<std::mutex> lock(mu_);
  size_t victim = size();
  int32_t active = 0;
  for (size_t i = 0; i < size(); ++i) {
    if (life(i) == Life::kActive) ++active;
    if (members_[i].name == name && life(i) != Life::kRemoved) victim = i;
  }
  if (victim == size()) return not_found_error("no instance named '{}'", name);
  if (life(victim) == Life::kRemoving) return failed_precondition_error("instance '{}' is already being removed", name);
  if (active <= 1) return failed_precondition_error("instance '{}' is the last active instance", name);
  const InstanceId id(static_cast<int32_t>(victim));
  if (padg()) {
    const TimePoint t0 = clock_->now();
    StatusOr<policy::ScalePlan> plan = policy::plan_remove_instance(layout_, id, options_.mitosis);
    if (!plan.ok()) return plan.status();
    ECO_RETURN_IF_ERROR(policy::apply(layout_, *plan));
    publish_layout();
    note_layout_change(t0);
  }
  members_[victim].life.store(static_cast<int>(Life::kRemoving));
  policy_->remove_instance(id);
  spdlog::info("router: removing instance {} once its {} request(s) finish", name,
               members_[victim].load.waiting + members_[victim].load.running);
  return ok_status();
}

void Router::finish_removals() {
  std::vector<size_t> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < size(); ++i) {
      if (life(i) != Life::kRemoving) continue;
      const Member& m = members_[i];
      bool holds = !m.load.empty();
      for (const auto& [id, f] : in_flight_) holds |= (f.member == i && f.routed) || (f.remote && f.decode_member == i);
      if (!holds) done.push_back(i);
    }
  }
  for (size_t i : done) {
    std::shared_ptr<GenerationBackend> b = backend(i);
    if (!b) continue;
    b->begin_drain();
    if (!b->idle()) continue;  // e.g. a probe still running: next time
    b->stop();
    members_[i].life.store(static_cast<int>(Life::kRemoved));
    {
      // Its engine and KV cache go with the last reference (a snapshot loop may
      // still hold one for a moment).
      std::lock_guard<std::mutex> lock(backends_mu_);
      members_[i].backend.reset();
    }
    b.reset();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.instances_removed;
    spdlog::info("router: instance {} removed", members_[i].name);
  }
}

Router::~Router() { stop(); }

void Router::start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
  }
  for (size_t i = 0; i < size(); ++i) {
    if (auto b = backend(i)) b->start();
  }
  // The first probes go out one probe_interval after start.
  const TimePoint now = clock_->now();
  for (size_t i = 0; i < size(); ++i) {
    probes_[i].last = now;
    probes_[i].ever = true;
  }
  if (options_.watchdog_interval.count() > 0 && !watchdog_.joinable()) watchdog_ = std::thread([this] { watchdog(); });
}

bool Router::healthy(size_t member, const instance::InstanceStatus& s, TimePoint now) const {
  return instance::loop_alive(s, now, options_.heartbeat_timeout, options_.step_timeout) && ready_[member].load();
}

void Router::probe(size_t i, TimePoint now) {
  Probe& p = probes_[i];
  if (p.in_flight.load()) {
    // Late: a hung engine, or only a long queue in front of the probe? An engine
    // whose steps still advance is working (an overloaded instance is not a dead
    // one); one that has not stepped since the probe went out is not ready.
    if (now - p.sent > options_.probe_timeout) {
      const instance::InstanceStatus s = status_of(i);
      const bool stepping =
          s.in_step && instance::loop_alive(s, now, options_.heartbeat_timeout, options_.step_timeout);
      if (s.steps > p.steps_at_send || stepping) {
        p.steps_at_send = s.steps;
        p.sent = now;  // give it another probe_timeout from here
      } else {
        ready_[i].store(false);  // keeps waiting for it
      }
    }
    return;
  }
  if (p.ever && now - p.last < options_.probe_interval) return;
  instance::GenerationRequest r;
  r.id = RequestId((uint64_t{1} << 62) + next_probe_id_++);  // far from the server's ids
  const int32_t bos = model_ ? model_->tokenizer().bos_id() : -1;
  r.prompt = {bos >= 0 ? bos : 1};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 1;
  r.sampling.has_seed = true;
  p.in_flight.store(true);
  p.id = r.id;
  p.sent = now;
  p.steps_at_send = status_of(i).steps;
  p.last = now;
  p.ever = true;
  std::shared_ptr<GenerationBackend> backend = this->backend(i);
  if (!backend) return;
  const RequestId id = r.id;
  std::atomic<bool>* ready = &ready_[i];
  Probe* slot = &p;
  // The sink runs on the instance's own thread, so the instance outlives it: a raw
  // pointer (a shared one in its own sink would keep the instance alive in a cycle).
  GenerationBackend* raw = backend.get();
  Status s = backend->submit(std::move(r), [ready, slot, raw, id](const instance::TokenEvent& ev) {
    if (!ev.finished) return;
    const bool ok = ev.finish_reason == "length" || ev.finish_reason == "stop" || ev.finish_reason == "prefill_done";
    // A prefill instance holds the probe's blocks for a transfer that will not come.
    if (ev.finish_reason == "prefill_done") raw->take_prefilled_kv(id, [](StatusOr<std::vector<uint8_t>>) {});
    ready->store(ok);
    slot->in_flight.store(false);
  });
  if (!s.ok()) {
    p.in_flight.store(false);
    // A full queue says nothing about the engine; a stopped one does.
    if (s.code() != StatusCode::kResourceExhausted) ready_[i].store(false);
  }
}

int32_t Router::build_view(const std::vector<instance::InstanceStatus>& snaps, TimePoint now) {
  const size_t n = std::min(size(), snaps.size());
  view_.instances.resize(n);
  view_.with_requests = false;  // add_requests_to_view() fills them when a policy needs them
  int32_t unhealthy = 0;
  for (size_t i = 0; i < n; ++i) {
    const Member& m = members_[i];
    const instance::InstanceStatus& s = snaps[i];
    policy::InstanceLoad& l = view_.instances[i];
    l = policy::InstanceLoad{};
    l.id = InstanceId(static_cast<int32_t>(i));
    l.role = m.role;
    l.healthy = healthy(i, s, now);
    if (life(i) == Life::kActive) unhealthy += l.healthy ? 0 : 1;
    if (llumnix() && life(i) == Life::kRemoving) {
      l.draining = true;  // routed nothing; its requests migrate away
    } else if (life(i) != Life::kActive) {
      l.healthy = false;  // being removed (or gone): routed nothing
    }
    l.block_size = block_size_;
    l.num_free_blocks = s.num_free_blocks;
    l.num_total_blocks = s.num_total_blocks;
    l.phase = static_cast<policy::InstancePhase>(std::clamp(s.phase, 0, 2));
    l.last_phase_switch = s.last_phase_switch;
    m.load.fill(l, now, llumnix());
  }
  return unhealthy;
}

void Router::account(const InFlight& f, int sign) {
  policy::RequestAccount r;
  r.prompt_tokens = f.prompt_tokens;
  r.generated = f.generated;
  r.predicted_prefill_seconds = f.predicted_prefill_seconds;
  r.slo_tpot_seconds = f.slo_tpot_seconds;
  r.first_token_seconds = f.first_token_seconds;
  if (llumnix()) {
    r.virtual_blocks = policy::virtual_usage_blocks(load_of(RequestId(0), f), block_size_, options_.migration.freeness);
  }
  members_[f.member].load.add(r, sign);
}

Status Router::submit(instance::GenerationRequest request, instance::EventSink sink) {
  if (!sink) return invalid_argument_error("no event sink");
  if (request.prompt.empty()) return invalid_argument_error("the prompt has no tokens");
  ECO_RETURN_IF_ERROR(instance::check_context(static_cast<int64_t>(request.prompt.size()),
                                              request.sampling.max_tokens, max_context_));
  const RequestId id = request.id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stopping_) return unavailable_error("the server is shutting down");
    if (in_flight_.count(id)) return already_exists_error("request {} is already running", id.value);
    InFlight f;
    f.prompt_tokens = static_cast<int32_t>(request.prompt.size());
    f.request = std::make_shared<instance::GenerationRequest>(std::move(request));
    f.sink = std::make_shared<instance::EventSink>(std::move(sink));
    f.routed = false;
    f.submitted = clock_->now();
    in_flight_.emplace(id, std::move(f));
  }
  Status s = dispatch(id, std::nullopt);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.erase(id);
  }
  return s;
}

Status Router::dispatch(RequestId id, std::optional<size_t> exclude) {
  // Snapshots are read outside the lock (each takes its instance's own lock).
  std::vector<instance::InstanceStatus> snaps;
  const size_t n = size();
  snaps.reserve(n);
  for (size_t i = 0; i < n; ++i) snaps.push_back(status_of(i));
  const TimePoint now = clock_->now();

  std::unique_lock<std::mutex> lock(mu_);
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return not_found_error("request {} is gone", id.value);
  InFlight& f = it->second;
  instance::GenerationRequest& request = *f.request;
  const TimePoint t0 = clock_->now();
  const int32_t unhealthy = build_view(snaps, now);
  if (exclude) view_.instances[*exclude].healthy = false;
  hashes_.clear();
  kv::PrefixCache::extend_hashes(request.prompt, block_size_, &hashes_);
  policy::RouteRequest rr;
  rr.prompt_len = static_cast<int32_t>(request.prompt.size());
  rr.max_tokens = request.sampling.max_tokens;
  rr.priority = request.priority;
  rr.block_hashes = hashes_;
  rr.now = now;
  rr.slo_ttft = request.slo_ttft;
  rr.slo_tpot = request.slo_tpot;
  std::optional<InstanceId> target;
  std::optional<policy::PdDecision> pd;
  if (padg()) {
    const policy::PadgDecision d = padg_->decide(view_, rr);
    target = d.instance;
    f.predicted_prefill_seconds = d.predicted_prefill_seconds;
    f.predicted_ttft_seconds = d.uncalibrated_ttft_seconds;
    f.routed_at = now;
    if (!target && !d.reason.empty() && d.reason != "no healthy instance") {
      stats_.route_seconds_total += to_seconds(clock_->now() - t0);
      ++stats_.rejected;
      return resource_exhausted_error("{}", d.reason);
    }
  } else if (fudg()) {
    pd = policy::pd_dispatch(view_, rr, options_.dispatch, &decode_index_);
    if (pd) {
      target = pd->remote_prefill ? pd->prefill : pd->decode;
      // Either way the decode instance ends up holding the prompt's blocks.
      decode_index_.insert(pd->decode, hashes_);
    }
  } else {
    target = policy_->route(view_, rr);
  }
  stats_.route_seconds_total += to_seconds(clock_->now() - t0);
  stats_.unhealthy_instances = unhealthy;
  if (!target) {
    ++stats_.rejected;
    return unavailable_error("no healthy instance can take the request ({} of {} unhealthy)",
                             unhealthy + (exclude ? 1 : 0), n);
  }
  const size_t idx = static_cast<size_t>(target->value);
  f.member = idx;
  f.slo_tpot_seconds = to_seconds(request.slo_tpot);
  f.generated = 0;
  f.output_tokens.clear();
  f.in_decode = false;
  f.remote = pd && pd->remote_prefill;
  f.routed = true;
  const uint64_t epoch = ++f.epoch;
  if (f.remote) {
    // The decode side must sample exactly as one instance would: fix the seed here.
    if (!request.sampling.has_seed) {
      seed_state_ = seed_state_ * 6364136223846793005ull + 1442695040888963407ull;
      request.sampling.seed = seed_state_ >> 1;
      request.sampling.has_seed = true;
    }
    f.decode_member = static_cast<size_t>(pd->decode.value);
  } else if (pd) {
    ++stats_.local_prefills;
  }
  const bool remote = f.remote;
  instance::EventSink wrapped = [this, id, epoch, remote, client = f.sink](const instance::TokenEvent& ev) {
    if (remote && ev.finished && ev.finish_reason == "prefill_done") {
      on_prefill_done(id, epoch);  // not the client's end: the request moves on
      return;
    }
    deliver(id, epoch, ev, *client);
  };
  account(f, +1);
  ++stats_.routed;
  instance::GenerationRequest copy = request;
  lock.unlock();

  // The instance calls the wrapper on its thread.
  std::shared_ptr<GenerationBackend> target_backend = backend(idx);
  Status s = target_backend ? target_backend->submit(std::move(copy), std::move(wrapped))
                            : unavailable_error("instance {} was removed", members_[idx].name);
  if (!s.ok()) {
    std::lock_guard<std::mutex> relock(mu_);
    auto again = in_flight_.find(id);
    if (again != in_flight_.end() && again->second.epoch == epoch) {
      account(again->second, -1);
      again->second.routed = false;
    }
    --stats_.routed;
  }
  return s;
}

Router::Delivery Router::on_event(RequestId id, uint64_t epoch, const instance::TokenEvent& ev) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(id);
  if (it == in_flight_.end() || it->second.epoch != epoch) return Delivery::kDrop;  // a superseded attempt
  InFlight& f = it->second;
  if (ev.token >= 0) {
    account(f, -1);
    if (f.generated == 0) {
      f.first_token = clock_->now();
      f.first_token_seconds = to_seconds(f.first_token.time_since_epoch());
      // padg calibrates its predictions by what this instance really took.
      if (padg() && !f.remote && f.routed_at != TimePoint{}) {
        padg_->observe_ttft(InstanceId(static_cast<int32_t>(f.member)), f.predicted_ttft_seconds,
                            to_seconds(f.first_token - f.routed_at));
      }
    }
    f.generated++;
    if (f.remote && !f.in_decode) f.output_tokens.push_back(ev.token);
    account(f, +1);
  }
  if (!ev.finished) return Delivery::kForward;
  // The source of a migration stopped while the request was suspended there: the
  // handover is with the destination, whose answer decides.
  if (f.suspended && ev.finish_reason == "abort" && !f.cancelled) {
    f.source_ended = true;
    return Delivery::kDrop;
  }
  // An instance failed the request before its first token: once, try another.
  if (ev.finish_reason == "error" && f.generated == 0 && !f.retried && !f.cancelled && !stopping_ &&
      options_.retry_before_first_token && size() > 1) {
    f.retried = true;
    account(f, -1);
    f.routed = false;
    return Delivery::kRetry;
  }
  account(f, -1);
  record_finish(f, ev.finish_reason == "length" || ev.finish_reason == "stop", clock_->now());
  in_flight_.erase(it);
  return Delivery::kForward;
}

void Router::record_finish(const InFlight& f, bool ok, TimePoint now) {
  if (f.cancelled) return;  // the client's choice says nothing about the SLOs
  ++window_finished_;
  if (!ok || f.generated == 0) return;
  const instance::GenerationRequest& r = *f.request;
  const bool ttft_met = r.slo_ttft <= Duration::zero() || f.first_token - f.submitted <= r.slo_ttft;
  const bool tpot_met = r.slo_tpot <= Duration::zero() || f.generated < 2 ||
                        (now - f.first_token) / (f.generated - 1) <= r.slo_tpot;
  if (ttft_met && tpot_met) ++window_met_;
}

void Router::autoscale(TimePoint now) {
  if (!options_.autoscale || !options_.make_instance || fudg()) return;
  if (window_start_ == TimePoint{}) window_start_ = now;
  if (now - window_start_ < options_.autoscale_window) return;
  policy::ScalingWindow w;
  w.now = now;
  w.last_decision = last_scaling_;
  int32_t active = 0;
  double kv = 0.0;
  std::optional<size_t> newest;
  for (size_t i = 0; i < size(); ++i) {
    if (life(i) != Life::kActive) continue;
    ++active;
    kv += status_of(i).kv_usage;
    newest = i;
  }
  w.mean_utilization = active > 0 ? kv / active : 0.0;
  std::string victim;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (window_finished_ > 0) w.slo_attainment = static_cast<double>(window_met_) / static_cast<double>(window_finished_);
    window_finished_ = window_met_ = 0;
    if (padg()) {
      StatusOr<policy::ScalePlan> plan = policy::plan_remove(layout_, options_.mitosis);
      if (plan.ok() && plan->removed_instance()) victim = members_[static_cast<size_t>(plan->removed_instance()->value)].name;
    } else if (newest) {
      victim = members_[*newest].name;
    }
  }
  window_start_ = now;
  const policy::ScaleSignal signal = policy::decide_scaling(w, options_.autoscale_policy);
  if (signal == policy::ScaleSignal::kScaleUp && active < options_.autoscale_max) {
    last_scaling_ = now;
    StatusOr<std::string> name = add_instance("");
    spdlog::info("autoscale: SLO attainment {}, KV usage {:.2f}: added {}", w.slo_attainment ? std::to_string(*w.slo_attainment) : "-",
                 w.mean_utilization, name.ok() ? *name : name.status().message());
  } else if (signal == policy::ScaleSignal::kScaleDown && active > std::max(1, options_.autoscale_min) && !victim.empty()) {
    last_scaling_ = now;
    const Status s = remove_instance(victim);
    spdlog::info("autoscale: SLO attainment {}, KV usage {:.2f}: removing {} ({})",
                 w.slo_attainment ? std::to_string(*w.slo_attainment) : "-", w.mean_utilization, victim, s.to_string());
  }
}

void Router::deliver(RequestId id, uint64_t epoch, const instance::TokenEvent& ev, const instance::EventSink& client) {
  size_t failed = 0;
  switch (on_event(id, epoch, ev)) {
    case Delivery::kDrop:
      return;
    case Delivery::kForward:
      client(ev);
      return;
    case Delivery::kRetry: {
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = in_flight_.find(id);
        if (it == in_flight_.end()) return;
        failed = it->second.member;
        ++stats_.retries;
      }
      Status s = dispatch(id, failed);
      if (!s.ok()) fail(id, "error", ev.error + " (retrying on another instance failed: " + s.message() + ")");
      return;
    }
  }
}

void Router::watchdog() {
  std::unique_lock<std::mutex> lock(watchdog_mu_);
  while (!watchdog_stop_) {
    Duration tick = options_.watchdog_interval;
    if (llumnix() && options_.migrate_interval > Duration::zero()) tick = std::min(tick, options_.migrate_interval);
    watchdog_cv_.wait_for(lock, std::chrono::duration_cast<std::chrono::steady_clock::duration>(tick));
    if (watchdog_stop_) break;
    lock.unlock();
    check_instances();
    lock.lock();
  }
}

void Router::check_instances() {
  finish_removals();
  autoscale(clock_->now());
  scale_by_freeness(clock_->now());
  plan_migrations(clock_->now());
  const size_t n = size();
  std::vector<bool> sick(n);
  const TimePoint now = clock_->now();
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (life(i) == Life::kRemoved) continue;
    if (options_.probe_interval.count() > 0) probe(i, now);
    sick[i] = !healthy(i, status_of(i), now);
    any |= sick[i];
  }
  if (!any) return;
  // Requests held by an instance that stopped beating: before their first token
  // they go elsewhere (once); after it they fail fast. The old instance is told to
  // cancel; anything it still sends belongs to a superseded attempt and is dropped.
  std::vector<std::pair<RequestId, size_t>> retry, lost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    // What a sick instance cached is not worth routing to (it may come back empty).
    for (size_t i = 0; i < n; ++i) {
      if (!sick[i]) continue;
      policy_->remove_instance(InstanceId(static_cast<int32_t>(i)));
      decode_index_.remove_instance(InstanceId(static_cast<int32_t>(i)));
    }
    for (auto& [id, f] : in_flight_) {
      if (!f.routed || f.member >= n || !sick[f.member]) continue;
      if (f.suspended) continue;  // its stop-and-copy is done: the destination's answer decides
      if (f.generated == 0 && !f.retried && !f.cancelled && n > 1) {
        f.retried = true;
        account(f, -1);
        f.routed = false;
        ++f.epoch;
        ++stats_.retries;
        retry.emplace_back(id, f.member);
      } else {
        lost.emplace_back(id, f.member);
      }
    }
  }
  for (auto [id, member] : retry) {
    if (auto b = backend(member)) b->cancel(id);
    Status s = dispatch(id, member);
    if (!s.ok()) fail(id, "error", "instance " + members_[member].name + " stopped responding, and retrying failed: " + s.message());
  }
  for (auto [id, member] : lost) {
    if (auto b = backend(member)) b->cancel(id);
    fail(id, "error", "instance " + members_[member].name +
                          " stopped responding after the request's first tokens; not regenerated");
  }
}

void Router::on_prefill_done(RequestId id, uint64_t epoch) {
  size_t prefill = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end() || it->second.epoch != epoch) return;
    it->second.prefill_done = clock_->now();
    prefill = it->second.member;
  }
  // Export runs as a task on the prefill instance's thread (never inside its step).
  std::shared_ptr<GenerationBackend> prefill_backend = backend(prefill);
  if (!prefill_backend) return fail(id, "error", "the prefill instance was removed");
  prefill_backend->take_prefilled_kv(
      id, [this, id, epoch](StatusOr<std::vector<uint8_t>> blob) { on_kv_exported(id, epoch, std::move(blob)); });
}

void Router::fail(RequestId id, const std::string& reason, const std::string& error) {
  std::shared_ptr<instance::EventSink> sink;
  int32_t prompt_tokens = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    account(it->second, -1);
    record_finish(it->second, false, clock_->now());
    sink = it->second.sink;
    prompt_tokens = it->second.prompt_tokens;
    in_flight_.erase(it);
  }
  instance::TokenEvent ev;
  ev.id = id;
  ev.finished = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = prompt_tokens;
  if (sink) (*sink)(ev);
}

void Router::on_kv_exported(RequestId id, uint64_t epoch, StatusOr<std::vector<uint8_t>> blob) {
  std::shared_ptr<instance::GenerationRequest> request;
  std::shared_ptr<instance::EventSink> client;
  std::vector<int32_t> output_tokens;
  size_t decode = 0;
  enum class Outcome { kHandOver, kAbort, kError } outcome = Outcome::kHandOver;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end() || it->second.epoch != epoch) return;
    InFlight& f = it->second;
    if (f.cancelled || stopping_) {
      outcome = Outcome::kAbort;
    } else if (!blob.ok()) {
      outcome = Outcome::kError;
      ++stats_.kv_transfer_failures;
    } else {
      ++stats_.kv_transfers;
      stats_.kv_transfer_bytes += static_cast<int64_t>(blob->size());
      stats_.kv_transfer_seconds += to_seconds(clock_->now() - f.prefill_done);
      // Hand over: from now on the decode instance holds the request (and cancels go there).
      account(f, -1);
      f.member = f.decode_member;
      f.in_decode = true;
      account(f, +1);
      request = f.request;
      client = f.sink;
      output_tokens = f.output_tokens;
      decode = f.decode_member;
    }
  }
  if (outcome == Outcome::kAbort) return fail(id, "abort", "");
  if (outcome == Outcome::kError) {
    return fail(id, "error", "moving the KV cache to the decode instance failed: " + blob.status().message());
  }
  auto wrapped = [this, id, epoch, client](const instance::TokenEvent& ev) { deliver(id, epoch, ev, *client); };
  std::shared_ptr<GenerationBackend> decode_backend = backend(decode);
  Status s = decode_backend ? decode_backend->submit_prefilled(*request, std::move(output_tokens), std::move(*blob),
                                                               std::move(wrapped))
                            : unavailable_error("the decode instance was removed");
  if (s.ok()) {
    // A cancel between the hand-over above and this submit went to the decode instance before
    // the request did (a no-op there) and would be lost: send it again now that it is there.
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = in_flight_.find(id);
      cancelled = it != in_flight_.end() && it->second.epoch == epoch && it->second.cancelled;
    }
    if (cancelled) decode_backend->cancel(id);
    return;
  }
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping = stopping_;
  }
  if (stopping) return fail(id, "abort", "");
  fail(id, "error", "the decode instance refused the request: " + s.message());
}

void Router::cancel(RequestId id) {
  size_t idx = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    it->second.cancelled = true;
    if (!it->second.routed) return;  // between attempts: the retry sees `cancelled`
    idx = it->second.member;
  }
  if (auto b = backend(idx)) b->cancel(id);
}

instance::InstanceStatus Router::status() const {
  instance::InstanceStatus total;
  double kv = 0.0;
  const TimePoint now = clock_->now();
  const size_t n = size();
  double counted = 0;
  for (size_t i = 0; i < n; ++i) {
    if (life(i) == Life::kRemoved) continue;
    counted += 1;
  }
  counted = std::max(1.0, counted);
  for (size_t i = 0; i < n; ++i) {
    if (life(i) == Life::kRemoved) continue;
    const instance::InstanceStatus s = status_of(i);
    total.num_waiting += s.num_waiting;
    total.num_running += s.num_running;
    total.num_swapped += s.num_swapped;
    total.num_waiting_tokens += s.num_waiting_tokens;
    total.num_running_tokens += s.num_running_tokens;
    total.num_free_blocks += s.num_free_blocks;
    total.num_total_blocks += s.num_total_blocks;
    total.block_size = s.block_size;
    kv += s.kv_usage;
    if (healthy(i, s, now)) {
      total.running = true;
      // A healthy instance in a long step has an old beat but a live loop: judged now.
      total.last_heartbeat = std::max(total.last_heartbeat, s.in_step ? now : s.last_heartbeat);
    }
    total.steps += s.steps;
    total.last_step_seconds = std::max(total.last_step_seconds, s.last_step_seconds);
    total.mean_step_seconds += s.mean_step_seconds / counted;
    total.mean_plan_seconds += s.mean_plan_seconds / counted;
    total.prompt_tokens_total += s.prompt_tokens_total;
    total.generation_tokens_total += s.generation_tokens_total;
    total.prefix_cache_queries += s.prefix_cache_queries;
    total.prefix_cache_hits += s.prefix_cache_hits;
    total.preemptions += s.preemptions;
  }
  total.kv_usage = kv / counted;
  if (!total.running) {
    // No healthy instance: report the newest heartbeat anyway (for the /health message).
    for (size_t i = 0; i < n; ++i) {
      total.last_heartbeat = std::max(total.last_heartbeat, status_of(i).last_heartbeat);
    }
  }
  return total;
}

std::vector<InstanceReport> Router::instances() const {
  std::vector<InstanceReport> out;
  const TimePoint now = clock_->now();
  const size_t n = size();
  for (size_t i = 0; i < n; ++i) {
    if (life(i) == Life::kRemoved) continue;
    std::shared_ptr<GenerationBackend> b = backend(i);
    if (!b) continue;
    for (InstanceReport r : b->instances()) {
      r.name = members_[i].name;
      r.healthy = healthy(i, r.status, now);
      if (members_[i].role == policy::InstanceRole::kPrefill) r.role = "prefill";
      if (members_[i].role == policy::InstanceRole::kDecode) r.role = "decode";
      r.state = life(i) == Life::kActive ? "active" : "removing";
      out.push_back(std::move(r));
    }
  }
  if (padg()) {
    std::lock_guard<std::mutex> lock(mu_);
    for (InstanceReport& r : out) {
      size_t i = 0;
      while (i < n && members_[i].name != r.name) ++i;
      if (i == n) continue;
      const Member& m = members_[i];
      if (auto macro = layout_.macro_of(InstanceId(static_cast<int32_t>(i)))) r.macro = macro->value;
      r.pending_prefill_seconds = std::max(0.0, m.load.pending_prefill_seconds);
      r.num_slo_decoding = m.load.slo_decoding;
      r.mean_saved_tpot_seconds = m.load.mean_saved_tpot_seconds(now);
    }
  }
  return out;
}

std::vector<InstanceTimeline> Router::timeline(TimePoint since) const {
  std::vector<InstanceTimeline> out;
  for (size_t i = 0; i < size(); ++i) {
    if (life(i) == Life::kRemoved) continue;
    std::shared_ptr<GenerationBackend> b = backend(i);
    if (!b) continue;
    for (InstanceTimeline t : b->timeline(since)) {
      t.name = members_[i].name;
      if (members_[i].role == policy::InstanceRole::kPrefill) t.role = "prefill";
      if (members_[i].role == policy::InstanceRole::kDecode) t.role = "decode";
      out.push_back(std::move(t));
    }
  }
  return out;
}

void Router::begin_drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }
  for (size_t i = 0; i < size(); ++i) {
    if (auto b = backend(i)) b->begin_drain();
  }
}

bool Router::idle() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!in_flight_.empty()) return false;
  }
  for (size_t i = 0; i < size(); ++i) {
    std::shared_ptr<GenerationBackend> b = backend(i);
    if (b && life(i) != Life::kRemoved && !b->idle()) return false;
  }
  return true;
}

void Router::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(watchdog_mu_);
    watchdog_stop_ = true;
  }
  watchdog_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (size_t i = 0; i < size(); ++i) {
    if (auto b = backend(i)) b->stop();
  }
  // Anything caught between the two (an export that found its instance stopped).
  std::vector<RequestId> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, f] : in_flight_) left.push_back(id);
  }
  for (RequestId id : left) fail(id, "abort", "");
}

ClusterStats Router::cluster_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace ecoserve::cluster
