// `ecoserve simulate`: run a strategy on a simulated cluster (sim::SimCluster: the
// live policies and InstanceCore with a cost model in place of the engine) under
// a workload with the same options as `ecoserve bench`, and print the same report,
// JSON and plots, plus the instance timeline. `ecoserve simulate cost` (the step
// time calculator) lives in cmd_simulate_cost.cc.
//
// Settings come from a YAML or JSON file (--config) and from flags; a flag given
// on the command line wins over the file. Every setting has one name, used as the
// file's key and (with dashes) as the flag: `strategy: padg` == `--strategy padg`.
// Exit status: 1 when it cannot start (bad settings, unreadable dataset) or when the
// run failed by loadgen::judge_run, 0 otherwise.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/ecoserve/cmd_simulate_settings.h"
#include "apps/ecoserve/commands.h"
#include "loadgen/arrival_process.h"
#include "loadgen/dataset.h"
#include "loadgen/goodput_search.h"
#include "loadgen/metrics.h"
#include "loadgen/report.h"
#include "loadgen/run_verdict.h"
#include "loadgen/timeline_svg.h"
#include "sim/config_text.h"
#include "sim/deployment.h"
#include "sim/sim_cluster.h"

namespace ecoserve::apps {

void add_simulate_cost_subcommand(CLI::App* simulate, int& exit_code);  // cmd_simulate_cost.cc

namespace {

using nlohmann::json;

StatusOr<json> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error("cannot read config '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  auto j = sim::parse_config_text(text, path.ends_with(".json") ? sim::ConfigFormat::kJson : sim::ConfigFormat::kAuto);
  if (!j.ok()) return j.status().with_prefix(fmt::format("config '{}'", path));
  if (!j->is_object()) return invalid_argument_error("config '{}' is not a mapping of settings", path);
  return j;
}

struct SimulateArgs {
  std::string config;
  std::shared_ptr<json> flags = std::make_shared<json>(json::object());  // settings given on the command line
  std::string sweep_rate;
  bool goodput_search = false;
  double attainment = 90;
  double search_min_rate = 0.5, search_max_rate = 64;
  int search_steps = 8;
  std::string result_json;
  std::string plot_dir;
  std::string timeline_svg;
  bool quiet = false;
  bool token_times = true;
};

// Settings: defaults, then the config file, then flags. INVALID_ARGUMENT for unknown keys.
StatusOr<json> merge_settings(const SimulateArgs& a) {
  json s = default_simulate_settings();
  json file = json::object();
  if (!a.config.empty()) {
    ECO_ASSIGN_OR_RETURN(file, load_config(a.config));
  }
  for (const json* layer : std::initializer_list<const json*>{&file, a.flags.get()}) {
    for (auto it = layer->begin(); it != layer->end(); ++it) {
      if (!s.contains(it.key())) return invalid_argument_error("unknown setting '{}'", it.key());
      s[it.key()] = it.value();
    }
  }
  ECO_RETURN_IF_ERROR(resolve_auto_settings(s));
  return s;
}

StatusOr<double> positive_or_inf(const std::string& v, const char* what) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(x > 0)) {
    return invalid_argument_error("{} must be a positive number or inf, got '{}'", what, v);
  }
  return x;
}

struct Workload {
  std::vector<loadgen::BenchRequest> requests;
  bool replay = false;
};

