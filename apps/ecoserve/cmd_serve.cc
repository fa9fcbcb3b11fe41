// ecoserve serve: one instance behind the OpenAI-compatible HTTP server.
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <signal.h>


#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "apps/ecoserve/commands.h"
#include "base/clock.h"
#include "base/log.h"
#include "engine/model_runner.h"
#include "cluster/instance_backend.h"
#include "cluster/router.h"
#include "model/llama_model.h"
#include "server/http_server.h"
#include "server/server_metrics.h"

namespace ecoserve::apps {

namespace {

struct ServeArgs {
  bool mmap = false;  // map the GGUF instead of reading it into huge pages
  std::string model;
  std::string policy = "chunked";
  int32_t threads = 0;
  std::string host = "127.0.0.1";
  int32_t port = 8000;
  int32_t io_threads = 2;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t chunk_size = 0;
  int32_t kv_cache_mb = 0;  // 0 = auto
  int32_t block_size = 16;
  engine::KvCacheType kv_cache_type = engine::KvCacheType::kF32;
  int32_t ctx = 0;
  int32_t max_waiting = 256;
  std::string api_key;
  std::string chat_template;
  std::string served_model_name;
  double drain_timeout = 30.0;
  bool prefix_caching = true;
  std::string preemption_mode = "recompute";
  int32_t swap_mb = 0;
  int64_t max_body_bytes = 4ll << 20;
  int32_t tokenizer_threads = 2;
  double header_timeout = 10.0;
  double body_timeout = 60.0;
  double keep_alive_timeout = 30.0;
  double send_timeout = 60.0;
  int32_t max_connections = 1024;
  int32_t instances = 1;
  std::string strategy = "nodg";
  std::string router = "least-loaded";
  int32_t threads_per_instance = 0;
  int32_t prefill_instances = 1;
  int32_t remote_prefill_min_tokens = 0;
};

// The write end of the shutdown pipe, for the signal handler: a handler gets no
// context, so this one value is process-wide (set once by ShutdownSignals::install).
std::atomic<int> g_shutdown_fd{-1};

void on_shutdown_signal(int sig) {
  const int fd = g_shutdown_fd.load();
  if (fd < 0) return;
  const char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t n = ::write(fd, &c, 1);  // async-signal-safe; a full pipe just drops it
}

// SIGINT/SIGTERM -> a byte in a pipe. wait() returns the first signal's number.
class ShutdownSignals {
 public:
  ~ShutdownSignals() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  Status install() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) return unavailable_error("serve: pipe2 failed");
    g_shutdown_fd.store(fds_[1]);
    struct sigaction sa = {};
    sa.sa_handler = on_shutdown_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (::sigaction(SIGINT, &sa, nullptr) != 0 || ::sigaction(SIGTERM, &sa, nullptr) != 0) {
      return unavailable_error("serve: sigaction failed");
    }
    return ok_status();
  }
  int wait() {
    for (;;) {
      pollfd p{fds_[0], POLLIN, 0};
      if (::poll(&p, 1, -1) < 0 && errno != EINTR) return SIGTERM;
      char c = 0;
      if (::read(fds_[0], &c, 1) == 1) return static_cast<unsigned char>(c);
    }
  }

 private:
  int fds_[2] = {-1, -1};
};

