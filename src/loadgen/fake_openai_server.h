// FakeOpenAiServer (test helper): a tiny OpenAI-compatible streaming server on
// 127.0.0.1 with a deterministic latency model, for testing `ecoserve bench`.
//
// Latency model, driven by server-side arrival times only: when a request arrives at
// time a, `load` = the number of earlier requests that arrived in (a - busy_ms, a].
//   first token at a + base_ttft_ms + per_load_ms * load
//   token i (i >= 1) at first + i * tpot_ms
// It streams max_tokens chunks "tok " (completions: choices[0].text, chat:
// choices[0].delta.content) in HTTP/1.1 chunked encoding, then a usage chunk
// (unless send_usage is false) and "data: [DONE]".
// Modes: fail_status != 0 answers every request with that status and a JSON error;
// reset_connections closes the socket right after reading the request.
// GET /v1/models lists one model, "fake-model". With api_key set, every request
// (GET /v1/models included) without "Authorization: Bearer <api_key>" gets a 401 and
// an OpenAI-style error ("missing API key" / "incorrect API key provided"); the
// Authorization header of every request is kept for tests (authorizations()), and
// the body of every POST (bodies()).
// Runs its own io_context thread; the destructor stops it. Thread-safe counters.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace ecoserve::loadgen::testing {

struct FakeServerOptions {
  double base_ttft_ms = 5;
  double per_load_ms = 10;
  double busy_ms = 100;
  double tpot_ms = 2;
  bool send_usage = true;
  int fail_status = 0;
  bool reset_connections = false;
  std::string api_key{};  // non-empty: required as "Authorization: Bearer <api_key>"
};

class FakeOpenAiServer {
 public:
  static StatusOr<std::unique_ptr<FakeOpenAiServer>> start(const FakeServerOptions& options);
  ~FakeOpenAiServer();
  int port() const;
  int requests_received() const;
  // "METHOD TARGET -> Authorization value" per request received ("" when absent), in order.
  std::vector<std::string> authorizations() const;
  // The body of every POST received, in order of arrival.
  std::vector<std::string> bodies() const;

  struct Impl;

 private:
  explicit FakeOpenAiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ecoserve::loadgen::testing
