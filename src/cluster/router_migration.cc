// Router, llumnix part: the request lists of the freeness view, the migration
// planner's timer, live migration in stages, and scaling by freeness. See
// router.h (RouterOptions, "llumnix") for the contract.
//
// One migration of request R from S to D, each arrow a callback on a backend
// thread, none of them under mu_ while a backend is called:
//   D.reserve(positions now) -> S.copy [0, c1) -> D.load -> S.copy [c1, c2) -> D.load
//   ... -> S.stop [ck, end) (R suspended at S) -> D.commit (R runs at D, events
//   with a new epoch) -> S.finish(committed: R's blocks freed at S, no final event).
// Before the stop-and-copy any failure (or R finishing, being cancelled or
// preempted at S) aborts it: D's reservation is freed and R never left S. After
// it, D's answer decides: committed, R continues at D; refused, S resumes R.

#include <algorithm>

#include <spdlog/spdlog.h>

#include "cluster/router.h"
#include "kv/block_allocator.h"

namespace ecoserve::cluster {

policy::RequestLoad Router::load_of(RequestId id, const InFlight& f) const {
  policy::RequestLoad r;
  r.id = id;
  r.priority = f.request->priority;
  r.num_tokens = f.prompt_tokens + f.generated;
  r.num_generated = f.generated;
  r.max_tokens = f.request->sampling.max_tokens;
  r.running = f.generated > 0;
  r.migrating = f.migrating;
  return r;
}

void Router::add_requests_to_view() {
  view_.with_requests = true;
  for (auto& inst : view_.instances) inst.requests.clear();
  for (const auto& [id, f] : in_flight_) {
    if (!f.routed || f.member >= view_.instances.size()) continue;
    view_.instances[f.member].requests.push_back(load_of(id, f));
  }
  // Queued requests in arrival order (ids grow with arrival), running ones by id: deterministic.
  for (auto& inst : view_.instances) {
    std::sort(inst.requests.begin(), inst.requests.end(),
              [](const policy::RequestLoad& a, const policy::RequestLoad& b) { return a.id.value < b.id.value; });
  }
}

void Router::plan_migrations(TimePoint now) {
  if (!llumnix() || !planner_ || options_.migrate_interval <= Duration::zero()) return;
  if (last_migration_plan_ != TimePoint{} && now - last_migration_plan_ < options_.migrate_interval) return;
  last_migration_plan_ = now;
  std::vector<instance::InstanceStatus> snaps;
  for (size_t i = 0; i < size(); ++i) snaps.push_back(status_of(i));
  std::vector<policy::MigrationOrder> orders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    build_view(snaps, now);
    add_requests_to_view();
    orders = planner_->plan(view_);
  }
  for (const policy::MigrationOrder& o : orders) {
    const Status s = start_migration(o.request, static_cast<size_t>(o.destination.value),
                                     std::string(policy::migration_reason_name(o.reason)));
    if (!s.ok()) spdlog::debug("router: migration of request {} not started: {}", o.request.value, s.message());
  }
}

Status Router::migrate(RequestId id, const std::string& destination) {
  if (!llumnix()) return failed_precondition_error("requests migrate only under --strategy llumnix");
  size_t dst = size();
  for (size_t i = 0; i < size(); ++i) {
    if (members_[i].name == destination && life(i) != Life::kRemoved) dst = i;
  }
  if (dst == size()) return not_found_error("no instance named '{}'", destination);
  return start_migration(id, dst, "manual");
}