void wait_until(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int run_serve(const ServeArgs& a) {
  // SIGINT/SIGTERM: a handler (any thread may run it, including threads libraries
  // started before main(), e.g. OpenBLAS's pool, which a signal mask set here would
  // not cover) writes the signal number to a pipe the main thread reads below. The
  // first one starts the drain; later ones are ignored.
  ShutdownSignals shutdown_signals;
  if (Status s = shutdown_signals.install(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }

  auto model = model::LlamaModel::load(a.model, a.mmap ? model::GgufFile::Load::kMmap : model::GgufFile::Load::kReadHugePages);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  const int32_t n = a.instances;
  engine::EngineOptions eo;
  // Each instance has its own engine and thread pool: --threads-per-instance, else
  // --threads (or every core) shared out.
  const int32_t cores = std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
  eo.num_threads = a.threads_per_instance > 0 ? a.threads_per_instance
                   : n == 1                   ? a.threads
                                              : std::max(1, (a.threads > 0 ? a.threads : cores) / n);
  eo.block_size = a.block_size;
  eo.max_context = a.ctx;
  eo.kv_cache_type = a.kv_cache_type;
  const auto& cfg = (*model)->config();
  const int64_t context = a.ctx > 0 ? a.ctx : cfg.n_ctx_train;
  const int64_t block_bytes = engine::ModelRunner::kv_bytes_per_block(cfg, a.block_size, eo.kv_cache_type);
  if (a.kv_cache_mb > 0) {
    eo.kv_cache_bytes = static_cast<int64_t>(a.kv_cache_mb) << 20;
  } else {
    // Auto: room for max_num_seqs full-context sequences, at most a quarter of RAM. The
    // memory is reserved, not committed: it is touched only as blocks fill.
    const int64_t ram = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    const int64_t want = (a.max_num_seqs * context + a.block_size) / a.block_size * block_bytes;
    eo.kv_cache_bytes =
        std::max(block_bytes * ((context + a.block_size - 1) / a.block_size), std::min(want, ram / 4 / n));
  }
  if (a.preemption_mode == "swap") {
    // Host memory for swapped-out blocks: --swap-space-mb, or as much as the device KV.
    eo.num_host_blocks = static_cast<int32_t>(a.swap_mb > 0 ? (static_cast<int64_t>(a.swap_mb) << 20) / block_bytes
                                                            : eo.kv_cache_bytes / block_bytes);
  }
  instance::InstanceOptions io;
  io.policy = a.policy;
  io.max_num_seqs = a.max_num_seqs;
  io.max_num_batched_tokens = a.max_num_batched_tokens;
  io.chunk_size = a.chunk_size > 0 ? a.chunk_size : a.max_num_batched_tokens;
  io.max_waiting = a.max_waiting;
  io.enable_prefix_caching = a.prefix_caching;
  io.preemption_mode = a.preemption_mode;
  const std::string served_model_name =
      a.served_model_name.empty() ? std::filesystem::path(a.model).stem().string() : a.served_model_name;
  // Per-step scheduler/execute measurements, fed on the loop thread (ServerMetrics is thread-safe).
  auto step_metrics = std::make_shared<server::ServerMetrics>(served_model_name);
  io.on_step = [step_metrics](const instance::StepStats& st) { step_metrics->observe_step(st); };
  SteadyClock clock;
  std::vector<std::unique_ptr<cluster::GenerationBackend>> members;
  const bool fudg = a.strategy == "fudg";
  if (fudg && (n < 2 || a.prefill_instances < 1 || a.prefill_instances >= n)) {
    std::fprintf(stderr, "error: --strategy fudg needs --instances >= 2 and 1 <= --prefill-instances < --instances "
                         "(got %d instances, %d prefill)\n", n, a.prefill_instances);
    return 1;
  }
  for (int32_t i = 0; i < n; ++i) {
    const bool prefill = fudg && i < a.prefill_instances;
    instance::InstanceOptions member_options = io;
    if (prefill) member_options.policy = "prefill-only";  // requests leave after their first token
    auto instance = cluster::InstanceBackend::create(*model, eo, member_options, &clock);
    if (!instance.ok()) {
      std::fprintf(stderr, "error: %s\n", instance.status().message().c_str());
      return 1;
    }
    (*instance)->set_role(!fudg ? "mixed" : prefill ? "prefill" : "decode");
    std::fprintf(stderr,
                 "[ecoserve] instance %d (%s): %d threads, KV cache %d blocks of %d tokens, %s (%.0f MiB reserved), %d "
                 "host swap blocks\n",
                 i, !fudg ? "mixed" : prefill ? "prefill" : "decode", eo.num_threads > 0 ? eo.num_threads : cores, (*instance)->num_kv_blocks(), a.block_size,
                 engine::kv_cache_type_name(eo.kv_cache_type),
                 (*instance)->num_kv_blocks() * static_cast<double>(block_bytes) / (1 << 20),
                 (*instance)->num_host_blocks());
    members.push_back(std::move(*instance));
  }
  StatusOr<std::unique_ptr<cluster::GenerationBackend>> backend = invalid_argument_error("no instance");
  if (n == 1) {
    backend = std::move(members[0]);
  } else {
    cluster::RouterOptions ro;
    ro.router = a.router;
    ro.strategy = a.strategy;
    ro.num_prefill_instances = fudg ? a.prefill_instances : 0;
    ro.dispatch.remote_prefill_min_tokens = a.remote_prefill_min_tokens;
    auto router = cluster::Router::create(std::move(members), ro, &clock);
    if (!router.ok()) {
      std::fprintf(stderr, "error: %s\n", router.status().message().c_str());
      return 1;
    }
    backend = std::unique_ptr<cluster::GenerationBackend>(std::move(*router));
  }
  server::ServerOptions so;
  so.host = a.host;
  so.port = static_cast<uint16_t>(a.port);
  so.num_io_threads = a.io_threads;
  so.api_key = a.api_key;
  so.chat_template = a.chat_template;
  so.max_body_bytes = a.max_body_bytes;
  so.num_tokenizer_threads = a.tokenizer_threads;
  so.header_timeout_seconds = a.header_timeout;
  so.body_timeout_seconds = a.body_timeout;
  so.keep_alive_timeout_seconds = a.keep_alive_timeout;
  so.send_timeout_seconds = a.send_timeout;
  so.max_connections = a.max_connections;
  so.served_model_name = served_model_name;
  so.metrics = step_metrics;  // /metrics also exports the per-step histograms
  auto server = server::HttpServer::create(backend->get(), so, &clock);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", server.status().message().c_str());
    return 1;
  }
  (*backend)->start();
  if (Status s = (*server)->start(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    (*backend)->stop();
    return 1;
  }
  const std::string host = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  std::printf("ecoserve listening on http://%s:%u (model %s, policy %s, %d instance%s, strategy %s%s)\n",
              host.c_str(), (*server)->port(), so.served_model_name.c_str(), a.policy.c_str(), n, n == 1 ? "" : "s",
              a.strategy.c_str(), n > 1 ? (", router " + a.router).c_str() : "");
  std::fflush(stdout);

  const int sig = shutdown_signals.wait();
  std::fprintf(stderr, "[ecoserve] %s: draining (up to %g s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               a.drain_timeout);
  (*server)->begin_drain();
  (*backend)->begin_drain();
  wait_until([&] { return (*backend)->idle() && (*server)->active_requests() == 0; }, a.drain_timeout);
  (*backend)->stop();  // aborts whatever is left
  // The scheduler-overhead figure: plan time per step (median, p99) and its share of the step.
  const std::string summary = server::format_step_summary(step_metrics->step_summary());
  spdlog::info("{}", summary);
  if (!spdlog::should_log(spdlog::level::info)) std::fprintf(stderr, "[ecoserve] %s\n", summary.c_str());
  // The aborted requests' last chunks and `data: [DONE]` are queued: wait until every
  // response is written while clients keep taking bytes (a slow reader of a long
  // stream is still served); give up after kStallSeconds without progress anywhere
  // or after --send-timeout in all.
  constexpr double kStallSeconds = 2.0;
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(a.send_timeout > 0 ? std::max(a.send_timeout, kStallSeconds) : 1e9);
  uint64_t written = (*server)->bytes_written();
  auto last_progress = std::chrono::steady_clock::now();
  while ((*server)->active_requests() > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (const uint64_t w = (*server)->bytes_written(); w != written) {
      written = w;
      last_progress = now;
    }
    if (now >= give_up || now - last_progress >= std::chrono::duration<double>(kStallSeconds)) {
      spdlog::warn("{} response(s) not fully taken by their clients; closing them", (*server)->active_requests());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  (*server)->stop();
  backend->reset();  // its pending sinks reference connections of the server
  server->reset();
  std::fprintf(stderr, "[ecoserve] stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve one model over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, "
               "/v1/models, /health, /metrics). SIGINT/SIGTERM drain and exit 0.");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--mmap", a->mmap,
                  "map the model file (shared page cache, less memory) instead of reading it into huge-page memory (faster decode)");
  cmd->add_option("--policy", a->policy, "instance scheduling policy: prefill-first (vLLM) or chunked (Sarathi-Serve)")
      ->capture_default_str()
      ->check(CLI::IsMember({"prefill-first", "chunked"}));
  cmd->add_option("-t,--threads", a->threads, "compute threads; 0 = all cores")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--host", a->host, "address to bind")->capture_default_str();
  cmd->add_option("--port", a->port, "TCP port; 0 = pick a free port (printed at start-up)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--io-threads", a->io_threads, "HTTP I/O threads")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "most sequences in a running batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "token budget of one step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--chunk-size", a->chunk_size, "largest prefill chunk (chunked policy); 0 = the token budget")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-mb", a->kv_cache_mb, "KV-cache memory in MiB (sets the number of blocks); 0 = room for --max-num-seqs full-context sequences, at most 1/4 of RAM (reserved lazily)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--block-size", a->block_size, "KV block size in tokens")->capture_default_str()->check(CLI::Range(1, 4096));
  add_kv_cache_dtype_option(cmd, a->kv_cache_type);
  cmd->add_option("-c,--ctx-size", a->ctx, "context length per request; 0 = the model's")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-waiting", a->max_waiting, "waiting-queue bound; requests beyond it get HTTP 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY' on /v1/* (default: no key)");
  cmd->add_option("--chat-template", a->chat_template,
                  "chat template: llama-2, llama-3, chatml, zephyr or mistral (default: detected from the GGUF, "
                  "chatml when unknown)")
      ->check(CLI::IsMember({"llama-2", "llama2", "llama-3", "llama3", "chatml", "zephyr", "mistral"}));
  cmd->add_option("--served-model-name", a->served_model_name,
                  "model name clients must use (default: the GGUF file name without extension)");
  cmd->add_option("--drain-timeout", a->drain_timeout,
                  "on SIGINT/SIGTERM, seconds to let running requests finish before aborting them")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--enable-prefix-caching,!--no-prefix-caching", a->prefix_caching,
                "share the KV blocks of common prompt prefixes (default: on)");
  cmd->add_option("--preemption-mode", a->preemption_mode,
                  "when KV blocks run out: recompute (drop and requeue) or swap (to host memory)")
      ->capture_default_str()
      ->check(CLI::IsMember({"recompute", "swap"}));
  cmd->add_option("--swap-space-mb", a->swap_mb, "host memory for swapped-out KV in MiB; 0 = as much as the KV cache")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-body-bytes", a->max_body_bytes, "largest request body; larger ones get HTTP 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  cmd->add_option("--tokenizer-threads", a->tokenizer_threads,
                  "threads that parse and tokenize requests (kept off the HTTP I/O threads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--header-timeout", a->header_timeout,
                  "seconds a client has to send a request's head; late ones get 408 and are closed; 0 = no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--body-timeout", a->body_timeout,
                  "seconds a client has to send a request's body after its head; 0 = no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--keep-alive-timeout", a->keep_alive_timeout,
                  "seconds an idle kept-alive connection stays open between requests; 0 = no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--send-timeout", a->send_timeout,
                  "seconds a response may wait for its client to take a byte before the connection is dropped (and "
                  "its generation cancelled); also bounds how long shutdown waits for slow readers; 0 = no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--instances", a->instances,
                  "instances in this process, each with its own engine, thread pool and KV cache, behind one endpoint")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--strategy", a->strategy,
                  "how instances share prefill and decode: nodg (every instance mixes both; the router spreads "
                  "requests) or fudg (prefill instances and decode instances; the prompt's KV cache moves after "
                  "the first token)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nodg", "fudg"}));
  cmd->add_option("--prefill-instances", a->prefill_instances,
                  "fudg: how many of the instances only prefill (the rest decode): XpYd")
      ->capture_default_str()
      ->check(CLI::Range(1, 255));
  cmd->add_option("--remote-prefill-min-tokens", a->remote_prefill_min_tokens,
                  "fudg: shorter prompts prefill on their decode instance instead of moving their KV (conditional "
                  "disaggregation); 0 = always remote")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--router", a->router,
                  "request routing across instances (nodg): round-robin, least-loaded (fewest queued and running "
                  "tokens) or cache-aware (longest cached prefix, traded against load)")
      ->capture_default_str()
      ->check(CLI::IsMember({"round-robin", "least-loaded", "cache-aware"}));
  cmd->add_option("--threads-per-instance", a->threads_per_instance,
                  "compute threads of each instance; 0 = --threads (or every core) divided among the instances")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-connections", a->max_connections,
                  "most open client connections (more get 503 and are closed); lowered to fit 'ulimit -n'")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->callback([a, &exit_code] { exit_code = run_serve(*a); });
}

}  // namespace ecoserve::apps
