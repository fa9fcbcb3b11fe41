#include "loadgen/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loadgen/sse_parser.h"

namespace ecoserve::loadgen {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// Shared by the sessions of one run.
struct RunState {
  asio::io_context ioc;
  tcp::resolver::results_type endpoints;
  const RunnerOptions* options = nullptr;
  const Clock* clock = nullptr;
  const PromptBuilder* builder = nullptr;
  TimePoint start;
  std::vector<RequestRecord>* records = nullptr;
  std::span<const BenchRequest> requests;
  std::deque<std::size_t> waiting;
  int in_flight = 0;
  std::size_t released = 0;
  std::size_t finished = 0;
  std::size_t errors = 0;
  double last_end_s = 0;
  std::function<void()> on_finished;
  std::function<std::string(const BenchRequest&)> body_fn;
  std::string target;

  double now_s() const { return to_seconds(clock->now() - start); }
};

// One request: connect, write, read the streamed response. Owned by its own
// shared_ptr through the pending async operations.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(RunState& st, std::size_t index, std::string body, std::string target)
      : st_(st), index_(index), socket_(st.ioc), timer_(st.ioc),
        sse_([this](const SseEvent& e) { on_event(e); }) {
    req_.method(http::verb::post);
    req_.target(target);
    req_.version(11);
    req_.set(http::field::host, st.options->url.host + ":" + st.options->url.port);
    req_.set(http::field::user_agent, "ecoserve-bench");
    req_.set(http::field::content_type, "application/json");
    req_.set(http::field::accept, "text/event-stream");
    req_.set(http::field::connection, "close");
    if (!st.options->api_key.empty()) req_.set(http::field::authorization, "Bearer " + st.options->api_key);
    req_.body() = std::move(body);
    req_.prepare_payload();
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
  }