Status Router::start_migration(RequestId id, size_t destination, const std::string& reason) {
  int32_t positions = 0;
  size_t source = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return unavailable_error("the router is stopping");
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return not_found_error("request {} is not running", id.value);
    InFlight& f = it->second;
    if (!f.routed || f.generated == 0) return failed_precondition_error("request {} has no first token yet", id.value);
    if (f.migrating) return failed_precondition_error("request {} is already being migrated", id.value);
    if (f.cancelled) return failed_precondition_error("request {} was cancelled", id.value);
    if (f.member == destination) return failed_precondition_error("request {} already runs there", id.value);
    if (life(destination) != Life::kActive) {
      return failed_precondition_error("instance {} is not active", members_[destination].name);
    }
    source = f.member;
    f.migrating = true;
    Migration m;
    m.source = source;
    m.destination = destination;
    m.epoch = f.epoch;
    m.record.request = id;
    m.record.from = members_[source].name;
    m.record.to = members_[destination].name;
    m.record.reason = reason;
    m.record.started = clock_->now();
    migrations_[id] = std::move(m);
    ++stats_.migrations_started;
    positions = f.prompt_tokens + f.generated - 1;
  }
  if (options_.on_migration_stage) options_.on_migration_stage(id, "reserve");
  std::shared_ptr<GenerationBackend> dst = backend(destination);
  if (!dst) {
    abort_migration(id, "destination_failed");
    return ok_status();
  }
  dst->migrate_in_reserve(id, positions, [this, id](Status s) {
    if (!s.ok()) {
      return abort_migration(id, s.code() == StatusCode::kResourceExhausted ? "destination_full" : "destination_failed");
    }
    migration_copy(id);
  });
  return ok_status();
}

void Router::migration_copy(RequestId id) {
  size_t source = 0;
  int32_t begin = 0;
  bool stop = false;
  std::string abort_reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = migrations_.find(id);
    if (m == migrations_.end()) return;
    auto it = in_flight_.find(id);
    if (stopping_) {
      abort_reason = "cancelled";
    } else if (it == in_flight_.end() || it->second.epoch != m->second.epoch) {
      abort_reason = "finished";
    } else if (it->second.cancelled) {
      abort_reason = "cancelled";
    } else if (clock_->now() - m->second.record.started > options_.migrate_timeout) {
      abort_reason = "timeout";
    } else {
      const InFlight& f = it->second;
      const int32_t computed = f.prompt_tokens + f.generated - 1;
      const int32_t last_stage =
          options_.migrate_last_stage_tokens > 0 ? options_.migrate_last_stage_tokens : block_size_;
      source = m->second.source;
      begin = m->second.loaded;
      // The last copy stage is the stop-and-copy: when few positions are left, or
      // the stages are used up (a request decoding faster than it copies).
      stop = policy::migration_stage_is_last(m->second.record.stages, computed, begin, options_.migrate_max_stages,
                                             last_stage);
      ++m->second.record.stages;
      if (stop) {
        m->second.record.stopped = clock_->now();
        it->second.suspended = true;
      }
    }
  }
  if (!abort_reason.empty()) return abort_migration(id, abort_reason);
  if (options_.on_migration_stage) options_.on_migration_stage(id, stop ? "stop" : "copy");
  std::shared_ptr<GenerationBackend> src = backend(source);
  if (!src) return on_migration_chunk(id, unavailable_error("the source instance was removed"));
  src->migrate_out(id, begin, stop,
                   [this, id](StatusOr<instance::MigrationChunk> chunk) { on_migration_chunk(id, std::move(chunk)); });
}

