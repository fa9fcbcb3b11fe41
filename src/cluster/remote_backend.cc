#include "cluster/remote_backend.h"

#include <future>
#include <thread>

#include "base/log.h"

namespace ecoserve::cluster {

using transport::Kind;
using transport::Message;

RemoteBackend::RemoteBackend(const RemoteBackendOptions& options, const Clock* clock)
    : options_(options), clock_(clock) {}

StatusOr<std::unique_ptr<RemoteBackend>> RemoteBackend::connect(const RemoteBackendOptions& options,
                                                                 const Clock* clock) {
  if (!clock) return invalid_argument_error("remote backend: no clock");
  auto backend = std::unique_ptr<RemoteBackend>(new RemoteBackend(options, clock));
  RemoteBackend* self = backend.get();
  transport::SocketLoopOptions so;
  so.mode = transport::SocketLoopOptions::Mode::kClient;
  so.address = options.address;
  so.tick = std::max(from_ms(10), options.status_interval / 2);
  ECO_ASSIGN_OR_RETURN(backend->loop_,
                       transport::SocketLoop::create(
                           so, [self](const std::string&, std::vector<uint8_t> bytes) { self->on_message(std::move(bytes)); },
                           [self] { self->on_tick(); }));
  backend->loop_->start();
  // Hello until one is answered: sends made before the TCP connection is up are dropped.
  const TimePoint deadline = clock->now() + options.connect_timeout;
  Status last = unavailable_error("no instance answered at {} within {:.1f} s", options.address,
                                  to_seconds(options.connect_timeout));
  Duration wait = from_ms(20);
  while (clock->now() < deadline) {
    Message hello;
    hello.kind = Kind::kHello;
    StatusOr<Message> reply = backend->call_and_wait(std::move(hello), wait);
    wait = std::min(wait * 2, from_ms(250));
    if (reply.ok()) {
      if (reply->kind != Kind::kHelloReply) return internal_error("{} answered hello with {}", options.address, transport::kind_name(reply->kind));
      backend->info_ = reply->info;
      // The first status, so that status() is the instance's own from the start.
      Message ask;
      ask.kind = Kind::kStatus;
      StatusOr<Message> first = backend->call_and_wait(std::move(ask), options.call_timeout);
      if (!first.ok()) return first.status().with_prefix("instance " + options.address);
      std::lock_guard<std::mutex> lock(backend->mu_);
      backend->alive_ = true;
      backend->hello_done_ = true;
      backend->last_rx_ = clock->now();
      return backend;
    }
    if (reply.status().code() != StatusCode::kDeadlineExceeded) {
      return reply.status().with_prefix("instance " + options.address);
    }
  }
  return last;
}

RemoteBackend::~RemoteBackend() {
  stop();
}

void RemoteBackend::send(const Message& m) { loop_->send({}, transport::encode(m, clock_->now())); }

void RemoteBackend::call(Message m, Duration timeout, std::function<void(StatusOr<Message>)> done) {
  bool registered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopped_) {
      m.call = next_call_++;
      calls_[m.call] = Call{std::move(done), clock_->now() + timeout};
      registered = true;
    }
  }
  if (registered) {
    send(m);
  } else {
    done(unavailable_error("instance {}: disconnected", options_.address));
  }
}

StatusOr<Message> RemoteBackend::call_and_wait(Message m, Duration timeout) {
  if (transport::SocketLoop::on_any_loop_thread()) {
    return internal_error("remote backend: a blocking call on a socket thread");
  }
  auto promise = std::make_shared<std::promise<StatusOr<Message>>>();
  std::future<StatusOr<Message>> result = promise->get_future();
  call(std::move(m), timeout, [promise](StatusOr<Message> r) { promise->set_value(std::move(r)); });
  return result.get();  // the tick ends every call by its deadline
}