  void start() {
    rec().sent_s = st_.now_s();
    timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(st_.options->request_timeout_s)));
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->done_) return;
      self->timed_out_ = true;
      error_code ignored;
      self->socket_.cancel(ignored);
      self->socket_.close(ignored);
    });
    asio::async_connect(socket_, st_.endpoints,
                        [self = shared_from_this()](error_code ec, const tcp::endpoint&) {
                          self->on_connect(ec);
                        });
  }

 private:
  RequestRecord& rec() { return (*st_.records)[index_]; }

  void on_connect(error_code ec) {
    if (ec) {
      if (ec == asio::error::connection_refused)
        return fail(ErrorKind::kConnectionRefused, ec.message());
      return fail_io(ec, ErrorKind::kConnectionError);
    }
    http::async_write(socket_, req_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->fail_io(ec, ErrorKind::kConnectionReset);
      http::async_read_header(self->socket_, self->buffer_, self->parser_,
                              [self](error_code ec, std::size_t) { self->on_header(ec); });
    });
  }

  void on_header(error_code ec) {
    if (ec) return fail_io(ec, ErrorKind::kConnectionReset);
    const auto& res = parser_.get();
    status_ = res.result_int();
    rec().http_status = static_cast<int>(status_);
    auto ct = res[http::field::content_type];
    streaming_ = ct.find("text/event-stream") != beast::string_view::npos;
    read_body();
  }

  void read_body() {
    if (parser_.is_done()) return on_body_done();
    parser_.get().body().data = chunk_;
    parser_.get().body().size = sizeof(chunk_);
    http::async_read_some(socket_, buffer_, parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            self->on_read(ec);
                          });
  }

  void on_read(error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    std::size_t n = sizeof(chunk_) - parser_.get().body().size;
    if (n > 0) {
      std::string_view bytes(chunk_, n);
      if (status_ != 200 || !streaming_) {
        if (raw_.size() < (1u << 24)) raw_.append(bytes);
      } else {
        sse_.feed(bytes);
        if (done_) return;  // a stream error finished the request
      }
    }
    if (ec) {
      if ((ec == http::error::end_of_stream || ec == asio::error::eof) && saw_done_) return on_body_done();
      return fail_io(ec, ErrorKind::kConnectionReset);
    }
    read_body();
  }

  void on_event(const SseEvent& e) {
    if (done_) return;
    if (e.type == "error") return fail(ErrorKind::kStreamError, e.data.substr(0, 300));
    auto chunk = parse_stream_data(e.data);
    if (!chunk.ok()) return fail(ErrorKind::kProtocolError, chunk.status().message());
    absorb(*chunk, st_.now_s());
  }

  void absorb(const StreamChunk& c, double t) {
    if (!c.error.empty()) return fail(ErrorKind::kStreamError, c.error.substr(0, 300));
    if (c.done) saw_done_ = true;
    if (!c.text.empty()) {
      auto& r = rec();
      if (r.first_token_s < 0) r.first_token_s = t;
      r.chunk_s.push_back(t);
      text_ += c.text;
    }
    if (c.has_usage) {
      have_usage_ = true;
      usage_prompt_ = c.prompt_tokens;
      usage_completion_ = c.completion_tokens;
    }
  }

  void on_body_done() {
    if (done_) return;
    sse_.finish();
    if (done_) return;
    double t = st_.now_s();
    if (status_ != 200) {
      std::string msg = raw_.substr(0, 300);
      auto parsed = parse_stream_data(raw_);
      if (parsed.ok() && !parsed->error.empty()) msg = parsed->error.substr(0, 300);
      return fail(ErrorKind::kHttpStatus, msg);
    }
    if (!streaming_) {  // the server ignored "stream": one JSON body
      auto parsed = parse_stream_data(raw_);
      if (!parsed.ok()) return fail(ErrorKind::kProtocolError, parsed.status().message());
      absorb(*parsed, t);
      if (done_) return;
    }
    auto& r = rec();
    const auto& q = st_.requests[index_];
    if (have_usage_ && usage_completion_ > 0) {
      r.output_tokens = usage_completion_;
      r.output_tokens_from_usage = true;
    } else if (builder().exact() && !text_.empty()) {
      r.output_tokens = builder().count_tokens(text_);
    } else {
      r.output_tokens = static_cast<std::int64_t>(r.chunk_s.size());
    }
    if (have_usage_ && usage_prompt_ > 0) {
      r.input_tokens = usage_prompt_;
      r.input_tokens_from_usage = true;
    } else {
      r.input_tokens = q.input_tokens;
    }
    if (r.first_token_s < 0) return fail(ErrorKind::kProtocolError, "response had no content");
    if (st_.options->keep_text) r.generated_text = text_;
    r.success = true;
    finish(t);
  }

  const PromptBuilder& builder() const { return *st_.builder; }

  void fail_io(error_code ec, ErrorKind kind) {
    if (timed_out_) return fail(ErrorKind::kTimeout, "request timed out");
    if (ec == asio::error::connection_refused) kind = ErrorKind::kConnectionRefused;
    return fail(kind, ec.message());
  }

  void fail(ErrorKind kind, std::string message) {
    if (done_) return;
    auto& r = rec();
    r.success = false;
    r.error = kind;
    r.error_message = std::move(message);
    if (r.input_tokens == 0) r.input_tokens = st_.requests[index_].input_tokens;
    ++st_.errors;
    finish(st_.now_s());
  }

  void finish(double t);

  RunState& st_;
  std::size_t index_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response_parser<http::buffer_body> parser_;
  SseParser sse_;
  char chunk_[16384];
  unsigned status_ = 0;
  bool streaming_ = true;
  bool saw_done_ = false;
  bool have_usage_ = false;
  std::int64_t usage_prompt_ = 0, usage_completion_ = 0;
  std::string text_;
  std::string raw_;
  bool done_ = false;
  bool timed_out_ = false;
};

void dispatch_waiting(RunState& st);

void Session::finish(double t) {
  done_ = true;
  rec().end_s = t;
  error_code ignored;
  timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  --st_.in_flight;
  ++st_.finished;
  st_.last_end_s = std::max(st_.last_end_s, t);
  dispatch_waiting(st_);
  if (st_.finished == st_.requests.size() && st_.on_finished) st_.on_finished();
}

