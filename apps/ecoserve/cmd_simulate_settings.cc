#include "apps/ecoserve/cmd_simulate_settings.h"

#include <algorithm>
#include <limits>

#include "apps/ecoserve/serve_args.h"
#include "base/cost_profile.h"
#include "engine/cost_profiler.h"
#include "policy/migration_planner.h"
#include "policy/profiled_cost_model.h"

namespace ecoserve::apps {

using json = nlohmann::json;

namespace {

struct Setting {
  const char* key;
  const char* help;
  enum Kind { kString, kInt, kDouble, kBool } kind;
};

// The settings in the order --help lists them. Defaults: default_simulate_settings().
constexpr Setting kSettings[] = {
    {"strategy", "nodg | fudg | padg | llumnix", Setting::kString},
    {"model", "model preset (ecoserve simulate cost --help lists them), e.g. llama-2-13b", Setting::kString},
    {"gpu", "GPU preset: a100-80gb, a800, h100-sxm, h200, l20, l40s", Setting::kString},
    {"cost_model", "roofline | h100-profile | cpu-profile (with --cost-profile and --kv-bytes-per-token)", Setting::kString},
    {"profile_dir", "the H100 operator profile (h100-profile)", Setting::kString},
    {"cost_profile", "cpu-profile: the JSON of `ecoserve profile cost`", Setting::kString},
    {"padg_profile", "padg: the cost profile its router and phases predict with (serve's --profile; empty: the "
                     "cost profile)", Setting::kString},
    {"kv_blocks", "cpu-profile: KV blocks per instance (0: from --kv-cache-mb, else room for --max-num-seqs full "
                  "contexts, as serve sizes it without its RAM cap)", Setting::kInt},
    {"kv_cache_mb", "cpu-profile: KV-cache memory per instance in MiB, as serve's --kv-cache-mb (with --kv-bytes-per-token)",
     Setting::kInt},
    {"max_context", "context per sequence (0: the model's; cpu-profile: needed)", Setting::kInt},
    {"kv_bytes_per_token", "cpu-profile: KV bytes of one token: 2 x layers x KV heads x head dim x bytes per value (what transfers move)", Setting::kInt},
    {"prompt_extra_tokens", "tokens the server adds to every prompt (null: 1 with cpu-profile, the BOS token "
                            "serve's tokenizer adds to bench's prompts; 0 otherwise)", Setting::kInt},
    {"instances", "instances (nodg, padg, llumnix)", Setting::kInt},
    {"tp", "tensor parallelism per instance", Setting::kInt},
    {"pp", "pipeline stages per instance", Setting::kInt},
    {"prefill_instances", "fudg: prefill instances", Setting::kInt},
    {"prefill_tp", "fudg: prefill tensor parallelism", Setting::kInt},
    {"prefill_pp", "fudg: prefill pipeline stages", Setting::kInt},
    {"decode_instances", "fudg: decode instances", Setting::kInt},
    {"decode_tp", "fudg: decode tensor parallelism", Setting::kInt},
    {"decode_pp", "fudg: decode pipeline stages", Setting::kInt},
    {"placement", "packed (roles in order) | paired (prefill and decode share nodes)", Setting::kString},
    {"nodes", "nodes (0: as many as the instances need)", Setting::kInt},
    {"gpus_per_node", "GPUs per node", Setting::kInt},
    {"intra", "intra-node link: nvlink | pcie", Setting::kString},
    {"intra_gbps", "intra-node link bandwidth per GPU and direction in Gb/s (0: the preset's; e.g. a CPU host's "
                   "memory copy)", Setting::kDouble},
    {"inter_node_gbps", "inter-node link per node (Gb/s): 10, 25, 100, 200, 400", Setting::kDouble},
    {"policy", "nodg/llumnix/fudg-decode instance policy: chunked | prefill-first", Setting::kString},
    {"max_num_seqs", "sequences per step at most (null: 64 with cpu-profile as serve, 256 on GPUs as vLLM)",
     Setting::kInt},
    {"max_num_batched_tokens", "tokens per step at most (null: 512 with cpu-profile as serve, 2048 on GPUs)",
     Setting::kInt},
    {"chunk_size", "prefill chunk in tokens, 0 = the token budget (null: 0 with cpu-profile as serve, 512 on GPUs)",
     Setting::kInt},
    {"block_size", "tokens per KV block", Setting::kInt},
    {"enable_prefix_caching", "prefix caching on instances", Setting::kBool},
    {"preemption_mode", "recompute | swap", Setting::kString},
    {"memory_fraction", "share of GPU memory for weights + KV", Setting::kDouble},
    {"step_overhead_ms", "added to every step (scheduler and launch time)", Setting::kDouble},
    {"host_step_scale_alone", "instances of a node share one host (CPU deployments): a step takes this times its "
                              "profiled time when no other instance of the node is mid-step as it starts",
     Setting::kDouble},
    {"host_step_scale_shared", "... and this times when one is (memory-bandwidth interference)", Setting::kDouble},
    {"router", "nodg: round-robin | least-loaded | cache-aware; llumnix: freeness (empty: freeness under llumnix, "
               "else least-loaded)", Setting::kString},
    {"remote_prefill_min_tokens", "fudg: shorter prompts prefill on their decode instance", Setting::kInt},
    {"slo_ttft_ms", "TTFT SLO (ms): every request's (as serve's --slo-ttft-ms), and the report's attainment and "
                    "goodput; padg without one derives it as serve does", Setting::kDouble},
    {"slo_tpot_ms", "TPOT SLO (ms), the same way", Setting::kDouble},
    {"macro_min", "padg: N_l, fewest instances of a macro instance", Setting::kInt},
    {"macro_max", "padg: N_u, most instances of a macro instance", Setting::kInt},
    {"padg_reject_unmeetable", "padg: reject requests whose TTFT SLO cannot be met", Setting::kBool},
    {"autoscale", "nodg, padg: add and remove instances by SLO attainment and KV usage, as serve's --autoscale",
     Setting::kBool},
    {"autoscale_window", "autoscaling window and cooldown (s)", Setting::kDouble},
    {"autoscale_min", "fewest active instances when scaling", Setting::kInt},
    {"autoscale_max", "most active instances when scaling", Setting::kInt},
    {"autoscale_attainment", "autoscale: SLO attainment (0..1) below which an instance is added", Setting::kDouble},
    {"migrate_interval_ms", "llumnix: how often the migration planner runs (0 = never)", Setting::kDouble},
    {"migration_choice", "llumnix: which request a source gives away: low-priority | shortest | longest",
     Setting::kString},
    {"migrate_source_freeness", "llumnix: an instance below this freeness gives requests away", Setting::kDouble},
    {"migrate_destination_freeness", "llumnix: an instance above this freeness takes them", Setting::kDouble},
    {"migrate_min_spread", "llumnix: least freeness difference for a load-balancing migration", Setting::kDouble},
    {"migrate_max_per_interval", "llumnix: migrations started per interval", Setting::kInt},
    {"migrate_max_stages", "llumnix: copy stages before the stop-and-copy at most", Setting::kInt},
    {"defragment", "llumnix: migrate away from an instance whose queue head cannot start", Setting::kBool},
    {"high_priority_headroom", "llumnix: tokens of headroom a high-priority request adds", Setting::kInt},
    {"scale_up_freeness", "llumnix: add an instance when the mean freeness stays below this (with "
                          "--scale-down-freeness)", Setting::kDouble},
    {"scale_down_freeness", "llumnix: drain and remove one when it stays above this", Setting::kDouble},
    {"scale_window", "llumnix: scaling window and cooldown (s)", Setting::kDouble},
    {"dataset", "synthetic | sharegpt | azure | mooncake (with --dataset-file)", Setting::kString},
    {"dataset_file", "the dataset or trace file", Setting::kString},
    {"input_len", "input lengths: N, uniform:LO:HI, lognormal:MEAN:MEDIAN, alpaca, sharegpt, longbench",
     Setting::kString},
    {"output_len", "output lengths, same forms", Setting::kString},
    {"length_scale", "multiply generated lengths by this", Setting::kDouble},
    {"num_prompts", "requests (file datasets: 0 = all)", Setting::kInt},
    {"rate", "request rate (req/s) or inf; traces replay their timestamps unless given", Setting::kString},
    {"burstiness", "gamma shape of inter-arrivals: 1 = Poisson", Setting::kString},
    {"trace_speedup", "divide trace timestamps by this", Setting::kDouble},
    {"seed", "workload and sampler seed", Setting::kInt},
    {"high_priority_fraction", "share of requests with high priority", Setting::kDouble},
    {"percentiles", "percentiles to report besides the median, e.g. 90,99", Setting::kString},
    {"request_timeout", "a request unanswered this many seconds after its arrival fails (as bench's "
                        "--request-timeout); bounds an overloaded run's queues (0 = never)", Setting::kDouble},
};

StatusOr<std::shared_ptr<const policy::CostModel>> load_cpu_profile(const std::string& path) {
  ECO_ASSIGN_OR_RETURN(CostProfile profile, engine::load_cost_profile(path));
  ECO_ASSIGN_OR_RETURN(auto model, policy::ProfiledCostModel::create(std::move(profile)));
  return std::shared_ptr<const policy::CostModel>(std::move(model));
}

}  // namespace

json default_simulate_settings() {
  const ServeArgs serve;  // the knobs serve has take its defaults
  return json{
      {"strategy", serve.strategy}, {"model", "llama-2-7b"}, {"gpu", "a100-80gb"}, {"cost_model", "roofline"},
      {"profile_dir", "../shared/data/profiles/h100-bf16"}, {"cost_profile", ""}, {"padg_profile", ""},
      {"kv_blocks", 0}, {"kv_cache_mb", serve.kv_cache_mb}, {"max_context", 0}, {"kv_bytes_per_token", 0},
      {"prompt_extra_tokens", nullptr},
      {"instances", 1}, {"tp", 1}, {"pp", 1},
      {"prefill_instances", 1}, {"prefill_tp", 1}, {"prefill_pp", 1},
      {"decode_instances", 1}, {"decode_tp", 1}, {"decode_pp", 1}, {"placement", "packed"},
      {"nodes", 0}, {"gpus_per_node", 8}, {"intra", "nvlink"}, {"intra_gbps", 0.0}, {"inter_node_gbps", 100.0},
      {"policy", serve.policy}, {"max_num_seqs", nullptr}, {"max_num_batched_tokens", nullptr},
      {"chunk_size", nullptr}, {"block_size", serve.block_size}, {"enable_prefix_caching", serve.prefix_caching},
      {"preemption_mode", serve.preemption_mode}, {"memory_fraction", 0.9}, {"step_overhead_ms", 0.0},
      {"host_step_scale_alone", 1.0}, {"host_step_scale_shared", 1.0},
      {"router", serve.router}, {"remote_prefill_min_tokens", serve.remote_prefill_min_tokens},
      {"slo_ttft_ms", nullptr}, {"slo_tpot_ms", nullptr},
      {"macro_min", serve.macro_min}, {"macro_max", serve.macro_max}, {"padg_reject_unmeetable", serve.reject_unmeetable},
      {"autoscale", serve.autoscale}, {"autoscale_window", serve.autoscale_window},
      {"autoscale_min", serve.autoscale_min}, {"autoscale_max", serve.autoscale_max},
      {"autoscale_attainment", serve.autoscale_attainment},
      {"migrate_interval_ms", serve.migrate_interval_ms}, {"migration_choice", serve.migration_choice},
      {"migrate_source_freeness", serve.migrate_source_freeness},
      {"migrate_destination_freeness", serve.migrate_destination_freeness},
      {"migrate_min_spread", serve.migrate_min_spread}, {"migrate_max_per_interval", serve.migrate_max_per_interval},
      {"migrate_max_stages", serve.migrate_max_stages}, {"defragment", serve.defragment},
      {"high_priority_headroom", serve.high_priority_headroom}, {"scale_up_freeness", serve.scale_up_freeness},
      {"scale_down_freeness", serve.scale_down_freeness}, {"scale_window", serve.scale_window},
      {"dataset", "synthetic"}, {"dataset_file", ""}, {"input_len", "128"}, {"output_len", "128"},
      {"length_scale", 1.0}, {"num_prompts", 200}, {"rate", "inf"}, {"burstiness", "1"},
      {"trace_speedup", 1.0}, {"seed", 0}, {"high_priority_fraction", 0.0},
      {"percentiles", "90,99"}, {"request_timeout", 600.0}};
}

void add_simulate_setting_flags(CLI::App* cmd, const std::shared_ptr<json>& flags) {
  const json defaults = default_simulate_settings();
  for (const Setting& f : kSettings) {
    std::string name = std::string("--") + f.key;
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string key = f.key;
    const std::string help = fmt::format("{} (default {})", f.help, defaults.at(key).dump());
    switch (f.kind) {
      case Setting::kString:
        cmd->add_option_function<std::string>(name, [flags, key](const std::string& v) { (*flags)[key] = v; }, help);
        break;
      case Setting::kInt:
        cmd->add_option_function<int64_t>(name, [flags, key](const int64_t& v) { (*flags)[key] = v; }, help);
        break;
      case Setting::kDouble:
        cmd->add_option_function<double>(name, [flags, key](const double& v) { (*flags)[key] = v; }, help);
        break;
      case Setting::kBool:
        cmd->add_option_function<bool>(name, [flags, key](const bool& v) { (*flags)[key] = v; }, help);
        break;
    }
  }
}

std::string setting_text(const json& s, const char* key) {
  const json& v = s.at(key);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

Status resolve_auto_settings(json& s) {
  ECO_ASSIGN_OR_RETURN(std::string cost_model, setting<std::string>(s, "cost_model"));
  const bool cpu = cost_model == "cpu-profile";
  const ServeArgs serve;
  auto fill = [&](const char* key, const json& value) {
    if (s.at(key).is_null()) s[key] = value;
  };
  fill("max_num_seqs", cpu ? serve.max_num_seqs : 256);
  fill("max_num_batched_tokens", cpu ? serve.max_num_batched_tokens : 2048);
  fill("chunk_size", cpu ? serve.chunk_size : 512);
  fill("prompt_extra_tokens", cpu ? 1 : 0);
  return ok_status();
}

StatusOr<SimulateDeployment> simulate_deployment(const json& s, bool record_steps) {
  SimulateDeployment out;
  sim::DeploymentSpec& d = out.spec;
  ECO_ASSIGN_OR_RETURN(d.cluster.strategy, setting<std::string>(s, "strategy"));
  ECO_ASSIGN_OR_RETURN(d.model, setting<std::string>(s, "model"));
  ECO_ASSIGN_OR_RETURN(d.gpu, setting<std::string>(s, "gpu"));
  ECO_ASSIGN_OR_RETURN(d.cost_model, setting<std::string>(s, "cost_model"));
  ECO_ASSIGN_OR_RETURN(d.profile_dir, setting<std::string>(s, "profile_dir"));
  ECO_ASSIGN_OR_RETURN(d.mixed.instances, setting<int32_t>(s, "instances"));
  ECO_ASSIGN_OR_RETURN(d.mixed.par.tp, setting<int32_t>(s, "tp"));
  ECO_ASSIGN_OR_RETURN(d.mixed.par.pp, setting<int32_t>(s, "pp"));
  ECO_ASSIGN_OR_RETURN(d.prefill.instances, setting<int32_t>(s, "prefill_instances"));
  ECO_ASSIGN_OR_RETURN(d.prefill.par.tp, setting<int32_t>(s, "prefill_tp"));
  ECO_ASSIGN_OR_RETURN(d.prefill.par.pp, setting<int32_t>(s, "prefill_pp"));
  ECO_ASSIGN_OR_RETURN(d.decode.instances, setting<int32_t>(s, "decode_instances"));
  ECO_ASSIGN_OR_RETURN(d.decode.par.tp, setting<int32_t>(s, "decode_tp"));
  ECO_ASSIGN_OR_RETURN(d.decode.par.pp, setting<int32_t>(s, "decode_pp"));
  ECO_ASSIGN_OR_RETURN(d.placement, setting<std::string>(s, "placement"));
  ECO_ASSIGN_OR_RETURN(d.cluster.topology.num_nodes, setting<int32_t>(s, "nodes"));
  ECO_ASSIGN_OR_RETURN(d.cluster.topology.gpus_per_node, setting<int32_t>(s, "gpus_per_node"));
  ECO_ASSIGN_OR_RETURN(d.cluster.topology.intra, setting<std::string>(s, "intra"));
  ECO_ASSIGN_OR_RETURN(double intra_gbps, setting<double>(s, "intra_gbps"));
  if (intra_gbps < 0) return invalid_argument_error("intra_gbps must be >= 0, got {}", intra_gbps);
  d.cluster.topology.intra_bytes_per_s = intra_gbps * 1e9 / 8;
  ECO_ASSIGN_OR_RETURN(d.cluster.topology.inter_node_gbps, setting<double>(s, "inter_node_gbps"));
  ECO_ASSIGN_OR_RETURN(d.core.policy, setting<std::string>(s, "policy"));
  ECO_ASSIGN_OR_RETURN(d.core.max_num_seqs, setting<int32_t>(s, "max_num_seqs"));
  ECO_ASSIGN_OR_RETURN(d.core.max_num_batched_tokens, setting<int32_t>(s, "max_num_batched_tokens"));
  ECO_ASSIGN_OR_RETURN(int32_t chunk, setting<int32_t>(s, "chunk_size"));
  if (chunk < 0) return invalid_argument_error("chunk_size must be >= 0 (0: the token budget), got {}", chunk);
  d.core.chunk_size = chunk > 0 ? chunk : d.core.max_num_batched_tokens;  // as serve resolves it
  ECO_ASSIGN_OR_RETURN(d.core.enable_prefix_caching, setting<bool>(s, "enable_prefix_caching"));
  ECO_ASSIGN_OR_RETURN(d.core.preemption_mode, setting<std::string>(s, "preemption_mode"));
  ECO_ASSIGN_OR_RETURN(d.block_size, setting<int32_t>(s, "block_size"));
  ECO_ASSIGN_OR_RETURN(d.memory_fraction, setting<double>(s, "memory_fraction"));
  ECO_ASSIGN_OR_RETURN(int32_t max_context, setting<int32_t>(s, "max_context"));
  ECO_ASSIGN_OR_RETURN(out.prompt_extra_tokens, setting<int32_t>(s, "prompt_extra_tokens"));
  if (out.prompt_extra_tokens < 0) return invalid_argument_error("prompt_extra_tokens must be >= 0");
  ECO_ASSIGN_OR_RETURN(double overhead_ms, setting<double>(s, "step_overhead_ms"));
  if (overhead_ms < 0) return invalid_argument_error("step_overhead_ms must be >= 0, got {}", overhead_ms);
  out.step_overhead_s = overhead_ms / 1000.0;

  // Cost model: a CPU profile is a "given" model with the geometry the settings state.
  ECO_ASSIGN_OR_RETURN(std::string padg_profile, setting<std::string>(s, "padg_profile"));
  if (d.cost_model == "cpu-profile") {
    ECO_ASSIGN_OR_RETURN(std::string path, setting<std::string>(s, "cost_profile"));
    if (path.empty()) return invalid_argument_error("cost_model cpu-profile needs cost_profile FILE (`ecoserve profile cost`)");
    ECO_ASSIGN_OR_RETURN(d.given_cost_model, load_cpu_profile(path));
    d.cost_model = "given";
    ECO_ASSIGN_OR_RETURN(d.given_kv_bytes_per_token, setting<int64_t>(s, "kv_bytes_per_token"));
    if (max_context <= 0) return invalid_argument_error("cost_model cpu-profile needs max_context (the live server's context)");
    d.given_max_context = max_context;
    ECO_ASSIGN_OR_RETURN(d.given_kv_blocks, setting<int32_t>(s, "kv_blocks"));
    ECO_ASSIGN_OR_RETURN(int64_t kv_mb, setting<int64_t>(s, "kv_cache_mb"));
    if (d.given_kv_blocks <= 0 && kv_mb > 0) {
      if (d.given_kv_bytes_per_token <= 0) return invalid_argument_error("kv_cache_mb needs kv_bytes_per_token");
      d.given_kv_blocks = static_cast<int32_t>(std::min<int64_t>(
          (kv_mb << 20) / (d.given_kv_bytes_per_token * d.block_size), std::numeric_limits<int32_t>::max()));
    } else if (d.given_kv_blocks <= 0) {
      // serve's automatic size: room for max_num_seqs full contexts (serve caps it at a quarter of the RAM).
      d.given_kv_blocks = static_cast<int32_t>((int64_t{d.core.max_num_seqs} * max_context + d.block_size) / d.block_size);
    }
  } else {
    d.max_context = max_context;
  }
  if (!padg_profile.empty()) {
    ECO_ASSIGN_OR_RETURN(d.cluster.padg_cost_model, load_cpu_profile(padg_profile));
  }

  // The cluster's policies, translated exactly as serve translates its flags.
  ServeArgs a;
  a.strategy = d.cluster.strategy;
  a.max_num_batched_tokens = d.core.max_num_batched_tokens;
  a.chunk_size = chunk;
  ECO_ASSIGN_OR_RETURN(a.router, setting<std::string>(s, "router"));
  ECO_ASSIGN_OR_RETURN(a.remote_prefill_min_tokens, setting<int32_t>(s, "remote_prefill_min_tokens"));
  ECO_ASSIGN_OR_RETURN(a.macro_min, setting<int32_t>(s, "macro_min"));
  ECO_ASSIGN_OR_RETURN(a.macro_max, setting<int32_t>(s, "macro_max"));
  ECO_ASSIGN_OR_RETURN(a.reject_unmeetable, setting<bool>(s, "padg_reject_unmeetable"));
  ECO_ASSIGN_OR_RETURN(a.autoscale, setting<bool>(s, "autoscale"));
  ECO_ASSIGN_OR_RETURN(a.autoscale_window, setting<double>(s, "autoscale_window"));
  ECO_ASSIGN_OR_RETURN(a.autoscale_min, setting<int32_t>(s, "autoscale_min"));
  ECO_ASSIGN_OR_RETURN(a.autoscale_max, setting<int32_t>(s, "autoscale_max"));
  ECO_ASSIGN_OR_RETURN(a.autoscale_attainment, setting<double>(s, "autoscale_attainment"));
  ECO_ASSIGN_OR_RETURN(a.migrate_interval_ms, setting<double>(s, "migrate_interval_ms"));
  ECO_ASSIGN_OR_RETURN(a.migration_choice, setting<std::string>(s, "migration_choice"));
  if (!policy::parse_migration_choice(a.migration_choice).ok()) {
    return invalid_argument_error("unknown migration_choice '{}' (low-priority, shortest, longest)", a.migration_choice);
  }
  ECO_ASSIGN_OR_RETURN(a.migrate_source_freeness, setting<double>(s, "migrate_source_freeness"));
  ECO_ASSIGN_OR_RETURN(a.migrate_destination_freeness, setting<double>(s, "migrate_destination_freeness"));
  ECO_ASSIGN_OR_RETURN(a.migrate_min_spread, setting<double>(s, "migrate_min_spread"));
  ECO_ASSIGN_OR_RETURN(a.migrate_max_per_interval, setting<int32_t>(s, "migrate_max_per_interval"));
  ECO_ASSIGN_OR_RETURN(a.migrate_max_stages, setting<int32_t>(s, "migrate_max_stages"));
  ECO_ASSIGN_OR_RETURN(a.defragment, setting<bool>(s, "defragment"));
  ECO_ASSIGN_OR_RETURN(a.high_priority_headroom, setting<int32_t>(s, "high_priority_headroom"));
  ECO_ASSIGN_OR_RETURN(a.scale_up_freeness, setting<double>(s, "scale_up_freeness"));
  ECO_ASSIGN_OR_RETURN(a.scale_down_freeness, setting<double>(s, "scale_down_freeness"));
  ECO_ASSIGN_OR_RETURN(a.scale_window, setting<double>(s, "scale_window"));
  // SLOs: given ones apply to every request (serve's default SLOs); padg derives them
  // from its cost model when missing, as serve does.
  if (!s.at("slo_ttft_ms").is_null()) {
    ECO_ASSIGN_OR_RETURN(a.slo_ttft_ms, setting<double>(s, "slo_ttft_ms"));
  }
  if (!s.at("slo_tpot_ms").is_null()) {
    ECO_ASSIGN_OR_RETURN(a.slo_tpot_ms, setting<double>(s, "slo_tpot_ms"));
  }
  if (a.strategy == "padg" && (a.slo_ttft_ms <= 0 || a.slo_tpot_ms <= 0)) {
    std::shared_ptr<const policy::CostModel> cm = d.cluster.padg_cost_model;
    if (!cm) {
      sim::Parallelism par = d.mixed.par;
      ECO_ASSIGN_OR_RETURN(cm, sim::make_cost_model(d, par));
    }
    int32_t context = d.cost_model == "given" ? d.given_max_context : max_context;
    if (context <= 0) {
      ECO_ASSIGN_OR_RETURN(sim::ModelSpec m, sim::model_preset(d.model));
      context = m.max_context;
    }
    derive_slos(a, *cm, context);
  }
  out.request_slo_ttft_s = a.slo_ttft_ms / 1e3;
  out.request_slo_tpot_s = a.slo_tpot_ms / 1e3;
  if (const std::string e = resolve_cluster_flags(a); !e.empty()) return invalid_argument_error("{}", e);
  const cluster::RouterOptions ro = router_options(a);
  sim::SimClusterOptions& c = d.cluster;
  c.router = ro.router;
  c.router_policy = ro.policy;
  c.dispatch = ro.dispatch;
  c.padg = ro.padg;
  c.mitosis = ro.mitosis;
  c.autoscale = ro.autoscale;
  c.autoscale_window = ro.autoscale_window;
  c.autoscale_min = ro.autoscale_min;
  c.autoscale_max = ro.autoscale_max;
  c.autoscale_policy = ro.autoscale_policy;
  if (a.strategy == "llumnix") {
    c.migration = ro.migration;
    c.migrate_interval = ro.migrate_interval;
    c.migrate_max_stages = ro.migrate_max_stages;
    c.scale_by_freeness = ro.scale_by_freeness;
    c.freeness_scaling = ro.freeness_scaling;
  }
  ECO_ASSIGN_OR_RETURN(c.host_step_scale_alone, setting<double>(s, "host_step_scale_alone"));
  ECO_ASSIGN_OR_RETURN(c.host_step_scale_shared, setting<double>(s, "host_step_scale_shared"));
  ECO_ASSIGN_OR_RETURN(c.seed, setting<uint64_t>(s, "seed"));
  d.record_steps = record_steps;
  return out;
}

}  // namespace ecoserve::apps
