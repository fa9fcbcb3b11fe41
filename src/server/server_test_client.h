// Test-only helpers shared by the server's end-to-end suites: a child
// `ecoserve serve --port 0` process on 127.0.0.1 with the tiny TinyStories model
// (base/subprocess.h) and a small blocking Boost.Beast client.
#pragma once

#include <utility>  // before Boost.Asio (1.74 awaitable.hpp needs std::exchange)

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"

namespace ecoserve::server::testing {

inline constexpr const char* kModel = "models/tinystories-656k-q8_0.gguf";
inline constexpr const char* kPrompt = "Once upon a time";

std::string ecoserve_binary();

// Why the end-to-end tests cannot run here ("" when they can): the shared model
// or the ecoserve binary is missing.
std::string skip_reason();

class ServerProcess {
 public:
  // Starts `ecoserve serve --model tiny --port 0 <extra>`, with `--threads 1` and
  // `--drain-timeout 5` unless `extra` sets them; its stderr goes to `stderr_path`
  // when given (else it is inherited). Empty error string on success.
  std::string start(const std::vector<std::string>& extra, const std::string& stderr_path = "");
  // SIGTERM and wait; returns the exit status.
  int stop() { return process_.stop(SIGTERM); }
  pid_t pid() const { return process_.pid(); }
  uint16_t port() const { return port_; }

 private:
  Subprocess process_;
  uint16_t port_ = 0;
};

struct Reply {
  int status = 0;  // -1: no HTTP response (body holds the error)
  std::string body;
  std::string content_type;
  nlohmann::json j() const { return nlohmann::json::parse(body, nullptr, false); }
};

void set_timeouts(boost::asio::ip::tcp::socket& s, int seconds);

// One request on a fresh connection.
Reply request(uint16_t port, boost::beast::http::verb verb, const std::string& target, const std::string& body = "",
              const std::map<std::string, std::string>& headers = {});
Reply post(uint16_t port, const std::string& target, const nlohmann::json& body,
           const std::map<std::string, std::string>& headers = {});

// The `data:` payloads of an SSE body, in order ("[DONE]" included).
std::vector<std::string> sse_payloads(const std::string& body);

// The value of the first sample of `name` in Prometheus text, -1 if absent.
double metric_value(const std::string& text, const std::string& name);

}  // namespace ecoserve::server::testing