void dispatch_waiting(RunState& st) {
  int limit = st.options->max_concurrency;
  while (!st.waiting.empty() && (limit <= 0 || st.in_flight < limit)) {
    std::size_t i = st.waiting.front();
    st.waiting.pop_front();
    ++st.in_flight;
    // The body is built when sent, not when the workload is made, to keep memory flat.
    std::make_shared<Session>(st, i, st.body_fn(st.requests[i]), st.target)->start();
  }
}

std::string progress_bar(std::size_t done, std::size_t total, double rate, std::size_t errors,
                         const std::string& label) {
  constexpr int kWidth = 30;
  double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  return fmt::format("\r{}[{}] {}/{} {:5.1f} req/s  errors {}   ", label, bar, done, total, rate, errors);
}

}  // namespace

BenchmarkRunner::BenchmarkRunner(RunnerOptions options, const Clock& clock, const PromptBuilder& builder)
    : options_(std::move(options)), clock_(clock), builder_(builder) {}

std::string BenchmarkRunner::request_body(const BenchRequest& r) const {
  nlohmann::json j;
  j["model"] = options_.model;
  if (options_.endpoint == Endpoint::kChat) {
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", r.prompt}}});
  } else {
    j["prompt"] = r.prompt;
  }
  j["max_tokens"] = r.output_tokens;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  j["temperature"] = options_.temperature;
  if (options_.ignore_eos) j["ignore_eos"] = true;
  if (r.priority) j["priority"] = *r.priority;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<RunResult> BenchmarkRunner::run(std::span<const BenchRequest> requests,
                                         std::span<const double> release_times_s) {
  if (requests.size() != release_times_s.size())
    return invalid_argument_error("bench: {} requests but {} release times", requests.size(),
                                  release_times_s.size());
  RunResult result;
  result.records.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    result.records[i].index = requests[i].index;
    result.records[i].expected_output_tokens = requests[i].output_tokens;
    result.records[i].priority_class = requests[i].priority_class;
    result.records[i].priority = requests[i].priority;
    result.records[i].long_request = requests[i].long_request;
  }
  if (requests.empty()) return result;

  RunState st;
  {
    tcp::resolver resolver(st.ioc);
    error_code ec;
    st.endpoints = resolver.resolve(options_.url.host, options_.url.port, ec);
    if (ec)
      return unavailable_error("cannot resolve '{}:{}': {}", options_.url.host, options_.url.port,
                               ec.message());
  }
  st.options = &options_;
  st.clock = &clock_;
  st.builder = &builder_;
  st.records = &result.records;
  st.requests = requests;
  st.target = options_.url.target(options_.endpoint);
  st.body_fn = [this](const BenchRequest& r) { return request_body(r); };

  // Release order: by release time (stable for ties).
  std::vector<std::size_t> order(requests.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return release_times_s[a] < release_times_s[b]; });

  asio::steady_timer release_timer(st.ioc);
  asio::steady_timer progress_timer(st.ioc);
  auto steady_start = std::chrono::steady_clock::now();
  st.start = clock_.now();
  bool all_done = false;
  st.on_finished = [&] {
    all_done = true;
    release_timer.cancel();
    progress_timer.cancel();
  };

  std::function<void()> release_due = [&] {
    double now = st.now_s();
    while (st.released < order.size() && release_times_s[order[st.released]] <= now) {
      std::size_t i = order[st.released++];
      result.records[i].scheduled_s = release_times_s[i];
      st.waiting.push_back(i);
    }
    dispatch_waiting(st);
    if (st.released < order.size() && !all_done) {
      double next = release_times_s[order[st.released]];
      release_timer.expires_at(steady_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  std::chrono::duration<double>(next)));
      release_timer.async_wait([&](error_code ec) {
        if (!ec) release_due();
      });
    }
  };

  // Progress: done/total, completions per second over the last interval, errors.
  std::size_t last_done = 0;
  double last_t = 0, shown_rate = 0;
  std::function<void()> show_progress = [&] {
    if (!options_.progress) return;
    double t = st.now_s();
    if (t > last_t) {
      double inst = static_cast<double>(st.finished - last_done) / (t - last_t);
      shown_rate = last_t == 0 ? inst : 0.7 * shown_rate + 0.3 * inst;
    }
    last_done = st.finished;
    last_t = t;
    std::fputs(progress_bar(st.finished, requests.size(), shown_rate, st.errors, options_.progress_label).c_str(),
               options_.progress);
    std::fflush(options_.progress);
    if (all_done) return;
    progress_timer.expires_after(std::chrono::milliseconds(250));
    progress_timer.async_wait([&](error_code ec) {
      if (!ec) show_progress();
    });
  };

  asio::post(st.ioc, [&] { release_due(); });
  if (options_.progress) asio::post(st.ioc, [&] { show_progress(); });
  st.ioc.run();
  if (options_.progress) {
    double dur = st.last_end_s;
    std::fputs(progress_bar(st.finished, requests.size(),
                            dur > 0 ? static_cast<double>(st.finished) / dur : 0.0, st.errors,
                            options_.progress_label).c_str(),
               options_.progress);
    std::fputs("\n", options_.progress);
    std::fflush(options_.progress);
  }
  result.duration_s = st.last_end_s;
  return result;
}