StatusOr<Workload> build_workload(const json& s) {
  loadgen::WorkloadOptions wo;
  ECO_ASSIGN_OR_RETURN(wo.kind, loadgen::parse_dataset_kind(setting_text(s, "dataset")));
  ECO_ASSIGN_OR_RETURN(wo.path, setting<std::string>(s, "dataset_file"));
  if (wo.kind != loadgen::DatasetKind::kSynthetic && wo.path.empty()) {
    return invalid_argument_error("dataset {} needs dataset_file", setting_text(s, "dataset"));
  }
  ECO_ASSIGN_OR_RETURN(wo.num_prompts, setting<int64_t>(s, "num_prompts"));
  ECO_ASSIGN_OR_RETURN(wo.length_scale, setting<double>(s, "length_scale"));
  ECO_ASSIGN_OR_RETURN(wo.seed, setting<uint64_t>(s, "seed"));
  ECO_ASSIGN_OR_RETURN(wo.high_priority_fraction, setting<double>(s, "high_priority_fraction"));
  auto in = loadgen::LengthDistribution::parse(setting_text(s, "input_len"), loadgen::LengthSide::kInput);
  if (!in.ok()) return in.status().with_prefix("input_len");
  auto out = loadgen::LengthDistribution::parse(setting_text(s, "output_len"), loadgen::LengthSide::kOutput);
  if (!out.ok()) return out.status().with_prefix("output_len");
  wo.input_len = *in;
  wo.output_len = *out;
  wo.lengths_only = true;
  loadgen::PromptBuilder builder(nullptr);
  Workload w;
  ECO_ASSIGN_OR_RETURN(w.requests, loadgen::build_workload(wo, builder));
  if (w.requests.empty()) return invalid_argument_error("the workload is empty");
  w.replay = setting_text(s, "rate") == "inf" && w.requests.front().timestamp_s.has_value();
  return w;
}

StatusOr<std::vector<double>> release_times(const json& s, const Workload& w, double rate) {
  if (w.replay) {
    ECO_ASSIGN_OR_RETURN(double speedup, setting<double>(s, "trace_speedup"));
    if (!(speedup > 0)) return invalid_argument_error("trace_speedup must be > 0");
    std::vector<double> t;
    for (const auto& q : w.requests) t.push_back(q.timestamp_s.value_or(0) / speedup);
    return t;
  }
  ECO_ASSIGN_OR_RETURN(double burstiness, positive_or_inf(setting_text(s, "burstiness"), "burstiness"));
  ECO_ASSIGN_OR_RETURN(uint64_t seed, setting<uint64_t>(s, "seed"));
  ECO_ASSIGN_OR_RETURN(auto proc, loadgen::ArrivalProcess::create({.rate = rate, .burstiness = burstiness, .seed = seed}));
  return proc.times(w.requests.size());
}

std::vector<sim::SimRequest> sim_requests(const Workload& w, const std::vector<double>& times,
                                          const SimulateDeployment& d) {
  std::vector<sim::SimRequest> out(w.requests.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const loadgen::BenchRequest& b = w.requests[i];
    sim::SimRequest& r = out[i];
    r.arrival_s = times[i];
    r.input_tokens = static_cast<int32_t>(std::max<int64_t>(1, b.input_tokens + d.prompt_extra_tokens));
    r.slo_ttft_s = d.request_slo_ttft_s;
    r.slo_tpot_s = d.request_slo_tpot_s;
    r.output_tokens = static_cast<int32_t>(std::max<int64_t>(1, b.output_tokens));
    r.priority = b.priority ? static_cast<int32_t>(-*b.priority) : 0;  // vLLM: lower runs first
    r.prefix_blocks = b.hash_ids;
    if (b.hash_block_tokens > 0) r.prefix_block_tokens = static_cast<int32_t>(b.hash_block_tokens);
  }
  return out;
}

// Requests as `ecoserve bench` records them: a rejected request is an HTTP 429, an invalid one a 400.
std::vector<loadgen::RequestRecord> records_of(const sim::SimResult& r, const Workload& w) {
  std::vector<loadgen::RequestRecord> out(r.requests.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const sim::SimRequestResult& q = r.requests[i];
    loadgen::RequestRecord& rec = out[i];
    rec.index = static_cast<int64_t>(i);
    rec.scheduled_s = rec.sent_s = q.arrival_s;
    rec.first_token_s = q.first_token_s;
    rec.end_s = q.end_s;
    rec.chunk_s = q.token_s;
    rec.input_tokens = q.input_tokens;
    rec.output_tokens = q.output_tokens;
    rec.expected_output_tokens = w.requests[i].output_tokens;
    rec.input_tokens_from_usage = rec.output_tokens_from_usage = true;
    rec.success = q.success;
    rec.priority_class = w.requests[i].priority_class;
    rec.priority = w.requests[i].priority;
    rec.long_request = w.requests[i].long_request;
    if (q.success) {
      rec.http_status = 200;
    } else if (q.finish_reason == "rejected" || q.finish_reason == "invalid") {
      rec.error = loadgen::ErrorKind::kHttpStatus;
      rec.http_status = q.finish_reason == "invalid" ? 400 : 429;
      rec.error_message = q.error;
    } else if (q.finish_reason == "timeout") {
      rec.error = loadgen::ErrorKind::kTimeout;
      rec.error_message = q.error;
    } else {
      rec.error = loadgen::ErrorKind::kStreamError;
      rec.error_message = q.error.empty() ? q.finish_reason : q.error;
    }
  }
  return out;
}

