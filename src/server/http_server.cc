#include "server/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <limits>
#include <atomic>
#include <ctime>
#include <deque>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "server/admin_api.h"
#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/completion_response.h"
#include "server/http_route.h"
#include "server/prepare_generation.h"
#include "server/server_metrics.h"
#include "server/sse.h"
#include "server/text_stream.h"

namespace ecoserve::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

constexpr int64_t kMaxDrainBytes = 64ll << 20;  // read and discard at most this after a 413
constexpr double kCloseGraceSeconds = 2.0;      // a timed-out client gets this long to take its 408
constexpr int kReservedFds = 64;                // file descriptors kept free of connections

std::string status_line(int status) {
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return fmt::format("HTTP/1.1 {} {}\r\n", status, std::string_view(reason.data(), reason.size()));
}

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

std::chrono::steady_clock::duration seconds_to_duration(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// A complete response that closes the connection, for answers given without a session.
std::string close_response(int status, const ApiError& e) {
  const std::string body = dump_json(e.to_json());
  return status_line(status) + fmt::format("Server: ecoserve\r\nContent-Type: application/json\r\n"
                                           "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                                           body.size(), body);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared server state.

struct ServerState {
  cluster::GenerationBackend* backend = nullptr;
  std::shared_ptr<const model::LlamaModel> model;
  ServerOptions options;
  const Clock* clock = nullptr;
  ChatTemplateKind chat_template = ChatTemplateKind::kChatml;
  PrepareContext prepare;  // what generation requests are checked against
  std::shared_ptr<ServerMetrics> metrics;
  int32_t max_connections = 0;  // options.max_connections, clipped to the file-descriptor limit
  // Declared before the io_context: sessions destroyed with its handlers still update them.
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::atomic<int32_t> active{0};       // generation requests whose response is not fully written
  std::atomic<int32_t> connections{0};  // open sessions
  std::atomic<uint64_t> bytes_written{0};  // to clients, all connections
  std::atomic<uint64_t> next_request_id{1};
  uint64_t id_salt = 0;

  net::io_context ioc;
  std::optional<net::thread_pool> tokenizer_pool;  // prepare_generation() runs here, never on I/O threads
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  uint16_t port = 0;

  std::string next_response_id(const char* prefix, uint64_t n) {
    return fmt::format("{}{:016x}", prefix, id_salt ^ (n * 0x9E3779B97F4A7C15ull));
  }
};

namespace {

// One HTTP/1.1 connection: reads requests one at a time (keep-alive,
// pipelining), answers each, and for a generation request streams or collects
// the instance's token events. Every handler runs on the connection's strand.
//
// Timeouts (ServerOptions): a connection gets header_timeout to send its first
// request head, body_timeout to send a body once the head is in, and
// keep_alive_timeout of idleness between requests; a late head or body gets 408
// and the connection closes. A response the client takes no byte of for
// send_timeout is dropped with the connection (its generation cancelled). No
// exception leaves a handler: a failure before the response started answers
// 500, after it the connection closes.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState& st) : socket_(std::move(socket)), timer_(socket_.get_executor()), st_(st) {}
  ~Session() {
    uncount_active();
    st_.connections.fetch_sub(1);
  }

  void start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->guarded([&] { self->do_read(); }); });
  }

 private:
  enum class Phase { kIdle, kHeader, kBody, kBusy, kWriting, kClosing };

  // Runs `fn`, turning any exception into a 500 (before a response started) or a closed connection.
  template <typename Fn>
  void guarded(Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      on_exception(e.what());
    } catch (...) {
      on_exception("unknown exception");
    }
  }

  void on_exception(const char* what) noexcept {
    try {
      spdlog::error("internal error while serving a request: {}", what);
      if (job_ && !job_->responded) {
        job_->responded = true;
        for (CompletionChoice& c : job_->choices) {
          if (!c.done) st_.backend->cancel(c.id);
        }
      }
      if (!closed_ && !response_started_) {
        send_error(make_error(500, "internal server error (see the server log)", "internal_error"), true);
      } else {
        close();
      }
    } catch (...) {
      close();
    }
  }

  // --- timers ------------------------------------------------------------------------------
  void arm_timer(double seconds, Phase phase) {
    phase_ = phase;
    timed_out_ = false;
    const uint64_t gen = ++timer_gen_;
    if (seconds <= 0) {
      timer_.cancel();
      return;
    }
    timer_.expires_after(seconds_to_duration(seconds));
    timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->guarded([&] { self->on_timeout(); });
    });
  }

  void disarm_timer(Phase phase) {
    phase_ = phase;
    ++timer_gen_;
    timer_.cancel();
  }

  void on_timeout() {
    if (closed_) return;
    switch (phase_) {
      case Phase::kIdle:
      case Phase::kClosing:
        close();
        return;
      case Phase::kHeader:
      case Phase::kBody: {
        timed_out_ = true;
        beast::error_code ec;
        socket_.cancel(ec);  // the pending read ends with operation_aborted -> on_read_error answers 408
        return;
      }
      case Phase::kWriting:  // no byte taken for send_timeout: the client stopped reading
        spdlog::info("closing a connection that took no bytes for {} s", st_.options.send_timeout_seconds);
        client_gone();
        return;
      case Phase::kBusy:
        return;
    }
  }

  // --- reading -----------------------------------------------------------------------------
  void do_read() {
    if (closed_) return;
    response_done_ = false;
    response_started_ = false;
    close_after_ = false;
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(st_.options.max_body_bytes));
    parser_->header_limit(64 * 1024);
    if (first_request_ || buffer_.size() > 0) {
      read_header();
      return;
    }
    // Between requests: wait for the next one's first byte, at most keep_alive_timeout.
    arm_timer(st_.options.keep_alive_timeout_seconds, Phase::kIdle);
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      self->guarded([&] {
        if (self->closed_) return;
        if (ec) {
          self->close();  // timed out while idle, or the client left
          return;
        }
        self->read_header();
      });
    });
  }

  void read_header() {
    first_request_ = false;
    arm_timer(st_.options.header_timeout_seconds, Phase::kHeader);
    http::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->guarded([&] { self->on_header(ec); });
    });
  }

  void on_header(beast::error_code ec) {
    if (closed_) return;
    if (ec) return on_read_error(ec);
    if (parser_->is_done()) return on_request();
    arm_timer(st_.options.body_timeout_seconds, Phase::kBody);
    auto expect = parser_->get().find(http::field::expect);
    if (expect != parser_->get().end() && beast::iequals(expect->value(), "100-continue")) {
      // curl and others wait (1 s) for this before sending a body.
      interim_ = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(socket_, net::buffer(interim_), [self = shared_from_this()](beast::error_code ec, size_t) {
        self->guarded([&] {
          if (self->closed_) return;
          if (ec) return self->close();
          self->read_body();
        });
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->guarded([&] {
        if (self->closed_) return;
        if (ec) return self->on_read_error(ec);
        self->on_request();
      });
    });
  }

  void on_read_error(beast::error_code ec) {
    const Phase phase = phase_;
    disarm_timer(Phase::kBusy);
    if (ec == http::error::body_limit) {
      drain_on_close_ = true;
      send_error(make_error(413,
                            fmt::format("request body exceeds the limit of {} bytes", st_.options.max_body_bytes),
                            "invalid_request_error", "request_too_large"),
                 /*close=*/true);
      return;
    }
    if (timed_out_) {
      const bool body = phase == Phase::kBody;
      // Nothing at all received on a kept-alive or fresh connection: just close.
      if (!body && buffer_.size() == 0 && !parser_->got_some()) return close();
      spdlog::info("closing a connection whose request {} did not arrive within {} s", body ? "body" : "head",
                   body ? st_.options.body_timeout_seconds : st_.options.header_timeout_seconds);
      send_error(make_error(408,
                            fmt::format("the request {} did not arrive within {} s", body ? "body" : "head",
                                        body ? st_.options.body_timeout_seconds : st_.options.header_timeout_seconds),
                            "invalid_request_error", "request_timeout"),
                 /*close=*/true);
      if (!closed_) arm_timer(kCloseGraceSeconds, Phase::kClosing);  // a client that does not read is cut off
      return;
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted || ec == net::error::bad_descriptor) {
      close();
      return;
    }
    send_error(make_error(400, "malformed HTTP request: " + ec.message(), "invalid_request_error"), true);
  }

  void on_request() {
    disarm_timer(Phase::kBusy);
    http::request<http::string_body> req = parser_->release();
    handle(req);
  }

  // --- writing -----------------------------------------------------------------------------
  void enqueue(std::string data) {
    if (closed_ || data.empty()) return;
    response_started_ = true;
    out_.push_back(std::move(data));
    if (!writing_) do_write();
  }

  // Writes out_ front to back, a piece at a time: every piece the kernel takes
  // re-arms the send timeout (nginx's send_timeout), so a slow reader is served
  // and one that stopped reading is cut off, its generation cancelled.
  void do_write() {
    writing_ = true;
    if (phase_ == Phase::kBusy || phase_ == Phase::kWriting) arm_timer(st_.options.send_timeout_seconds, Phase::kWriting);
    const std::string& front = out_.front();
    socket_.async_write_some(net::buffer(front.data() + out_offset_, front.size() - out_offset_),
                             [self = shared_from_this()](beast::error_code ec, size_t n) {
                               self->guarded([&] { self->on_write(ec, n); });
                             });
  }

  void on_write(beast::error_code ec, size_t n) {
    writing_ = false;
    if (closed_) {  // the buffer in flight was kept alive until now
      out_.clear();
      out_offset_ = 0;
      return;
    }
    if (ec) {
      client_gone();
      return;
    }
    st_.bytes_written.fetch_add(n, std::memory_order_relaxed);
    out_offset_ += n;
    if (out_offset_ == out_.front().size()) {
      out_.pop_front();
      out_offset_ = 0;
    }
    if (!out_.empty()) {
      do_write();
      return;
    }
    if (phase_ == Phase::kWriting) disarm_timer(Phase::kBusy);
    maybe_next();
  }

  // The current response is fully enqueued.
  void finish_response(bool close_conn) {
    response_done_ = true;
    close_after_ = close_after_ || close_conn;
    maybe_next();
  }

  void maybe_next() {
    if (closed_ || writing_ || !out_.empty() || !response_done_) return;
    uncount_active();  // the response is on the wire
    if (close_after_) {
      if (drain_on_close_) {
        drain_and_close();
      } else {
        close();
      }
      return;
    }
    if (watch_pending_) {
      beast::error_code ec;
      socket_.cancel(ec);  // on_watch continues with maybe_next()
      return;
    }
    do_read();
  }

  // After answering 413 mid-upload: stop sending, read and drop the rest so the
  // client sees our answer instead of a reset (for at most body_timeout).
  void drain_and_close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    drain_buf_.resize(64 * 1024);
    arm_timer(std::max(st_.options.body_timeout_seconds, kCloseGraceSeconds), Phase::kClosing);
    do_drain();
  }
  void do_drain() {
    socket_.async_read_some(net::buffer(drain_buf_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += static_cast<int64_t>(n);
      if (ec || self->drained_ > kMaxDrainBytes) {
        self->close();
        return;
      }
      self->do_drain();
    });
  }

  // Watches the socket while a generation runs: EOF/reset means the client left.
  void start_watch() {
    watch_pending_ = true;
    socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->guarded([&] { self->on_watch(ec, n); });
    });
  }
  void on_watch(beast::error_code ec, size_t n) {
    watch_pending_ = false;
    if (!ec) {
      buffer_.commit(n);  // a pipelined request: kept for the next read
      if (buffer_.size() > static_cast<size_t>(st_.options.max_body_bytes) + 64 * 1024) {
        close();  // pipelining far more than one request: not a client we serve
        return;
      }
      if (job_ && !job_->responded) {
        start_watch();
        return;
      }
      maybe_next();
      return;
    }
    if (ec == net::error::operation_aborted) {
      maybe_next();
      return;
    }
    if (job_ && !job_->responded) {
      client_gone();
    } else if (response_done_) {
      close();
    }
  }

  void client_gone() {
    if (job_ && !job_->responded) {
      spdlog::info("client of {} disconnected; cancelling", job_->id);
      for (CompletionChoice& c : job_->choices) {
        if (!c.done) st_.backend->cancel(c.id);
      }
    }
    client_gone_ = true;
    close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    ++timer_gen_;
    timer_.cancel();
    if (!writing_) {  // else the write in flight still uses out_.front()
      out_.clear();
      out_offset_ = 0;
    }
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    // A generation still running keeps the request counted until its final event arrives.
    if (!job_ || job_->responded) uncount_active();
  }

  void count_active() {
    if (counted_) return;
    counted_ = true;
    st_.active.fetch_add(1);
  }
  void uncount_active() {
    if (!counted_) return;
    counted_ = false;
    st_.active.fetch_sub(1);
  }

  // --- responses ---------------------------------------------------------------------------
  std::string head(int status, std::string_view content_type, std::optional<size_t> content_length,
                   std::string_view extra = "") {
    std::string h = status_line(status);
    h += fmt::format("Server: ecoserve\r\nContent-Type: {}\r\n", content_type);
    if (content_length) {
      h += fmt::format("Content-Length: {}\r\n", *content_length);
    } else {
      h += "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
    }
    if (!keep_alive_) h += "Connection: close\r\n";
    h += extra;
    h += "\r\n";
    return h;
  }

  void send_body(int status, std::string_view content_type, std::string body, bool close_conn = false,
                 std::string_view extra = "") {
    if (close_conn) keep_alive_ = false;
    std::string msg = head(status, content_type, body.size(), extra);
    if (!head_only_) msg += body;
    enqueue(std::move(msg));
    finish_response(!keep_alive_);
  }

  void send_json(int status, const json& j, std::string_view extra = "") {
    send_body(status, "application/json", dump_json(j), false, extra);
  }

  void send_error(const ApiError& e, bool close_conn = false, std::string_view extra = "") {
    if (e.http_status >= 500) spdlog::warn("HTTP {}: {}", e.http_status, e.message);
    send_body(e.http_status, "application/json", dump_json(e.to_json()), close_conn, extra);
  }

  // --- routing -----------------------------------------------------------------------------
  void handle(http::request<http::string_body>& req) {
    keep_alive_ = req.keep_alive();
    head_only_ = false;
    std::optional<std::string_view> authorization;
    if (auto it = req.find(http::field::authorization); it != req.end()) authorization = sv(it->value());
    auto routed = route_request(sv(req.method_string()), sv(req.target()), authorization, st_.options.api_key);
    if (auto* reject = std::get_if<RouteRejection>(&routed)) {
      send_error(reject->error, false, reject->extra_headers);
      return;
    }
    const Route route = std::get<Route>(routed);
    head_only_ = route.head_only;
    switch (route.kind) {
      case RouteKind::kHealth:
        return handle_health();
      case RouteKind::kMetrics:
        return send_body(200, "text/plain; version=0.0.4; charset=utf-8", st_.metrics->render(st_.backend->status(), st_.backend->instances(),
                                                                          st_.backend->cluster_stats()));
      case RouteKind::kModels:
        return handle_models();
      case RouteKind::kAdminCluster:
        return handle_admin_cluster();
      case RouteKind::kAdminTimeline:
        return handle_admin_timeline(sv(req.target()));
      case RouteKind::kAdminAddInstance:
        return run_admin([body = std::move(req.body())](ServerState& st) { return admin_add_instance(*st.backend, body, *st.clock); });
      case RouteKind::kAdminRemoveInstance:
        return run_admin([name = route.name](ServerState& st) { return admin_remove_instance(*st.backend, name); });
      case RouteKind::kCompletions:
      case RouteKind::kChatCompletions:
        return handle_generation(route.endpoint(), std::move(req.body()));
    }
  }

  void handle_health() {
    const AdminReply r = health_reply(st_.backend->status(), st_.draining.load(), st_.clock->now(),
                                      from_seconds(st_.options.health_timeout_seconds),
                                      from_seconds(st_.options.step_timeout_seconds));
    send_json(r.status, r.body);
  }

  void handle_admin_cluster() {
    send_json(200, admin_cluster_json(*st_.backend, st_.options.served_model_name, st_.clock->now()));
  }

  void handle_admin_timeline(std::string_view target) {
    auto j = admin_timeline_json(*st_.backend, target, st_.clock->now());
    if (auto* e = std::get_if<ApiError>(&j)) return send_error(*e);
    send_json(200, std::get<json>(j));
  }

  // Admin changes block (an engine starts, a peer connects): they run on the
  // tokenizer pool and the answer comes back to this connection's strand.
  void run_admin(std::function<AdminReply(ServerState&)> change) {
    auto self = shared_from_this();
    auto strand = socket_.get_executor();
    net::post(st_.tokenizer_pool->get_executor(), [self, strand, change = std::move(change)] {
      AdminReply r = change(self->st_);  // never throws
      net::post(strand, [self, r = std::move(r)] {
        self->guarded([&] {
          if (self->closed_) return;
          if (r.error) return self->send_error(*r.error);
          self->send_json(r.status, r.body);
        });
      });
    });
  }

  void handle_models() {
    json m = {{"id", st_.options.served_model_name},
              {"object", "model"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"owned_by", "ecoserve"},
              {"root", st_.options.served_model_name},
              {"parent", nullptr},
              {"max_model_len", st_.backend->max_context()}};
    send_json(200, json{{"object", "list"}, {"data", json::array({m})}});
  }

  // Parsing, validation and tokenizing run on the tokenizer pool; the result comes
  // back to this connection's strand for submission.
  void handle_generation(Endpoint endpoint, std::string body) {
    const TimePoint arrival = st_.clock->now();
    if (st_.draining.load()) {
      send_error(make_error(503, "the server is shutting down", "service_unavailable", "draining"));
      return;
    }
    count_active();  // drain waits for this request from now on
    auto self = shared_from_this();
    auto strand = socket_.get_executor();
    net::post(st_.tokenizer_pool->get_executor(), [self, strand, endpoint, arrival, body = std::move(body)] {
      std::variant<PreparedGeneration, ApiError> prepared;
      try {
        prepared = prepare_generation(self->st_.prepare, endpoint, body);
      } catch (const std::exception& e) {
        spdlog::error("internal error while preparing a request: {}", e.what());
        prepared = make_error(500, "internal server error (see the server log)", "internal_error");
      } catch (...) {
        prepared = make_error(500, "internal server error (see the server log)", "internal_error");
      }
      net::post(strand, [self, endpoint, arrival, prepared = std::move(prepared)]() mutable {
        self->guarded([&] { self->submit_generation(endpoint, arrival, prepared); });
      });
    });
  }

  void submit_generation(Endpoint endpoint, TimePoint arrival, std::variant<PreparedGeneration, ApiError>& prepared) {
    if (closed_) {
      uncount_active();
      return;
    }
    if (auto* e = std::get_if<ApiError>(&prepared)) {
      send_error(*e);
      return;
    }
    PreparedGeneration& p = std::get<PreparedGeneration>(prepared);
    const CompletionRequest& r = p.request;
    const bool chat = endpoint == Endpoint::kChatCompletions;
    const model::Tokenizer& tok = st_.model->tokenizer();
    auto job = std::make_shared<CompletionJob>();
    job->chat = chat;
    job->stream = r.stream;
    job->include_usage = r.include_usage;
    job->logprobs = r.logprobs;
    job->top_logprobs = r.top_logprobs;
    job->created = static_cast<int64_t>(std::time(nullptr));
    job->model = st_.options.served_model_name;
    job->prompt_tokens = static_cast<int32_t>(p.prompt.size());
    job->arrival = arrival;
    job->base_id = st_.next_request_id.fetch_add(static_cast<uint64_t>(r.n));
    job->id = st_.next_response_id(chat ? "chatcmpl-" : "cmpl-", job->base_id);
    job->choices.resize(static_cast<size_t>(r.n));
    job->remaining = r.n;

    for (int32_t i = 0; i < r.n; ++i) {
      CompletionChoice& c = job->choices[static_cast<size_t>(i)];
      c.id = RequestId(job->base_id + static_cast<uint64_t>(i));
      c.text = std::make_unique<TextStream>(tok, r.stop);
      instance::GenerationRequest g;
      g.id = c.id;
      g.prompt = p.prompt;
      g.sampling = r.sampling;
      g.sampling.max_tokens = p.max_tokens;
      g.sampling.logprobs = r.logprobs;
      g.sampling.top_logprobs = r.top_logprobs;
      g.sampling.has_seed = r.has_seed;
      if (r.has_seed) g.sampling.seed = static_cast<uint64_t>(r.seed) + static_cast<uint64_t>(i);
      // vLLM's field: a lower value is served earlier; internally higher runs first.
      g.priority = r.priority == std::numeric_limits<int32_t>::min() ? std::numeric_limits<int32_t>::max() : -r.priority;
      g.slo_ttft = from_ms(r.slo_ttft_ms > 0 ? r.slo_ttft_ms : st_.options.default_slo_ttft_ms);
      g.slo_tpot = from_ms(r.slo_tpot_ms > 0 ? r.slo_tpot_ms : st_.options.default_slo_tpot_ms);
      auto self = shared_from_this();
      const Clock* clock = st_.clock;
      auto executor = socket_.get_executor();
      Status s = st_.backend->submit(std::move(g), [self, job, clock, executor](const instance::TokenEvent& ev) {
        const TimePoint t = clock->now();
        net::post(executor, [self, job, ev, t] { self->guarded([&] { self->on_event(*job, ev, t); }); });
      });
      if (!s.ok()) {
        job->responded = true;  // events of choices already submitted are ignored
        for (int32_t k = 0; k < i; ++k) st_.backend->cancel(job->choices[static_cast<size_t>(k)].id);
        switch (s.code()) {
          case StatusCode::kResourceExhausted:
            send_error(make_error(429, "the server is overloaded: " + s.message(), "rate_limit_error",
                                  "rate_limit_exceeded"),
                       false, "Retry-After: 1\r\n");
            break;
          case StatusCode::kUnavailable:
            send_error(make_error(503, s.message(), "service_unavailable", "unavailable"));
            break;
          case StatusCode::kInvalidArgument:
            send_error(bad_request(s.message()));
            break;
          default:
            send_error(make_error(500, s.message(), "internal_error"));
        }
        return;
      }
    }
    job_ = job;
    if (job->stream) {
      enqueue(head(200, "text/event-stream; charset=utf-8", std::nullopt));
      if (chat) {
        for (int32_t i = 0; i < r.n; ++i) {
          json delta = {{"role", "assistant"}, {"content", ""}};
          enqueue(http_chunk(sse_event(chunk_json(*job, i, delta, nullptr, nullptr))));
        }
      }
    }
    start_watch();
  }

  // --- generation events ---------------------------------------------------------------------
  void record_finish(const CompletionJob& job, const CompletionChoice& c, TimePoint t,
                     const instance::TokenEvent* final_event) {
    ServerMetrics& m = *st_.metrics;
    m.observe_e2e(to_seconds(t - job.arrival));
    const int32_t n = c.text->num_tokens();
    if (c.has_first && n > 1) m.observe_tpot(to_seconds(c.last_token_time - c.first_token_time) / (n - 1));
    if (final_event && final_event->scheduled_time.time_since_epoch().count() != 0 &&
        final_event->scheduled_time >= job.arrival) {
      m.observe_queue_time(to_seconds(final_event->scheduled_time - job.arrival));
    }
  }

  void on_event(CompletionJob& job, const instance::TokenEvent& ev, TimePoint t) {
    if (job.responded) return;
    const uint64_t idx = ev.id.value - job.base_id;
    if (idx >= job.choices.size()) return;
    CompletionChoice& c = job.choices[idx];
    if (c.done) return;
    const bool live = !closed_ && !client_gone_;
    std::string delta;
    json finish = nullptr;
    if (ev.token >= 0) {
      if (!c.has_first) {
        c.has_first = true;
        c.first_token_time = t;
        st_.metrics->observe_ttft(to_seconds(t - job.arrival));
      } else {
        st_.metrics->observe_inter_token(to_seconds(t - c.last_token_time));
      }
      c.last_token_time = t;
      const size_t offset = c.text->text().size();
      delta = c.text->push(ev.token);
      if (job.logprobs) add_logprobs(st_.model->tokenizer(), job, c, ev, offset);
      if (c.text->stopped()) {
        c.done = true;
        c.finish_reason = "stop";
        if (!ev.finished) st_.backend->cancel(ev.id);
        record_finish(job, c, t, ev.finished ? &ev : nullptr);
      }
    }
    if (ev.finished) {
      if (ev.prompt_tokens > 0) job.prompt_tokens = ev.prompt_tokens;
      job.cached_tokens = std::max(job.cached_tokens, ev.cached_prompt_tokens);
      if (!c.done) {
        delta += c.text->finish();
        c.done = true;
        c.finish_reason = c.text->stopped() ? "stop" : ev.finish_reason;
        if (ev.finish_reason == "error") spdlog::warn("request {} failed: {}", ev.id.value, ev.error);
        record_finish(job, c, t, &ev);
      }
    }
    if (c.done) {
      finish = c.finish_reason;
      --job.remaining;
    }
    if (job.stream && live && (!delta.empty() || c.done || (job.logprobs && ev.token >= 0))) {
      json lp = take_logprobs(job, c);
      json body = job.chat ? (delta.empty() && c.done ? json::object() : json{{"content", delta}}) : json(delta);
      enqueue(http_chunk(sse_event(chunk_json(job, static_cast<int32_t>(idx), body, lp, finish))));
    }
    if (job.remaining == 0) finalize(job);
  }

  // Every choice is done: the stream's terminator, or the whole JSON response.
  // The request stays counted as active until these bytes are written (maybe_next).
  void finalize(CompletionJob& job) {
    job.responded = true;
    const bool live = !closed_ && !client_gone_;
    if (job_.get() == &job) job_.reset();
    if (!live) {
      uncount_active();
      close();
      return;
    }
    if (job.stream) {
      if (job.include_usage) enqueue(http_chunk(sse_event(usage_chunk_json(job))));
      enqueue(http_chunk(kSseDone));
      enqueue(std::string(kLastChunk));
      finish_response(!keep_alive_);
      return;
    }
    for (const CompletionChoice& c : job.choices) {
      if (c.finish_reason == "error") {
        send_error(make_error(500, "generation failed in the instance (see the server log)", "internal_error"));
        return;
      }
    }
    send_json(200, final_response_json(job));
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  ServerState& st_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> out_;
  std::string interim_;  // "100 Continue" while it is written
  size_t out_offset_ = 0;  // bytes of out_.front() already written
  std::vector<char> drain_buf_;
  int64_t drained_ = 0;
  Phase phase_ = Phase::kIdle;
  uint64_t timer_gen_ = 0;    // a timer callback acts only if no later arm/disarm happened
  bool timed_out_ = false;
  bool first_request_ = true;
  bool writing_ = false;
  bool response_done_ = false;
  bool response_started_ = false;
  bool close_after_ = false;
  bool drain_on_close_ = false;
  bool keep_alive_ = true;
  bool head_only_ = false;
  bool closed_ = false;
  bool watch_pending_ = false;
  bool client_gone_ = false;
  bool counted_ = false;      // this connection's request is counted in ServerState::active
  std::shared_ptr<CompletionJob> job_;
};

