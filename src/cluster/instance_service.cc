#include "cluster/instance_service.h"

#include <random>

#include "base/log.h"

namespace ecoserve::cluster {

using transport::Kind;
using transport::Message;

InstanceService::InstanceService(GenerationBackend* backend, const InstanceServiceOptions& options, const Clock* clock)
    : backend_(backend), options_(options), clock_(clock) {}

StatusOr<std::unique_ptr<InstanceService>> InstanceService::create(GenerationBackend* backend,
                                                                   const InstanceServiceOptions& options,
                                                                   const Clock* clock) {
  if (!backend || !clock) return invalid_argument_error("instance service: no backend or clock");
  auto service = std::unique_ptr<InstanceService>(new InstanceService(backend, options, clock));
  InstanceService* self = service.get();
  transport::SocketLoopOptions so;
  so.mode = transport::SocketLoopOptions::Mode::kServer;
  so.address = options.listen;
  so.tick = from_ms(50);
  ECO_ASSIGN_OR_RETURN(service->loop_,
                       transport::SocketLoop::create(
                           so,
                           [self](const std::string& peer, std::vector<uint8_t> bytes) {
                             self->on_message(peer, std::move(bytes));
                           },
                           [self] { self->on_tick(); }));
  transport::InstanceInfo& info = service->info_;
  info.name = service->loop_->endpoint();
  info.role = options.role;
  info.policy = options.policy;
  info.max_context = backend->max_context();
  info.block_size = options.block_size > 0 ? options.block_size : backend->status().block_size;
  info.model_path = options.model_path;
  info.model_id = options.model_id;
  std::random_device rd;
  info.boot_id = (static_cast<uint64_t>(rd()) << 32 | rd()) | 1;  // never 0
  return service;
}

InstanceService::~InstanceService() { stop(); }

void InstanceService::start() { loop_->start(); }

void InstanceService::stop() {
  if (loop_) loop_->stop();
}

size_t InstanceService::num_routers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return routers_.size();
}

void InstanceService::reply(const std::string& peer, const Message& m) {
  loop_->send(peer, transport::encode(m, clock_->now()));
}

instance::EventSink InstanceService::sink_for(const std::string& peer) {
  return [this, peer](const instance::TokenEvent& ev) {
    Message m;
    m.kind = Kind::kEvent;
    m.event = ev;
    reply(peer, m);
    if (!ev.finished) return;
    bool orphan = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = routers_.find(peer);
      if (it != routers_.end()) {
        it->second.running.erase(ev.id);
        if (ev.finish_reason == "prefill_done") it->second.held.insert(ev.id);
      } else {
        orphan = ev.finish_reason == "prefill_done";
      }
    }
    // Its router is gone: nobody will take this KV.
    if (orphan) backend_->take_prefilled_kv(ev.id, [](StatusOr<std::vector<uint8_t>>) {});
  };
}

void InstanceService::on_message(const std::string& peer, std::vector<uint8_t> bytes) {
  const TimePoint now = clock_->now();
  StatusOr<Message> decoded = transport::decode(bytes, now);
  if (!decoded.ok()) {
    spdlog::warn("instance {}: refused a message: {}", info_.name, decoded.status().message());
    reply(peer, transport::error_message(0, decoded.status()));
    return;
  }
  Message& m = *decoded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    routers_[peer].last_rx = now;
  }
  switch (m.kind) {
    case Kind::kHello: {
      Message r;
      r.kind = Kind::kHelloReply;
      r.call = m.call;
      r.info = info_;
      reply(peer, r);
      return;
    }
    case Kind::kStatus: {
      Message r;
      r.kind = Kind::kStatusReply;
      r.call = m.call;
      r.status = backend_->status();
      r.info.boot_id = info_.boot_id;
      reply(peer, r);
      return;
    }
    case Kind::kSubmit:
    case Kind::kSubmitPrefilled: {
      const RequestId id = m.request.id;
      {
        std::lock_guard<std::mutex> lock(mu_);
        routers_[peer].running.insert(id);
      }
      Status s = m.kind == Kind::kSubmit
                     ? backend_->submit(std::move(m.request), sink_for(peer))
                     : backend_->submit_prefilled(std::move(m.request), std::move(m.output_tokens), std::move(m.kv),
                                                  sink_for(peer));
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        routers_[peer].running.erase(id);
      }
      reply(peer, transport::ack_message(m.call, s));
      return;
    }
    case Kind::kCancel: backend_->cancel(m.id); return;
    case Kind::kTimeline: {
      Message r;
      r.kind = Kind::kTimelineReply;
      r.call = m.call;
      auto lanes = backend_->timeline(now - from_seconds(m.seconds));
      if (!lanes.empty()) r.steps = std::move(lanes[0].steps);
      reply(peer, r);
      return;
    }
    case Kind::kTakeKv: {
      {
        std::lock_guard<std::mutex> lock(mu_);
        routers_[peer].held.erase(m.id);
      }
      const uint64_t call = m.call;
      backend_->take_prefilled_kv(m.id, [this, peer, call](StatusOr<std::vector<uint8_t>> blob) {
        Message r;
        r.kind = Kind::kKvReply;
        r.call = call;
        if (blob.ok()) {
          r.kv = std::move(*blob);
        } else {
          r.code = blob.status().code();
          r.error = blob.status().message();
        }
        reply(peer, r);
      });
      return;
    }
    case Kind::kMigrateOut:
    case Kind::kMigrateOutFinish:
    case Kind::kMigrateInReserve:
    case Kind::kMigrateInLoad:
    case Kind::kMigrateInCommit:
    case Kind::kMigrateInCancel: on_migration_message(peer, m); return;
    case Kind::kFreeze: {
      if (!options_.freeze_for_testing) {
        reply(peer, transport::ack_message(m.call, permission_denied_error("freeze is a test hook: start the instance "
                                                                            "with --test-hooks")));
        return;
      }
      options_.freeze_for_testing(from_seconds(m.seconds));
      reply(peer, transport::ack_message(m.call, ok_status()));
      return;
    }
    default:
      reply(peer, transport::error_message(m.call, invalid_argument_error("an instance does not take '{}' messages",
                                                                          transport::kind_name(m.kind))));
      return;
  }
}

