// `ecoserve bench`: load generator and report for any OpenAI-compatible server
// (ecoserve, vLLM, llama-server), and `ecoserve bench stats` for dataset statistics.
// Exit status: 1 when it cannot start (bad arguments, unreadable dataset or
// tokenizer, bad URL, model discovery failed), and 1 after printing (and writing)
// the report when the run failed by loadgen::judge_run: no request succeeded, or
// more than --max-failure-rate of them failed; 0 otherwise.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/ecoserve/commands.h"
#include "base/clock.h"
#include "loadgen/arrival_process.h"
#include "loadgen/bench_runner.h"
#include "loadgen/dataset.h"
#include "loadgen/dataset_stats.h"
#include "loadgen/goodput_search.h"
#include "loadgen/metrics.h"
#include "loadgen/report.h"
#include "loadgen/run_verdict.h"
#include "loadgen/seeded_share.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ecoserve::apps {
namespace {

using namespace ecoserve::loadgen;

struct BenchArgs {
  std::string url = "http://127.0.0.1:8000";
  std::string model;  // empty: the first of GET /v1/models
  std::optional<std::string> api_key;  // unset: $OPENAI_API_KEY
  double max_failure_rate = 1.0;
  std::string endpoint = "completions";
  std::string tokenizer;
  std::vector<std::string> dataset = {"synthetic"};
  std::string input_len;
  std::string output_len;
  std::string preset;
  double length_scale = 1.0;
  std::optional<double> long_fraction;  // unset: no long mix
  std::string long_input_len;
  std::string long_output_len;
  double high_priority_fraction = 0.0;
  std::int64_t high_priority_value = -1;
  std::int64_t num_prompts = 200;
  std::string rate = "inf";
  std::string burstiness = "1";
  double trace_speedup = 1.0;
  int max_concurrency = 0;
  std::uint64_t seed = 0;
  double request_timeout_s = 600;
  bool ignore_eos = true;
  double temperature = 0.0;
  std::string percentiles = "90,99";
  std::optional<double> slo_ttft_ms, slo_tpot_ms;
  bool goodput_search = false;
  double attainment = 90;
  double search_min_rate = 0.5, search_max_rate = 64;
  int search_steps = 6;
  std::string result_json;
  std::string plot_dir;
  bool quiet = false;
  bool keep_text = false;
};

struct StatsArgs {
  std::vector<std::string> dataset;
  std::string tokenizer;
  std::int64_t min_count = 2;
  std::int64_t min_prefix = 64;
};

StatusOr<double> parse_positive_or_inf(const std::string& s, const char* what) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0))
    return invalid_argument_error("{} must be a positive number or inf, got '{}'", what, s);
  return v;
}

StatusOr<std::vector<double>> parse_percentiles(const std::string& s) {
  std::vector<double> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    char* end = nullptr;
    double v = std::strtod(item.c_str(), &end);
    if (end != item.c_str() + item.size() || v < 0 || v > 100)
      return invalid_argument_error("--percentiles: '{}' is not a number in [0, 100]", item);
    if (v == 50) continue;  // the median is always shown
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

struct Tok {
  std::unique_ptr<model::GgufFile> file;
  std::unique_ptr<model::Tokenizer> tokenizer;
};

StatusOr<Tok> load_tokenizer(const std::string& path) {
  Tok t;
  if (path.empty()) return t;
  ECO_ASSIGN_OR_RETURN(t.file, model::GgufFile::open(path));
  auto tok = model::Tokenizer::from_gguf(*t.file);
  if (!tok.ok()) return tok.status().with_prefix(fmt::format("--tokenizer '{}'", path));
  t.tokenizer = std::move(tok).value();
  return t;
}

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return permission_denied_error("cannot write '{}'", path);
  out << text;
  return out ? ok_status() : data_loss_error("write to '{}' failed", path);
}

