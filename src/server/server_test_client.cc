#include "server/server_test_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <filesystem>

#include <boost/beast/core.hpp>

#include "base/test_data.h"

namespace ecoserve::server::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

std::string ecoserve_binary() { return std::string(ECOSERVE_BINARY_DIR) + "/ecoserve"; }

std::string skip_reason() {
  if (!shared_data_path(kModel)) return missing_data_message(kModel);
  if (!std::filesystem::exists(ecoserve_binary())) return "no ecoserve binary at " + ecoserve_binary();
  return "";
}

std::string ServerProcess::start(const std::vector<std::string>& extra, const std::string& stderr_path) {
  auto model = shared_data_path(kModel);
  if (!model) return missing_data_message(kModel);
  std::vector<std::string> args = {ecoserve_binary(), "serve", "--model", *model, "--port", "0"};
  // Defaults the caller did not set (the CLI rejects a flag given twice).
  for (const auto& [flag, value] : {std::pair{"--threads", "1"}, std::pair{"--drain-timeout", "5"}}) {
    if (std::find(extra.begin(), extra.end(), flag) == extra.end()) {
      args.push_back(flag);
      args.push_back(value);
    }
  }
  args.insert(args.end(), extra.begin(), extra.end());
  SubprocessOptions options;
  options.stderr_path = stderr_path;
  if (Status s = process_.start(args, options); !s.ok()) return s.to_string();
  auto rest = process_.wait_for_line("ecoserve listening on http://127.0.0.1:", std::chrono::seconds(30));
  if (!rest.ok()) return rest.status().to_string();
  port_ = static_cast<uint16_t>(std::stoi(*rest));
  return "";
}

void set_timeouts(tcp::socket& s, int seconds) {
  timeval tv{seconds, 0};
  setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

Reply request(uint16_t port, http::verb verb, const std::string& target, const std::string& body,
              const std::map<std::string, std::string>& headers) {
  net::io_context ioc;
  tcp::socket s(ioc);
  beast::error_code ec;
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  Reply r;
  if (ec) {
    r.status = -1;
    r.body = "connect: " + ec.message();
    return r;
  }
  set_timeouts(s, 30);
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty() || verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  for (const auto& [k, v] : headers) req.set(k, v);
  http::write(s, req, ec);
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(s, buf, parser, ec);
  if (ec) {
    r.status = -1;
    r.body = ec.message();
    return r;
  }
  auto res = parser.release();
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  r.content_type = std::string(res[http::field::content_type]);
  return r;
}

Reply post(uint16_t port, const std::string& target, const json& body, const std::map<std::string, std::string>& headers) {
  return request(port, http::verb::post, target, body.dump(), headers);
}

std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

double metric_value(const std::string& text, const std::string& name) {
  size_t pos = text.find("\n" + name + "{");
  if (pos == std::string::npos) return -1.0;
  size_t sp = text.find("} ", pos);
  return std::stod(text.substr(sp + 2, text.find('\n', sp) - sp - 2));
}

}  // namespace ecoserve::server::testing