void InstanceService::on_migration_message(const std::string& peer, Message& m) {
  const uint64_t call = m.call;
  const RequestId id = m.id;
  // The bookkeeping of `peer` (it may be forgotten meanwhile: then nothing to do).
  auto with_router = [this, peer](const std::function<void(Router&)>& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = routers_.find(peer);
    if (it != routers_.end()) fn(it->second);
  };
  auto ack = [this, peer, call](const Status& s) {
    if (call != 0) reply(peer, transport::ack_message(call, s));
  };
  switch (m.kind) {
    case Kind::kMigrateOut:
      backend_->migrate_out(id, m.begin, m.stop, [this, peer, call](StatusOr<instance::MigrationChunk> chunk) {
        Message r;
        r.kind = Kind::kMigrateChunk;
        r.call = call;
        if (chunk.ok()) {
          r.chunk = std::move(*chunk);
        } else {
          r.code = chunk.status().code();
          r.error = chunk.status().message();
        }
        reply(peer, r);
      });
      return;
    case Kind::kMigrateOutFinish:
      backend_->migrate_out_finish(id, m.committed, [id, committed = m.committed, with_router, ack](Status s) {
        // Committed: it runs elsewhere now and was dropped here without a final event.
        if (s.ok() && committed) with_router([id](Router& r) { r.running.erase(id); });
        ack(s);
      });
      return;
    case Kind::kMigrateInReserve:
      with_router([id](Router& r) { r.reserved.insert(id); });
      backend_->migrate_in_reserve(id, m.num_tokens, [id, with_router, ack](Status s) {
        if (!s.ok()) with_router([id](Router& r) { r.reserved.erase(id); });  // a refused one holds nothing
        ack(s);
      });
      return;
    case Kind::kMigrateInLoad:
      backend_->migrate_in_load(id, std::move(m.chunk), ack);
      return;
    case Kind::kMigrateInCommit: {
      const RequestId rid = m.chunk.handover.request.id;
      // Before the commit runs: its final event may come right after it.
      bool inserted = false;
      with_router([rid, &inserted](Router& r) { inserted = r.running.insert(rid).second; });
      backend_->migrate_in_commit(std::move(m.chunk), sink_for(peer), [rid, inserted, with_router, ack](Status s) {
        with_router([&](Router& r) {
          if (s.ok()) {
            r.reserved.erase(rid);
          } else if (inserted) {
            r.running.erase(rid);  // not committed: the sink was never taken; the reservation stays
          }
        });
        ack(s);
      });
      return;
    }
    case Kind::kMigrateInCancel:
      with_router([id](Router& r) { r.reserved.erase(id); });
      backend_->migrate_in_cancel(id);
      ack(ok_status());
      return;
    default: return;
  }
}

void InstanceService::on_tick() {
  const TimePoint now = clock_->now();
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [peer, r] : routers_) {
      if (now - r.last_rx > options_.router_timeout) gone.push_back(peer);
    }
  }
  for (const std::string& peer : gone) forget_router(peer);
}

void InstanceService::forget_router(const std::string& peer) {
  Router r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = routers_.find(peer);
    if (it == routers_.end()) return;
    r = std::move(it->second);
    routers_.erase(it);
  }
  if (!r.running.empty() || !r.held.empty() || !r.reserved.empty()) {
    spdlog::warn("instance {}: a router went silent; cancelling its {} request(s) (suspended ones included), "
                 "freeing {} held KV transfer(s) and {} migration reservation(s)",
                 info_.name, r.running.size(), r.held.size(), r.reserved.size());
  }
  for (RequestId id : r.reserved) backend_->migrate_in_cancel(id);
  // A request suspended by a stop-and-copy is aborted by its cancel like the others.
  for (RequestId id : r.running) backend_->cancel(id);
  for (RequestId id : r.held) backend_->take_prefilled_kv(id, [](StatusOr<std::vector<uint8_t>>) {});
}

}  // namespace ecoserve::cluster