void RemoteBackend::on_message(std::vector<uint8_t> bytes) {
  const TimePoint now = clock_->now();
  StatusOr<Message> decoded = transport::decode(bytes, now);
  if (!decoded.ok()) {
    if (decoded.status().code() == StatusCode::kFailedPrecondition) {
      // Another wire version: nothing it says can be read; end what waits on it.
      std::unordered_map<uint64_t, Call> calls;
      {
        std::lock_guard<std::mutex> lock(mu_);
        calls.swap(calls_);
      }
      for (auto& [id, c] : calls) c.done(decoded.status());
    } else {
      spdlog::warn("instance {}: unreadable message: {}", options_.address, decoded.status().message());
    }
    return;
  }
  Message& m = *decoded;
  bool revived = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_rx_ = now;
    if (!alive_ && hello_done_ && !stopped_) revived = alive_ = true;
  }
  if (revived) spdlog::warn("instance {} answers again", options_.address);
  switch (m.kind) {
    case Kind::kEvent: {
      std::shared_ptr<instance::EventSink> sink;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = requests_.find(m.event.id);
        if (it != requests_.end()) {
          sink = it->second;
          if (m.event.finished) requests_.erase(it);
        }
      }
      if (sink) {
        (*sink)(m.event);
      } else if (!m.event.finished) {
        // A request this side already ended (the instance was thought dead): stop it there.
        Message c;
        c.kind = Kind::kCancel;
        c.id = m.event.id;
        send(c);
      }
      return;
    }
    case Kind::kStatusReply: {
      bool restarted = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        status_ = m.status;
        restarted = info_.boot_id != 0 && m.info.boot_id != info_.boot_id;
        info_.boot_id = m.info.boot_id;
      }
      if (restarted) fail_everything("instance " + options_.address + " restarted", "error");
      if (m.call == 0) return;
      break;  // connect()'s first status: a reply
    }
    default: break;
  }
  // A reply.
  std::function<void(StatusOr<Message>)> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(m.call);
    if (it == calls_.end()) return;  // timed out already
    done = std::move(it->second.done);
    calls_.erase(it);
  }
  if (m.kind == Kind::kError) {
    done(Status(m.code, m.error));
  } else {
    done(std::move(m));
  }
}

void RemoteBackend::on_tick() {
  const TimePoint now = clock_->now();
  bool hello_done = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hello_done = hello_done_;
  }
  if (hello_done && now - last_status_sent_ >= options_.status_interval) {
    Message m;
    m.kind = Kind::kStatus;
    send(m);
    last_status_sent_ = now;
  }
  std::vector<std::function<void(StatusOr<Message>)>> expired;
  bool died = false;
  double silent = 0.0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = calls_.begin(); it != calls_.end();) {
      if (now >= it->second.deadline) {
        expired.push_back(std::move(it->second.done));
        it = calls_.erase(it);
      } else {
        ++it;
      }
    }
    silent = to_seconds(now - last_rx_);
    if (alive_ && now - last_rx_ > options_.peer_timeout) {
      alive_ = false;
      died = true;
    }
  }
  for (auto& done : expired) done(deadline_exceeded_error("instance {} did not answer in time", options_.address));
  if (died) {
    spdlog::warn("instance {}: no message for {:.1f} s; its requests fail", options_.address, silent);
    fail_everything("instance " + options_.address + " stopped answering", "error");
  }
}

void RemoteBackend::fail_everything(const std::string& why, const std::string& finish_reason) {
  std::unordered_map<RequestId, std::shared_ptr<instance::EventSink>> requests;
  std::unordered_map<uint64_t, Call> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests.swap(requests_);
    // A commit under way is ended by its call (the router then resumes the request
    // at the source), not by a final event.
    for (RequestId id : committing_) requests.erase(id);
    // Hellos and probes of a live connection are not ended by a restart; everything else is.
    calls.swap(calls_);
  }
  for (auto& [id, c] : calls) c.done(unavailable_error("{}", why));
  for (auto& [id, sink] : requests) {
    instance::TokenEvent ev;
    ev.id = id;
    ev.finished = true;
    ev.finish_reason = finish_reason;
    if (finish_reason == "error") ev.error = why;
    (*sink)(ev);
  }
}

Status RemoteBackend::submit_message(Message m, instance::EventSink sink) {
  const RequestId id = m.request.id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || draining_) return unavailable_error("instance {} is not taking requests", options_.address);
    if (!alive_) return unavailable_error("instance {} is not answering", options_.address);
    if (requests_.count(id)) return already_exists_error("request {} is already running on {}", id.value, options_.address);
    requests_[id] = std::make_shared<instance::EventSink>(std::move(sink));
  }
  auto forget = [this, id]() -> std::shared_ptr<instance::EventSink> {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) return nullptr;
    auto s = it->second;
    requests_.erase(it);
    return s;
  };
  if (transport::SocketLoop::on_any_loop_thread()) {
    // From an event sink or callback of a remote instance: waiting here could
    // deadlock two socket threads on each other's replies, so the acknowledgement
    // is not awaited; a refusal arrives as the request's final "error" event.
    call(std::move(m), options_.call_timeout, [forget, id](StatusOr<Message> r) {
      if (r.ok() && r->code == StatusCode::kOk) return;
      const std::string why = r.ok() ? r->error : r.status().message();
      if (auto sink = forget()) {
        instance::TokenEvent ev;
        ev.id = id;
        ev.finished = true;
        ev.finish_reason = "error";
        ev.error = why;
        (*sink)(ev);
      }
    });
    return ok_status();
  }
  StatusOr<Message> ack = call_and_wait(std::move(m), options_.call_timeout);
  Status s = ok_status();
  if (ack.ok()) {
    s = Status(ack->code, ack->error);
  } else {
    s = ack.status();
  }
  if (s.ok()) return s;
  forget();
  if (!ack.ok()) {
    Message c;
    c.kind = Kind::kCancel;
    c.id = id;
    send(c);
    return unavailable_error("instance {}: {}", options_.address, s.message());
  }
  return s;
}