void do_accept(ServerState& s) {
  s.acceptor->async_accept(net::make_strand(s.ioc), [&s](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !s.acceptor->is_open()) return;
      spdlog::warn("accept failed: {}", ec.message());
      if (ec == net::error::no_descriptors) {
        // Out of file descriptors: back off briefly instead of spinning on accept().
        auto t = std::make_shared<net::steady_timer>(s.ioc, std::chrono::milliseconds(50));
        t->async_wait([&s, t](beast::error_code) {
          if (s.acceptor->is_open()) do_accept(s);
        });
        return;
      }
    } else if (s.connections.load() >= s.max_connections) {
      // Over the cap: a short 503 (the socket's send buffer is empty, so this does not block) and close.
      static const std::string kFull = close_response(
          503, make_error(503, "too many open connections; retry later", "service_unavailable", "too_many_connections"));
      beast::error_code ignored;
      socket.non_blocking(true, ignored);
      socket.write_some(net::buffer(kFull), ignored);
      socket.shutdown(tcp::socket::shutdown_both, ignored);
      socket.close(ignored);
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      s.connections.fetch_add(1);
      try {
        std::make_shared<Session>(std::move(socket), s)->start();
      } catch (const std::exception& e) {
        spdlog::error("cannot start a connection: {}", e.what());
      }
    }
    if (s.acceptor->is_open()) do_accept(s);
  });
}

