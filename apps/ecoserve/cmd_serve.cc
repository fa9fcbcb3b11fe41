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
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "apps/ecoserve/commands.h"
#include "apps/ecoserve/serve_args.h"
#include "base/clock.h"
#include "base/log.h"
#include "engine/cost_profiler.h"
#include "engine/model_runner.h"
#include "policy/profiled_cost_model.h"
#include "cluster/instance_backend.h"
#include "cluster/instance_service.h"
#include "cluster/remote_backend.h"
#include "cluster/router.h"
#include "policy/migration_planner.h"
#include "base/subprocess.h"
#include "model/llama_model.h"
#include "server/http_server.h"
#include "server/server_metrics.h"

namespace ecoserve::apps {

namespace {

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

// The engine and instance options the flags give, for `n` instances sharing this host.
void engine_and_instance_options(const ServeArgs& a, const model::LlamaModel& m, int32_t n, engine::EngineOptions& eo,
                                 instance::InstanceOptions& io) {
  const int32_t cores = std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
  // Each instance has its own engine and thread pool: --threads-per-instance, else
  // --threads (or every core) shared out.
  eo.num_threads = a.threads_per_instance > 0 ? a.threads_per_instance
                   : n == 1                   ? a.threads
                                              : std::max(1, (a.threads > 0 ? a.threads : cores) / n);
  eo.block_size = a.block_size;
  eo.max_context = a.ctx;
  eo.kv_cache_type = a.kv_cache_type;
  eo.isa = a.isa;
  eo.bf16_weights = *kernels::parse_bf16_weights_mode(a.bf16_weights, "--bf16-weights");  // checked by the flag
  // Instances in processes of their own each make their tiles: each gets its part of the
  // share. In-process instances share one set (run_serve: EngineOptions::bf16_tiles).
  eo.bf16_weights_share = a.multi_process ? a.bf16_weights_share / n : a.bf16_weights_share;
  const auto& cfg = m.config();
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
  io.policy = a.policy;
  io.max_num_seqs = a.max_num_seqs;
  io.max_num_batched_tokens = a.max_num_batched_tokens;
  io.chunk_size = a.chunk_size > 0 ? a.chunk_size : a.max_num_batched_tokens;
  io.max_waiting = a.max_waiting;
  io.enable_prefix_caching = a.prefix_caching;
  io.preemption_mode = a.preemption_mode;
}

// One embedded instance of `role` ("mixed", "prefill" or "decode"), with a log line.
StatusOr<std::unique_ptr<cluster::InstanceBackend>> make_instance(std::shared_ptr<const model::LlamaModel> m,
                                                                   const engine::EngineOptions& eo,
                                                                   instance::InstanceOptions io,
                                                                   const std::string& role, const std::string& name,
                                                                   const Clock* clock) {
  if (role == "prefill") io.policy = "prefill-only";  // requests leave after their first token
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<cluster::InstanceBackend> instance,
                       cluster::InstanceBackend::create(m, eo, io, clock));
  instance->set_role(role);
  const int32_t cores = std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
  const int64_t block_bytes = engine::ModelRunner::kv_bytes_per_block(m->config(), eo.block_size, eo.kv_cache_type);
  std::fprintf(stderr,
               "[ecoserve] instance %s (%s): %d threads, KV cache %d blocks of %d tokens, %s (%.0f MiB reserved), %d "
               "host swap blocks, %s kernels%s\n",
               name.c_str(), role.c_str(), eo.num_threads > 0 ? eo.num_threads : cores, instance->num_kv_blocks(),
               eo.block_size, engine::kv_cache_type_name(eo.kv_cache_type),
               instance->num_kv_blocks() * static_cast<double>(block_bytes) / (1 << 20), instance->num_host_blocks(),
               std::string(kernels::isa_name(eo.isa)).c_str(),
               instance->bf16_weights_decision() == "off"
                   ? ""
                   : (", bf16 weights " + instance->bf16_weights_decision()).c_str());
  return instance;
}

std::string model_id_of(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return std::filesystem::path(path).filename().string() + ":" + (ec ? std::string("?") : std::to_string(size));
}

// `ecoserve instance` processes started by `serve --multi-process`: one per
// instance, on loopback ports they pick; stopped with SIGTERM when serve exits.
struct ChildInstances {
  std::mutex mu;  // spawn_instance may run on an HTTP worker (POST /admin/instances)
  std::vector<std::unique_ptr<Subprocess>> children;
  std::vector<std::string> addresses;
  ~ChildInstances() {
    for (auto& c : children) c->stop(SIGTERM);
  }
};

// Starts `ecoserve instance` number `i` and returns its address (children own it).
StatusOr<std::string> spawn_instance(const ServeArgs& a, const engine::EngineOptions& eo, int32_t i,
                                     ChildInstances& out) {
  char self[4096] = {};
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return unavailable_error("cannot find the ecoserve binary (/proc/self/exe)");
  const bool fudg = a.strategy == "fudg";
  const std::string role = !fudg ? "mixed" : i < a.prefill_instances ? "prefill" : "decode";
  std::vector<std::string> argv = {
      std::string(self, static_cast<size_t>(len)), "instance", "--listen", "tcp://127.0.0.1:0", "-m", a.model,
      "--role", role, "--threads", std::to_string(eo.num_threads), "--policy", a.policy,
      "--max-num-seqs", std::to_string(a.max_num_seqs), "--max-num-batched-tokens",
      std::to_string(a.max_num_batched_tokens), "--chunk-size", std::to_string(a.chunk_size),
      "--kv-cache-mb", std::to_string(std::max<int64_t>(1, eo.kv_cache_bytes >> 20)), "--block-size",
      std::to_string(a.block_size), "--kv-cache-dtype", engine::kv_cache_type_name(a.kv_cache_type), "--isa",
      std::string(kernels::isa_name(a.isa)), "-c",
      std::to_string(a.ctx), "--max-waiting", std::to_string(a.max_waiting),
      a.prefix_caching ? "--enable-prefix-caching" : "--no-prefix-caching", "--preemption-mode",
      a.preemption_mode, "--swap-space-mb", std::to_string(a.swap_mb), "--name", std::to_string(i)};
  if (a.mmap) argv.push_back("--mmap");
  // Each child is one instance: it gets its share of auto's memory already divided.
  argv.insert(argv.end(), {"--bf16-weights=" + a.bf16_weights, "--bf16-weights-share",
                           fmt::format("{}", eo.bf16_weights_share)});
  const std::string profile = !a.profile.empty() ? a.profile : engine::default_cost_profile_path(a.model);
  if (a.policy == "temporal" && std::filesystem::exists(profile)) argv.insert(argv.end(), {"--profile", profile});
  auto child = std::make_unique<Subprocess>();
  ECO_RETURN_IF_ERROR(child->start(argv));
  StatusOr<std::string> line = child->wait_for_line("ecoserve instance listening on ", std::chrono::seconds(120));
  if (!line.ok()) return line.status().with_prefix("instance " + std::to_string(i) + " did not start");
  std::lock_guard<std::mutex> lock(out.mu);
  out.addresses.push_back(line->substr(0, line->find(' ')));
  out.children.push_back(std::move(child));
  return out.addresses.back();
}

Status spawn_instances(const ServeArgs& a, const engine::EngineOptions& eo, ChildInstances& out) {
  for (int32_t i = 0; i < a.instances; ++i) ECO_RETURN_IF_ERROR(spawn_instance(a, eo, i, out).status());
  return ok_status();
}

StatusOr<std::unique_ptr<cluster::RemoteBackend>> connect_instance(const ServeArgs& a, const std::string& address,
                                                                   const Clock* clock) {
  cluster::RemoteBackendOptions ro;
  ro.address = address;
  ro.peer_timeout = from_seconds(std::max(0.2, a.heartbeat_timeout * 0.6));
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<cluster::RemoteBackend> r, cluster::RemoteBackend::connect(ro, clock));
  const transport::InstanceInfo& info = r->info();
  std::fprintf(stderr, "[ecoserve] instance %s: role %s, model %s, context %d, blocks of %d tokens\n",
               address.c_str(), info.role.c_str(), info.model_id.c_str(), info.max_context, info.block_size);
  return r;
}

