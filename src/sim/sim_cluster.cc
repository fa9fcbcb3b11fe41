#include "sim/sim_cluster.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "kv/prefix_cache.h"
#include "policy/freeness.h"

namespace ecoserve::sim {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Token ids 2..32001 (never the special ids 0 and 1): a function of the stream (a
// mixed seed) and the position, one multiply per token.
int32_t token_of(uint64_t stream, int32_t position) {
  const uint64_t x = stream + static_cast<uint64_t>(position) * 0x9e3779b97f4a7c15ull;
  return 2 + static_cast<int32_t>((x >> 32) % 32000);
}

const char* role_name(policy::InstanceRole r) {
  switch (r) {
    case policy::InstanceRole::kPrefill:
      return "prefill";
    case policy::InstanceRole::kDecode:
      return "decode";
    default:
      return "mixed";
  }
}

RequestId id_of(size_t index) { return RequestId(static_cast<uint64_t>(index) + 1); }

}  // namespace

StatusOr<std::unique_ptr<SimCluster>> SimCluster::create(SimClusterOptions options) {
  std::unique_ptr<SimCluster> c(new SimCluster(std::move(options)));
  ECO_RETURN_IF_ERROR(c->init());
  return c;
}

SimCluster::SimCluster(SimClusterOptions options) : options_(std::move(options)) {}
SimCluster::~SimCluster() = default;

Status SimCluster::init() {
  const std::string& s = options_.strategy;
  if (s != "nodg" && s != "fudg" && s != "padg" && s != "llumnix") {
    return invalid_argument_error("unknown strategy '{}' (nodg, fudg, padg, llumnix)", s);
  }
  if (options_.instances.empty()) return invalid_argument_error("the cluster has no instances");
  if (options_.autoscale) ECO_RETURN_IF_ERROR(policy::validate(options_.autoscale_policy));
  if ((options_.autoscale || options_.scale_by_freeness) && !options_.scale_template) {
    return invalid_argument_error("autoscaling needs a scale_template instance");
  }
  if (options_.scale_by_freeness) {
    ECO_ASSIGN_OR_RETURN(auto scaler, policy::FreenessScaler::create(options_.freeness_scaling));
    freeness_scaler_.emplace(std::move(scaler));
  }
  network_ = std::make_unique<SimNetwork>(runtime_);
  ECO_ASSIGN_OR_RETURN(Topology topo, Topology::create(*network_, options_.topology));
  topology_ = std::make_unique<Topology>(std::move(topo));
  gpu_used_.assign(static_cast<size_t>(topology_->num_gpus()), false);
  if (!(options_.host_step_scale_alone > 0) || !(options_.host_step_scale_shared > 0)) {
    return invalid_argument_error("host step scales must be > 0 ({}, {})", options_.host_step_scale_alone,
                                  options_.host_step_scale_shared);
  }
  if (options_.host_step_scale_alone != 1.0 || options_.host_step_scale_shared != 1.0) {
    hosts_.assign(static_cast<size_t>(topology_->num_nodes()),
                  SimHost{.alone = options_.host_step_scale_alone, .shared = options_.host_step_scale_shared});
  }
  std::vector<SimInstanceSpec> specs = std::move(options_.instances);
  options_.instances.clear();
  int32_t prefill = 0, decode = 0;
  for (const SimInstanceSpec& spec : specs) {
    prefill += spec.role == policy::InstanceRole::kPrefill;
    decode += spec.role == policy::InstanceRole::kDecode;
  }
  if (s == "fudg" && (prefill == 0 || decode == 0)) {
    return invalid_argument_error("fudg needs prefill and decode instances ({} prefill, {} decode)", prefill, decode);
  }
  block_size_ = specs[0].options.executor.block_size;
  for (const SimInstanceSpec& spec : specs) ECO_RETURN_IF_ERROR(add_instance(spec));
  if (s == "padg") {
    auto cost = options_.padg_cost_model ? options_.padg_cost_model : options_.instances[0].cost_model;
    ECO_RETURN_IF_ERROR(policy::validate(options_.mitosis));
    auto padg = std::make_unique<policy::PadgRouter>(options_.padg, cost);
    padg_ = padg.get();
    router_ = std::move(padg);
    for (size_t i = 0; i < instances_.size(); ++i) {
      ECO_ASSIGN_OR_RETURN(policy::ScalePlan plan,
                           policy::plan_add(layout_, InstanceId(static_cast<int32_t>(i)), options_.mitosis));
      ECO_RETURN_IF_ERROR(policy::apply(layout_, plan));
    }
    publish_layout("start");
  } else if (s == "llumnix") {
    ECO_ASSIGN_OR_RETURN(auto planner, policy::MigrationPlanner::create(options_.migration));
    planner_.emplace(std::move(planner));
    if (options_.router.empty()) options_.router = "freeness";
    if (options_.router == "freeness") {
      router_ = std::make_unique<policy::FreenessRouter>(options_.migration.freeness);
    } else {
      ECO_ASSIGN_OR_RETURN(router_, policy::make_router_policy(options_.router, options_.router_policy));
    }
  } else if (s == "nodg") {
    if (options_.router.empty()) options_.router = "least-loaded";
    ECO_ASSIGN_OR_RETURN(router_, policy::make_router_policy(options_.router, options_.router_policy));
  }
  return ok_status();
}

instance::GenerationRequest SimCluster::make_request(size_t index) const {
  const SimRequest& r = requests_[index];
  instance::GenerationRequest g;
  g.id = id_of(index);
  g.prompt.resize(static_cast<size_t>(r.input_tokens));
  const int32_t block = std::max(1, r.prefix_block_tokens);
  const uint64_t own = mix(options_.seed ^ (static_cast<uint64_t>(index) << 1 | 1));
  // Positions in the shared prefix blocks, then the request's own.
  const auto shared = static_cast<int32_t>(
      std::min<uint64_t>(static_cast<uint64_t>(r.input_tokens), uint64_t{r.prefix_blocks.size()} * block));
  for (int32_t p = 0; p < shared; ++p) {
    const size_t b = static_cast<size_t>(p / block);
    g.prompt[static_cast<size_t>(p)] = token_of(mix(options_.seed ^ static_cast<uint64_t>(r.prefix_blocks[b]) << 1), p);
  }
  for (int32_t p = shared; p < r.input_tokens; ++p) g.prompt[static_cast<size_t>(p)] = token_of(own, p);
  g.sampling.max_tokens = r.output_tokens;
  g.sampling.ignore_eos = true;
  g.sampling.seed = own;
  g.sampling.has_seed = true;
  g.priority = r.priority;
  g.slo_ttft = from_seconds(r.slo_ttft_s);
  g.slo_tpot = from_seconds(r.slo_tpot_s);
  return g;
}

StatusOr<SimResult> SimCluster::run(std::span<const SimRequest> requests, const Progress& progress) {
  requests_ = requests;
  progress_ = progress;
  progress_every_ = std::max<int64_t>(1, static_cast<int64_t>(requests.size()) / 200);
  result_.requests.resize(requests.size());
  flights_.reset(requests.size());
  const int32_t max_context = instances_[0]->executor().max_context();
  for (size_t i = 0; i < requests.size(); ++i) {
    const SimRequest& r = requests[i];
    if (i > 0 && r.arrival_s < requests[i - 1].arrival_s) {
      return invalid_argument_error("request {} arrives at {} s, before request {} ({} s)", i, r.arrival_s, i - 1,
                                    requests[i - 1].arrival_s);
    }
    if (r.input_tokens <= 0 || r.output_tokens <= 0) {
      return invalid_argument_error("request {} has {} input and {} output tokens", i, r.input_tokens,
                                    r.output_tokens);
    }
    SimRequestResult& out = result_.requests[i];
    out.arrival_s = r.arrival_s;
    out.input_tokens = r.input_tokens;
    (void)max_context;
  }
  if (!requests.empty()) runtime_.schedule_at(TimePoint(from_seconds(requests[0].arrival_s)), [this] { arrive(0); });
  if ((options_.autoscale && options_.strategy != "fudg") || options_.scale_by_freeness) {
    runtime_.schedule_after(options_.scale_check_interval, [this] { check_scaling(); });
  }
  for (const SimClusterOptions::Action& a : options_.actions) {
    runtime_.schedule_at(TimePoint(from_seconds(a.at_s)), [this, a] { act(a); });
  }
  if (planner_ && options_.migrate_interval > Duration::zero()) {
    runtime_.schedule_after(options_.migrate_interval, [this] { plan_migrations(); });
  }
  const TimePoint deadline = TimePoint(options_.max_time);
  while (runtime_.run_one()) {
    if (done_ == static_cast<int64_t>(requests.size())) break;
    if (runtime_.now() > deadline) break;
  }
  // Whatever is still running at the deadline fails.
  std::vector<size_t> left;
  flights_.live_indices(&left);
  for (size_t index : left) reject(index, "error", "the simulation reached its time limit");
  result_.duration_s = to_seconds(runtime_.now().time_since_epoch());
  SimStats& st = result_.stats;
  st.events = static_cast<int64_t>(runtime_.events_run());
  st.network_bytes_sent = network_->bytes_sent();
  st.network_bytes_delivered = network_->bytes_delivered();
  for (const auto& inst : instances_) {
    SimInstanceReport rep;
    rep.name = inst->name();
    rep.role = role_name(options_.instances[static_cast<size_t>(inst->id().value)].role);
    rep.removed = removed_[static_cast<size_t>(inst->id().value)];
    rep.counters = inst->counters();
    rep.free_blocks_at_end = inst->num_free_blocks();
    rep.total_blocks = inst->num_total_blocks();
    rep.steps = inst->steps();
    st.preemptions += inst->core().scheduler().num_preemptions();
    result_.instances.push_back(std::move(rep));
  }
  if (progress_) progress_(done_, static_cast<int64_t>(requests.size()));
  return std::move(result_);
}

void SimCluster::arrive(size_t index) {
  if (index + 1 < requests_.size()) {
    runtime_.schedule_at(TimePoint(from_seconds(requests_[index + 1].arrival_s)), [this, index] { arrive(index + 1); });
  }
  dispatch(index);
}

void SimCluster::account(const Flight& f, int sign) {
  policy::RequestAccount r;
  r.prompt_tokens = f.prompt_tokens;
  r.generated = f.generated;
  r.predicted_prefill_seconds = f.predicted_prefill_seconds;
  r.slo_tpot_seconds = f.slo_tpot_seconds;
  r.first_token_seconds = f.first_token_seconds;
  if (planner_) {  // llumnix (init() sets planner_ for it alone)
    policy::RequestLoad l;
    l.priority = f.priority;
    l.num_tokens = f.prompt_tokens + f.generated;
    l.num_generated = f.generated;
    l.max_tokens = f.max_tokens;
    l.running = f.generated > 0;
    l.migrating = f.migrating;
    r.virtual_blocks = policy::virtual_usage_blocks(l, block_size_, options_.migration.freeness);
  }
  loads_[f.member].add(r, sign);
}

void SimCluster::build_view(bool with_requests) {
  const TimePoint now = runtime_.now();
  view_.instances.resize(instances_.size());
  view_.with_requests = with_requests;
  const bool llumnix = planner_.has_value();  // init() sets planner_ for llumnix alone
  // The fixed fields of an instance's entry are set once (policies read the view
  // through const references); every field that changes is set on every call.
  for (size_t i = view_fixed_; i < instances_.size(); ++i) {
    policy::InstanceLoad& l = view_.instances[i];
    l = policy::InstanceLoad{};
    const SimInstance& inst = *instances_[i];
    l.id = inst.id();
    l.role = options_.instances[i].role;
    l.block_size = block_size_;
    l.num_total_blocks = inst.num_total_blocks();
    l.max_num_seqs = options_.instances[i].options.core.max_num_seqs;
    l.node = node_of_[i];
  }
  view_fixed_ = instances_.size();
  for (size_t i = 0; i < instances_.size(); ++i) {
    policy::InstanceLoad& l = view_.instances[i];
    const SimInstance& inst = *instances_[i];
    l.num_free_blocks = inst.num_free_blocks();
    l.phase = static_cast<policy::InstancePhase>(std::clamp(inst.phase(), 0, 2));
    l.last_phase_switch = inst.last_phase_switch();
    loads_[i].fill(l, now, llumnix);
    l.healthy = !removed_[i] || llumnix;
    l.draining = removed_[i] && llumnix;  // a removed instance's requests migrate away
    l.requests.clear();
  }
  if (!with_requests) return;
  flights_.live_indices(&order_);  // arrival order: deterministic
  for (size_t index : order_) {
    const Flight& f = *flights_.find(index);
    policy::RequestLoad r;
    r.id = id_of(index);
    r.priority = f.priority;
    r.num_tokens = f.prompt_tokens + f.generated;
    r.num_generated = f.generated;
    r.max_tokens = f.max_tokens;
    r.running = f.generated > 0;
    r.migrating = f.migrating;
    view_.instances[f.member].requests.push_back(r);
  }
}

void SimCluster::dispatch(size_t index) {
  const SimRequest& req = requests_[index];
  instance::GenerationRequest g = make_request(index);
  build_view(false);
  hashes_.clear();
  // Only prefix-aware decisions read the prompt's block hashes (the cache-aware
  // router, fudg's conditional disaggregation); the others route on load.
  if (options_.router == "cache-aware" || options_.strategy == "fudg") {
    kv::PrefixCache::extend_hashes(g.prompt, block_size_, &hashes_);
  }
  policy::RouteRequest rr;
  rr.prompt_len = req.input_tokens;
  rr.max_tokens = req.output_tokens;
  rr.priority = req.priority;
  rr.block_hashes = hashes_;
  rr.now = runtime_.now();
  rr.slo_ttft = g.slo_ttft;
  rr.slo_tpot = g.slo_tpot;
  Flight f;
  f.prompt_tokens = req.input_tokens;
  f.max_tokens = req.output_tokens;
  f.priority = req.priority;
  f.slo_tpot_seconds = req.slo_tpot_s;
  std::optional<InstanceId> target;
  if (padg_) {
    const policy::PadgDecision d = padg_->decide(view_, rr);
    target = d.instance;
    f.predicted_prefill_seconds = d.predicted_prefill_seconds;
    f.uncalibrated_ttft_seconds = d.uncalibrated_ttft_seconds;
    f.routed_at = rr.now;
    if (!target) return reject(index, "rejected", d.reason.empty() ? "no instance can take it" : d.reason);
  } else if (options_.strategy == "fudg") {
    const auto pd = policy::pd_dispatch(view_, rr, options_.dispatch, &decode_index_);
    if (!pd) return reject(index, "rejected", "no decode instance can take it");
    decode_index_.insert(pd->decode, hashes_);  // either way the decode instance ends up holding the prompt
    f.remote = pd->remote_prefill;
    f.decode_member = static_cast<size_t>(pd->decode.value);
    target = pd->remote_prefill ? pd->prefill : pd->decode;
    f.in_decode = !pd->remote_prefill;
    if (!pd->remote_prefill) ++result_.stats.local_prefills;
  } else {
    target = router_->route(view_, rr);
    if (!target) return reject(index, "rejected", "no instance can take it");
  }
  const size_t member = static_cast<size_t>(target->value);
  const Status valid = instances_[member]->core().validate(g);
  if (!valid.ok()) return reject(index, "invalid", valid.message());  // the server's 400
  f.member = member;
  account(f, +1);
  if (options_.request_timeout_s > 0) {
    f.timeout = runtime_.schedule_at(TimePoint(from_seconds(req.arrival_s + options_.request_timeout_s)), [this, index] {
      Flight* fl = flights_.find(index);
      if (fl == nullptr) return;
      fl->timeout = SimRuntime::kNoEvent;
      end_migration(index, "cancelled");  // a migration under way ends with it (frees the reservation)
      reject(index, "timeout", fmt::format("no answer within {} s", options_.request_timeout_s));
    });
  }
  flights_.insert(index, std::move(f));
  instances_[member]->add_request(std::move(g));
}

void SimCluster::on_event(InstanceId from, const instance::TokenEvent& ev) {
  const size_t index = static_cast<size_t>(ev.id.value - 1);
  Flight* found = flights_.find(index);
  if (found == nullptr) return;
  Flight& f = *found;
  if (f.member != static_cast<size_t>(from.value)) return;  // a superseded holder (should not happen)
  const double now_s = to_seconds(runtime_.now().time_since_epoch());
  SimRequestResult& out = result_.requests[index];
  if (ev.token >= 0) {
    account(f, -1);
    if (f.generated == 0) {
      out.first_token_s = now_s;
      f.first_token_seconds = now_s;
      if (padg_ && f.routed_at != TimePoint{}) {
        padg_->observe_ttft(from, f.uncalibrated_ttft_seconds, to_seconds(runtime_.now() - f.routed_at));
      }
    }
    ++f.generated;
    if (f.remote && !f.in_decode) f.output_tokens.push_back(ev.token);
    account(f, +1);
    out.output_tokens = f.generated;
    if (options_.keep_token_times) out.token_s.push_back(now_s);
  }
  if (!ev.finished) return;
  if (ev.finish_reason == "prefill_done" && f.remote && !f.in_decode) return hand_off(index);
  account(f, -1);
  out.cached_prompt_tokens = std::max(out.cached_prompt_tokens, ev.cached_prompt_tokens);
  finish(index, ev);
}

void SimCluster::finish(size_t index, const instance::TokenEvent& ev) {
  Flight& f = *flights_.find(index);
  SimRequestResult& out = result_.requests[index];
  out.end_s = to_seconds(runtime_.now().time_since_epoch());
  out.instance = static_cast<int32_t>(f.member);
  out.finish_reason = ev.finish_reason;
  out.error = ev.error;
  out.success = ev.finish_reason == "length" || ev.finish_reason == "stop";
  ++(out.success ? result_.stats.completed : result_.stats.failed);
  record_finish(index, out.success);
  if (f.timeout != SimRuntime::kNoEvent) runtime_.cancel(f.timeout);
  flights_.erase(index);
  ++done_;
  if (progress_ && done_ % progress_every_ == 0) progress_(done_, static_cast<int64_t>(requests_.size()));
}

void SimCluster::reject(size_t index, const std::string& finish_reason, const std::string& error) {
  if (Flight* f = flights_.find(index)) {
    account(*f, -1);
    instances_[f->member]->abort(id_of(index));
    flights_.erase(index);
  }
  SimRequestResult& out = result_.requests[index];
  out.end_s = to_seconds(runtime_.now().time_since_epoch());
  record_finish(index, false);
  out.finish_reason = finish_reason;
  out.error = error;
  out.success = false;
  ++(finish_reason == "rejected" || finish_reason == "invalid" ? result_.stats.rejected : result_.stats.failed);
  ++done_;
  if (progress_ && done_ % progress_every_ == 0) progress_(done_, static_cast<int64_t>(requests_.size()));
}

void SimCluster::transfer(size_t from, size_t to, int64_t bytes, std::function<void()> done) {
  const std::vector<GpuId>& a = options_.instances[from].gpus;
  const std::vector<GpuId>& b = options_.instances[to].gpus;
  const size_t n = std::max(a.size(), b.size());
  std::vector<std::pair<GpuId, GpuId>> pairs;
  pairs.reserve(n);
  for (size_t i = 0; i < n; ++i) pairs.emplace_back(a[i % a.size()], b[i % b.size()]);
  const int64_t per_pair = (bytes + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
  topology_->transfer(pairs, per_pair, std::move(done));
}

// --- fudg ---

void SimCluster::hand_off(size_t index) {
  const Flight& f = *flights_.find(index);
  const size_t source = f.member, destination = f.decode_member;
  const TimePoint started = runtime_.now();
  instances_[source]->post([this, index, source, destination, started](instance::InstanceCore& core, Executor& exec) {
    auto blob = core.export_held(id_of(index), exec);
    if (!blob.ok()) {
      (void)core.release_held(id_of(index));
      Flight* fl = flights_.find(index);
      if (fl == nullptr) return;
      account(*fl, -1);
      instance::TokenEvent ev;
      ev.id = id_of(index);
      ev.finished = true;
      ev.finish_reason = "error";
      ev.error = "KV export failed: " + blob.status().message();
      finish(index, ev);
      return;
    }
    const int64_t bytes = static_cast<int64_t>(requests_[index].input_tokens) * options_.kv_bytes_per_token;
    ++result_.stats.kv_transfers;
    result_.stats.kv_transfer_bytes += bytes;
    transfer(source, destination, bytes,
             [this, index, source, destination, started, kv = std::move(blob).value()]() mutable {
               result_.stats.kv_transfer_seconds += to_seconds(runtime_.now() - started);
               instances_[source]->post(
                   [index](instance::InstanceCore& c, Executor&) { (void)c.release_held(id_of(index)); });
               Flight* found = flights_.find(index);
               if (found == nullptr) return;
               Flight& fl = *found;
               account(fl, -1);
               fl.member = destination;
               fl.in_decode = true;
               account(fl, +1);
               instances_[destination]->add_prefilled_request(make_request(index), fl.output_tokens, std::move(kv));
             });
  });
}

// --- the flight table ---

void SimCluster::FlightTable::reset(size_t num_requests) {
  slots_.clear();
  free_.clear();
  slot_of_.assign(num_requests, -1);
}

void SimCluster::FlightTable::insert(size_t index, Flight flight) {
  int32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<int32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[static_cast<size_t>(slot)] = Slot{index, std::move(flight)};
  slot_of_[index] = slot;
}

void SimCluster::FlightTable::erase(size_t index) {
  const int32_t slot = slot_of_[index];
  if (slot < 0) return;
  slot_of_[index] = -1;
  slots_[static_cast<size_t>(slot)] = Slot{};  // frees what the flight held
  free_.push_back(slot);
}

void SimCluster::FlightTable::live_indices(std::vector<size_t>* out) const {
  out->clear();
  out->reserve(size());
  for (const Slot& s : slots_) {
    if (s.index != kFree) out->push_back(s.index);
  }
  std::sort(out->begin(), out->end());
}

// --- llumnix ---

void SimCluster::plan_migrations() {
  if (done_ < static_cast<int64_t>(requests_.size())) {
    runtime_.schedule_after(options_.migrate_interval, [this] { plan_migrations(); });
  }
  build_view(true);
  const std::vector<policy::MigrationOrder> orders = planner_->plan(view_);
  for (const policy::MigrationOrder& o : orders) {
    const Status s = start_migration(static_cast<size_t>(o.request.value - 1), static_cast<size_t>(o.destination.value),
                                     std::string(policy::migration_reason_name(o.reason)));
    (void)s;  // a request that finished or moved since the view was built
  }
}

Status SimCluster::start_migration(size_t index, size_t destination, const std::string& reason) {
  Flight* found = flights_.find(index);
  if (found == nullptr) return not_found_error("request {} is not running", index);
  Flight& f = *found;
  if (f.generated == 0) return failed_precondition_error("request {} has no first token yet", index);
  if (f.migrating) return failed_precondition_error("request {} is already being migrated", index);
  if (f.member == destination) return failed_precondition_error("request {} already runs there", index);
  account(f, -1);
  f.migrating = true;
  account(f, +1);
  Migration m;
  m.source = f.member;
  m.destination = destination;
  m.record.request = static_cast<int64_t>(index);
  m.record.from = static_cast<int32_t>(f.member);
  m.record.to = static_cast<int32_t>(destination);
  m.record.reason = reason;
  m.record.started_s = to_seconds(runtime_.now().time_since_epoch());
  migrations_[index] = std::move(m);
  ++result_.stats.migrations_started;
  const int32_t positions = f.prompt_tokens + f.generated - 1;
  instances_[destination]->post([this, index, positions](instance::InstanceCore& core, Executor&) {
    const Status s = core.migrate_in_reserve(id_of(index), positions);
    if (!s.ok()) return end_migration(index, "destination_full");
    migration_stage(index);
  });
  return ok_status();
}

void SimCluster::migration_stage(size_t index) {
  auto mit = migrations_.find(index);
  if (mit == migrations_.end()) return;
  const size_t source = mit->second.source;
  instances_[source]->post([this, index, source](instance::InstanceCore& core, Executor& exec) {
    auto mit = migrations_.find(index);
    if (mit == migrations_.end()) return;
    Migration& m = mit->second;
    const Flight* found = flights_.find(index);
    if (found == nullptr) return end_migration(index, "finished");
    const Flight& f = *found;
    const int32_t computed = f.prompt_tokens + f.generated - 1;
    const int32_t last_stage = options_.migrate_last_stage_tokens > 0 ? options_.migrate_last_stage_tokens : block_size_;
    const bool stop = policy::migration_stage_is_last(m.record.stages, computed, m.loaded, options_.migrate_max_stages,
                                                       last_stage);
    ++m.record.stages;
    auto chunk = stop ? core.migrate_out_stop(id_of(index), m.loaded, exec)
                      : core.migrate_out_copy(id_of(index), m.loaded, exec);
    if (!chunk.ok()) {
      return end_migration(index, chunk.status().code() == StatusCode::kNotFound ? "finished" : "preempted");
    }
    if (stop) m.stopped = runtime_.now();
    const int64_t bytes = static_cast<int64_t>(chunk->end - chunk->begin) * options_.kv_bytes_per_token;
    m.record.bytes += bytes;
    transfer(source, m.destination, bytes, [this, index, c = std::move(chunk).value()]() mutable {
      auto mit = migrations_.find(index);
      if (mit == migrations_.end()) return;
      const size_t dst = mit->second.destination;
      instances_[dst]->post([this, index, dst, c = std::move(c)](instance::InstanceCore& core, Executor& exec) {
        auto mit = migrations_.find(index);
        if (mit == migrations_.end()) return;
        Migration& m = mit->second;
        if (!c.last) {
          if (!core.migrate_in_load(id_of(index), c, exec).ok()) return end_migration(index, "destination_failed");
          m.loaded = c.end;
          return migration_stage(index);
        }
        const Status s = core.migrate_in_commit(c, instances_[dst]->event_sink(), exec);
        const size_t src = m.source;
        if (!s.ok()) {
          instances_[src]->post([index](instance::InstanceCore& sc, Executor&) {
            (void)sc.migrate_out_finish(id_of(index), /*committed=*/false);
          });
          return end_migration(index, "destination_failed");
        }
        if (Flight* found = flights_.find(index)) {
          Flight& f = *found;
          account(f, -1);
          f.member = dst;
          f.migrating = false;
          account(f, +1);
          ++result_.requests[index].migrations;
        }
        m.record.downtime_s = to_seconds(runtime_.now() - m.stopped);
        instances_[src]->post([index](instance::InstanceCore& sc, Executor&) {
          (void)sc.migrate_out_finish(id_of(index), /*committed=*/true);
        });
        end_migration(index, "completed");
      });
    });
  });
}

void SimCluster::end_migration(size_t index, const std::string& outcome) {
  auto mit = migrations_.find(index);
  if (mit == migrations_.end()) return;
  Migration m = std::move(mit->second);
  migrations_.erase(mit);
  if (outcome != "completed") {
    instances_[m.destination]->post(
        [index](instance::InstanceCore& core, Executor&) { core.migrate_in_cancel(id_of(index)); });
    Flight* f = flights_.find(index);
    if (f != nullptr && f->migrating) {
      account(*f, -1);
      f->migrating = false;
      account(*f, +1);
    }
  } else {
    ++result_.stats.migrations_completed;
  }
  result_.stats.migrated_bytes += m.record.bytes;
  m.record.outcome = outcome;
  m.record.finished_s = to_seconds(runtime_.now().time_since_epoch());
  result_.migrations.push_back(std::move(m.record));
}

// --- operator actions ---

Status SimCluster::add_instance(const SimInstanceSpec& given) {
  SimInstanceSpec spec = given;
  const size_t i = instances_.size();
  if (spec.options.name.empty()) spec.options.name = "i" + std::to_string(i);
  if (spec.gpus.empty()) return invalid_argument_error("instance {} runs on no GPU", spec.options.name);
  for (GpuId g : spec.gpus) {
    if (!topology_->contains(g)) {
      return invalid_argument_error("instance {}: GPU {} is outside the {} GPUs of the topology", spec.options.name,
                                    g.value, topology_->num_gpus());
    }
  }
  if (options_.strategy != "fudg" && spec.role != policy::InstanceRole::kMixed) {
    return invalid_argument_error("strategy {} runs mixed instances only; {} is {}", options_.strategy,
                                  spec.options.name, role_name(spec.role));
  }
  if (spec.options.executor.block_size != block_size_) {
    return invalid_argument_error("instances must share one KV block size ({} vs {})",
                                  spec.options.executor.block_size, block_size_);
  }
  const int32_t node = topology_->node_of(spec.gpus.front());
  SimInstanceOptions inst_options = spec.options;
  inst_options.host = hosts_.empty() ? nullptr : &hosts_[static_cast<size_t>(node)];
  auto inst = SimInstance::create(InstanceId(static_cast<int32_t>(i)), std::move(inst_options), spec.cost_model, runtime_,
                                  [this](InstanceId from, const instance::TokenEvent& ev) { on_event(from, ev); });
  if (!inst.ok()) return inst.status();
  for (GpuId g : spec.gpus) gpu_used_[static_cast<size_t>(g.value)] = true;
  node_of_.push_back(node);
  instances_.push_back(std::move(inst).value());
  options_.instances.push_back(std::move(spec));
  loads_.emplace_back();
  removed_.push_back(false);
  return ok_status();
}

void SimCluster::publish_layout(const std::string& action) {
  std::ostringstream os;
  os << layout_;
  result_.stats.layout = os.str();
  ++result_.stats.layout_changes;
  result_.layout_changes.push_back({to_seconds(runtime_.now().time_since_epoch()), action, os.str()});
  if (!padg_) return;
  std::vector<std::vector<InstanceId>> groups;
  for (const policy::MacroGroup& g : layout_.macros) groups.push_back(g.members);
  padg_->set_layout(std::move(groups));
}

Status SimCluster::remove_instance(size_t member) {
  if (member >= instances_.size() || removed_[member]) {
    return not_found_error("no active instance {}", member);
  }
  if (options_.strategy == "fudg") return failed_precondition_error("fudg roles are fixed");
  const InstanceId id(static_cast<int32_t>(member));
  if (padg_) {
    ECO_ASSIGN_OR_RETURN(policy::ScalePlan plan, policy::plan_remove_instance(layout_, id, options_.mitosis));
    ECO_RETURN_IF_ERROR(policy::apply(layout_, plan));
  }
  removed_[member] = true;
  router_->remove_instance(id);
  if (padg_) publish_layout("remove " + instances_[member]->name());
  return ok_status();
}

void SimCluster::act(const SimClusterOptions::Action& a) {
  using Kind = SimClusterOptions::Action::Kind;
  Status s;
  std::string what;
  if (a.kind == Kind::kAddInstance) {
    s = add_instance(a.instance);
    if (s.ok()) {
      const InstanceId id(static_cast<int32_t>(instances_.size() - 1));
      what = "add " + instances_.back()->name();
      if (padg_) {
        auto plan = policy::plan_add(layout_, id, options_.mitosis);
        s = plan.ok() ? policy::apply(layout_, *plan) : plan.status();
        if (s.ok()) publish_layout(what);
      } else {
        result_.layout_changes.push_back({to_seconds(runtime_.now().time_since_epoch()), what, ""});
      }
    }
  } else if (a.kind == Kind::kRemoveInstance) {
    s = remove_instance(static_cast<size_t>(a.target));
    if (s.ok() && !padg_) {
      result_.layout_changes.push_back(
          {to_seconds(runtime_.now().time_since_epoch()), "remove " + instances_[static_cast<size_t>(a.target)]->name(), ""});
    }
  } else {
    s = start_migration(static_cast<size_t>(a.request), static_cast<size_t>(a.target), "manual");
  }
  if (!s.ok()) {
    result_.layout_changes.push_back({to_seconds(runtime_.now().time_since_epoch()), "failed: " + s.message(), ""});
  }
}

// --- autoscaling ---

int32_t SimCluster::num_active() const {
  int32_t n = 0;
  for (bool r : removed_) n += r ? 0 : 1;
  return n;
}

void SimCluster::record_finish(size_t index, bool ok) {
  ++window_finished_;
  const SimRequestResult& r = result_.requests[index];
  const SimRequest& q = requests_[index];
  if (!ok || r.output_tokens == 0) return;
  const bool ttft_met = q.slo_ttft_s <= 0 || r.first_token_s - r.arrival_s <= q.slo_ttft_s;
  const bool tpot_met = q.slo_tpot_s <= 0 || r.output_tokens < 2 ||
                        (r.end_s - r.first_token_s) / (r.output_tokens - 1) <= q.slo_tpot_s;
  if (ttft_met && tpot_met) ++window_met_;
}

Status SimCluster::scale_up() {
  SimInstanceSpec spec = *options_.scale_template;
  spec.options.name.clear();
  const int32_t need = std::max<int32_t>(1, static_cast<int32_t>(spec.gpus.size()));
  spec.gpus.clear();
  const int32_t per_node = topology_->gpus_per_node();
  for (int32_t node = 0; node < topology_->num_nodes() && spec.gpus.empty(); ++node) {
    std::vector<GpuId> free;
    for (int32_t k = 0; k < per_node; ++k) {
      const GpuId g = topology_->gpu(node, k);
      if (!gpu_used_[static_cast<size_t>(g.value)]) free.push_back(g);
    }
    if (static_cast<int32_t>(free.size()) >= need) spec.gpus.assign(free.begin(), free.begin() + need);
  }
  if (spec.gpus.empty()) return resource_exhausted_error("no node has {} free GPUs", need);
  SimClusterOptions::Action a;
  a.kind = SimClusterOptions::Action::kAddInstance;
  a.instance = std::move(spec);
  const size_t before = instances_.size();
  act(a);
  if (instances_.size() == before) return internal_error("the instance was not added");
  ++result_.stats.scale_ups;
  return ok_status();
}

void SimCluster::check_scaling() {
  if (done_ < static_cast<int64_t>(requests_.size())) {
    runtime_.schedule_after(options_.scale_check_interval, [this] { check_scaling(); });
  }
  const TimePoint now = runtime_.now();
  if (options_.scale_by_freeness && freeness_scaler_) {
    build_view(true);
    const double mean = policy::mean_freeness(view_, options_.migration.freeness);
    freeness_scaler_->observe(now, mean);
    const policy::ScaleSignal signal = freeness_scaler_->decide(now, num_active());
    if (signal == policy::ScaleSignal::kScaleUp) {
      (void)scale_up();
    } else if (signal == policy::ScaleSignal::kScaleDown) {
      auto pick = policy::pick_instance_to_drain(view_, options_.migration.freeness);
      if (pick && policy::freeness_without(view_, *pick, options_.migration.freeness) >
                      options_.freeness_scaling.scale_up_freeness) {
        SimClusterOptions::Action a;
        a.kind = SimClusterOptions::Action::kRemoveInstance;
        a.target = pick->value;
        act(a);
        ++result_.stats.scale_downs;
      }
    }
  }
  if (!options_.autoscale || options_.strategy == "fudg") return;
  if (window_start_ == TimePoint{}) window_start_ = now;
  if (now - window_start_ < options_.autoscale_window) return;
  policy::ScalingWindow w;
  w.now = now;
  w.last_decision = last_scaling_;
  double kv = 0.0;
  std::optional<size_t> newest;
  for (size_t i = 0; i < instances_.size(); ++i) {
    if (removed_[i]) continue;
    const double total = instances_[i]->num_total_blocks();
    kv += total > 0 ? 1.0 - instances_[i]->num_free_blocks() / total : 0.0;
    newest = i;
  }
  const int32_t active = num_active();
  w.mean_utilization = active > 0 ? kv / active : 0.0;
  if (window_finished_ > 0) w.slo_attainment = static_cast<double>(window_met_) / static_cast<double>(window_finished_);
  window_finished_ = window_met_ = 0;
  window_start_ = now;
  std::optional<size_t> victim = newest;
  if (padg_) {
    auto plan = policy::plan_remove(layout_, options_.mitosis);
    victim.reset();
    if (plan.ok() && plan->removed_instance()) victim = static_cast<size_t>(plan->removed_instance()->value);
  }
  const policy::ScaleSignal signal = policy::decide_scaling(w, options_.autoscale_policy);
  if (signal == policy::ScaleSignal::kScaleUp && active < options_.autoscale_max) {
    last_scaling_ = now;
    (void)scale_up();
  } else if (signal == policy::ScaleSignal::kScaleDown && active > std::max(1, options_.autoscale_min) && victim) {
    last_scaling_ = now;
    SimClusterOptions::Action a;
    a.kind = SimClusterOptions::Action::kRemoveInstance;
    a.target = static_cast<int32_t>(*victim);
    act(a);
    ++result_.stats.scale_downs;
  }
}

}  // namespace ecoserve::sim
