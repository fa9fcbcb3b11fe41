// The flags of `ecoserve serve`, `router` and `instance` (ServeArgs), how they
// are declared (cmd_serve_flags.cc) and what they turn into for the router.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cluster/router.h"
#include "engine/model_runner.h"

namespace ecoserve::apps {

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
  kernels::Isa isa = kernels::default_isa();
  // EngineOptions::bf16_weights as 0, 1 or auto (kernels::bf16_weights_mode_name), and the
  // share of available memory auto lets the tiles take (serve divides it among its instances).
  std::string bf16_weights = std::string(kernels::bf16_weights_mode_name(kernels::default_bf16_weights()));
  double bf16_weights_share = kernels::kBf16WeightsAutoShare;
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
  std::string router;  // empty: freeness under llumnix, else least-loaded
  int32_t threads_per_instance = 0;
  int32_t prefill_instances = 1;
  int32_t remote_prefill_min_tokens = 0;
  // Multi-process (ZeroMQ): `serve --multi-process` spawns its instances as
  // `ecoserve instance` processes; `ecoserve router` fronts running ones.
  bool multi_process = false;
  std::vector<std::string> remote_instances;  // router: tcp://HOST:PORT of each instance
  double heartbeat_timeout = 5.0;             // router: seconds without a status answer -> unhealthy
  double step_timeout = 300.0;                // seconds one engine step may run before its instance is hung
  std::string listen = "tcp://127.0.0.1:0";   // instance
  std::string role = "mixed";                 // instance
  bool test_hooks = false;                    // instance
  // padg (EcoServe): the cost profile, default SLOs, macro-instance sizes.
  std::string profile;            // empty: MODEL.profile.json when it exists, else measured at start-up
  double slo_ttft_ms = 0.0;       // 0: padg derives one from the profile; other strategies: none
  double slo_tpot_ms = 0.0;
  int32_t macro_min = 2;
  int32_t macro_max = 4;
  bool reject_unmeetable = false;
  // Autoscaling (nodg, padg).
  bool autoscale = false;
  double autoscale_window = 30.0;
  int32_t autoscale_min = 1;
  int32_t autoscale_max = 8;
  double autoscale_attainment = 0.9;
  // llumnix: live migration and scaling by freeness.
  double migrate_interval_ms = 500.0;
  std::string migration_choice = "low-priority";
  double migrate_source_freeness = 2.0;
  double migrate_destination_freeness = 16.0;
  double migrate_min_spread = 8.0;
  int32_t migrate_max_per_interval = 1;
  int32_t migrate_max_stages = 4;
  bool defragment = true;
  int32_t high_priority_headroom = 1024;
  double scale_up_freeness = 0.0;    // > 0 (with --scale-down-freeness): scale by freeness
  double scale_down_freeness = 0.0;
  double scale_window = 30.0;
  double test_step_delay_ms = 0.0;  // tests only: each engine step also sleeps this long
};

// The engine and scheduler of an instance (serve, instance).
void add_engine_flags(CLI::App* cmd, const std::shared_ptr<ServeArgs>& a);
// The OpenAI HTTP endpoint (serve, router).
void add_http_flags(CLI::App* cmd, const std::shared_ptr<ServeArgs>& a);
// How a router spreads requests over instances (serve, router).
void add_cluster_flags(CLI::App* cmd, const std::shared_ptr<ServeArgs>& a);

// Checks the cross-flag rules of the cluster flags and fills in the router's
// default; an error message, or empty.
std::string resolve_cluster_flags(ServeArgs& a);
// padg's default SLOs when none are given (slo_*_ms <= 0), from `cm`
// (policy::padg_default_slos with the flags' chunk), in ms.
void derive_slos(ServeArgs& a, const policy::CostModel& cm, int32_t max_context);
// The router's options the flags ask for (strategy, routing, padg, autoscaling, llumnix).
cluster::RouterOptions router_options(const ServeArgs& a);

}  // namespace ecoserve::apps