// Connects to running instances and loads the model they serve (from the path the
// first one reports, or --model): the router tokenizes and renders templates.
StatusOr<std::vector<std::unique_ptr<cluster::GenerationBackend>>> connect_instances(
    const ServeArgs& a, const std::vector<std::string>& addresses, const Clock* clock,
    std::shared_ptr<const model::LlamaModel>* model_out) {
  std::vector<std::unique_ptr<cluster::RemoteBackend>> remotes;
  for (const std::string& address : addresses) {
    ECO_ASSIGN_OR_RETURN(std::unique_ptr<cluster::RemoteBackend> r, connect_instance(a, address, clock));
    const transport::InstanceInfo& info = r->info();
    if (!remotes.empty() && info.model_id != remotes[0]->info().model_id) {
      return failed_precondition_error("instance {} serves {}, instance {} serves {}: a router fronts one model",
                                       address, info.model_id, addresses[0], remotes[0]->info().model_id);
    }
    const bool fudg = a.strategy == "fudg";
    const size_t i = remotes.size();
    const std::string want = !fudg ? "mixed" : static_cast<int32_t>(i) < a.prefill_instances ? "prefill" : "decode";
    const bool fits = info.role == want || (fudg && want == "decode" && info.role == "mixed");
    if (a.strategy == "padg" && info.policy != "temporal") {
      return failed_precondition_error("instance {} runs the '{}' policy; padg needs '--policy temporal' on every instance",
                                       address, info.policy);
    }
    if (!fits) {
      return failed_precondition_error(
          "instance {} runs as '{}' but --strategy {} needs '{}' there (start it with --role {}; with fudg the "
          "first --prefill-instances instances prefill)",
          address, info.role, a.strategy, want, want);
    }
    remotes.push_back(std::move(r));
  }
  const std::string path = !a.model.empty() ? a.model : remotes[0]->info().model_path;
  auto model = model::LlamaModel::load(path, model::GgufFile::Load::kMmap);
  if (!model.ok()) return model.status().with_prefix("the router loads the model's tokenizer from " + path);
  *model_out = *model;
  std::vector<std::unique_ptr<cluster::GenerationBackend>> members;
  for (auto& r : remotes) {
    r->set_model(*model);
    members.push_back(std::move(r));
  }
  return members;
}