void Router::on_migration_chunk(RequestId id, StatusOr<instance::MigrationChunk> chunk) {
  size_t destination = 0;
  uint64_t new_epoch = 0;
  std::shared_ptr<instance::EventSink> client;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = migrations_.find(id);
    if (m == migrations_.end()) return;
    auto it = in_flight_.find(id);
    if (!chunk.ok()) {
      // The source could not copy: the request ended, was preempted there, or the
      // source is gone. A stop-and-copy that failed left nothing suspended.
      if (it != in_flight_.end()) it->second.suspended = false;
    } else {
      destination = m->second.destination;
      m->second.record.bytes += static_cast<int64_t>(chunk->kv.size());
      if (chunk->last) {
        if (it == in_flight_.end()) {
          chunk = not_found_error("the request is gone");
        } else {
          m->second.record.context_tokens = chunk->end;
          new_epoch = it->second.epoch + 1;
          client = it->second.sink;
        }
      }
    }
  }
  if (!chunk.ok()) {
    const StatusCode code = chunk.status().code();
    return abort_migration(id, code == StatusCode::kNotFound             ? "finished"
                               : code == StatusCode::kFailedPrecondition ? "preempted"
                                                                         : "source_failed");
  }
  std::shared_ptr<GenerationBackend> dst = backend(destination);
  if (!chunk->last) {
    const int32_t end = chunk->end;
    if (options_.on_migration_stage) options_.on_migration_stage(id, "load");
    if (!dst) return abort_migration(id, "destination_failed");
    dst->migrate_in_load(id, std::move(*chunk), [this, id, end](Status s) {
      if (!s.ok()) {
        return abort_migration(id, s.code() == StatusCode::kResourceExhausted ? "destination_full" : "destination_failed");
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto m = migrations_.find(id);
        if (m == migrations_.end()) return;
        m->second.loaded = end;
      }
      migration_copy(id);
    });
    return;
  }
  if (options_.on_migration_stage) options_.on_migration_stage(id, "commit");
  if (!dst) return on_migration_committed(id, new_epoch, unavailable_error("the destination instance was removed"));
  auto sink = [this, id, new_epoch, client](const instance::TokenEvent& ev) { deliver(id, new_epoch, ev, *client); };
  dst->migrate_in_commit(std::move(*chunk), std::move(sink),
                         [this, id, new_epoch](Status s) { on_migration_committed(id, new_epoch, std::move(s)); });
}

void Router::on_migration_committed(RequestId id, uint64_t new_epoch, Status s) {
  size_t source = 0, destination = 0;
  bool gone = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = migrations_.find(id);
    if (m == migrations_.end()) return;
    source = m->second.source;
    destination = m->second.destination;
    auto it = in_flight_.find(id);
    gone = it == in_flight_.end() || it->second.cancelled;
    if (s.ok() && it != in_flight_.end()) {
      // From here the destination holds it: its events (the new epoch) go to the
      // client, and so does its final "abort" when it was cancelled meanwhile.
      InFlight& f = it->second;
      account(f, -1);
      f.member = destination;
      f.epoch = new_epoch;
      f.migrating = f.suspended = false;
      account(f, +1);
      const TimePoint now = clock_->now();
      m->second.record.downtime_seconds = to_seconds(now - m->second.record.stopped);
      end_migration(id, gone ? "cancelled" : "completed");
    } else if (s.ok()) {
      end_migration(id, "finished");
    } else {
      if (it != in_flight_.end()) it->second.suspended = false;
      end_migration(id, s.code() == StatusCode::kResourceExhausted ? "destination_full" : "destination_failed");
    }
  }
  std::shared_ptr<GenerationBackend> src = backend(source);
  if (s.ok()) {
    // Cancelled (or ended) while the stop-and-copy was under way: end it there too.
    if (gone) {
      if (auto dst = backend(destination)) dst->cancel(id);
    }
    if (src) src->migrate_out_finish(id, /*committed=*/true, [](Status) {});
    return;
  }
  if (auto dst = backend(destination)) dst->migrate_in_cancel(id);
  if (!src) return fail(id, "error", "migration failed and the source instance is gone: " + s.message());
  src->migrate_out_finish(id, /*committed=*/false, [this, id, msg = s.message()](Status resumed) {
    if (!resumed.ok() && resumed.code() != StatusCode::kNotFound) {
      fail(id, "error", "migration failed (" + msg + ") and the source could not resume the request: " +
                            resumed.message());
    }
  });
}

void Router::abort_migration(RequestId id, const std::string& reason) {
  size_t destination = 0;
  bool orphaned = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto m = migrations_.find(id);
    if (m == migrations_.end()) return;
    destination = m->second.destination;
    auto it = in_flight_.find(id);
    if (it != in_flight_.end() && it->second.epoch == m->second.epoch) {
      it->second.migrating = it->second.suspended = false;
      orphaned = it->second.source_ended;
    }
    end_migration(id, reason);
  }
  if (auto dst = backend(destination)) dst->migrate_in_cancel(id);
  if (orphaned) fail(id, "error", "the instance running the request stopped during its migration");
}

