#include "server/http_server.h"

#include <atomic>
#include <cmath>
#include <ctime>
#include <deque>
#include <mutex>
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

#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/openai_request.h"
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

ApiError make_error(int status, std::string message, std::string type, std::string code = "",
                    std::string param = "") {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

std::string status_line(int status) {
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return fmt::format("HTTP/1.1 {} {}\r\n", status, std::string_view(reason.data(), reason.size()));
}

double clamp_logprob(float lp) {
  if (!std::isfinite(lp)) return -9999.0;
  return std::max(-9999.0, static_cast<double>(lp));
}

json bytes_of(const std::string& s) {
  json arr = json::array();
  for (unsigned char c : s) arr.push_back(static_cast<int>(c));
  return arr;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared server state.

struct ServerState {
  instance::InstanceLoop* loop = nullptr;
  std::shared_ptr<const model::LlamaModel> model;
  ServerOptions options;
  const Clock* clock = nullptr;
  ChatTemplateKind chat_template = ChatTemplateKind::kChatml;
  std::string bos_text = "<s>";
  std::string eos_text = "</s>";
  std::shared_ptr<ServerMetrics> metrics;

  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  uint16_t port = 0;
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::atomic<int32_t> active{0};
  std::atomic<uint64_t> next_request_id{1};
  uint64_t id_salt = 0;

  std::string next_response_id(const char* prefix, uint64_t n) {
    return fmt::format("{}{:016x}", prefix, id_salt ^ (n * 0x9E3779B97F4A7C15ull));
  }
};

namespace {

// One choice of a generation request.
struct Choice {
  RequestId id;
  std::unique_ptr<TextStream> text;
  bool done = false;
  std::string finish_reason;
  bool has_first = false;
  TimePoint first_token_time;
  TimePoint last_token_time;
  // Logprobs (non-streaming: accumulated; streaming: per chunk).
  json lp_tokens = json::array(), lp_token_logprobs = json::array(), lp_top = json::array(),
       lp_offsets = json::array(), lp_content = json::array();
};

struct Job {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::string id;
  int64_t created = 0;
  std::string model;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;
  TimePoint arrival;
  uint64_t base_id = 0;
  std::vector<Choice> choices;
  int32_t remaining = 0;
  bool responded = false;  // final response enqueued (or abandoned)
  bool counted = false;    // counted in Impl::active
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ServerState& st) : socket_(std::move(socket)), st_(st) {}

  void start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

 private:
  // --- reading -----------------------------------------------------------------------------
  void do_read() {
    if (closed_) return;
    response_done_ = false;
    close_after_ = false;
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(st_.options.max_body_bytes));
    parser_->header_limit(64 * 1024);
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      drain_on_close_ = true;
      send_error(make_error(413,
                            fmt::format("request body exceeds the limit of {} bytes", st_.options.max_body_bytes),
                            "invalid_request_error", "request_too_large"),
                 /*close=*/true);
      return;
    }
    if (ec) {
      if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
          ec == net::error::operation_aborted || ec == net::error::bad_descriptor) {
        close();
        return;
      }
      send_error(make_error(400, "malformed HTTP request: " + ec.message(), "invalid_request_error"), true);
      return;
    }
    http::request<http::string_body> req = parser_->release();
    handle(req);
  }

  // --- writing -----------------------------------------------------------------------------
  void enqueue(std::string data) {
    if (closed_ || data.empty()) return;
    out_.push_back(std::move(data));
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    net::async_write(socket_, net::buffer(out_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (closed_) {  // the buffer in flight was kept alive until now
      out_.clear();
      return;
    }
    if (ec) {
      client_gone();
      return;
    }
    out_.pop_front();
    if (!out_.empty()) {
      do_write();
      return;
    }
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
  // client sees our answer instead of a reset.
  void drain_and_close() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    drain_buf_.resize(64 * 1024);
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
      self->on_watch(ec, n);
    });
  }
  void on_watch(beast::error_code ec, size_t n) {
    watch_pending_ = false;
    if (!ec) {
      buffer_.commit(n);  // a pipelined request: kept for the next read
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
      for (Choice& c : job_->choices) {
        if (!c.done) st_.loop->cancel(c.id);
      }
    }
    client_gone_ = true;
    close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    if (!writing_) out_.clear();  // else the write in flight still uses out_.front()
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
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
    std::string_view target(req.target().data(), req.target().size());
    std::string_view path = target.substr(0, target.find('?'));
    const auto method = req.method();

    struct Route {
      std::string_view path;
      http::verb verb;
    };
    static constexpr Route kRoutes[] = {{"/v1/completions", http::verb::post},
                                        {"/v1/chat/completions", http::verb::post},
                                        {"/v1/models", http::verb::get},
                                        {"/health", http::verb::get},
                                        {"/metrics", http::verb::get}};
    const Route* route = nullptr;
    for (const Route& r : kRoutes) {
      if (r.path == path) route = &r;
    }
    if (!route) {
      send_error(make_error(404, fmt::format("no route for {} {}", std::string_view(req.method_string().data(),
                                                                                     req.method_string().size()),
                                             path),
                            "invalid_request_error", "not_found"));
      return;
    }
    if (method != route->verb && !(route->verb == http::verb::get && method == http::verb::head)) {
      const std::string allow = route->verb == http::verb::post ? "POST" : "GET, HEAD";
      send_error(make_error(405, fmt::format("method {} is not allowed on {}; use {}",
                                             std::string_view(req.method_string().data(), req.method_string().size()),
                                             path, allow),
                            "invalid_request_error", "method_not_allowed"),
                 false, "Allow: " + allow + "\r\n");
      return;
    }
    head_only_ = method == http::verb::head;

    if (path.starts_with("/v1/") && !st_.options.api_key.empty()) {
      auto it = req.find(http::field::authorization);
      const std::string expected = "Bearer " + st_.options.api_key;
      if (it == req.end() || std::string_view(it->value().data(), it->value().size()) != expected) {
        send_error(make_error(401,
                              it == req.end() ? "missing API key: send the header 'Authorization: Bearer <key>'"
                                              : "incorrect API key provided",
                              "invalid_request_error", "invalid_api_key"),
                   false, "WWW-Authenticate: Bearer\r\n");
        return;
      }
    }

    if (path == "/health") return handle_health();
    if (path == "/metrics") {
      send_body(200, "text/plain; version=0.0.4; charset=utf-8", st_.metrics->render(st_.loop->status()));
      return;
    }
    if (path == "/v1/models") return handle_models();
    handle_generation(path == "/v1/chat/completions" ? Endpoint::kChatCompletions : Endpoint::kCompletions,
                      req.body());
  }

  void handle_health() {
    const instance::InstanceStatus s = st_.loop->status();
    const double age = to_seconds(st_.clock->now() - s.last_heartbeat);
    if (st_.draining.load()) {
      send_json(503, json{{"status", "draining"}});
    } else if (!s.running) {
      send_json(503, json{{"status", "instance loop not running"}});
    } else if (age > st_.options.health_timeout_seconds) {
      send_json(503, json{{"status", fmt::format("instance loop heartbeat is {:.1f} s old", age)}});
    } else {
      send_json(200, json{{"status", "ok"}});
    }
  }

  void handle_models() {
    json m = {{"id", st_.options.served_model_name},
              {"object", "model"},
              {"created", static_cast<int64_t>(std::time(nullptr))},
              {"owned_by", "ecoserve"},
              {"root", st_.options.served_model_name},
              {"parent", nullptr},
              {"max_model_len", st_.loop->runner().max_context()}};
    send_json(200, json{{"object", "list"}, {"data", json::array({m})}});
  }

  void handle_generation(Endpoint endpoint, const std::string& body) {
    const TimePoint arrival = st_.clock->now();
    if (st_.draining.load()) {
      send_error(make_error(503, "the server is shutting down", "service_unavailable", "draining"));
      return;
    }
    auto parsed = parse_completion_request(body, endpoint);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      send_error(*e);
      return;
    }
    CompletionRequest& r = std::get<CompletionRequest>(parsed);
    const bool chat = endpoint == Endpoint::kChatCompletions;
    if (!r.model.empty() && r.model != st_.options.served_model_name) {
      send_error(not_found(fmt::format("The model `{}` does not exist; this server serves `{}`", r.model,
                                       st_.options.served_model_name),
                           "model", "model_not_found"));
      return;
    }
    const model::Tokenizer& tok = st_.model->tokenizer();
    std::vector<int32_t> prompt;
    if (chat) {
      prompt = tok.encode(render_chat(st_.chat_template, r.messages, st_.bos_text, st_.eos_text),
                          /*add_special=*/true, /*parse_special=*/true);
    } else if (r.prompt_is_tokens) {
      for (int32_t t : r.prompt_tokens) {
        if (t >= tok.vocab_size()) {
          send_error(bad_request(fmt::format("prompt token id {} is out of range (vocabulary size {})", t,
                                             tok.vocab_size()),
                                 "prompt"));
          return;
        }
      }
      prompt = r.prompt_tokens;
    } else {
      prompt = tok.encode(r.prompt, /*add_special=*/true, /*parse_special=*/true);
    }
    if (prompt.empty()) {
      send_error(bad_request("the prompt encodes to no tokens", chat ? "messages" : "prompt"));
      return;
    }
    const int32_t max_ctx = st_.loop->runner().max_context();
    const int32_t plen = static_cast<int32_t>(prompt.size());
    const char* where = chat ? "messages" : "prompt";
    int32_t max_tokens = r.max_tokens.value_or(chat ? std::max(0, max_ctx - plen) : 16);
    if (!r.max_tokens && !chat) max_tokens = std::min(max_tokens, std::max(1, max_ctx - plen));
    if (max_tokens < 1 || static_cast<int64_t>(plen) + max_tokens > max_ctx) {
      send_error(bad_request(
          fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in "
                      "the {}, {} in the completion). Please reduce the length of the {} or completion.",
                      max_ctx, static_cast<int64_t>(plen) + std::max(max_tokens, 1), plen, where,
                      std::max(max_tokens, 1), where),
          chat ? "messages" : "prompt"));
      return;
    }

    auto job = std::make_shared<Job>();
    job->chat = chat;
    job->stream = r.stream;
    job->include_usage = r.include_usage;
    job->logprobs = r.logprobs;
    job->top_logprobs = r.top_logprobs;
    job->created = static_cast<int64_t>(std::time(nullptr));
    job->model = st_.options.served_model_name;
    job->prompt_tokens = plen;
    job->arrival = arrival;
    job->base_id = st_.next_request_id.fetch_add(static_cast<uint64_t>(r.n));
    job->id = st_.next_response_id(chat ? "chatcmpl-" : "cmpl-", job->base_id);
    job->choices.resize(static_cast<size_t>(r.n));
    job->remaining = r.n;

    for (int32_t i = 0; i < r.n; ++i) {
      Choice& c = job->choices[static_cast<size_t>(i)];
      c.id = RequestId(job->base_id + static_cast<uint64_t>(i));
      c.text = std::make_unique<TextStream>(tok, r.stop);
      instance::GenerationRequest g;
      g.id = c.id;
      g.prompt = prompt;
      g.sampling = r.sampling;
      g.sampling.max_tokens = max_tokens;
      g.sampling.logprobs = r.logprobs;
      g.sampling.top_logprobs = r.top_logprobs;
      g.sampling.has_seed = r.has_seed;
      if (r.has_seed) g.sampling.seed = static_cast<uint64_t>(r.seed) + static_cast<uint64_t>(i);
      g.priority = r.priority;
      auto self = shared_from_this();
      const Clock* clock = st_.clock;
      auto executor = socket_.get_executor();
      Status s = st_.loop->submit(std::move(g), [self, job, clock, executor](const instance::TokenEvent& ev) {
        const TimePoint t = clock->now();
        net::post(executor, [self, job, ev, t] { self->on_event(*job, ev, t); });
      });
      if (!s.ok()) {
        job->responded = true;  // events of choices already submitted are ignored
        for (int32_t k = 0; k < i; ++k) st_.loop->cancel(job->choices[static_cast<size_t>(k)].id);
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
    job->counted = true;
    st_.active.fetch_add(1);
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
  json chunk_json(const Job& job, int32_t index, const json& delta_or_text, const json& logprobs,
                  const json& finish_reason) {
    json choice = {{"index", index}};
    if (job.chat) {
      choice["delta"] = delta_or_text;
    } else {
      choice["text"] = delta_or_text;
    }
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = finish_reason;
    json j = {{"id", job.id},
              {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", job.created},
              {"model", job.model},
              {"choices", json::array({choice})}};
    if (job.include_usage) j["usage"] = nullptr;
    return j;
  }

  json usage_json(const Job& job) const {
    int32_t completion = 0;
    for (const Choice& c : job.choices) completion += c.text->num_tokens();
    json u = {{"prompt_tokens", job.prompt_tokens},
              {"completion_tokens", completion},
              {"total_tokens", job.prompt_tokens + completion}};
    if (job.cached_tokens > 0) u["prompt_tokens_details"] = {{"cached_tokens", job.cached_tokens}};
    return u;
  }

  void add_logprobs(const Job& job, Choice& c, const instance::TokenEvent& ev, size_t text_offset) {
    const model::Tokenizer& tok = st_.model->tokenizer();
    const std::string piece = tok.token_to_piece(ev.token, /*render_special=*/true);
    if (job.chat) {
      json tops = json::array();
      for (const auto& t : ev.top_logprobs) {
        const std::string p = tok.token_to_piece(t.token, true);
        tops.push_back({{"token", p}, {"logprob", clamp_logprob(t.logprob)}, {"bytes", bytes_of(p)}});
      }
      c.lp_content.push_back(
          {{"token", piece}, {"logprob", clamp_logprob(ev.logprob)}, {"bytes", bytes_of(piece)}, {"top_logprobs", tops}});
    } else {
      json tops = json::object();
      for (const auto& t : ev.top_logprobs) tops[tok.token_to_piece(t.token, true)] = clamp_logprob(t.logprob);
      c.lp_tokens.push_back(piece);
      c.lp_token_logprobs.push_back(clamp_logprob(ev.logprob));
      c.lp_top.push_back(job.top_logprobs > 0 ? tops : json(nullptr));
      c.lp_offsets.push_back(text_offset);
    }
  }

  json take_logprobs(const Job& job, Choice& c) {
    if (!job.logprobs) return nullptr;
    json out;
    if (job.chat) {
      out = {{"content", c.lp_content}};
      c.lp_content = json::array();
    } else {
      out = {{"tokens", c.lp_tokens},
             {"token_logprobs", c.lp_token_logprobs},
             {"top_logprobs", c.lp_top},
             {"text_offset", c.lp_offsets}};
      c.lp_tokens = json::array();
      c.lp_token_logprobs = json::array();
      c.lp_top = json::array();
      c.lp_offsets = json::array();
    }
    return out;
  }

  void record_finish(const Job& job, const Choice& c, TimePoint t, const instance::TokenEvent* final_event) {
    ServerMetrics& m = *st_.metrics;
    m.observe_e2e(to_seconds(t - job.arrival));
    const int32_t n = c.text->num_tokens();
    if (c.has_first && n > 1) m.observe_tpot(to_seconds(c.last_token_time - c.first_token_time) / (n - 1));
    if (final_event && final_event->scheduled_time.time_since_epoch().count() != 0 &&
        final_event->scheduled_time >= job.arrival) {
      m.observe_queue_time(to_seconds(final_event->scheduled_time - job.arrival));
    }
  }

  void on_event(Job& job, const instance::TokenEvent& ev, TimePoint t) {
    if (job.responded) return;
    const uint64_t idx = ev.id.value - job.base_id;
    if (idx >= job.choices.size()) return;
    Choice& c = job.choices[idx];
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
      if (job.logprobs) add_logprobs(job, c, ev, offset);
      if (c.text->stopped()) {
        c.done = true;
        c.finish_reason = "stop";
        if (!ev.finished) st_.loop->cancel(ev.id);
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

  void finalize(Job& job) {
    job.responded = true;
    if (job.counted) st_.active.fetch_sub(1);
    const bool live = !closed_ && !client_gone_;
    if (job_.get() == &job) job_.reset();
    if (!live) {
      close();
      return;
    }
    if (job.stream) {
      if (job.include_usage) {
        json j = {{"id", job.id},
                  {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", job.created},
                  {"model", job.model},
                  {"choices", json::array()},
                  {"usage", usage_json(job)}};
        enqueue(http_chunk(sse_event(j)));
      }
      enqueue(http_chunk(kSseDone));
      enqueue(std::string(kLastChunk));
      finish_response(!keep_alive_);
      return;
    }
    bool any_error = false;
    json choices = json::array();
    for (size_t i = 0; i < job.choices.size(); ++i) {
      Choice& c = job.choices[i];
      if (c.finish_reason == "error") any_error = true;
      json lp = take_logprobs(job, c);
      json choice = {{"index", i}};
      if (job.chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text->text()}};
      } else {
        choice["text"] = c.text->text();
      }
      choice["logprobs"] = lp;
      choice["finish_reason"] = c.finish_reason;
      choices.push_back(std::move(choice));
    }
    if (any_error) {
      send_error(make_error(500, "generation failed in the instance (see the server log)", "internal_error"));
      return;
    }
    json j = {{"id", job.id},
              {"object", job.chat ? "chat.completion" : "text_completion"},
              {"created", job.created},
              {"model", job.model},
              {"choices", choices},
              {"usage", usage_json(job)}};
    send_json(200, j);
  }

  tcp::socket socket_;
  ServerState& st_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> out_;
  std::vector<char> drain_buf_;
  int64_t drained_ = 0;
  bool writing_ = false;
  bool response_done_ = false;
  bool close_after_ = false;
  bool drain_on_close_ = false;
  bool keep_alive_ = true;
  bool head_only_ = false;
  bool closed_ = false;
  bool watch_pending_ = false;
  bool client_gone_ = false;
  std::shared_ptr<Job> job_;
};

}  // namespace

static void do_accept(ServerState& s) {
  s.acceptor->async_accept(net::make_strand(s.ioc), [&s](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !s.acceptor->is_open()) return;
      spdlog::warn("accept failed: {}", ec.message());
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), s)->start();
    }
    if (s.acceptor->is_open()) do_accept(s);
  });
}