// What POST /admin/instances adds: the running instance at `address` (it must
// serve the same model, as a mixed instance), else a new one like the others: an
// `ecoserve instance` child with `children`, an embedded engine with `eo`/`io`.
using InstanceFactory = std::function<StatusOr<std::unique_ptr<cluster::GenerationBackend>>(const std::string&)>;
InstanceFactory instance_factory(const ServeArgs& a, std::shared_ptr<const model::LlamaModel> model,
                                 const engine::EngineOptions& eo, const instance::InstanceOptions& io,
                                 const Clock* clock, ChildInstances* children, bool embedded) {
  auto next = std::make_shared<std::atomic<int32_t>>(a.instances);
  return [a, model, eo, io, clock, children, embedded, next](
             const std::string& address) -> StatusOr<std::unique_ptr<cluster::GenerationBackend>> {
    std::string where = address;
    if (where.empty() && children) {
      ECO_ASSIGN_OR_RETURN(where, spawn_instance(a, eo, (*next)++, *children));
    }
    if (!where.empty()) {
      ECO_ASSIGN_OR_RETURN(std::unique_ptr<cluster::RemoteBackend> r, connect_instance(a, where, clock));
      if (r->info().model_id != engine::model_file_id(a.model)) {
        return invalid_argument_error("instance {} serves {}, this router {}", where, r->info().model_id,
                                      engine::model_file_id(a.model));
      }
      if (a.strategy == "padg" && r->info().policy != "temporal") {
        return invalid_argument_error("instance {} runs the '{}' policy; padg needs '--policy temporal'", where,
                                      r->info().policy);
      }
      if (r->info().role != "mixed") {
        return invalid_argument_error("instance {} runs as '{}'; added instances must be mixed", where, r->info().role);
      }
      r->set_model(model);
      return std::unique_ptr<cluster::GenerationBackend>(std::move(r));
    }
    if (!embedded) return invalid_argument_error("give the 'address' of a running `ecoserve instance` to attach");
    ECO_ASSIGN_OR_RETURN(std::unique_ptr<cluster::InstanceBackend> b,
                         make_instance(model, eo, io, "mixed", std::to_string((*next)++), clock));
    return std::unique_ptr<cluster::GenerationBackend>(std::move(b));
  };
}