json timeline_json(const sim::SimResult& r) {
  const double end = r.duration_s;
  json lanes = json::array();
  for (const sim::SimInstanceReport& inst : r.instances) {
    json steps = json::array();
    for (const instance::StepRecord& s : inst.steps) {
      steps.push_back(json::array({seconds_since_epoch(s.start) - end, s.seconds, s.num_prefill_tokens,
                                   s.num_decode_tokens, s.num_prefill_seqs, s.num_decode_seqs, s.phase}));
    }
    lanes.push_back({{"name", inst.name}, {"role", inst.role}, {"steps", steps}});
  }
  json migrations = json::array();
  for (const sim::SimMigration& m : r.migrations) {
    migrations.push_back({{"request", m.request},
                          {"from", r.instances[static_cast<size_t>(m.from)].name},
                          {"to", r.instances[static_cast<size_t>(m.to)].name},
                          {"reason", m.reason},
                          {"outcome", m.outcome},
                          {"start_s", m.started_s - end},
                          {"stop_s", nullptr},
                          {"end_s", m.finished_s - end},
                          {"stages", m.stages},
                          {"bytes", m.bytes},
                          {"downtime_s", m.downtime_s}});
  }
  return json{{"seconds", std::max(end, 1e-9)},
              {"columns", {"start_s", "duration_s", "prefill_tokens", "decode_tokens", "prefill_seqs", "decode_seqs", "phase"}},
              {"instances", lanes},
              {"migrations", migrations}};
}

json stats_json(const sim::SimResult& r) {
  const sim::SimStats& s = r.stats;
  json inst = json::array();
  for (const sim::SimInstanceReport& i : r.instances) {
    inst.push_back({{"name", i.name}, {"role", i.role}, {"steps", i.counters.steps},
                    {"busy_s", i.counters.busy_seconds},
                    {"utilization", r.duration_s > 0 ? i.counters.busy_seconds / r.duration_s : 0.0},
                    {"prefill_tokens", i.counters.prefill_tokens}, {"decode_tokens", i.counters.decode_tokens},
                    {"kv_blocks", i.total_blocks}, {"free_blocks_at_end", i.free_blocks_at_end}});
  }
  return json{{"completed", s.completed}, {"failed", s.failed}, {"rejected", s.rejected},
              {"kv_transfers", s.kv_transfers}, {"kv_transfer_bytes", s.kv_transfer_bytes},
              {"kv_transfer_seconds", s.kv_transfer_seconds}, {"local_prefills", s.local_prefills},
              {"migrations_started", s.migrations_started}, {"migrations_completed", s.migrations_completed},
              {"migrated_bytes", s.migrated_bytes}, {"network_bytes_sent", s.network_bytes_sent},
              {"network_bytes_delivered", s.network_bytes_delivered}, {"preemptions", s.preemptions},
              {"events", s.events}, {"layout", s.layout}, {"simulated_s", r.duration_s}, {"instances", inst}};
}

class ProgressBar {
 public:
  ProgressBar(std::FILE* out, std::string label) : out_(out), label_(std::move(label)) {}
  void operator()(int64_t done, int64_t total) {
    if (!out_ || total <= 0) return;
    const int64_t percent = 100 * done / total;
    if (percent == last_percent_) return;  // at most 101 redraws
    last_percent_ = percent;
    const int width = 30;
    const int filled = static_cast<int>(width * done / total);
    std::fprintf(out_, "\r%s [%s%s] %lld/%lld", label_.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total));
    if (done == total) std::fputc('\n', out_);
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  std::string label_;
  int64_t last_percent_ = -1;
};

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return permission_denied_error("cannot write '{}'", path);
  out << text;
  return out ? ok_status() : data_loss_error("write to '{}' failed", path);
}

