// HttpServer: the OpenAI-compatible HTTP front end over a GenerationBackend
// (one instance, or many behind a router).
//
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models,
// GET /health, GET /metrics. Requests are parsed and validated here, prompts
// rendered (chat template) and tokenized, then submitted to the backend
// (n choices = n requests with the same prompt, sharing its cached blocks);
// token events are detokenized incrementally, stop strings applied, and
// answered as JSON or as SSE (`stream: true`). Errors use OpenAI's shape.
//
// Threading: Boost.Asio io_context run by `num_io_threads` threads of its own;
// each connection runs on its strand. Parsing and tokenizing a generation request
// run on `num_tokenizer_threads` threads of their own. No exception escapes a
// connection's handlers: a failure answers 500 (or closes a started response).
// Backend events (delivered on backend threads) are posted to the connection's
// strand. A client that hangs up while its request runs cancels it.
// Ownership: borrows the backend and the Clock (both must outlive the server's
// threads: call stop() before destroying them... and destroy the backend before
// the HttpServer, since its pending sinks hold connections).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "cluster/generation_backend.h"
#include "model/llama_model.h"

namespace ecoserve::server {

class ServerMetrics;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                 // 0 = pick a free port (see HttpServer::port())
  int32_t num_io_threads = 2;
  std::string api_key;                  // non-empty: /v1/* require "Authorization: Bearer <key>"
  std::string served_model_name;        // the `model` clients must name ("" = any is refused but "")
  std::string chat_template;            // template name override; "" = detect from the GGUF
  int64_t max_body_bytes = 4ll << 20;   // larger bodies get 413
  // /health is 503 when the loop's heartbeat is older than health_timeout_seconds
  // between steps, or its current step has run longer than step_timeout_seconds.
  double health_timeout_seconds = 5.0;
  double step_timeout_seconds = 300.0;
  // Slow or idle clients (like nginx's client_header_timeout, client_body_timeout,
  // keepalive_timeout); 0 = no limit. A late head or body gets 408 and the connection closes.
  double header_timeout_seconds = 10.0;      // from connection open or first byte to the end of the head
  double body_timeout_seconds = 60.0;        // from the end of the head to the end of the body
  double keep_alive_timeout_seconds = 30.0;  // idle time between requests on one connection
  double send_timeout_seconds = 60.0;        // a response the client takes no byte of for this long is dropped
  // Open connections; more are answered 503 and closed. Lowered to fit the open-file limit.
  int32_t max_connections = 1024;
  // Threads that parse, validate and tokenize generation requests (off the I/O threads,
  // so /health answers while large prompts are tokenized).
  int32_t num_tokenizer_threads = 2;
  // SLOs given to requests that bring none (`slo_ttft_ms`/`slo_tpot_ms` in the
  // body); 0 = none. The time-aware strategies (padg) schedule by them.
  double default_slo_ttft_ms = 0.0;
  double default_slo_tpot_ms = 0.0;
  // Metrics shared with the caller (e.g. also fed by InstanceOptions::on_step); null = the server makes its own.
  std::shared_ptr<ServerMetrics> metrics;
};

class HttpServer {
 public:
  // INVALID_ARGUMENT for an unknown chat template name. Does not bind yet.
  // `backend` (borrowed; must outlive the server) generates; its model's tokenizer
  // and chat template serve the requests.
  static StatusOr<std::unique_ptr<HttpServer>> create(cluster::GenerationBackend* backend, const ServerOptions& options,
                                                      const Clock* clock);
  ~HttpServer();  // stop()

  // Binds, listens and starts the io threads. UNAVAILABLE naming host:port when binding fails.
  Status start();
  // The bound port (after start()).
  uint16_t port() const;
  // Stops accepting connections; new generation requests on open connections get 503.
  void begin_drain();
  // Generation requests whose response is not completely written yet (from the
  // moment the body is read until the last byte, e.g. `data: [DONE]`, is sent).
  int32_t active_requests() const;
  // Bytes written to clients so far, all connections (shutdown waits while this grows).
  uint64_t bytes_written() const;
  // Stops the io threads (open connections are dropped). Idempotent.
  void stop();

  const std::string& served_model_name() const;
  std::string_view chat_template_name() const;

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ecoserve::server