// padg: the cost model the temporal policy and the router predict with: the
// profile at --profile (default MODEL.profile.json beside the model) or, when
// there is none, a quick one measured now with the instances' thread count.
StatusOr<std::shared_ptr<const policy::CostModel>> load_cost_model(const ServeArgs& a,
                                                                   std::shared_ptr<const model::LlamaModel> m,
                                                                   const engine::EngineOptions& eo) {
  const std::string path = !a.profile.empty() ? a.profile : engine::default_cost_profile_path(a.model);
  StatusOr<CostProfile> profile = engine::load_cost_profile(path);
  if (profile.ok()) {
    if (profile->model_id != engine::model_file_id(a.model)) {
      spdlog::warn("cost profile {} was measured for {}, not {}: predictions may be off (run `ecoserve profile cost`)",
                   path, profile->model_id, engine::model_file_id(a.model));
    }
    std::fprintf(stderr, "[ecoserve] cost profile: %s (%zu prefill and %zu decode points, %d threads)\n", path.c_str(),
                 profile->prefill.size(), profile->decode.size(), profile->threads);
  } else if (profile.status().code() == StatusCode::kNotFound && a.profile.empty()) {
    const SteadyClock clock;
    engine::CostProfilerOptions po = engine::quick_cost_profiler_options(&clock, a.chunk_size > 0 ? a.chunk_size : a.max_num_batched_tokens);
    po.model_id = engine::model_file_id(a.model);
    const TimePoint t0 = clock.now();
    profile = engine::measure_cost_profile(std::move(m), eo, po);
    if (!profile.ok()) return profile.status().with_prefix("measuring a cost profile");
    std::fprintf(stderr,
                 "[ecoserve] no cost profile at %s: measured a quick one in %.1f s (%d threads); `ecoserve profile "
                 "cost -m %s -t %d` measures a finer one there\n",
                 path.c_str(), to_seconds(clock.now() - t0), profile->threads, a.model.c_str(), profile->threads);
  } else {
    return profile.status();
  }
  ECO_ASSIGN_OR_RETURN(std::unique_ptr<policy::ProfiledCostModel> cm, policy::ProfiledCostModel::create(*profile));
  return std::shared_ptr<const policy::CostModel>(std::move(cm));
}

