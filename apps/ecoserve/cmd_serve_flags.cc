// Flag declarations and flag-to-options translation of `ecoserve serve`, `router`
// and `instance` (serve_args.h).
#include <CLI/CLI.hpp>

#include "apps/ecoserve/commands.h"
#include "apps/ecoserve/serve_args.h"
#include "policy/cost_model.h"
#include "policy/migration_planner.h"

namespace ecoserve::apps {

cluster::RouterOptions router_options(const ServeArgs& a) {
  cluster::RouterOptions ro;
  ro.router = a.router;
  ro.strategy = a.strategy;
  ro.num_prefill_instances = a.strategy == "fudg" ? a.prefill_instances : 0;
  ro.dispatch.remote_prefill_min_tokens = a.remote_prefill_min_tokens;
  ro.heartbeat_timeout = from_seconds(a.heartbeat_timeout);
  ro.step_timeout = from_seconds(a.step_timeout);
  ro.padg.default_slo_ttft = from_ms(a.slo_ttft_ms);
  ro.padg.default_slo_tpot = from_ms(a.slo_tpot_ms);
  ro.padg.chunk_size = a.chunk_size > 0 ? a.chunk_size : a.max_num_batched_tokens;
  ro.padg.reject_unmeetable = a.reject_unmeetable;
  ro.mitosis.macro_min = a.macro_min;
  ro.mitosis.macro_max = a.macro_max;
  ro.autoscale = a.autoscale;
  ro.autoscale_window = from_seconds(a.autoscale_window);
  ro.autoscale_min = a.autoscale_min;
  ro.autoscale_max = a.autoscale_max;
  ro.autoscale_policy.target_attainment = a.autoscale_attainment;
  ro.autoscale_policy.cooldown = from_seconds(a.autoscale_window);
  if (a.strategy == "llumnix") {
    ro.migrate_interval = from_ms(a.migrate_interval_ms);
    ro.migration.choice = *policy::parse_migration_choice(a.migration_choice);  // checked by the flag
    ro.migration.source_freeness = a.migrate_source_freeness;
    ro.migration.destination_freeness = a.migrate_destination_freeness;
    ro.migration.min_spread = a.migrate_min_spread;
    ro.migration.max_migrations = a.migrate_max_per_interval;
    ro.migration.defragment = a.defragment;
    ro.migration.freeness.high_priority_headroom_tokens = a.high_priority_headroom;
    ro.migrate_max_stages = a.migrate_max_stages;
    ro.scale_by_freeness = a.scale_up_freeness > 0 || a.scale_down_freeness > 0;
    ro.freeness_scaling.scale_up_freeness = a.scale_up_freeness;
    ro.freeness_scaling.scale_down_freeness = a.scale_down_freeness;
    ro.freeness_scaling.window = from_seconds(a.scale_window);
    ro.freeness_scaling.cooldown = from_seconds(a.scale_window);
    ro.freeness_scaling.min_instances = a.autoscale_min;
    ro.freeness_scaling.max_instances = a.autoscale_max;
  }
  return ro;
}

void derive_slos(ServeArgs& a, const policy::CostModel& cm, int32_t max_context) {
  const policy::SloTargets t =
      policy::padg_default_slos(cm, max_context, a.chunk_size > 0 ? a.chunk_size : a.max_num_batched_tokens);
  if (a.slo_tpot_ms <= 0) a.slo_tpot_ms = 1e3 * t.tpot_seconds;
  if (a.slo_ttft_ms <= 0) a.slo_ttft_ms = 1e3 * t.ttft_seconds;
}

// Checks the cross-flag rules of the cluster flags and fills in the router's
// default; an error message, or empty.
std::string resolve_cluster_flags(ServeArgs& a) {
  if (a.router.empty()) a.router = a.strategy == "llumnix" ? "freeness" : "least-loaded";
  const bool up = a.scale_up_freeness > 0, down = a.scale_down_freeness > 0;
  if (up || down) {
    if (a.strategy != "llumnix") return "--scale-up-freeness/--scale-down-freeness need --strategy llumnix";
    if (!up || !down || a.scale_up_freeness >= a.scale_down_freeness) {
      return "scaling by freeness needs both --scale-up-freeness and --scale-down-freeness, the first below the "
             "second";
    }
  }
  if (a.strategy == "llumnix" && a.migrate_source_freeness >= a.migrate_destination_freeness) {
    return "--migrate-source-freeness must be below --migrate-destination-freeness";
  }
  return "";
}

// The engine and scheduler of an instance (serve, instance).
void add_engine_flags(CLI::App* cmd, const std::shared_ptr<ServeArgs>& a) {
  cmd->add_flag("--mmap", a->mmap,
                  "map the model file (shared page cache, less memory) instead of reading it into huge-page "
                  "memory (faster decode; Q8_0 and Q4_K matrices repacked for faster int8 kernels: ~2x prefill)");
  cmd->add_option("--policy", a->policy,
                  "instance scheduling policy: prefill-first (vLLM), chunked (Sarathi-Serve) or temporal (EcoServe's "
                  "prefill and decode phases; what --strategy padg uses)")
      ->capture_default_str()
      ->check(CLI::IsMember({"prefill-first", "chunked", "temporal"}));

  cmd->add_option("-t,--threads", a->threads, "compute threads; 0 = all cores")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
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
  add_isa_option(cmd, a->isa);
  cmd->add_flag("--bf16-weights{1},--no-bf16-weights{0}", a->bf16_weights,
                "make the weights' bf16 tiles once at load (CPUs with AMX-BF16, or AVX-512 BF16 at the avx512vnni-zmm "
                "level for float and Q6_K weights: 2 more bytes of memory per weight; prompts and decode batches of "
                "8-64 faster, the same results): --bf16-weights always (or the "
                "instance fails to start), --no-bf16-weights never, --bf16-weights=auto when the tiles fit "
                "--bf16-weights-share of the memory available at load less the KV cache; default: "
                "ECOSERVE_BF16_WEIGHTS, else auto")
      ->capture_default_str()
      ->check(CLI::IsMember({"0", "1", "auto"}));
  cmd->add_option("--bf16-weights-share", a->bf16_weights_share,
                  "with --bf16-weights=auto: the share of the memory available at load (less the KV caches) the bf16 "
                  "tiles may take; in-process instances share one set, --multi-process children each get the share "
                  "divided by --instances")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("-c,--ctx-size", a->ctx, "context length per request; 0 = the model's")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-waiting", a->max_waiting, "waiting-queue bound; requests beyond it get HTTP 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--enable-prefix-caching,!--no-prefix-caching", a->prefix_caching,
                "share the KV blocks of common prompt prefixes (default: on)");
  cmd->add_option("--preemption-mode", a->preemption_mode,
                  "when KV blocks run out: recompute (drop and requeue) or swap (to host memory)")
      ->capture_default_str()
      ->check(CLI::IsMember({"recompute", "swap"}));
  cmd->add_option("--swap-space-mb", a->swap_mb, "host memory for swapped-out KV in MiB; 0 = as much as the KV cache")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}
