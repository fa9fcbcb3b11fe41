#include "loadgen/fake_openai_server.h"

#include <chrono>
#include <deque>
#include <mutex>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ecoserve::loadgen::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using SteadyTime = std::chrono::steady_clock::time_point;

struct FakeOpenAiServer::Impl {
  FakeServerOptions options;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::thread thread;
  std::atomic<int> received{0};
  mutable std::mutex mu;
  std::vector<std::string> authorizations;  // guarded by mu
  std::vector<std::string> bodies;          // guarded by mu
  std::deque<SteadyTime> arrivals;  // touched only on the io thread
  int port = 0;

  void accept();
};

namespace {

std::string chunk(const std::string& payload) {
  return fmt::format("{:x}\r\n{}\r\n", payload.size(), payload);
}

class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(FakeOpenAiServer::Impl& impl, tcp::socket s) : impl_(impl), socket_(std::move(s)), timer_(impl.ioc) {}

  void start() {
    http::async_read(socket_, buffer_, req_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (!ec) self->on_request();
    });
  }

 private:
  void on_request() {
    ++impl_.received;
    const auto& o = impl_.options;
    const auto auth_it = req_.find(http::field::authorization);
    const bool has_auth = auth_it != req_.end();
    const std::string auth = has_auth ? std::string(auth_it->value()) : "";
    {
      std::lock_guard lock(impl_.mu);
      impl_.authorizations.push_back(fmt::format("{} {} -> {}", std::string(req_.method_string()),
                                                 std::string(req_.target()), auth));
      if (req_.method() == http::verb::post) impl_.bodies.push_back(req_.body());
    }
    if (!o.api_key.empty() && auth != "Bearer " + o.api_key) {
      nlohmann::json e = {{"error",
                           {{"message", has_auth ? "incorrect API key provided" : "missing API key"},
                            {"type", "invalid_request_error"},
                            {"code", "invalid_api_key"}}}};
      return respond(401, "Unauthorized", e.dump());
    }
    if (req_.method() == http::verb::get && req_.target() == "/v1/models") {
      nlohmann::json m = {{"object", "list"}, {"data", {{{"id", "fake-model"}, {"object", "model"}}}}};
      return respond(200, "OK", m.dump());
    }
    if (o.reset_connections) {
      error_code ig;
      socket_.set_option(asio::socket_base::linger(true, 0), ig);  // RST
      socket_.close(ig);
      return;
    }
    if (o.fail_status != 0)
      return respond(o.fail_status, "Error", R"({"error":{"message":"fake failure","type":"server_error"}})");
    auto j = nlohmann::json::parse(req_.body(), nullptr, false);
    int max_tokens = 16;
    if (!j.is_discarded() && j.contains("max_tokens") && j["max_tokens"].is_number_integer())
      max_tokens = std::max(1, j["max_tokens"].get<int>());
    chat_ = req_.target().find("chat") != beast::string_view::npos;
    // Load = earlier arrivals within busy_ms.
    auto now = std::chrono::steady_clock::now();
    auto busy = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double, std::milli>(o.busy_ms));
    while (!impl_.arrivals.empty() && impl_.arrivals.front() <= now - busy) impl_.arrivals.pop_front();
    int load = static_cast<int>(impl_.arrivals.size());
    impl_.arrivals.push_back(now);
    auto ms = [](double v) {
      return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double, std::milli>(v));
    };
    first_ = now + ms(o.base_ttft_ms + o.per_load_ms * load);
    tpot_ = ms(o.tpot_ms);
    remaining_ = max_tokens;
    total_ = max_tokens;
    prompt_tokens_ = 1;
    if (!j.is_discarded() && j.contains("prompt") && j["prompt"].is_string())
      prompt_tokens_ = static_cast<int>(j["prompt"].get<std::string>().size() / 4) + 1;
    out_ = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
           "Connection: close\r\n\r\n";
    write([self = shared_from_this()] { self->next_token(); });
  }

  void next_token() {
    auto when = first_ + tpot_ * (total_ - remaining_);
    timer_.expires_at(when);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec) return;
      nlohmann::json c;
      if (self->chat_)
        c = {{"choices", {{{"index", 0}, {"delta", {{"content", "tok "}}}}}}};
      else
        c = {{"choices", {{{"index", 0}, {"text", "tok "}}}}};
      self->out_ = chunk("data: " + c.dump() + "\n\n");
      if (--self->remaining_ > 0) return self->write([self] { self->next_token(); });
      if (self->impl_.options.send_usage) {
        nlohmann::json u = {{"choices", nlohmann::json::array()},
                            {"usage", {{"prompt_tokens", self->prompt_tokens_}, {"completion_tokens", self->total_}}}};
        self->out_ += chunk("data: " + u.dump() + "\n\n");
      }
      self->out_ += chunk("data: [DONE]\n\n") + "0\r\n\r\n";
      self->write_then_close();
    });
  }

  // A whole JSON response, then close.
  void respond(int status, const char* reason, const std::string& body) {
    out_ = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                       "Connection: close\r\n\r\n{}", status, reason, body.size(), body);
    write_then_close();
  }

  template <typename F>
  void write(F then) {
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this(), then](error_code ec, std::size_t) {
      if (!ec) then();
    });
  }

  void write_then_close() {
    write([self = shared_from_this()] {
      error_code ig;
      self->socket_.shutdown(tcp::socket::shutdown_send, ig);
      self->socket_.close(ig);
    });
  }

  FakeOpenAiServer::Impl& impl_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  std::string out_;
  bool chat_ = false;
  SteadyTime first_;
  std::chrono::steady_clock::duration tpot_{};
  int remaining_ = 0, total_ = 0, prompt_tokens_ = 0;
};

}  // namespace

void FakeOpenAiServer::Impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket s) {
    if (ec) return;
    std::make_shared<Conn>(*this, std::move(s))->start();
    accept();
  });
}

StatusOr<std::unique_ptr<FakeOpenAiServer>> FakeOpenAiServer::start(const FakeServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  error_code ec;
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return unavailable_error("fake server: cannot listen: {}", ec.message());
  impl->port = impl->acceptor.local_endpoint().port();
  impl->accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->ioc.run(); });
  return std::unique_ptr<FakeOpenAiServer>(new FakeOpenAiServer(std::move(impl)));
}

FakeOpenAiServer::FakeOpenAiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FakeOpenAiServer::~FakeOpenAiServer() {
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int FakeOpenAiServer::port() const { return impl_->port; }
int FakeOpenAiServer::requests_received() const { return impl_->received.load(); }

std::vector<std::string> FakeOpenAiServer::authorizations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->authorizations;
}

std::vector<std::string> FakeOpenAiServer::bodies() const {
  std::lock_guard lock(impl_->mu);
  return impl_->bodies;
}

}  // namespace ecoserve::loadgen::testing