// Serves `backend` over HTTP until SIGINT/SIGTERM, then drains. Returns the exit code.
int serve_http(const ServeArgs& a, std::unique_ptr<cluster::GenerationBackend> backend_owner,
               const std::string& served_model_name, std::shared_ptr<server::ServerMetrics> step_metrics,
               ShutdownSignals& shutdown_signals, const Clock& clock, const std::string& banner) {
  std::unique_ptr<cluster::GenerationBackend>* backend = &backend_owner;
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
  so.step_timeout_seconds = a.step_timeout;
  so.default_slo_ttft_ms = a.slo_ttft_ms;
  so.default_slo_tpot_ms = a.slo_tpot_ms;
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
  std::printf("ecoserve listening on http://%s:%u (model %s, %s)\n", host.c_str(), (*server)->port(),
              so.served_model_name.c_str(), banner.c_str());
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

// padg: switches the instances to the temporal policy, loads (or measures) the
// cost model and fills in the default SLOs. `a` and `io` are updated.
Status setup_padg(ServeArgs& a, std::shared_ptr<const model::LlamaModel> m, const engine::EngineOptions& eo,
                  instance::InstanceOptions& io, std::shared_ptr<const policy::CostModel>* cost_model) {
  const int32_t max_context = eo.max_context > 0 ? eo.max_context : m->config().n_ctx_train;
  ECO_ASSIGN_OR_RETURN(*cost_model, load_cost_model(a, std::move(m), eo));
  a.policy = io.policy = "temporal";
  io.cost_model = *cost_model;
  derive_slos(a, **cost_model, max_context);
  std::fprintf(stderr, "[ecoserve] padg: default SLOs TTFT %.0f ms, TPOT %.1f ms; macro instances of %d..%d\n",
               a.slo_ttft_ms, a.slo_tpot_ms, a.macro_min, a.macro_max);
  return ok_status();
}

int run_serve(const ServeArgs& args) {
  ServeArgs a = args;
  // SIGINT/SIGTERM: a handler (any thread may run it, including threads libraries
  // started before main(), e.g. OpenBLAS's pool, which a signal mask set here would
  // not cover) writes the signal number to a pipe the main thread reads below. The
  // first one starts the drain; later ones are ignored.
  ShutdownSignals shutdown_signals;
  if (Status s = shutdown_signals.install(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  };
  if (const std::string e = resolve_cluster_flags(a); !e.empty()) {
    std::fprintf(stderr, "error: %s\n", e.c_str());
    return 1;
  }
  const int32_t n = a.instances;
  const bool fudg = a.strategy == "fudg";
  if (fudg && (n < 2 || a.prefill_instances < 1 || a.prefill_instances >= n)) {
    std::fprintf(stderr, "error: --strategy fudg needs --instances >= 2 and 1 <= --prefill-instances < --instances "
                         "(got %d instances, %d prefill)\n", n, a.prefill_instances);
    return 1;
  }
  auto model = model::LlamaModel::load(a.model, a.mmap || a.multi_process ? model::GgufFile::Load::kMmap
                                                                          : model::GgufFile::Load::kReadHugePages);
  if (!model.ok()) return fail(model.status());
  engine::EngineOptions eo;
  instance::InstanceOptions io;
  engine_and_instance_options(a, **model, n, eo, io);
  const std::string served_model_name =
      a.served_model_name.empty() ? std::filesystem::path(a.model).stem().string() : a.served_model_name;
  // Per-step scheduler/execute measurements, fed on the loop thread (ServerMetrics is thread-safe).
  auto step_metrics = std::make_shared<server::ServerMetrics>(served_model_name);
  io.on_step = [step_metrics, delay = from_ms(a.test_step_delay_ms)](const instance::StepStats& st) {
    step_metrics->observe_step(st);
    if (delay > Duration::zero()) std::this_thread::sleep_for(delay);  // tests: a slower engine
  };
  if (!a.multi_process && n > 1) {
    // One set of bf16 tiles for every instance (they share the model): decided and made here,
    // once, beside all the instances' KV caches.
    ThreadPool pool(std::max(1, static_cast<int32_t>(std::thread::hardware_concurrency())));
    auto made = engine::make_bf16_weights(**model, eo, n * eo.kv_cache_bytes, pool);
    if (!made.ok()) return fail(made.status());
    if (made->decision != "off") {
      std::fprintf(stderr, "[ecoserve] bf16 weights %s%s\n", made->decision.c_str(),
                   made->tiles ? fmt::format(", shared by the {} instances", n).c_str() : "");
    }
    eo.bf16_tiles = made->tiles;
    if (!made->tiles) eo.bf16_weights = kernels::Bf16WeightsMode::kOff;  // decided: the instances need not
  }
  std::shared_ptr<const policy::CostModel> cost_model;
  if (a.strategy == "padg") {
    if (Status s = setup_padg(a, *model, eo, io, &cost_model); !s.ok()) return fail(s);
  }
  SteadyClock clock;
  std::vector<std::unique_ptr<cluster::GenerationBackend>> members;
  ChildInstances children;
  if (a.multi_process) {
    if (Status s = spawn_instances(a, eo, children); !s.ok()) return fail(s);
    std::shared_ptr<const model::LlamaModel> unused;
    auto connected = connect_instances(a, children.addresses, &clock, &unused);
    if (!connected.ok()) return fail(connected.status());
    members = std::move(*connected);
  } else {
    for (int32_t i = 0; i < n; ++i) {
      const std::string role = !fudg ? "mixed" : i < a.prefill_instances ? "prefill" : "decode";
      auto instance = make_instance(*model, eo, io, role, std::to_string(i), &clock);
      if (!instance.ok()) return fail(instance.status());
      members.push_back(std::move(*instance));
    }
  }
  std::unique_ptr<cluster::GenerationBackend> backend;
  if (n == 1 && !a.multi_process && a.strategy != "padg" && a.strategy != "llumnix") {
    backend = std::move(members[0]);
  } else {
    cluster::RouterOptions ro = router_options(a);
    ro.cost_model = cost_model;
    ro.make_instance = instance_factory(a, *model, eo, io, &clock, a.multi_process ? &children : nullptr, true);
    auto router = cluster::Router::create(std::move(members), ro, &clock);
    if (!router.ok()) return fail(router.status());
    backend = std::move(*router);
  }
  char banner[256];
  std::snprintf(banner, sizeof(banner), "policy %s, %d instance%s%s, strategy %s%s", a.policy.c_str(), n,
                n == 1 ? "" : "s", a.multi_process ? " in processes" : "", a.strategy.c_str(),
                n > 1 || a.multi_process ? (", router " + (a.strategy == "padg" ? std::string("padg") : a.router)).c_str() : "");
  return serve_http(a, std::move(backend), served_model_name, step_metrics, shutdown_signals, clock, banner);
}

int run_router(const ServeArgs& args) {
  ServeArgs a = args;
  ShutdownSignals shutdown_signals;
  if (Status s = shutdown_signals.install(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  if (const std::string e = resolve_cluster_flags(a); !e.empty()) {
    std::fprintf(stderr, "error: %s\n", e.c_str());
    return 1;
  }
  const int32_t n = static_cast<int32_t>(a.remote_instances.size());
  if (a.strategy == "fudg" && (n < 2 || a.prefill_instances < 1 || a.prefill_instances >= n)) {
    std::fprintf(stderr, "error: --strategy fudg needs at least two --instance and 1 <= --prefill-instances < their "
                         "number (got %d instances, %d prefill)\n", n, a.prefill_instances);
    return 1;
  }
  SteadyClock clock;
  std::shared_ptr<const model::LlamaModel> model;
  auto members = connect_instances(a, a.remote_instances, &clock, &model);
  if (!members.ok()) {
    std::fprintf(stderr, "error: %s\n", members.status().message().c_str());
    return 1;
  }
  if (a.model.empty()) a.model = std::string(model->gguf().path());
  if (a.autoscale || a.scale_up_freeness > 0) {
    std::fprintf(stderr, "error: --autoscale and --scale-up-freeness need instances this process can start (`ecoserve serve --instances N`); "
                         "a router attaches running ones with POST /admin/instances {\"address\": ...}\n");
    return 1;
  }
  cluster::RouterOptions ro = router_options(a);
  if (a.strategy == "padg") {
    // The router predicts prefill times with the instances' profile (measured here
    // when none is found: then on this host, with --threads).
    engine::EngineOptions eo;
    instance::InstanceOptions io;
    engine_and_instance_options(a, *model, 1, eo, io);
    if (Status s = setup_padg(a, model, eo, io, &ro.cost_model); !s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 1;
    }
  }
  ro.make_instance = instance_factory(a, model, {}, {}, &clock, nullptr, false);
  auto router = cluster::Router::create(std::move(*members), ro, &clock);
  if (!router.ok()) {
    std::fprintf(stderr, "error: %s\n", router.status().message().c_str());
    return 1;
  }
  const std::string path = !a.model.empty() ? a.model : std::string(model->gguf().path());
  const std::string served_model_name =
      a.served_model_name.empty() ? std::filesystem::path(path).stem().string() : a.served_model_name;
  auto metrics = std::make_shared<server::ServerMetrics>(served_model_name);
  char banner[256];
  std::snprintf(banner, sizeof(banner), "%d remote instance%s, strategy %s, router %s", n, n == 1 ? "" : "s",
                a.strategy.c_str(), a.strategy == "padg" ? "padg" : a.router.c_str());
  return serve_http(a, std::move(*router), served_model_name, metrics, shutdown_signals, clock, banner);
}

int run_instance(const ServeArgs& a) {
  ShutdownSignals shutdown_signals;
  if (Status s = shutdown_signals.install(); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  };
  auto model = model::LlamaModel::load(a.model, a.mmap ? model::GgufFile::Load::kMmap : model::GgufFile::Load::kReadHugePages);
  if (!model.ok()) return fail(model.status());
  engine::EngineOptions eo;
  instance::InstanceOptions io;
  engine_and_instance_options(a, **model, 1, eo, io);
  if (a.policy == "temporal") {
    auto cm = load_cost_model(a, *model, eo);
    if (!cm.ok()) return fail(cm.status());
    io.cost_model = *cm;
  }
  SteadyClock clock;
  auto instance = make_instance(*model, eo, io, a.role, a.served_model_name.empty() ? a.listen : a.served_model_name,
                                &clock);
  if (!instance.ok()) return fail(instance.status());
  cluster::InstanceServiceOptions so;
  so.listen = a.listen;
  so.role = a.role;
  so.policy = a.role == "prefill" ? "prefill-only" : io.policy;
  so.model_path = std::filesystem::absolute(a.model).string();
  so.model_id = model_id_of(a.model);
  so.block_size = eo.block_size;
  cluster::InstanceBackend* raw = instance->get();
  if (a.test_hooks) so.freeze_for_testing = [raw](Duration d) { raw->freeze_for_testing(d); };
  (*instance)->start();  // first: the service reports the running instance's block size
  auto service = cluster::InstanceService::create(raw, so, &clock);
  if (!service.ok()) {
    (*instance)->stop();
    return fail(service.status());
  }
  (*service)->start();
  std::printf("ecoserve instance listening on %s (model %s, role %s, wire version %u)\n",
              (*service)->endpoint().c_str(), so.model_id.c_str(), a.role.c_str(), transport::kWireVersion);
  std::fflush(stdout);
  const int sig = shutdown_signals.wait();
  std::fprintf(stderr, "[ecoserve] instance %s: draining (up to %g s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               a.drain_timeout);
  (*instance)->begin_drain();
  wait_until([&] { return (*instance)->idle(); }, a.drain_timeout);
  (*instance)->stop();   // aborts what is left; the final events still go out
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*service)->stop();
  std::fprintf(stderr, "[ecoserve] instance stopped\n");
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve one model over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, "
               "/v1/models, /health, /metrics). SIGINT/SIGTERM drain and exit 0.");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  add_engine_flags(cmd, a);
  add_http_flags(cmd, a);
  cmd->add_option("--drain-timeout", a->drain_timeout,
                  "on SIGINT/SIGTERM, seconds to let running requests finish before aborting them")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--instances", a->instances,
                  "instances in this process, each with its own engine, thread pool and KV cache, behind one endpoint")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--threads-per-instance", a->threads_per_instance,
                  "compute threads of each instance; 0 = --threads (or every core) divided among the instances")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_cluster_flags(cmd, a);
  cmd->add_option("--test-step-delay-ms", a->test_step_delay_ms,
                  "tests only: every engine step of the embedded instances also sleeps this long")
      ->group("")  // hidden from --help
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_flag("--multi-process", a->multi_process,
                "run each instance as its own `ecoserve instance` process on a loopback port, reached over ZeroMQ "
                "(what `ecoserve router` does with instances started by hand)");
  cmd->add_option("--heartbeat-timeout", a->heartbeat_timeout,
                  "seconds without a heartbeat before an instance is unhealthy (gets no requests)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->callback([a, &exit_code] { exit_code = run_serve(*a); });
}

void add_router_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "router", "Serve the OpenAI HTTP API in front of running `ecoserve instance` processes, reached over ZeroMQ "
                "(msgpack messages, versioned). The router loads the model's tokenizer from the path the first "
                "instance reports (or --model). SIGINT/SIGTERM drain and exit 0.");
  cmd->add_option("--instance", a->remote_instances,
                  "an instance's address, tcp://HOST:PORT (repeat for each; with fudg the first --prefill-instances "
                  "must run with --role prefill)")
      ->required();
  cmd->add_option("-m,--model", a->model, "the GGUF the instances serve, if its path differs on this host")
      ->check(CLI::ExistingFile);
  add_http_flags(cmd, a);
  cmd->add_option("--drain-timeout", a->drain_timeout,
                  "on SIGINT/SIGTERM, seconds to let running requests finish before aborting them")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_cluster_flags(cmd, a);
  cmd->add_option("--heartbeat-timeout", a->heartbeat_timeout,
                  "seconds without an instance's heartbeat before it is unhealthy: it gets no requests and the "
                  "requests it held fail (retried elsewhere when no token was sent yet)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->callback([a, &exit_code] { exit_code = run_router(*a); });
}

void add_instance_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "instance", "Serve one instance (engine, scheduler, KV cache) to routers over ZeroMQ: `ecoserve router "
                  "--instance tcp://HOST:PORT` fronts it. Prints 'ecoserve instance listening on tcp://...'. "
                  "SIGINT/SIGTERM drain and exit 0.");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--listen", a->listen, "ZeroMQ address to bind, tcp://HOST:PORT (port 0 picks a free one)")
      ->capture_default_str();
  cmd->add_option("--role", a->role,
                  "mixed (prefill and decode), prefill (requests leave after their first token; their KV is "
                  "held for a decode instance) or decode")
      ->capture_default_str()
      ->check(CLI::IsMember({"mixed", "prefill", "decode"}));
  cmd->add_option("--name", a->served_model_name, "the instance's name in logs (default: its address)");
  add_engine_flags(cmd, a);
  cmd->add_option("--drain-timeout", a->drain_timeout,
                  "on SIGINT/SIGTERM, seconds to let running requests finish before aborting them")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--profile", a->profile,
                  "--policy temporal: cost profile (`ecoserve profile cost`); default MODEL.profile.json beside the "
                  "model, else a quick one is measured at start-up");
  cmd->add_flag("--test-hooks", a->test_hooks, "accept test-only messages (freeze the engine); never in production");
  cmd->callback([a, &exit_code] { exit_code = run_instance(*a); });
}

}  // namespace ecoserve::apps