// Runs the io_context on one thread; a handler's exception (there should be none:
// sessions catch their own) is logged and the thread keeps serving.
void run_io(net::io_context& ioc) {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("uncaught exception in an I/O thread (kept serving): {}", e.what());
    } catch (...) {
      spdlog::error("uncaught exception in an I/O thread (kept serving)");
    }
  }
}

// The connection cap after the file-descriptor limit: what is left once the
// descriptors the process already holds and kReservedFds are set aside.
int32_t effective_max_connections(int32_t wanted) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return wanted;
  const int64_t room = static_cast<int64_t>(rl.rlim_cur) - kReservedFds;
  return static_cast<int32_t>(std::clamp<int64_t>(room, 1, wanted));
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct HttpServer::Impl : ServerState {};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::create(cluster::GenerationBackend* backend,
                                                         const ServerOptions& options, const Clock* clock) {
  if (!backend || !clock) return invalid_argument_error("HttpServer needs a backend and a clock");
  std::shared_ptr<const model::LlamaModel> model = backend->model();
  if (!model) return invalid_argument_error("HttpServer: the backend has no model");
  if (options.num_io_threads < 1) return invalid_argument_error("num_io_threads must be >= 1, got {}", options.num_io_threads);
  if (options.num_tokenizer_threads < 1)
    return invalid_argument_error("num_tokenizer_threads must be >= 1, got {}", options.num_tokenizer_threads);
  if (options.max_body_bytes < 1) return invalid_argument_error("max_body_bytes must be >= 1, got {}", options.max_body_bytes);
  if (options.max_connections < 1)
    return invalid_argument_error("max_connections must be >= 1, got {}", options.max_connections);
  auto impl = std::make_unique<Impl>();
  impl->backend = backend;
  impl->model = std::move(model);
  impl->options = options;
  impl->clock = clock;
  if (!options.chat_template.empty()) {
    auto kind = chat_template_from_name(options.chat_template);
    if (!kind) {
      return invalid_argument_error("unknown chat template '{}'; choose one of: {}", options.chat_template,
                                    chat_template_names());
    }
    impl->chat_template = *kind;
  } else if (auto kind = detect_chat_template(impl->model->chat_template())) {
    impl->chat_template = *kind;
    spdlog::info("chat template: {} (detected from the GGUF)", ::ecoserve::server::chat_template_name(*kind));
  } else {
    impl->chat_template = ChatTemplateKind::kChatml;
    spdlog::warn("{}; falling back to chatml for /v1/chat/completions. Pass --chat-template NAME ({}) to choose.",
                 impl->model->chat_template().empty() ? "the model has no chat template (tokenizer.chat_template)"
                                                      : "the model's chat template (tokenizer.chat_template) is not "
                                                        "one ecoserve recognises",
                 chat_template_names());
  }
  const model::Tokenizer& tok = impl->model->tokenizer();
  PrepareContext& pc = impl->prepare;
  pc.tokenizer = &tok;
  pc.chat_template = impl->chat_template;
  if (tok.bos_id() >= 0) pc.bos_text = std::string(tok.token_text(tok.bos_id()));
  if (tok.eos_id() >= 0) pc.eos_text = std::string(tok.token_text(tok.eos_id()));
  pc.served_model_name = options.served_model_name;
  pc.max_context = backend->max_context();
  pc.max_token_bytes = max_token_bytes(tok);
  impl->max_connections = effective_max_connections(options.max_connections);
  if (impl->max_connections < options.max_connections) {
    spdlog::warn("max_connections lowered from {} to {} by the open-file limit (ulimit -n)", options.max_connections,
                 impl->max_connections);
  }
  impl->metrics = options.metrics ? options.metrics : std::make_shared<ServerMetrics>(options.served_model_name);
  std::random_device rd;
  impl->id_salt = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Status HttpServer::start() {
  Impl& s = *impl_;
  beast::error_code ec;
  auto addr = net::ip::make_address(s.options.host, ec);
  if (ec) return invalid_argument_error("--host '{}' is not an IP address: {}", s.options.host, ec.message());
  tcp::endpoint ep(addr, s.options.port);
  s.acceptor.emplace(net::make_strand(s.ioc));
  s.acceptor->open(ep.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(ep, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return unavailable_error("cannot listen on {}:{}: {}", s.options.host, s.options.port, ec.message());
  s.port = s.acceptor->local_endpoint().port();
  s.tokenizer_pool.emplace(static_cast<size_t>(s.options.num_tokenizer_threads));
  s.work.emplace(s.ioc.get_executor());
  do_accept(s);
  for (int32_t i = 0; i < s.options.num_io_threads; ++i) s.threads.emplace_back([&s] { run_io(s.ioc); });
  return ok_status();
}

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::begin_drain() {
  impl_->draining.store(true);
  if (impl_->acceptor) {
    net::post(impl_->acceptor->get_executor(), [this] {
      beast::error_code ec;
      impl_->acceptor->close(ec);
    });
  }
}

int32_t HttpServer::active_requests() const { return impl_->active.load(); }

uint64_t HttpServer::bytes_written() const { return impl_->bytes_written.load(std::memory_order_relaxed); }

void HttpServer::stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->draining.store(true);
  if (impl_->tokenizer_pool) impl_->tokenizer_pool->join();  // its results post to the io_context
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

const std::string& HttpServer::served_model_name() const { return impl_->options.served_model_name; }

std::string_view HttpServer::chat_template_name() const { return ::ecoserve::server::chat_template_name(impl_->chat_template); }

}  // namespace ecoserve::server