// The OpenAI HTTP endpoint (serve, router).
void add_http_flags(CLI::App* cmd, const std::shared_ptr<ServeArgs>& a) {
  cmd->add_option("--host", a->host, "address to bind")->capture_default_str();
  cmd->add_option("--port", a->port, "TCP port; 0 = pick a free port (printed at start-up)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--io-threads", a->io_threads, "HTTP I/O threads")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY' on /v1/* (default: no key)");
  cmd->add_option("--chat-template", a->chat_template,
                  "chat template: llama-2, llama-3, chatml, zephyr or mistral (default: detected from the GGUF, "
                  "chatml when unknown)")
      ->check(CLI::IsMember({"llama-2", "llama2", "llama-3", "llama3", "chatml", "zephyr", "mistral"}));
  cmd->add_option("--served-model-name", a->served_model_name,
                  "model name clients must use (default: the GGUF file name without extension)");
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
  cmd->add_option("--step-timeout", a->step_timeout,
                  "seconds one engine step may run before its instance counts as hung (unhealthy, /health 503); an "
                  "instance beats only between steps, so keep this above the longest prefill chunk's time")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--max-connections", a->max_connections,
                  "most open client connections (more get 503 and are closed); lowered to fit 'ulimit -n'")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
}
// How a router spreads requests over instances (serve, router).
void add_cluster_flags(CLI::App* cmd, const std::shared_ptr<ServeArgs>& a) {
  cmd->add_option("--strategy", a->strategy,
                  "how instances share prefill and decode: nodg (every instance mixes both; the router spreads "
                  "requests), fudg (prefill instances and decode instances; the prompt's KV cache moves after "
                  "the first token) or padg (EcoServe: each instance alternates prefill and decode phases, macro "
                  "instances stagger them, requests are routed by TTFT, TPOT-slack and KV checks) or llumnix (nodg "
                  "instances, new requests to the freest, running requests live-migrated between instances with "
                  "their KV cache)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nodg", "fudg", "padg", "llumnix"}));
  cmd->add_option("--migrate-interval-ms", a->migrate_interval_ms,
                  "llumnix: how often the migration planner pairs the least free instances with the freest; 0 = "
                  "never migrate (freeness routing only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3.6e6));
  cmd->add_option("--migration-choice", a->migration_choice,
                  "llumnix: which request a source gives away: low-priority (lowest priority, then shortest), "
                  "shortest (cheapest to copy) or longest")
      ->capture_default_str()
      ->check(CLI::IsMember({"low-priority", "shortest", "longest"}));
  cmd->add_option("--migrate-source-freeness", a->migrate_source_freeness,
                  "llumnix: an instance below this freeness (free KV blocks per running request) gives requests away")
      ->capture_default_str();
  cmd->add_option("--migrate-destination-freeness", a->migrate_destination_freeness,
                  "llumnix: an instance above this freeness may take them")
      ->capture_default_str();
  cmd->add_option("--migrate-min-spread", a->migrate_min_spread,
                  "llumnix: no load-balancing migration unless the destination's freeness exceeds the source's by this")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--migrate-max-per-interval", a->migrate_max_per_interval,
                  "llumnix: migrations started per interval (draining an instance may start one per destination)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--migrate-max-stages", a->migrate_max_stages,
                  "llumnix: KV copy stages while the request keeps decoding, the stop-and-copy included, at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--defragment,!--no-defragment", a->defragment,
                "llumnix: migrate a request away from an instance whose next queued request cannot start for "
                "lack of KV blocks (default: on)");
  cmd->add_option("--high-priority-headroom", a->high_priority_headroom,
                  "llumnix: tokens of headroom a high-priority request (body `priority` < 0) adds to its instance's "
                  "virtual usage, so fewer requests land beside it")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--scale-up-freeness", a->scale_up_freeness,
                  "llumnix: add an instance when the mean freeness stays below this for --scale-window seconds "
                  "(with --scale-down-freeness; instances are made like --autoscale's, within --autoscale-min/max)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--scale-down-freeness", a->scale_down_freeness,
                  "llumnix: drain (migrate away) and remove an instance when the mean freeness stays above this")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--scale-window", a->scale_window, "llumnix scaling: seconds a freeness condition must hold (and cooldown)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--slo-ttft-ms", a->slo_ttft_ms,
                  "default time-to-first-token SLO of requests that set no `slo_ttft_ms`; padg routes by it (0 = "
                  "padg: 5x the prefill of a half-context prompt, at least 1 s)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--slo-tpot-ms", a->slo_tpot_ms,
                  "default time-per-output-token SLO of requests that set no `slo_tpot_ms`; padg's prefill phases "
                  "spend the decodes' slack against it (0 = padg: 5x a batch-1 decode step)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--macro-min", a->macro_min, "padg: fewest instances of a macro instance (N_l)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--macro-max", a->macro_max,
                  "padg: most instances of a macro instance (N_u); one more splits it (mitosis); needs 2 N_l <= N_u + 1")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--autoscale", a->autoscale,
                "nodg, padg: add an instance when a window's SLO attainment falls below --autoscale-attainment or KV "
                "usage exceeds 80%; remove one when the SLOs are met and KV usage is below 30% (padg: the mitosis "
                "rules pick it; instances move between macro instances as handles, nothing restarts)");
  cmd->add_option("--autoscale-window", a->autoscale_window, "autoscaling: seconds per decision (and cooldown)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--autoscale-min", a->autoscale_min, "autoscaling: fewest active instances")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--autoscale-max", a->autoscale_max, "autoscaling: most active instances")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--autoscale-attainment", a->autoscale_attainment,
                  "autoscaling: scale up below this share of requests meeting both SLOs (--slo-ttft-ms, --slo-tpot-ms)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_flag("--reject-unmeetable", a->reject_unmeetable,
                "padg: answer 429 at once when no instance can meet the request's TTFT SLO (else it goes to the "
                "instance with the least predicted TTFT)");
  cmd->add_option("--profile", a->profile,
                  "padg: cost profile (`ecoserve profile cost`); default MODEL.profile.json beside the model, else "
                  "a quick one is measured at start-up");
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
                  "tokens), cache-aware (longest cached prefix, traded against load) or freeness (Llumnix: the "
                  "most free KV blocks per running request; the default under --strategy llumnix)")
      ->capture_default_str()
      ->check(CLI::IsMember({"round-robin", "least-loaded", "cache-aware", "freeness"}));
}

}  // namespace ecoserve::apps
