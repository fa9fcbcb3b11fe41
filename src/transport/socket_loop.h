// SocketLoop: one ZeroMQ socket owned by one thread. ZeroMQ sockets are not
// thread-safe, so every send from another thread is queued and the loop thread
// (woken through an eventfd it polls beside the socket) writes it.
//
//  - kServer: a ROUTER socket bound to `address` (tcp://HOST:PORT, port 0 picks
//    one; endpoint() tells which). Each received message carries its peer's
//    routing id; send(peer, bytes) answers that peer (a peer that left is
//    skipped: ZMQ_ROUTER_MANDATORY makes the send fail instead of queueing).
//  - kClient: a DEALER socket connected to `address`; peer ids are empty.
//    ZeroMQ reconnects by itself after the peer restarts.
//
// on_message and on_tick run on the loop thread, one at a time; they may call
// send() (which then only queues). A send that cannot be written now (no peer,
// high-water mark) is dropped and counted: callers time their calls out.
// Messages larger than Options::max_message_bytes are refused by ZeroMQ.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"

namespace ecoserve::transport {

struct SocketLoopOptions {
  enum class Mode { kServer, kClient };
  Mode mode = Mode::kClient;
  std::string address;           // tcp://HOST:PORT
  Duration tick = from_ms(50);   // on_tick period
  int64_t max_message_bytes = 4ll << 30;
};

class SocketLoop {
 public:
  // peer: the sender's routing id (kServer) or "" (kClient).
  using OnMessage = std::function<void(const std::string& peer, std::vector<uint8_t> bytes)>;
  using OnTick = std::function<void()>;

  // Binds or connects now (so a bad address fails here); the thread starts in start().
  static StatusOr<std::unique_ptr<SocketLoop>> create(const SocketLoopOptions& options, OnMessage on_message,
                                                      OnTick on_tick);
  ~SocketLoop();
  SocketLoop(const SocketLoop&) = delete;
  SocketLoop& operator=(const SocketLoop&) = delete;

  void start();
  // Joins the thread; queued sends are dropped. Idempotent. Not from the loop thread.
  void stop();
  // Queues a message; any thread.
  void send(std::string peer, std::vector<uint8_t> bytes);
  // The bound or connected endpoint, e.g. "tcp://127.0.0.1:40123".
  const std::string& endpoint() const { return endpoint_; }
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // True on the thread of any SocketLoop: code there must not wait for a reply
  // (the reply may need this very thread, or another loop waiting on this one).
  static bool on_any_loop_thread();
  int64_t dropped() const { return dropped_.load(); }

 private:
  struct Impl;
  explicit SocketLoop(std::unique_ptr<Impl> impl);
  void run();

  std::unique_ptr<Impl> impl_;
  std::string endpoint_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> dropped_{0};
  std::mutex mu_;
  std::deque<std::pair<std::string, std::vector<uint8_t>>> outbox_;  // under mu_
};

}  // namespace ecoserve::transport
