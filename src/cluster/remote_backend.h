// RemoteBackend: the GenerationBackend of an instance in another process
// (`ecoserve instance --listen tcp://...`), reached over ZeroMQ with the
// messages of transport/wire.h. A Router fronts several of them exactly as it
// fronts embedded InstanceBackends.
//
// Liveness: the backend asks for the instance's status every status_interval
// and status() returns the last answer (the router routes on its own exact
// accounting; snapshots only supply free blocks and health). When nothing has
// arrived for peer_timeout the instance is dead: status().running turns false
// (so the router stops routing to it), every request it held ends with an
// "error" event naming the instance, and every pending call fails. If it answers
// again it is alive again; a new boot id (a restarted process) also ends the
// requests the old process held.
//
// submit() and submit_prefilled() wait up to call_timeout for the instance's
// acknowledgement, so their errors (queue full, prompt too long, draining) are
// returned as with an embedded instance. Called on a socket thread (from an
// event sink or KV callback of any remote instance, as the router's fudg
// handover does) they do not wait, since two socket threads could then wait on
// each other; a refusal then arrives as the request's final "error" event.
//
// Live migration (llumnix): the migrate_* calls are calls with a reply, as
// take_prefilled_kv is (migrate_in_cancel is a message with none, as cancel is);
// each `done` runs exactly once on the socket thread (or at
// once when the instance is not answering): with the reply, or UNAVAILABLE when the
// instance dies, restarts or this backend stops, DEADLINE_EXCEEDED after
// call_timeout. migrate_in_commit registers its sink before the commit leaves, so
// the instance's token events after a successful commit reach it exactly like a
// submitted request's (and end with its final event, or an "error" one when the
// instance dies); a failed commit unregisters it. Repairs a lost answer would
// leave behind: a stop-and-copy whose answer never came is undone (resumed at the
// source, as the router assumes nothing was suspended), and a commit whose answer
// never came is cancelled at the destination (the router resumes the source). A
// committed migrate_out_finish forgets the request here: it runs elsewhere now.
//
// Thread-safety: every method may be called from any thread; event sinks and
// take_prefilled_kv / migrate_* callbacks run on the socket thread.
#pragma once

#include <condition_variable>
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

struct RemoteBackendOptions {
  std::string address;                 // tcp://HOST:PORT of `ecoserve instance`
  Duration connect_timeout = from_ms(10000);  // for the hello
  Duration call_timeout = from_ms(5000);      // submit acknowledgements, timeline
  Duration status_interval = from_ms(100);
  Duration peer_timeout = from_ms(3000);
};

class RemoteBackend final : public GenerationBackend {
 public:
  // Connects and exchanges hellos: UNAVAILABLE when no instance answers within
  // connect_timeout, FAILED_PRECONDITION when it speaks another wire version.
  // model() is null until set_model().
  static StatusOr<std::unique_ptr<RemoteBackend>> connect(const RemoteBackendOptions& options, const Clock* clock);
  ~RemoteBackend() override;

  const transport::InstanceInfo& info() const { return info_; }
  // The served model, loaded by the caller (the instance sends its path and id).
  void set_model(std::shared_ptr<const model::LlamaModel> model) { model_ = std::move(model); }

  void start() override {}
  Status submit(instance::GenerationRequest request, instance::EventSink sink) override;
  void cancel(RequestId id) override;
  std::shared_ptr<const model::LlamaModel> model() const override { return model_; }
  int32_t max_context() const override { return info_.max_context; }
  instance::InstanceStatus status() const override;
  std::vector<InstanceReport> instances() const override;
  std::vector<InstanceTimeline> timeline(TimePoint since) const override;
  // The router's drain: this backend takes no new requests; the instance process
  // (which other routers may share) keeps serving.
  void begin_drain() override;
  bool idle() const override;
  // Cancels what is running there, waits briefly for the instance's final events,
  // ends the rest with "abort" and disconnects. Idempotent.
  void stop() override;
  void take_prefilled_kv(RequestId id, std::function<void(StatusOr<std::vector<uint8_t>>)> done) override;
  Status submit_prefilled(instance::GenerationRequest request, std::vector<int32_t> output_tokens,
                          std::vector<uint8_t> kv, instance::EventSink sink) override;
  void migrate_out(RequestId id, int32_t begin, bool stop, ChunkDone done) override;
  void migrate_out_finish(RequestId id, bool committed, StatusDone done) override;
  void migrate_in_reserve(RequestId id, int32_t num_tokens, StatusDone done) override;
  void migrate_in_load(RequestId id, instance::MigrationChunk chunk, StatusDone done) override;
  void migrate_in_commit(instance::MigrationChunk last, instance::EventSink sink, StatusDone done) override;
  void migrate_in_cancel(RequestId id) override;
  // Test hook: asks the instance (started with --test-hooks) to freeze its engine.
  Status freeze_for_testing(Duration d);

 private:
  RemoteBackend(const RemoteBackendOptions& options, const Clock* clock);
  struct Call {
    std::function<void(StatusOr<transport::Message>)> done;
    TimePoint deadline;
  };
  void on_message(std::vector<uint8_t> bytes);
  void on_tick();
  void send(const transport::Message& m);
  // Sends `m` expecting one reply; `done` runs on the socket thread (reply, timeout or death).
  void call(transport::Message m, Duration timeout, std::function<void(StatusOr<transport::Message>)> done);
  // Like call() but waits for the reply (not on the socket thread).
  StatusOr<transport::Message> call_and_wait(transport::Message m, Duration timeout);
  Status submit_message(transport::Message m, instance::EventSink sink);
  // A migration call answered by kAck: UNAVAILABLE at once when the instance is
  // not answering, else call() with call_timeout; `done` gets the ack's status.
  void ack_call(transport::Message m, std::function<void(Status)> done);
  // UNAVAILABLE unless the instance answers and this backend runs.
  Status check_alive() const;
  // Ends every request and call with `why` (socket thread or stop()).
  void fail_everything(const std::string& why, const std::string& finish_reason);

  RemoteBackendOptions options_;
  const Clock* clock_;
  std::unique_ptr<transport::SocketLoop> loop_;
  transport::InstanceInfo info_;
  std::shared_ptr<const model::LlamaModel> model_;

  mutable std::mutex mu_;
  std::unordered_map<RequestId, std::shared_ptr<instance::EventSink>> requests_;  // under mu_
  std::unordered_map<uint64_t, Call> calls_;                                        // under mu_
  // Requests whose migrate_in_commit awaits its answer: their sinks are in
  // requests_, but a failure is reported by the commit's `done`, not to the sink.
  std::unordered_set<RequestId> committing_;                                        // under mu_
  uint64_t next_call_ = 1;                                                          // under mu_
  instance::InstanceStatus status_;                                                 // under mu_
  TimePoint last_rx_{};                                                             // under mu_
  bool alive_ = false;                                                              // under mu_
  bool hello_done_ = false;                                                         // under mu_
  bool draining_ = false;                                                           // under mu_
  bool stopped_ = false;                                                            // under mu_
  TimePoint last_status_sent_{};  // socket thread only
};

}  // namespace ecoserve::cluster