StatusOr<std::string> http_get(const ServerUrl& url, const std::string& target, const std::string& api_key,
                               double timeout_s) {
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  error_code ec;
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return unavailable_error("cannot resolve '{}:{}': {}", url.host, url.port, ec.message());
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(timeout_s)));
  stream.connect(endpoints, ec);
  if (ec) return unavailable_error("cannot connect to {}: {}", url.to_string(), ec.message());
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, url.host + ":" + url.port);
  req.set(http::field::user_agent, "ecoserve");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(256u << 20);
  if (!ec) http::read(stream, buffer, parser, ec);
  if (ec) return unavailable_error("GET {}{}: {}", url.to_string(), target, ec.message());
  const auto& res = parser.get();
  if (int code = static_cast<int>(res.result_int()); code != 200) {
    std::string what = fmt::format("GET {}{}: HTTP {} {}", url.to_string(), target, code,
                                   std::string(http::obsolete_reason(res.result())));
    auto parsed = parse_stream_data(res.body());
    if (parsed.ok() && !parsed->error.empty()) what += ": " + parsed->error.substr(0, 300);
    if (code == 401) return unauthenticated_error("{}", what);
    if (code == 403) return permission_denied_error("{}", what);
    if (code == 400 || code == 404) return invalid_argument_error("{}", what);
    return unavailable_error("{}", what);
  }
  return res.body();
}

StatusOr<std::string> discover_model(const ServerUrl& url, const std::string& api_key, double timeout_s) {
  std::string target = url.target(Endpoint::kCompletions);
  target = target.substr(0, target.size() - std::string("/completions").size()) + "/models";
  auto body = http_get(url, target, api_key, timeout_s);
  if (!body.ok()) {
    // Model discovery reports every HTTP failure but 401/403 as UNAVAILABLE.
    const StatusCode c = body.status().code();
    if (c == StatusCode::kUnauthenticated || c == StatusCode::kPermissionDenied || c == StatusCode::kUnavailable) {
      return body.status();
    }
    return unavailable_error("{}", body.status().message());
  }
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return unavailable_error("GET {}{}: no model listed", url.to_string(), target);
  return j["data"][0]["id"].get<std::string>();
}

StatusOr<ApiKeyChoice> choose_api_key(const std::optional<std::string>& flag, const char* env) {
  ApiKeyChoice c;
  if (flag) {
    c.key = *flag;
    c.source = flag->empty() ? "" : "--api-key";
  } else if (env != nullptr && *env != '\0') {
    c.key = env;
    c.source = "OPENAI_API_KEY";
  }
  for (unsigned char ch : c.key)
    if (ch < 0x20 || ch > 0x7e)
      return invalid_argument_error("the API key from {} holds a control or non-ASCII byte (0x{:02x})",
                                    c.source, static_cast<unsigned>(ch));
  return c;
}

}  // namespace ecoserve::loadgen