void Router::end_migration(RequestId id, const std::string& outcome) {
  auto m = migrations_.find(id);
  if (m == migrations_.end()) return;
  MigrationRecord r = std::move(m->second.record);
  migrations_.erase(m);
  r.outcome = outcome;
  r.finished = clock_->now();
  stats_.migrated_bytes += r.bytes;
  if (outcome == "completed") {
    ++stats_.migrations_completed;
    constexpr size_t kBuckets = std::size(kMigrationDowntimeBuckets);
    stats_.migration_downtime_buckets.resize(kBuckets + 1, 0);
    for (size_t b = 0; b < kBuckets; ++b) {
      if (r.downtime_seconds <= kMigrationDowntimeBuckets[b]) ++stats_.migration_downtime_buckets[b];
    }
    ++stats_.migration_downtime_buckets[kBuckets];
    stats_.migration_downtime_seconds_total += r.downtime_seconds;
    spdlog::debug("router: request {} migrated {} -> {} ({}, {} positions, {} stages, {} bytes, downtime {:.2f} ms)",
                  r.request.value, r.from, r.to, r.reason, r.context_tokens, r.stages, r.bytes,
                  r.downtime_seconds * 1e3);
  } else {
    auto a = std::find_if(stats_.migrations_aborted.begin(), stats_.migrations_aborted.end(),
                          [&](const auto& p) { return p.first == outcome; });
    if (a == stats_.migrations_aborted.end()) {
      stats_.migrations_aborted.emplace_back(outcome, 1);
    } else {
      ++a->second;
    }
    spdlog::debug("router: migration of request {} {} -> {} aborted: {}", r.request.value, r.from, r.to, outcome);
  }
  if (stats_.recent_migrations.size() >= 256) stats_.recent_migrations.erase(stats_.recent_migrations.begin());
  stats_.recent_migrations.push_back(std::move(r));
}

void Router::scale_by_freeness(TimePoint now) {
  if (!llumnix() || !options_.scale_by_freeness || !freeness_scaler_ || !options_.make_instance) return;
  std::vector<instance::InstanceStatus> snaps;
  for (size_t i = 0; i < size(); ++i) snaps.push_back(status_of(i));
  std::string victim;
  policy::ScaleSignal signal = policy::ScaleSignal::kHold;
  double mean = 0.0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || draining_) return;
    build_view(snaps, now);
    add_requests_to_view();
    mean = policy::mean_freeness(view_, options_.migration.freeness);
    int32_t active = 0;
    for (size_t i = 0; i < size(); ++i) active += life(i) == Life::kActive ? 1 : 0;
    freeness_scaler_->observe(now, mean);
    signal = freeness_scaler_->decide(now, active);
    if (signal == policy::ScaleSignal::kScaleDown) {
      auto pick = policy::pick_instance_to_drain(view_, options_.migration.freeness);
      // Only when the others would stay free enough: else it would be added back.
      if (pick && policy::freeness_without(view_, *pick, options_.migration.freeness) >
                      options_.freeness_scaling.scale_up_freeness) {
        victim = members_[static_cast<size_t>(pick->value)].name;
      }
    }
  }
  if (signal == policy::ScaleSignal::kScaleUp) {
    StatusOr<std::string> name = add_instance("");
    if (name.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.freeness_scale_ups;
    }
    spdlog::info("llumnix scaling: mean freeness {:.1f} below {}: added {}", mean,
                 options_.freeness_scaling.scale_up_freeness, name.ok() ? *name : name.status().message());
  } else if (signal == policy::ScaleSignal::kScaleDown && !victim.empty()) {
    const Status s = remove_instance(victim);
    if (s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.freeness_scale_downs;
    }
    spdlog::info("llumnix scaling: mean freeness {:.1f} above {}: draining {} ({})", mean,
                 options_.freeness_scaling.scale_down_freeness, victim, s.to_string());
  }
}

}  // namespace ecoserve::cluster
