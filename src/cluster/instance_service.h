// InstanceService: serves one GenerationBackend (an embedded instance) to
// routers over ZeroMQ (`ecoserve instance --listen tcp://HOST:PORT`), speaking
// transport/wire.h. The other end is RemoteBackend.
//
// Every message is answered on the socket thread; the backend's event sinks run
// on its loop thread and only queue messages. A router that sends nothing for
// router_timeout (routers ask for status every 100 ms) is gone: its requests are
// cancelled and the KV held for its transfers is freed, so a dead router leaks
// nothing.
//
// Live migration: the migrate_* messages run the backend's migrate_* calls and
// answer when they are done. A request migrated here (committed) belongs to the
// committing router like a submitted one: its events go to that router and it is
// cancelled with that router's other requests; a request migrated away (a
// committed migrate_out_finish) no longer belongs to anyone here. When a router
// goes silent, its migration reservations here are cancelled, and a request of it
// suspended here by a stop-and-copy is aborted like its other requests (cancel
// ends a suspended request too): not resumed, since its client listens through
// that router, which has failed the request by its own peer timeout already
// (shorter than router_timeout), so no one would read the tokens.
//
// A message this instance cannot read gets a kError naming the problem (another
// wire version included), never a crash.
//
// Thread-safety: start()/stop() from one thread; the rest is internal.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/clock.h"
#include "cluster/generation_backend.h"
#include "transport/socket_loop.h"
#include "transport/wire.h"

namespace ecoserve::cluster {

struct InstanceServiceOptions {
  std::string listen = "tcp://127.0.0.1:0";
  std::string role = "mixed";
  std::string policy;  // reported to routers (InstanceInfo::policy)
  std::string model_path;
  std::string model_id;
  int32_t block_size = 0;  // tokens per KV block; 0 = from the backend's status
  Duration router_timeout = from_ms(10000);
  // Test hook (kFreeze): freezes the engine while the port stays open; null = refused.
  std::function<void(Duration)> freeze_for_testing;
};

class InstanceService {
 public:
  // Binds now (a taken port fails here); serving starts in start().
  static StatusOr<std::unique_ptr<InstanceService>> create(GenerationBackend* backend,
                                                           const InstanceServiceOptions& options, const Clock* clock);
  ~InstanceService();
  void start();
  // Stops answering; does not stop the backend. Idempotent.
  void stop();
  const std::string& endpoint() const { return loop_->endpoint(); }
  uint64_t boot_id() const { return info_.boot_id; }
  // Routers heard from within router_timeout.
  size_t num_routers() const;

 private:
  InstanceService(GenerationBackend* backend, const InstanceServiceOptions& options, const Clock* clock);
  void on_message(const std::string& peer, std::vector<uint8_t> bytes);
  void on_tick();
  void reply(const std::string& peer, const transport::Message& m);
  // The sink of a request from `peer`: forwards events, remembers held prefills.
  instance::EventSink sink_for(const std::string& peer);
  void forget_router(const std::string& peer);
  // The migrate_* messages (socket thread); replies are sent when the backend is done.
  void on_migration_message(const std::string& peer, transport::Message& m);

  GenerationBackend* backend_;
  InstanceServiceOptions options_;
  const Clock* clock_;
  transport::InstanceInfo info_;
  std::unique_ptr<transport::SocketLoop> loop_;

  struct Router {
    TimePoint last_rx{};
    std::unordered_set<RequestId> running;  // submitted, no final event yet
    std::unordered_set<RequestId> held;     // ended "prefill_done": KV held until taken
    std::unordered_set<RequestId> reserved; // migrating here: blocks reserved, not committed
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Router> routers_;  // under mu_; by ZeroMQ routing id
};

}  // namespace ecoserve::cluster