StatusOr<std::vector<double>> parse_list(const std::string& s, const char* what) {
  std::vector<double> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    ECO_ASSIGN_OR_RETURN(double v, positive_or_inf(item, what));
    out.push_back(v);
  }
  if (out.empty()) return invalid_argument_error("{} is empty", what);
  return out;
}

int run_simulate(const SimulateArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "ecoserve simulate: %s\n", s.message().c_str());
    return 1;
  };
  auto settings = merge_settings(a);
  if (!settings.ok()) return fail(settings.status());
  const json& s = *settings;
  auto deployment = simulate_deployment(s, !a.timeline_svg.empty() || !a.result_json.empty());
  if (!deployment.ok()) return fail(deployment.status());
  const sim::DeploymentSpec* spec = &deployment->spec;
  auto options = sim::build_cluster(*spec);
  if (!options.ok()) return fail(options.status());
  for (auto& inst : options->instances) inst.options.executor.step_overhead_seconds = deployment->step_overhead_s;
  if ((options->autoscale || options->scale_by_freeness) && !options->scale_template) {
    options->scale_template = options->instances.front();  // new instances are copies of the first
  }
  options->keep_token_times = a.token_times;
  options->request_timeout_s = s.at("request_timeout").get<double>();
  auto workload = build_workload(s);
  if (!workload.ok()) return fail(workload.status());
  auto percentiles = parse_list(setting_text(s, "percentiles"), "percentiles");
  if (!percentiles.ok()) return fail(percentiles.status());
  loadgen::SloOptions slo;
  if (!s.at("slo_ttft_ms").is_null()) slo.ttft_ms = s.at("slo_ttft_ms").get<double>();
  if (!s.at("slo_tpot_ms").is_null()) slo.tpot_ms = s.at("slo_tpot_ms").get<double>();
  std::vector<double> pct;
  for (double p : *percentiles) if (p != 50 && p <= 100) pct.push_back(p);
  loadgen::MetricsOptions mo{.percentiles = pct, .slo = slo, .by_priority = false, .by_length = false};
  const std::string layout =
      options->strategy == "fudg"
          ? fmt::format("{} prefill (tp{} pp{}) + {} decode (tp{} pp{})", spec->prefill.instances,
                        spec->prefill.par.tp, spec->prefill.par.pp, spec->decode.instances, spec->decode.par.tp,
                        spec->decode.par.pp)
          : fmt::format("{} x tp{} pp{}", spec->mixed.instances, spec->mixed.par.tp, spec->mixed.par.pp);
  if (!a.quiet) {
    std::fprintf(stderr, "simulating %s on %s: %s, %s, cost model %s, %zu instances, %zu requests\n",
                 options->strategy.c_str(), spec->gpu.c_str(), spec->model.c_str(), layout.c_str(),
                 options->instances[0].cost_model->name().data(), options->instances.size(),
                 workload->requests.size());
  }
  auto run_once = [&](double rate, const std::string& label) -> StatusOr<std::pair<sim::SimResult, double>> {
    ECO_ASSIGN_OR_RETURN(auto times, release_times(s, *workload, rate));
    const std::vector<sim::SimRequest> reqs = sim_requests(*workload, times, *deployment);
    ECO_ASSIGN_OR_RETURN(auto cluster, sim::SimCluster::create(*options));
    ProgressBar bar(a.quiet ? nullptr : stderr, label);
    const auto t0 = std::chrono::steady_clock::now();
    ECO_ASSIGN_OR_RETURN(sim::SimResult result, cluster->run(reqs, std::ref(bar)));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::make_pair(std::move(result), wall);
  };

  json config = s;
  config["layout"] = layout;
  config["num_prompts"] = workload->requests.size();
  config["trace_replay"] = workload->replay;
  config["simulated"] = true;
  config["request_slo_ttft_ms"] = deployment->request_slo_ttft_s * 1e3;  // every request's (0: none)
  config["request_slo_tpot_ms"] = deployment->request_slo_tpot_s * 1e3;
  std::optional<loadgen::GoodputSearchResult> sweep;
  std::optional<std::pair<sim::SimResult, double>> final_run;
  if (a.goodput_search) {
    if (!slo.enabled()) return fail(invalid_argument_error("--goodput-search needs slo_ttft_ms and/or slo_tpot_ms"));
    if (!(a.attainment > 0 && a.attainment <= 100)) return fail(invalid_argument_error("--attainment must be in (0, 100]"));
    loadgen::GoodputSearchOptions so{.min_rate = a.search_min_rate, .max_rate = a.search_max_rate,
                                     .steps = a.search_steps, .target_attainment = a.attainment / 100.0};
    config["goodput_search"] = {{"min_rate", so.min_rate}, {"max_rate", so.max_rate}, {"steps", so.steps},
                                {"attainment", a.attainment}};
    std::vector<std::pair<double, std::pair<sim::SimResult, double>>> runs;
    int probe_no = 0;
    auto probe = [&](double rate) -> StatusOr<loadgen::GoodputProbe> {
      ECO_ASSIGN_OR_RETURN(auto r, run_once(rate, fmt::format("rate {:g}", rate)));
      const auto m = loadgen::compute_metrics(records_of(r.first, *workload), r.first.duration_s, mo);
      runs.emplace_back(rate, std::move(r));
      return loadgen::GoodputProbe{.rate = rate, .attainment = m.attainment, .goodput = m.goodput};
    };
    auto found = loadgen::goodput_search(so, probe, [&](const loadgen::GoodputProbe& p) {
      std::printf("%s\n", loadgen::format_probe(++probe_no, p).c_str());
      std::fflush(stdout);
    });
    if (!found.ok()) return fail(found.status());
    sweep = *found;
    size_t pick = runs.size() - 1;
    if (found->best_rate) {
      for (size_t i = 0; i < runs.size(); ++i) {
        if (runs[i].first == *found->best_rate) pick = i;
      }
    }
    config["reported_rate"] = runs[pick].first;
    final_run = std::move(runs[pick].second);
  } else if (!a.sweep_rate.empty()) {
    auto rates = parse_list(a.sweep_rate, "--sweep-rate");
    if (!rates.ok()) return fail(rates.status());
    if (!slo.enabled()) return fail(invalid_argument_error("--sweep-rate needs slo_ttft_ms and/or slo_tpot_ms"));
    sweep.emplace();
    std::printf("%-12s %-12s %-12s %s\n", "rate", "attainment", "goodput", "P(first) TTFT / TPOT (ms)");
    for (double rate : *rates) {
      auto r = run_once(rate, fmt::format("rate {:g}", rate));
      if (!r.ok()) return fail(r.status());
      const auto records = records_of(r->first, *workload);
      const auto m = loadgen::compute_metrics(records, r->first.duration_s, mo);
      loadgen::GoodputProbe p{.rate = rate, .attainment = m.attainment, .goodput = m.goodput, .pass = false};
      sweep->probes.push_back(p);
      std::printf("%-12g %-12.3f %-12.3f %.1f / %.1f\n", rate, m.attainment, m.goodput,
                  m.ttft_ms.percentiles.empty() ? m.ttft_ms.median : m.ttft_ms.percentiles.front().second,
                  m.tpot_ms.percentiles.empty() ? m.tpot_ms.median : m.tpot_ms.percentiles.front().second);
      final_run = std::move(*r);
    }
  } else {
    auto rate = positive_or_inf(setting_text(s, "rate"), "rate");
    if (!rate.ok()) return fail(rate.status());
    auto r = run_once(*rate, "simulate");
    if (!r.ok()) return fail(r.status());
    final_run = std::move(*r);
  }
  const sim::SimResult& result = final_run->first;
  const auto records = records_of(result, *workload);
  const auto metrics = loadgen::compute_metrics(records, result.duration_s, mo);
  loadgen::ReportInfo info{.max_concurrency = 0, .token_counts_exact = true, .percentiles = pct, .slo = slo};
  std::printf("%s", loadgen::format_report(metrics, info).c_str());
  if (a.goodput_search && sweep) std::printf("%s", loadgen::format_search_summary(*sweep, a.attainment / 100.0).c_str());
  const sim::SimStats& st = result.stats;
  std::printf("%-40s%-10lld\n", "Simulated events:", static_cast<long long>(st.events));
  std::printf("%-40s%-10.2f\n", "Simulator wall time (s):", final_run->second);
  if (st.kv_transfers > 0) {
    std::printf("%-40s%-10lld\n", "KV transfers:", static_cast<long long>(st.kv_transfers));
    std::printf("%-40s%-10.1f\n", "KV transferred (MB):", st.kv_transfer_bytes / 1e6);
  }
  if (st.migrations_started > 0) {
    std::printf("%-40s%lld / %lld\n", "Migrations completed / started:", static_cast<long long>(st.migrations_completed),
                static_cast<long long>(st.migrations_started));
  }
  std::printf("%-40s%-10lld\n", "Preemptions:", static_cast<long long>(st.preemptions));
  std::printf("==================================================\n");
  const loadgen::RunVerdict verdict = loadgen::judge_run(metrics.completed, metrics.failed, 1.0);
  if (!a.result_json.empty()) {
    json j = loadgen::result_json(config, metrics, records, sweep);
    j["simulation"] = stats_json(result);
    j["timeline"] = timeline_json(result);
    j["exit_code"] = verdict.exit_code;
    if (Status w = write_text(a.result_json, j.dump(2, ' ', false, json::error_handler_t::replace)); !w.ok()) {
      return fail(w);
    }
  }
  if (!a.plot_dir.empty()) {
    if (Status w = loadgen::write_plots(a.plot_dir, records, sweep, a.attainment / 100.0); !w.ok()) return fail(w);
  }
  if (!a.timeline_svg.empty()) {
    auto svg = loadgen::render_timeline_svg(
        timeline_json(result),
        fmt::format("ecoserve simulate: {} {} on {} ({})", options->strategy, spec->model, spec->gpu, layout));
    if (!svg.ok()) return fail(svg.status());
    if (Status w = write_text(a.timeline_svg, *svg); !w.ok()) return fail(w);
  }
  if (verdict.exit_code != 0) std::fprintf(stderr, "ecoserve simulate: FAILED: %s\n", verdict.reason.c_str());
  return verdict.exit_code;
}

}  // namespace

