#include "transport/socket_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <zmq.hpp>

#include "base/log.h"

namespace ecoserve::transport {

struct SocketLoop::Impl {
  SocketLoopOptions options;
  OnMessage on_message;
  OnTick on_tick;
  zmq::context_t context{1};
  zmq::socket_t socket;
  int wake_fd = -1;
  ~Impl() {
    if (wake_fd >= 0) ::close(wake_fd);
  }
};

namespace {

thread_local bool t_on_loop_thread = false;

void free_vector(void*, void* hint) { delete static_cast<std::vector<uint8_t>*>(hint); }

zmq::message_t to_message(std::vector<uint8_t> bytes) {
  if (bytes.empty()) return zmq::message_t();
  auto* owned = new std::vector<uint8_t>(std::move(bytes));
  return zmq::message_t(owned->data(), owned->size(), free_vector, owned);
}

}  // namespace

StatusOr<std::unique_ptr<SocketLoop>> SocketLoop::create(const SocketLoopOptions& options, OnMessage on_message,
                                                         OnTick on_tick) {
  if (options.address.rfind("tcp://", 0) != 0 && options.address.rfind("ipc://", 0) != 0 &&
      options.address.rfind("inproc://", 0) != 0) {
    return invalid_argument_error("'{}' is not a ZeroMQ address (tcp://HOST:PORT)", options.address);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->on_message = std::move(on_message);
  impl->on_tick = std::move(on_tick);
  impl->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->wake_fd < 0) return internal_error("eventfd failed");
  std::string endpoint;
  try {
    const bool server = options.mode == SocketLoopOptions::Mode::kServer;
    impl->socket = zmq::socket_t(impl->context, server ? zmq::socket_type::router : zmq::socket_type::dealer);
    impl->socket.set(zmq::sockopt::linger, 0);
    impl->socket.set(zmq::sockopt::maxmsgsize, options.max_message_bytes);
    impl->socket.set(zmq::sockopt::sndhwm, 100000);
    impl->socket.set(zmq::sockopt::rcvhwm, 100000);
    if (server) {
      impl->socket.set(zmq::sockopt::router_mandatory, 1);
      impl->socket.bind(options.address);
      endpoint = impl->socket.get(zmq::sockopt::last_endpoint);
    } else {
      // Nothing is queued for a peer that is not connected: such sends fail at once.
      impl->socket.set(zmq::sockopt::immediate, 1);
      impl->socket.set(zmq::sockopt::reconnect_ivl, 100);
      impl->socket.set(zmq::sockopt::reconnect_ivl_max, 1000);
      impl->socket.connect(options.address);
      endpoint = options.address;
    }
  } catch (const zmq::error_t& e) {
    return unavailable_error("{} {}: {}", options.mode == SocketLoopOptions::Mode::kServer ? "cannot listen on" : "cannot connect to",
                             options.address, e.what());
  }
  auto loop = std::unique_ptr<SocketLoop>(new SocketLoop(std::move(impl)));
  loop->endpoint_ = std::move(endpoint);
  return loop;
}

SocketLoop::SocketLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SocketLoop::~SocketLoop() { stop(); }

void SocketLoop::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void SocketLoop::stop() {
  stop_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake_fd, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void SocketLoop::send(std::string peer, std::vector<uint8_t> bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.emplace_back(std::move(peer), std::move(bytes));
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake_fd, &one, sizeof(one));
}

bool SocketLoop::on_any_loop_thread() { return t_on_loop_thread; }

void SocketLoop::run() {
  t_on_loop_thread = true;
  Impl& im = *impl_;
  const bool server = im.options.mode == SocketLoopOptions::Mode::kServer;
  auto next_tick = std::chrono::steady_clock::now();
  std::deque<std::pair<std::string, std::vector<uint8_t>>> batch;
  while (!stop_.load()) {
    try {
      // Write what other threads queued.
      {
        std::lock_guard<std::mutex> lock(mu_);
        batch.swap(outbox_);
      }
      for (auto& [peer, bytes] : batch) {
        bool sent = false;
        try {
          if (server) {
            zmq::message_t id(peer.data(), peer.size());
            sent = im.socket.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait).has_value() &&
                   im.socket.send(to_message(std::move(bytes)), zmq::send_flags::dontwait).has_value();
          } else {
            sent = im.socket.send(to_message(std::move(bytes)), zmq::send_flags::dontwait).has_value();
          }
        } catch (const zmq::error_t&) {
          sent = false;  // EHOSTUNREACH: the peer left
        }
        if (!sent) dropped_.fetch_add(1);
      }
      batch.clear();

      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - std::chrono::steady_clock::now()) +
                  std::chrono::milliseconds(1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!outbox_.empty()) wait = std::chrono::milliseconds(0);  // queued meanwhile: read, then write it
      }
      zmq::pollitem_t items[] = {{im.socket.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, im.wake_fd, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::max(std::chrono::milliseconds(0), wait));
      if (items[1].revents & ZMQ_POLLIN) {
        uint64_t v = 0;
        [[maybe_unused]] ssize_t n = ::read(im.wake_fd, &v, sizeof(v));
      }
      // Read everything that arrived (ZeroMQ's readiness must be drained).
      for (int k = 0; k < 256; ++k) {
        std::vector<zmq::message_t> frames;
        zmq::message_t part;
        if (!im.socket.recv(part, zmq::recv_flags::dontwait)) break;
        frames.push_back(std::move(part));
        while (frames.back().more()) {
          zmq::message_t more;
          if (!im.socket.recv(more, zmq::recv_flags::none)) break;
          frames.push_back(std::move(more));
        }
        if (frames.size() != (server ? 2u : 1u)) continue;  // not ours
        std::string peer = server ? frames[0].to_string() : std::string();
        const auto* d = static_cast<const uint8_t*>(frames.back().data());
        std::vector<uint8_t> bytes(d, d + frames.back().size());
        if (im.on_message) im.on_message(peer, std::move(bytes));
      }
      // The tick comes after reading what arrived: a loop thread that was held up
      // (descheduled, or a slow handler) must not judge a peer silent from a
      // timestamp its queued messages would have refreshed.
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_tick) {
        if (im.on_tick) im.on_tick();
        next_tick = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(im.options.tick);
      }
    } catch (const std::exception& e) {
      spdlog::warn("transport {}: {}", endpoint_, e.what());
    }
  }
}

}  // namespace ecoserve::transport
