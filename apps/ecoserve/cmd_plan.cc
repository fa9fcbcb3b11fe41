// `ecoserve plan`: which strategy, parallel layout and instance counts serve a
// workload within its SLO on a GPU budget (sim/planner.h: DistServe's placement
// search, Algorithms 1 and 2, extended to nodg, padg and llumnix), by simulation.
// Prints the candidates (best goodput per GPU first) and the recommendation, a
// progress bar on stderr, and the whole plan as JSON with --json.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/ecoserve/commands.h"
#include "loadgen/dataset.h"
#include "loadgen/length_distribution.h"
#include "loadgen/prompt_builder.h"
#include "sim/planner.h"

namespace ecoserve::apps {
namespace {

using json = nlohmann::json;

struct PlanArgs {
  std::string model = "llama-2-13b";
  std::string gpu = "a100-80gb";
  std::string cost_model = "roofline";
  std::string profile_dir = "../shared/data/profiles/h100-bf16";
  int32_t gpus = 8;
  int32_t gpus_per_node = 8;
  std::string intra = "nvlink";
  double inter_node_gbps = 100;
  std::string strategies = "nodg,fudg,padg,llumnix";
  std::string dataset = "synthetic";
  std::string dataset_file;
  std::string input_len = "512";
  std::string output_len = "64";
  double length_scale = 1.0;
  int64_t num_prompts = 300;
  double rate = 0;
  double slo_ttft_ms = 0;
  double slo_tpot_ms = 0;
  double attainment = 90;
  uint64_t seed = 0;
  std::string policy = "chunked";
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t chunk_size = 512;
  int32_t probe_requests = 300;
  int32_t max_probe_requests = 4000;
  int32_t search_steps = 5;
  bool no_verify = false;
  std::string json_path;
  bool quiet = false;
};

StatusOr<std::vector<std::string>> split_strategies(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  if (out.empty()) return invalid_argument_error("--strategies lists none");
  return out;
}

StatusOr<std::vector<sim::SimRequest>> workload_template(const PlanArgs& a) {
  loadgen::WorkloadOptions wo;
  ECO_ASSIGN_OR_RETURN(wo.kind, loadgen::parse_dataset_kind(a.dataset));
  wo.path = a.dataset_file;
  if (wo.kind != loadgen::DatasetKind::kSynthetic && wo.path.empty()) {
    return invalid_argument_error("--dataset {} needs --dataset-file", a.dataset);
  }
  if (a.num_prompts < 1) return invalid_argument_error("--num-prompts must be >= 1, got {}", a.num_prompts);
  wo.num_prompts = a.num_prompts;
  wo.length_scale = a.length_scale;
  wo.seed = a.seed;
  auto in = loadgen::LengthDistribution::parse(a.input_len, loadgen::LengthSide::kInput);
  if (!in.ok()) return in.status().with_prefix("--input-len");
  auto out = loadgen::LengthDistribution::parse(a.output_len, loadgen::LengthSide::kOutput);
  if (!out.ok()) return out.status().with_prefix("--output-len");
  wo.input_len = *in;
  wo.output_len = *out;
  wo.lengths_only = true;
  loadgen::PromptBuilder builder(nullptr);
  ECO_ASSIGN_OR_RETURN(auto requests, loadgen::build_workload(wo, builder));
  std::vector<sim::SimRequest> w;
  for (const loadgen::BenchRequest& b : requests) {
    sim::SimRequest r;
    r.input_tokens = static_cast<int32_t>(std::max<int64_t>(1, b.input_tokens));
    // ShareGPT rows without an answer have no output length: use --output-len's mean.
    const int64_t out_tokens = b.output_tokens > 0 ? b.output_tokens : std::llround(out->mean() * a.length_scale);
    r.output_tokens = static_cast<int32_t>(std::max<int64_t>(1, out_tokens));
    r.priority = b.priority ? static_cast<int32_t>(-*b.priority) : 0;
    r.prefix_blocks = b.hash_ids;
    if (b.hash_block_tokens > 0) r.prefix_block_tokens = static_cast<int32_t>(b.hash_block_tokens);
    w.push_back(std::move(r));
  }
  if (w.empty()) return invalid_argument_error("the workload is empty");
  return w;
}

StatusOr<sim::PlanRequest> plan_request(const PlanArgs& a) {
  sim::PlanRequest r;
  sim::DeploymentSpec& b = r.base;
  ECO_ASSIGN_OR_RETURN(sim::ModelSpec model, sim::model_preset(a.model));
  ECO_ASSIGN_OR_RETURN(sim::GpuSpec gpu, sim::gpu_preset(a.gpu));
  b.model = model.name;
  b.gpu = gpu.name;
  if (a.cost_model != "roofline" && a.cost_model != "h100-profile") {
    return invalid_argument_error("--cost-model must be roofline or h100-profile, got '{}'", a.cost_model);
  }
  b.cost_model = a.cost_model;
  b.profile_dir = a.profile_dir;
  if (a.policy != "chunked" && a.policy != "prefill-first") {
    return invalid_argument_error("--policy must be chunked or prefill-first, got '{}'", a.policy);
  }
  b.core.policy = a.policy;
  b.core.max_num_seqs = a.max_num_seqs;
  b.core.max_num_batched_tokens = a.max_num_batched_tokens;
  b.core.chunk_size = a.chunk_size;
  b.cluster.padg.chunk_size = a.chunk_size;
  b.cluster.seed = a.seed;
  if (a.gpus < 1) return invalid_argument_error("--gpus must be >= 1, got {}", a.gpus);
  if (a.gpus_per_node < 1) return invalid_argument_error("--gpus-per-node must be >= 1, got {}", a.gpus_per_node);
  sim::TopologyOptions& t = b.cluster.topology;
  t.gpus_per_node = a.gpus_per_node;
  t.num_nodes = (a.gpus + a.gpus_per_node - 1) / a.gpus_per_node;
  t.intra = a.intra;
  t.inter_node_gbps = a.inter_node_gbps;
  ECO_RETURN_IF_ERROR(sim::Topology::validate(t));
  r.max_gpus = a.gpus;
  ECO_ASSIGN_OR_RETURN(r.strategies, split_strategies(a.strategies));
  if (!(a.slo_ttft_ms > 0) || !(a.slo_tpot_ms > 0)) {
    return invalid_argument_error("--slo-ttft-ms and --slo-tpot-ms must both be > 0");
  }
  if (!(a.attainment > 0 && a.attainment <= 100)) {
    return invalid_argument_error("--attainment must be in (0, 100], got {}", a.attainment);
  }
  r.slo = sim::SloSpec{a.slo_ttft_ms / 1000, a.slo_tpot_ms / 1000, a.attainment / 100};
  if (!(a.rate >= 0)) return invalid_argument_error("--rate must be >= 0, got {}", a.rate);
  r.target_rate = a.rate;
  ECO_ASSIGN_OR_RETURN(r.workload_template, workload_template(a));
  return r;
}

std::string layout_of(const sim::PlanCandidate& c) {
  const std::string prefix = c.strategy + " ";
  return c.description.rfind(prefix, 0) == 0 ? c.description.substr(prefix.size()) : c.description;
}

json to_json(const sim::Plan& p, const sim::PlanRequest& r, const PlanArgs& a, double seconds) {
  json cands = json::array();
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const sim::PlanCandidate& c = p.candidates[i];
    const sim::DeploymentSpec& s = c.spec;
    json roles = s.cluster.strategy == "fudg"
                     ? json{{"prefill", {{"instances", s.prefill.instances}, {"tp", s.prefill.par.tp}, {"pp", s.prefill.par.pp}}},
                            {"decode", {{"instances", s.decode.instances}, {"tp", s.decode.par.tp}, {"pp", s.decode.par.pp}}}}
                     : json{{"mixed", {{"instances", s.mixed.instances}, {"tp", s.mixed.par.tp}, {"pp", s.mixed.par.pp}}}};
    json j{{"strategy", c.strategy}, {"description", c.description}, {"gpus", c.gpus}, {"goodput_rps", c.goodput},
           {"goodput_per_gpu", c.goodput_per_gpu}, {"feasible", c.feasible}, {"recommended", i == p.recommended},
           {"placement", s.placement}, {"roles", roles}, {"note", c.note}};
    if (s.cluster.strategy == "padg") {
      j["macro_min"] = s.cluster.mitosis.macro_min;
      j["macro_max"] = s.cluster.mitosis.macro_max;
    }
    if (c.verified_attainment >= 0) {
      j["verified_rate_rps"] = c.verified_rate;
      j["verified_attainment"] = c.verified_attainment;
    }
    cands.push_back(std::move(j));
  }
  json evals = json::array();
  for (const sim::PlanEvaluation& e : p.evaluations) {
    evals.push_back({{"strategy", e.strategy}, {"unit", e.unit}, {"gpus", e.gpus}, {"goodput_rps", e.goodput},
                     {"goodput_per_gpu", e.goodput_per_gpu}, {"probes", e.probes}, {"note", e.note}});
  }
  const sim::WorkloadShape shape = sim::workload_shape(r.workload_template);
  return json{{"model", r.base.model}, {"gpu", r.base.gpu}, {"cost_model", r.base.cost_model},
              {"gpus", r.max_gpus}, {"gpus_per_node", r.base.cluster.topology.gpus_per_node},
              {"intra", r.base.cluster.topology.intra}, {"inter_node_gbps", r.base.cluster.topology.inter_node_gbps},
              {"policy", a.policy}, {"target_rate_rps", r.target_rate},
              {"slo", {{"ttft_ms", r.slo.ttft_s * 1000}, {"tpot_ms", r.slo.tpot_s * 1000}, {"attainment", r.slo.attainment}}},
              {"workload", {{"requests", r.workload_template.size()}, {"mean_input", shape.mean_input},
                            {"mean_output", shape.mean_output}}},
              {"candidates", cands},
              {"recommended", p.recommended < p.candidates.size() ? json(p.recommended) : json(nullptr)},
              {"reason", p.reason}, {"evaluations", evals}, {"seconds", seconds}};
}

// "\rplan [######........] 40% nodg mixed tp1pp1" on stderr, redrawn when the percent or the unit changes.
class PlanProgressBar {
 public:
  explicit PlanProgressBar(std::FILE* out) : out_(out) {}
  void operator()(const sim::PlanProgress& p) {
    if (!out_) return;
    const int percent = static_cast<int>(p.fraction * 100);
    if (percent == last_percent_ && p.what == last_what_) return;
    last_percent_ = percent;
    last_what_ = p.what;
    const int width = 30;
    const int filled = static_cast<int>(width * p.fraction);
    std::string what = p.what.substr(0, 48);
    std::fprintf(out_, "\rplan [%s%s] %3d%% %-48s", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), percent, what.c_str());
    if (p.fraction >= 1.0) std::fputc('\n', out_);
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  int last_percent_ = -1;
  std::string last_what_;
};

int run_plan(const PlanArgs& a) {
  auto request = plan_request(a);
  if (!request.ok()) {
    std::fprintf(stderr, "error: %s\n", request.status().message().c_str());
    return 1;
  }
  sim::PlanOptions o;
  o.probe.requests = a.probe_requests;
  o.probe.max_requests = std::max(a.max_probe_requests, a.probe_requests);
  o.probe.search_steps = a.search_steps;
  o.probe.seed = a.seed + 1;
  o.verify = !a.no_verify;
  auto bar = std::make_shared<PlanProgressBar>(a.quiet ? nullptr : stderr);
  o.progress = [bar](const sim::PlanProgress& p) { (*bar)(p); };
  const auto start = std::chrono::steady_clock::now();
  auto plan = sim::plan(*request, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!plan.ok()) {
    if (!a.quiet) std::fputc('\n', stderr);
    std::fprintf(stderr, "error: %s\n", plan.status().message().c_str());
    return 1;
  }
  const sim::PlanRequest& r = *request;
  const sim::WorkloadShape shape = sim::workload_shape(r.workload_template);
  std::printf("plan: %s on %d x %s (%s cost model), %d GPUs per node, %s, %g Gb/s between nodes\n", r.base.model.c_str(),
              r.max_gpus, r.base.gpu.c_str(), r.base.cost_model.c_str(), r.base.cluster.topology.gpus_per_node,
              r.base.cluster.topology.intra.c_str(), r.base.cluster.topology.inter_node_gbps);
  std::printf("workload: %zu requests, mean %.0f tokens in, %.0f out; SLO: %g%% within TTFT %g ms and TPOT %g ms%s\n",
              r.workload_template.size(), shape.mean_input, shape.mean_output, r.slo.attainment * 100,
              r.slo.ttft_s * 1000, r.slo.tpot_s * 1000,
              r.target_rate > 0 ? fmt::format("; target {:g} req/s", r.target_rate).c_str() : "");
  // "*" marks the recommended candidate; goodput in req/s.
  std::printf("  %-8s %-38s %4s %9s %11s  %s\n", "strategy", "layout", "GPUs", "goodput", "goodput/GPU", "note");
  for (size_t i = 0; i < plan->candidates.size(); ++i) {
    const sim::PlanCandidate& c = plan->candidates[i];
    std::printf("%s %-8s %-38s %4d %9.2f %11.3f  %s\n", i == plan->recommended ? "*" : " ", c.strategy.c_str(),
                layout_of(c).c_str(), c.gpus, c.goodput, c.goodput_per_gpu, c.note.c_str());
  }
  if (plan->recommended < plan->candidates.size()) {
    std::printf("recommended: %s because %s\n", plan->candidates[plan->recommended].description.c_str(),
                plan->reason.c_str());
  } else {
    std::printf("recommended: none: %s\n", plan->reason.c_str());
  }
  int32_t probes = 0;
  for (const sim::PlanEvaluation& e : plan->evaluations) probes += e.probes;
  std::printf("planned in %.1f s (%d simulated units, %d probes)\n", seconds,
              static_cast<int>(std::count_if(plan->evaluations.begin(), plan->evaluations.end(),
                                             [](const sim::PlanEvaluation& e) { return e.probes > 0; })),
              probes);
  if (!a.json_path.empty()) {
    std::ofstream f(a.json_path, std::ios::binary);
    f << to_json(*plan, r, a, seconds).dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "error: cannot write '%s'\n", a.json_path.c_str());
      return 1;
    }
  }
  return plan->recommended < plan->candidates.size() ? 0 : 2;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Search strategies, parallel layouts and instance counts for a workload and SLO on a GPU budget, by "
      "simulation (DistServe's placement algorithms, extended to nodg, padg and llumnix)");
  cmd->add_option("--model", a->model, "model preset (see `ecoserve simulate cost --help`), e.g. opt-13b, llama-2-70b")
      ->capture_default_str();
  cmd->add_option("--gpu", a->gpu, "GPU preset: a100-80gb, a800, h100-sxm, h200, l20, ...")->capture_default_str();
  cmd->add_option("--cost-model", a->cost_model, "step times: roofline | h100-profile (needs --gpu h100-sxm)")
      ->capture_default_str();
  cmd->add_option("--profile-dir", a->profile_dir, "the H100 profile for --cost-model h100-profile")
      ->capture_default_str();
  cmd->add_option("--gpus", a->gpus, "GPU budget (total); nodes = ceil(gpus / gpus-per-node)")->capture_default_str();
  cmd->add_option("--gpus-per-node", a->gpus_per_node, "GPUs per node (tensor parallelism stays inside one)")
      ->capture_default_str();
  cmd->add_option("--intra", a->intra, "link between the GPUs of a node: nvlink | pcie")->capture_default_str();
  cmd->add_option("--inter-node-gbps", a->inter_node_gbps, "network between nodes, per node and direction (Gb/s)")
      ->capture_default_str();
  cmd->add_option("--strategies", a->strategies, "comma-separated strategies to consider: nodg, fudg, padg, llumnix")
      ->capture_default_str();
  cmd->add_option("--dataset", a->dataset, "synthetic | sharegpt | azure | mooncake (lengths only; with --dataset-file)")
      ->capture_default_str();
  cmd->add_option("--dataset-file", a->dataset_file, "the dataset or trace file");
  cmd->add_option("--input-len", a->input_len,
                  "synthetic input lengths: N, uniform:LO:HI, lognormal:MEAN:MEDIAN, alpaca, sharegpt, longbench")
      ->capture_default_str();
  cmd->add_option("--output-len", a->output_len, "output lengths, same forms (ShareGPT rows without an answer: its mean)")
      ->capture_default_str();
  cmd->add_option("--length-scale", a->length_scale, "multiply generated lengths by this")->capture_default_str();
  cmd->add_option("--num-prompts", a->num_prompts, "requests in the workload template (probes cycle through it)")
      ->capture_default_str();
  cmd->add_option("--rate", a->rate, "target request rate (req/s); 0 = no target: the most goodput per GPU")
      ->capture_default_str();
  cmd->add_option("--slo-ttft-ms", a->slo_ttft_ms, "TTFT limit (ms), required")->required();
  cmd->add_option("--slo-tpot-ms", a->slo_tpot_ms, "TPOT limit (ms), required")->required();
  cmd->add_option("--attainment", a->attainment, "share of requests (%) that must meet both limits")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "workload and arrival seed")->capture_default_str();
  cmd->add_option("--policy", a->policy, "nodg/llumnix instance policy: chunked | prefill-first (vLLM)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "sequences per step at most")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "tokens per step at most")
      ->capture_default_str();
  cmd->add_option("--chunk-size", a->chunk_size, "prefill chunk (tokens)")->capture_default_str();
  cmd->add_option("--probe-requests", a->probe_requests,
                  "requests per simulated probe of one instance (larger units scale it)")
      ->capture_default_str();
  cmd->add_option("--max-probe-requests", a->max_probe_requests, "requests per probe at most")->capture_default_str();
  cmd->add_option("--search-steps", a->search_steps, "bisection steps of each goodput search")->capture_default_str();
  cmd->add_flag("--no-verify", a->no_verify, "do not simulate each candidate once on the real topology");
  cmd->add_option("--json", a->json_path, "write the plan (candidates, every simulated unit) as JSON to this file");
  cmd->add_flag("--quiet", a->quiet, "no progress bar");
  cmd->callback([a, &exit_code] { exit_code = run_plan(*a); });
}

}  // namespace ecoserve::apps