void add_simulate_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<SimulateArgs>();
  auto* cmd = app.add_subcommand(
      "simulate",
      "Simulate a strategy (nodg, fudg, padg, llumnix) on a GPU or CPU cluster: the live scheduling code with a\n"
      "cost model in place of the engine. Prints the report of `ecoserve bench`; settings from --config\n"
      "(YAML or JSON, keys as the flags with '_') and flags (flags win). `simulate cost` is the step-time calculator.");
  cmd->add_option("--config", a->config, "YAML or JSON file of settings (keys: the flag names with '_' for '-')");
  add_simulate_setting_flags(cmd, a->flags);
  cmd->add_option("--sweep-rate", a->sweep_rate,
                  "comma-separated rates (req/s): simulate each and print attainment and goodput per rate "
                  "(attainment_vs_rate.svg with --plot-dir); the last rate's run is reported");
  cmd->add_flag("--goodput-search", a->goodput_search,
                "find the highest rate whose SLO attainment is at least --attainment (bisection, as `ecoserve bench`); "
                "reports the run at that rate");
  cmd->add_option("--attainment", a->attainment, "target SLO attainment (%) for --goodput-search")->capture_default_str();
  cmd->add_option("--search-min-rate", a->search_min_rate, "lowest rate probed (req/s)")->capture_default_str();
  cmd->add_option("--search-max-rate", a->search_max_rate, "highest rate probed (req/s)")->capture_default_str();
  cmd->add_option("--search-steps", a->search_steps, "bisection probes")->capture_default_str();
  cmd->add_option("--result-json", a->result_json, "write the report, every request and the timeline as JSON");
  cmd->add_option("--plot-dir", a->plot_dir, "write the CDF and throughput SVG plots of `ecoserve bench` here");
  cmd->add_option("--timeline-svg", a->timeline_svg, "draw every instance's steps (and migrations) to this SVG");
  cmd->add_flag("--no-token-times", [a](int64_t) { a->token_times = false; },
                "do not keep every token's time (saves memory on huge runs; ITL is then not reported)");
  cmd->add_flag("--quiet", a->quiet, "no progress bar");
  add_simulate_cost_subcommand(cmd, exit_code);
  cmd->callback([a, cmd, &exit_code] {
    if (!cmd->get_subcommands().empty()) return;  // `simulate cost` ran
    exit_code = run_simulate(*a);
  });
}

}  // namespace ecoserve::apps