Status RemoteBackend::submit(instance::GenerationRequest request, instance::EventSink sink) {
  Message m;
  m.kind = Kind::kSubmit;
  m.request = std::move(request);
  return submit_message(std::move(m), std::move(sink));
}

Status RemoteBackend::submit_prefilled(instance::GenerationRequest request, std::vector<int32_t> output_tokens,
                                       std::vector<uint8_t> kv, instance::EventSink sink) {
  Message m;
  m.kind = Kind::kSubmitPrefilled;
  m.request = std::move(request);
  m.output_tokens = std::move(output_tokens);
  m.kv = std::move(kv);
  return submit_message(std::move(m), std::move(sink));
}

void RemoteBackend::cancel(RequestId id) {
  Message m;
  m.kind = Kind::kCancel;
  m.id = id;
  send(m);
}

void RemoteBackend::take_prefilled_kv(RequestId id, std::function<void(StatusOr<std::vector<uint8_t>>)> done) {
  Message m;
  m.kind = Kind::kTakeKv;
  m.id = id;
  bool alive = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    alive = alive_ && !stopped_;
  }
  if (!alive) return done(unavailable_error("instance {} is not answering", options_.address));
  call(std::move(m), std::max(options_.call_timeout, from_ms(30000)), [done = std::move(done)](StatusOr<Message> r) {
    if (!r.ok()) return done(r.status());
    if (r->code != StatusCode::kOk) return done(Status(r->code, r->error));
    done(std::move(r->kv));
  });
}

instance::InstanceStatus RemoteBackend::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  instance::InstanceStatus s = status_;
  s.running = s.running && alive_ && !stopped_;
  if (s.block_size == 0) s.block_size = info_.block_size;
  return s;
}

std::vector<InstanceReport> RemoteBackend::instances() const {
  InstanceReport r;
  r.name = options_.address;
  r.role = info_.role;
  r.status = status();
  r.healthy = r.status.running;
  return {r};
}

std::vector<InstanceTimeline> RemoteBackend::timeline(TimePoint since) const {
  InstanceTimeline t{options_.address, info_.role, {}};
  Message m;
  m.kind = Kind::kTimeline;
  m.seconds = std::clamp(to_seconds(clock_->now() - since), 0.0, 1e6);
  auto* self = const_cast<RemoteBackend*>(this);  // a read, but it goes through the call table
  if (transport::SocketLoop::on_any_loop_thread()) return {t};
  StatusOr<Message> reply = self->call_and_wait(std::move(m), std::min(options_.call_timeout, from_ms(2000)));
  if (reply.ok()) t.steps = std::move(reply->steps);
  return {t};
}

void RemoteBackend::begin_drain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

bool RemoteBackend::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.empty();
}

void RemoteBackend::stop() {
  std::vector<RequestId> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || !loop_) return;
    stopped_ = true;
    for (const auto& [id, sink] : requests_) ids.push_back(id);
  }
  for (RequestId id : ids) cancel(id);
  // The instance answers cancels with each request's final "abort" event.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!idle() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  loop_->stop();
  fail_everything("instance " + options_.address + " disconnected", "abort");
}

Status RemoteBackend::check_alive() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return unavailable_error("instance {}: disconnected", options_.address);
  if (!alive_) return unavailable_error("instance {} is not answering", options_.address);
  return ok_status();
}

void RemoteBackend::ack_call(Message m, std::function<void(Status)> done) {
  if (Status s = check_alive(); !s.ok()) return done(std::move(s));
  const Kind kind = m.kind;
  call(std::move(m), options_.call_timeout, [this, kind, done = std::move(done)](StatusOr<Message> r) {
    if (!r.ok()) return done(r.status());
    if (r->kind != Kind::kAck) {
      return done(internal_error("instance {} answered {} with {}", options_.address, transport::kind_name(kind),
                                 transport::kind_name(r->kind)));
    }
    done(Status(r->code, r->error));
  });
}