// Runs the whole `bench` command. Returns the process exit code.
int run_bench(const BenchArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "ecoserve bench: %s\n", s.message().c_str());
    return 1;
  };
  auto url = ServerUrl::parse(a.url);
  if (!url.ok()) return fail(url.status());
  auto endpoint = parse_endpoint(a.endpoint);
  if (!endpoint.ok()) return fail(endpoint.status());
  if (a.dataset.empty() || a.dataset.size() > 2)
    return fail(invalid_argument_error("--dataset takes KIND [FILE]"));
  auto kind = parse_dataset_kind(a.dataset[0]);
  if (!kind.ok()) return fail(kind.status());
  if (*kind != DatasetKind::kSynthetic && a.dataset.size() != 2)
    return fail(invalid_argument_error("--dataset {} needs a FILE", a.dataset[0]));
  auto rate = parse_positive_or_inf(a.rate, "--rate");
  if (!rate.ok()) return fail(rate.status());
  auto burstiness = parse_positive_or_inf(a.burstiness, "--burstiness");
  if (!burstiness.ok()) return fail(burstiness.status());
  auto percentiles = parse_percentiles(a.percentiles);
  if (!percentiles.ok()) return fail(percentiles.status());
  if (Status s = validate_max_failure_rate(a.max_failure_rate); !s.ok()) return fail(s);
  auto api_key = choose_api_key(a.api_key, std::getenv("OPENAI_API_KEY"));
  if (!api_key.ok()) return fail(api_key.status());
  // Appended to authentication failures: which key was sent, or that none was.
  const std::string auth_hint =
      api_key->key.empty() ? "no API key was sent: pass --api-key KEY or set OPENAI_API_KEY"
                           : fmt::format("the API key from {} was rejected", api_key->source);
  if (a.request_timeout_s <= 0) return fail(invalid_argument_error("--request-timeout must be > 0"));
  if (a.trace_speedup <= 0) return fail(invalid_argument_error("--trace-speedup must be > 0"));
  if (a.max_concurrency < 0) return fail(invalid_argument_error("--max-concurrency must be >= 0"));
  SloOptions slo{a.slo_ttft_ms, a.slo_tpot_ms};
  if (a.goodput_search && !slo.enabled())
    return fail(invalid_argument_error("--goodput-search needs --slo-ttft-ms and/or --slo-tpot-ms"));
  if (a.attainment <= 0 || a.attainment > 100)
    return fail(invalid_argument_error("--attainment must be in (0, 100], got {}", a.attainment));
  if (Status s = validate_share(a.high_priority_fraction, "--high-priority-fraction"); !s.ok()) return fail(s);
  if (a.long_fraction) {
    if (Status s = validate_share(*a.long_fraction, "--long-fraction"); !s.ok()) return fail(s);
  } else if (!a.long_input_len.empty() || !a.long_output_len.empty()) {
    return fail(invalid_argument_error("--long-input-len and --long-output-len need --long-fraction"));
  }

  WorkloadOptions wo;
  wo.kind = *kind;
  if (a.dataset.size() == 2) wo.path = a.dataset[1];
  wo.num_prompts = a.num_prompts;
  wo.length_scale = a.length_scale;
  wo.seed = a.seed;
  std::string in_spec = !a.input_len.empty() ? a.input_len : !a.preset.empty() ? a.preset : "128";
  std::string out_spec = !a.output_len.empty() ? a.output_len : !a.preset.empty() ? a.preset : "128";
  auto in_dist = LengthDistribution::parse(in_spec, LengthSide::kInput);
  if (!in_dist.ok()) return fail(in_dist.status().with_prefix("--input-len"));
  auto out_dist = LengthDistribution::parse(out_spec, LengthSide::kOutput);
  if (!out_dist.ok()) return fail(out_dist.status().with_prefix("--output-len"));
  wo.input_len = *in_dist;
  wo.output_len = *out_dist;
  wo.long_fraction = a.long_fraction.value_or(0.0);
  if (!a.long_input_len.empty()) {
    auto d = LengthDistribution::parse(a.long_input_len, LengthSide::kInput);
    if (!d.ok()) return fail(d.status().with_prefix("--long-input-len"));
    wo.long_input_len = *d;
  }
  if (!a.long_output_len.empty()) {
    auto d = LengthDistribution::parse(a.long_output_len, LengthSide::kOutput);
    if (!d.ok()) return fail(d.status().with_prefix("--long-output-len"));
    wo.long_output_len = *d;
  }
  wo.high_priority_fraction = a.high_priority_fraction;
  wo.high_priority_value = a.high_priority_value;

  auto tok = load_tokenizer(a.tokenizer);
  if (!tok.ok()) return fail(tok.status());
  PromptBuilder builder(tok->tokenizer.get());
  if (!a.quiet) std::fprintf(stderr, "building workload (%s)...\n", std::string(dataset_kind_name(*kind)).c_str());
  auto workload = build_workload(wo, builder);
  if (!workload.ok()) return fail(workload.status());
  if (workload->empty()) return fail(invalid_argument_error("the workload is empty"));

  // Release times: replay trace timestamps unless --rate was given.
  bool replay = !a.goodput_search && std::isinf(*rate) && a.rate == "inf" && workload->front().timestamp_s.has_value();
  auto make_times = [&](double r) -> StatusOr<std::vector<double>> {
    if (replay) {
      std::vector<double> t;
      for (const auto& q : *workload) t.push_back(q.timestamp_s.value_or(0) / a.trace_speedup);
      return t;
    }
    ECO_ASSIGN_OR_RETURN(auto proc, ArrivalProcess::create({.rate = r, .burstiness = *burstiness, .seed = a.seed}));
    return proc.times(workload->size());
  };

  RunnerOptions ro;
  ro.url = *url;
  ro.endpoint = *endpoint;
  ro.model = a.model;
  ro.api_key = api_key->key;
  if (ro.model.empty()) {
    auto m = discover_model(*url, ro.api_key);
    if (!m.ok()) {
      Status s = m.status().with_prefix("no --model given and model discovery failed");
      if (m.status().code() == StatusCode::kUnauthenticated || m.status().code() == StatusCode::kPermissionDenied)
        s = Status(s.code(), fmt::format("{} ({})", s.message(), auth_hint));
      return fail(s);
    }
    ro.model = *m;
    if (!a.quiet) std::fprintf(stderr, "model: %s (from /v1/models)\n", ro.model.c_str());
  }
  ro.request_timeout_s = a.request_timeout_s;
  ro.max_concurrency = a.max_concurrency;
  ro.ignore_eos = a.ignore_eos;
  ro.temperature = a.temperature;
  ro.keep_text = a.keep_text;
  ro.progress = a.quiet ? nullptr : stderr;
  SteadyClock clock;
  BenchmarkRunner runner(ro, clock, builder);

  MetricsOptions mo{.percentiles = *percentiles, .slo = slo, .by_priority = wo.high_priority_fraction > 0,
                    .by_length = wo.long_fraction > 0};
  std::int64_t num_high = 0, num_long = 0;
  for (const auto& q : *workload) {
    num_high += q.priority_class == PriorityClass::kHigh;
    num_long += q.long_request;
  }
  auto describe = [](const std::optional<LengthDistribution>& d) {
    return d ? nlohmann::json(d->describe()) : nlohmann::json(nullptr);
  };
  nlohmann::json config = {
      {"url", url->to_string()}, {"model", ro.model}, {"endpoint", std::string(endpoint_name(*endpoint))},
      {"api_key", api_key->source.empty() ? "none" : api_key->source},  // where it came from, never the key
      {"tokenizer", a.tokenizer}, {"dataset", a.dataset}, {"input_len", wo.input_len.describe()},
      {"output_len", wo.output_len.describe()}, {"length_scale", a.length_scale},
      {"num_prompts", workload->size()}, {"rate", a.rate}, {"burstiness", a.burstiness},
      {"trace_replay", replay}, {"trace_speedup", a.trace_speedup}, {"max_concurrency", a.max_concurrency},
      {"seed", a.seed}, {"request_timeout_s", a.request_timeout_s}, {"ignore_eos", a.ignore_eos},
      {"temperature", a.temperature}, {"percentiles", *percentiles},
      {"slo_ttft_ms", slo.ttft_ms ? nlohmann::json(*slo.ttft_ms) : nlohmann::json(nullptr)},
      {"slo_tpot_ms", slo.tpot_ms ? nlohmann::json(*slo.tpot_ms) : nlohmann::json(nullptr)},
      {"token_counts_exact", builder.exact()}, {"max_failure_rate", a.max_failure_rate},
      {"high_priority_fraction", wo.high_priority_fraction}, {"high_priority_value", wo.high_priority_value},
      {"num_high_priority", num_high}, {"long_fraction", wo.long_fraction},
      {"long_input_len", describe(wo.long_input_len)}, {"long_output_len", describe(wo.long_output_len)},
      {"num_long", num_long}};
  ReportInfo info{.max_concurrency = a.max_concurrency, .token_counts_exact = builder.exact(),
                  .percentiles = *percentiles, .slo = slo};

  RunResult final_run;
  BenchmarkMetrics final_metrics;
  std::optional<GoodputSearchResult> search;
  if (a.goodput_search) {
    GoodputSearchOptions so{.min_rate = a.search_min_rate, .max_rate = a.search_max_rate,
                            .steps = a.search_steps, .target_attainment = a.attainment / 100.0};
    config["goodput_search"] = {{"min_rate", so.min_rate}, {"max_rate", so.max_rate}, {"steps", so.steps},
                                {"attainment", a.attainment}};
    std::vector<std::pair<double, RunResult>> runs;
    int probe_no = 0;
    auto probe = [&](double r) -> StatusOr<GoodputProbe> {
      ECO_ASSIGN_OR_RETURN(auto times, make_times(r));
      // Each probe sends new prompts (the same lengths' distribution, seed + probe
      // index): a server's prefix cache warmed by an earlier probe must not serve a
      // later one, or every probe after the first measures cache hits, not prefill.
      WorkloadOptions probe_workload = wo;
      probe_workload.seed = a.seed + runs.size();
      ECO_ASSIGN_OR_RETURN(auto prompts, build_workload(probe_workload, builder));
      ECO_ASSIGN_OR_RETURN(auto res, runner.run(prompts, times));
      auto m = compute_metrics(res.records, res.duration_s, mo);
      runs.emplace_back(r, std::move(res));
      return GoodputProbe{.rate = r, .attainment = m.attainment, .goodput = m.goodput};
    };
    auto result = goodput_search(so, probe, [&](const GoodputProbe& p) {
      std::printf("%s\n", format_probe(++probe_no, p).c_str());
      std::fflush(stdout);
    });
    if (!result.ok()) return fail(result.status());
    search = *result;
    // Report the run at the best rate (or the last probe when none passed).
    std::size_t pick = runs.size() - 1;
    if (search->best_rate)
      for (std::size_t i = 0; i < runs.size(); ++i)
        if (runs[i].first == *search->best_rate) pick = i;
    final_run = std::move(runs[pick].second);
    config["reported_rate"] = runs[pick].first;
  } else {
    auto times = make_times(*rate);
    if (!times.ok()) return fail(times.status());
    auto res = runner.run(*workload, *times);
    if (!res.ok()) return fail(res.status());
    final_run = std::move(res).value();
  }
  final_metrics = compute_metrics(final_run.records, final_run.duration_s, mo);
  std::printf("%s", format_report(final_metrics, info).c_str());
  if (search) std::printf("%s", format_search_summary(*search, a.attainment / 100.0).c_str());
  std::fflush(stdout);
  // With --goodput-search the rule judges the reported run (the best rate's, or the
  // last probe's when no rate met the target): failures of the overloaded probes
  // above the best rate are what the search measures, not a broken server.
  RunVerdict verdict = judge_run(final_metrics.completed, final_metrics.failed, a.max_failure_rate);

  if (!a.result_json.empty()) {
    auto j = result_json(config, final_metrics, final_run.records, search);
    j["exit_code"] = verdict.exit_code;
    if (verdict.exit_code != 0) j["failure_reason"] = verdict.reason;
    if (Status s = write_file(a.result_json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
        !s.ok())
      std::fprintf(stderr, "ecoserve bench: %s\n", s.message().c_str());
  }
  if (!a.plot_dir.empty()) {
    if (Status s = write_plots(a.plot_dir, final_run.records, search, a.attainment / 100.0); !s.ok())
      std::fprintf(stderr, "ecoserve bench: %s\n", s.message().c_str());
  }
  if (verdict.exit_code != 0) {
    std::string line = "ecoserve bench: FAILED: ";
    if (search) line += fmt::format("the reported run (rate {:.3f} req/s): ", config["reported_rate"].get<double>());
    line += verdict.reason;
    if (!final_metrics.errors.empty())
      line += "; errors: " + summarize_errors(final_metrics.errors, final_metrics.error_examples);
    if (final_metrics.errors.contains("http_401") || final_metrics.errors.contains("http_403"))
      line += " (" + auth_hint + ")";
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  return verdict.exit_code;
}

int run_stats(const StatsArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "ecoserve bench stats: %s\n", s.message().c_str());
    return 1;
  };
  if (a.dataset.size() != 2) return fail(invalid_argument_error("--dataset takes KIND FILE"));
  auto kind = parse_dataset_kind(a.dataset[0]);
  if (!kind.ok()) return fail(kind.status());
  if (*kind == DatasetKind::kSynthetic) return fail(invalid_argument_error("stats needs a dataset file"));
  auto tok = load_tokenizer(a.tokenizer);
  if (!tok.ok()) return fail(tok.status());
  StatsOptions o{.kind = *kind, .path = a.dataset[1], .min_count = a.min_count,
                 .min_prefix_tokens = a.min_prefix, .tokenizer = tok->tokenizer.get()};
  auto stats = compute_dataset_stats(o);
  if (!stats.ok()) return fail(stats.status());
  std::printf("%s", format_dataset_stats(*stats, o).c_str());
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Benchmark an OpenAI-compatible server (ecoserve, vLLM, llama-server): streamed requests,\n"
      "TTFT/TPOT/ITL/E2E, throughput, SLO attainment, goodput; output like `vllm bench serve`.");
  cmd->add_option("--url", args->url, "server base URL (http only)")->capture_default_str();
  cmd->add_option("--model", args->model, "model name sent in requests (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", args->api_key,
                  "send 'Authorization: Bearer KEY' on every request, /v1/models included (default: "
                  "$OPENAI_API_KEY when set; an empty KEY sends none). The environment keeps the key out of `ps`");
  cmd->add_option("--endpoint", args->endpoint, "completions or chat")->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "GGUF file whose tokenizer counts tokens and builds exact-length prompts "
                  "(without it counts are approximate)");
  cmd->add_option("--dataset", args->dataset,
                  "KIND [FILE]: sharegpt FILE, azure FILE, mooncake FILE or synthetic")
      ->expected(1, 2);
  cmd->add_option("--input-len", args->input_len,
                  "synthetic input lengths: N, uniform:LO:HI, lognormal:MEAN:MEDIAN, alpaca, sharegpt, longbench");
  cmd->add_option("--output-len", args->output_len,
                  "output lengths (synthetic; ShareGPT without responses), same forms as --input-len");
  cmd->add_option("--preset", args->preset, "alpaca, sharegpt or longbench for both lengths (EcoServe Table 4)");
  cmd->add_option("--length-scale", args->length_scale,
                  "multiply generated lengths (and Mooncake's 512-token blocks) by this")
      ->capture_default_str();
  cmd->add_option("--long-fraction", args->long_fraction,
                  "mix of long and short requests: this share (0-1) of the requests, exactly round(F x N) chosen "
                  "with --seed, take their lengths from --long-input-len/--long-output-len (scaled by "
                  "--length-scale, with a random prompt of that length); the rest keep the dataset's or --input-len/"
                  "--output-len. The report adds results for the long and short classes");
  cmd->add_option("--long-input-len", args->long_input_len,
                  "input lengths of the long requests, same forms as --input-len (unset: the dataset's)");
  cmd->add_option("--long-output-len", args->long_output_len,
                  "output lengths of the long requests, same forms as --input-len (unset: the dataset's)");
  cmd->add_option("--high-priority-fraction", args->high_priority_fraction,
                  "this share (0-1) of the requests, exactly round(F x N) chosen with --seed independently of "
                  "arrivals and lengths, send \"priority\": --high-priority-value in their body; the others send "
                  "none. The report and --result-json add results for the high and normal classes")
      ->capture_default_str();
  cmd->add_option("--high-priority-value", args->high_priority_value,
                  "the \"priority\" high-priority requests send (vLLM semantics: a lower value is served earlier; "
                  "a request without the field has 0)")
      ->capture_default_str();
  cmd->add_option("--num-prompts", args->num_prompts, "requests to send (file datasets: 0 = all)")
      ->capture_default_str();
  cmd->add_option("--rate", args->rate, "request rate (req/s) or inf; traces replay their timestamps unless given")
      ->capture_default_str();
  cmd->add_option("--burstiness", args->burstiness,
                  "gamma shape of inter-arrivals: 1 = Poisson, <1 burstier, inf = evenly spaced")
      ->capture_default_str();
  cmd->add_option("--trace-speedup", args->trace_speedup, "divide trace timestamps by this when replaying")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", args->max_concurrency, "max requests in flight (0 = unlimited)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed,
                  "seed for sampling, prompts and arrivals (--goodput-search probe k uses seed + k for its prompts, so "
                  "no probe finds the previous probes' prompts in a prefix cache)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", args->request_timeout_s, "per-request timeout (s)")->capture_default_str();
  cmd->add_option("--ignore-eos", args->ignore_eos, "ask the server to ignore EOS (true/false)")
      ->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "sampling temperature sent")->capture_default_str();
  cmd->add_option("--percentiles", args->percentiles, "comma-separated percentiles besides mean and median")
      ->capture_default_str();
  cmd->add_option("--slo-ttft-ms", args->slo_ttft_ms, "TTFT SLO (ms)");
  cmd->add_option("--slo-tpot-ms", args->slo_tpot_ms, "TPOT SLO (ms)");
  cmd->add_flag("--goodput-search", args->goodput_search,
                "bisect the rate for the highest one meeting --attainment");
  cmd->add_option("--attainment", args->attainment, "target SLO attainment (%) for --goodput-search")
      ->capture_default_str();
  cmd->add_option("--search-min-rate", args->search_min_rate, "lower rate bound (req/s)")->capture_default_str();
  cmd->add_option("--search-max-rate", args->search_max_rate, "upper rate bound (req/s)")->capture_default_str();
  cmd->add_option("--search-steps", args->search_steps, "bisection probes")->capture_default_str();
  cmd->add_option("--result-json", args->result_json, "write configuration, metrics and every request here");
  cmd->add_option("--plot", args->plot_dir, "write SVG plots into this directory");
  cmd->add_flag("--save-text", args->keep_text, "keep generated text in --result-json");
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->add_option("--max-failure-rate", args->max_failure_rate,
                  "exit 1 (after the report) when more than this share (0-1) of requests failed; "
                  "a run where no request succeeded always exits 1")
      ->capture_default_str();
  cmd->footer(
      "Exit status: 0 when the run succeeded; 1 when bench cannot start (bad arguments, dataset, URL,\n"
      "model discovery failed, e.g. HTTP 401) or, after the report is printed and written, when no\n"
      "request succeeded or more than --max-failure-rate of them failed (a share equal to it passes);\n"
      "stderr then has one 'ecoserve bench: FAILED: ...' line with the reason and the errors.\n"
      "With --goodput-search the rule judges the reported run (at the best rate meeting --attainment,\n"
      "or the last probe when none did); failures of the overloaded probes above it do not count, and\n"
      "finding no rate that meets the target is a result, not a failure.\n"
      "Trace replay is judged like any run. `bench stats` sends no requests.");

  auto sargs = std::make_shared<StatsArgs>();
  auto* stats = cmd->add_subcommand("stats", "Length distributions and prefix repetition of a dataset");
  stats->add_option("--dataset", sargs->dataset, "KIND FILE (sharegpt, azure, mooncake)")->expected(2)->required();
  stats->add_option("--tokenizer", sargs->tokenizer, "GGUF tokenizer for exact token ids");
  stats->add_option("--min-count", sargs->min_count, "prune trie nodes seen fewer than N times")
      ->capture_default_str();
  stats->add_option("--min-prefix", sargs->min_prefix, "a prompt shares a prefix if >= L tokens survive")
      ->capture_default_str();
  stats->callback([sargs, &exit_code] { exit_code = run_stats(*sargs); });
  cmd->callback([args, stats, &exit_code] {
    if (stats->parsed()) return;
    exit_code = run_bench(*args);
  });
}

}  // namespace ecoserve::apps