// ---------------------------------------------------------------------------------------------

struct HttpServer::Impl : ServerState {};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

StatusOr<std::unique_ptr<HttpServer>> HttpServer::create(instance::InstanceLoop* loop,
                                                         std::shared_ptr<const model::LlamaModel> model,
                                                         const ServerOptions& options, const Clock* clock) {
  if (!loop || !model || !clock) return invalid_argument_error("HttpServer needs an instance loop, a model and a clock");
  if (options.num_io_threads < 1) return invalid_argument_error("num_io_threads must be >= 1, got {}", options.num_io_threads);
  if (options.max_body_bytes < 1) return invalid_argument_error("max_body_bytes must be >= 1, got {}", options.max_body_bytes);
  auto impl = std::make_unique<Impl>();
  impl->loop = loop;
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
  if (tok.bos_id() >= 0) impl->bos_text = std::string(tok.token_text(tok.bos_id()));
  if (tok.eos_id() >= 0) impl->eos_text = std::string(tok.token_text(tok.eos_id()));
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
  s.work.emplace(s.ioc.get_executor());
  do_accept(s);
  for (int32_t i = 0; i < s.options.num_io_threads; ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
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

void HttpServer::stop() {
  if (impl_->stopped.exchange(true)) return;
  impl_->draining.store(true);
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

const std::string& HttpServer::served_model_name() const { return impl_->options.served_model_name; }

std::string_view HttpServer::chat_template_name() const { return ::ecoserve::server::chat_template_name(impl_->chat_template); }

}  // namespace ecoserve::server