void RemoteBackend::migrate_out(RequestId id, int32_t begin, bool stop, ChunkDone done) {
  if (Status s = check_alive(); !s.ok()) return done(std::move(s));
  Message m;
  m.kind = Kind::kMigrateOut;
  m.id = id;
  m.begin = begin;
  m.stop = stop;
  call(std::move(m), options_.call_timeout, [this, id, stop, done = std::move(done)](StatusOr<Message> r) {
    StatusOr<instance::MigrationChunk> chunk = unavailable_error("instance {}: no answer", options_.address);
    if (!r.ok()) {
      chunk = r.status();
    } else if (r->kind != Kind::kMigrateChunk) {
      chunk = internal_error("instance {} answered migrate_out with {}", options_.address, transport::kind_name(r->kind));
    } else if (r->code != StatusCode::kOk) {
      chunk = Status(r->code, r->error);
    } else {
      chunk = std::move(r->chunk);
    }
    if (stop && !chunk.ok()) {
      // The router takes a failed stop-and-copy as nothing suspended. If the
      // instance suspended it and the answer was lost (or is late), resume it there
      // (the message follows the stop on the same connection; resuming a request
      // that is not suspended is refused there and changes nothing).
      Message resume;
      resume.kind = Kind::kMigrateOutFinish;
      resume.id = id;
      resume.committed = false;
      send(resume);
    }
    done(std::move(chunk));
  });
}

void RemoteBackend::migrate_out_finish(RequestId id, bool committed, StatusDone done) {
  // Committed: the destination runs the request now and this instance drops it
  // without a final event, so this side forgets its sink once the instance
  // answers (unless a newer migration brought it back here meanwhile).
  std::shared_ptr<instance::EventSink> moved_away;
  if (committed) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it != requests_.end()) moved_away = it->second;
  }
  auto forget = [this, id, moved_away] {
    if (!moved_away) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second == moved_away) requests_.erase(it);
  };
  Message m;
  m.kind = Kind::kMigrateOutFinish;
  m.id = id;
  m.committed = committed;
  ack_call(std::move(m), [forget, done = std::move(done)](Status s) {
    forget();  // whatever the answer: the router gave the request to the destination
    done(std::move(s));
  });
}

void RemoteBackend::migrate_in_reserve(RequestId id, int32_t num_tokens, StatusDone done) {
  Message m;
  m.kind = Kind::kMigrateInReserve;
  m.id = id;
  m.num_tokens = num_tokens;
  ack_call(std::move(m), std::move(done));
}

void RemoteBackend::migrate_in_load(RequestId id, instance::MigrationChunk chunk, StatusDone done) {
  Message m;
  m.kind = Kind::kMigrateInLoad;
  m.id = id;
  m.chunk = std::move(chunk);
  ack_call(std::move(m), std::move(done));
}

void RemoteBackend::migrate_in_commit(instance::MigrationChunk last, instance::EventSink sink, StatusDone done) {
  if (!last.last) return done(invalid_argument_error("a commit needs the stop-and-copy stage"));
  const RequestId id = last.handover.request.id;
  auto shared = std::make_shared<instance::EventSink>(std::move(sink));
  {
    // Registered before the commit leaves: the instance's first events may arrive
    // before its acknowledgement. An entry still here is a stale one of an earlier
    // stay of this request (its committed finish not answered yet): replaced.
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_ || !alive_) {
      lock.unlock();
      return done(unavailable_error("instance {} is not answering", options_.address));
    }
    requests_[id] = shared;
    committing_.insert(id);
  }
  auto unregister = [this, id, shared] {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second == shared) requests_.erase(it);
  };
  Message m;
  m.kind = Kind::kMigrateInCommit;
  m.chunk = std::move(last);
  ack_call(std::move(m), [this, id, unregister, done = std::move(done)](Status s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      committing_.erase(id);
    }
    if (!s.ok()) {
      unregister();
      // The router resumes the request at the source. If the instance committed it
      // and its answer was lost (or is late), end it there; a refused commit left
      // only the reservation, which the cancel frees as well.
      Message c;
      c.kind = Kind::kCancel;
      c.id = id;
      send(c);
    }
    done(std::move(s));
  });
}

void RemoteBackend::migrate_in_cancel(RequestId id) {
  Message m;
  m.kind = Kind::kMigrateInCancel;
  m.id = id;
  send(m);
}

Status RemoteBackend::freeze_for_testing(Duration d) {
  Message m;
  m.kind = Kind::kFreeze;
  m.seconds = to_seconds(d);
  StatusOr<Message> reply = call_and_wait(std::move(m), options_.call_timeout);
  if (!reply.ok()) return reply.status();
  return Status(reply->code, reply->error);
}

}  // namespace ecoserve::cluster
