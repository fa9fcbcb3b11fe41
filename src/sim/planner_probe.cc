#include "sim/planner_probe.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ecoserve::sim {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Instances of the helper role a probe at `rate` needs so that they run at most
// `utilization` of their capacity (`helper_rps` each).
int32_t helpers_for(double rate, double helper_rps, double utilization) {
  if (!(helper_rps > 0.0)) return 1;
  const double n = std::ceil(rate / (helper_rps * utilization) - 1e-9);
  return static_cast<int32_t>(std::clamp(n, 1.0, 4096.0));
}

}  // namespace

std::vector<SimRequest> retime(std::span<const SimRequest> requests, double rate, uint64_t seed) {
  std::vector<SimRequest> out;
  if (!(rate > 0.0)) return out;
  out.assign(requests.begin(), requests.end());
  uint64_t state = seed;
  double t = 0.0;  // unit-rate time
  for (size_t i = 0; i < out.size(); ++i) {
    if (i > 0) {
      const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
      t += -std::log1p(-u);
    }
    out[i].arrival_s = t / rate;
  }
  return out;
}

Status validate_probe_options(const ProbeOptions& o) {
  if (o.requests < 1) return invalid_argument_error("requests per probe must be >= 1, got {}", o.requests);
  if (o.max_requests < o.requests) {
    return invalid_argument_error("max requests per probe ({}) must be >= requests per probe ({})", o.max_requests,
                                  o.requests);
  }
  if (o.search_steps < 0 || o.search_steps > 30) {
    return invalid_argument_error("search steps must be in [0, 30], got {}", o.search_steps);
  }
  if (!(o.min_lifetimes >= 0.0)) return invalid_argument_error("min_lifetimes must be >= 0, got {}", o.min_lifetimes);
  if (!(o.warmup_fraction >= 0.0 && o.warmup_fraction < 1.0)) {
    return invalid_argument_error("warmup_fraction must be in [0, 1), got {}", o.warmup_fraction);
  }
  if (!(o.bracket_high > 0.0)) return invalid_argument_error("bracket_high must be > 0, got {}", o.bracket_high);
  if (!(o.bracket_ratio > 1.0)) return invalid_argument_error("bracket_ratio must be > 1, got {}", o.bracket_ratio);
  if (!(o.helper_utilization > 0.0 && o.helper_utilization <= 1.0)) {
    return invalid_argument_error("helper utilization must be in (0, 1], got {}", o.helper_utilization);
  }
  return ok_status();
}

std::vector<SimRequest> probe_workload(std::span<const SimRequest> workload_template, int32_t count, double rate,
                                       uint64_t seed, const SloSpec& slo) {
  std::vector<SimRequest> picked;
  if (workload_template.empty() || count <= 0) return picked;
  picked.reserve(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    SimRequest r = workload_template[static_cast<size_t>(i) % workload_template.size()];
    r.slo_ttft_s = std::max(0.0, slo.ttft_s);
    r.slo_tpot_s = std::max(0.0, slo.tpot_s);
    picked.push_back(std::move(r));
  }
  return retime(picked, rate, seed);
}

WorkloadShape workload_shape(std::span<const SimRequest> requests) {
  WorkloadShape s;
  if (requests.empty()) return s;
  for (const SimRequest& r : requests) {
    s.mean_input += r.input_tokens;
    s.mean_output += r.output_tokens;
  }
  s.mean_input /= static_cast<double>(requests.size());
  s.mean_output /= static_cast<double>(requests.size());
  return s;
}

DeploymentSpec mixed_unit(const DeploymentSpec& base, const std::string& strategy, Parallelism par, int32_t instances) {
  DeploymentSpec s = base;
  s.cluster.strategy = strategy;
  s.cluster.topology.num_nodes = 0;  // as many as the unit needs
  s.cluster.keep_token_times = false;
  s.record_steps = false;
  s.mixed = RoleSpec{instances, par};
  s.prefill = RoleSpec{};
  s.decode = RoleSpec{};
  s.placement = "packed";
  return s;
}

StatusOr<InstanceCapacity> instance_capacity(const DeploymentSpec& base, Parallelism par, WorkloadShape shape) {
  ECO_ASSIGN_OR_RETURN(SimClusterOptions o, build_cluster(mixed_unit(base, "nodg", par, 1)));
  const SimInstanceSpec& inst = o.instances.at(0);
  const policy::CostModel& cost = *inst.cost_model;
  InstanceCapacity c;
  c.par = par;
  c.kv_tokens = int64_t{inst.options.executor.num_kv_blocks} * inst.options.executor.block_size;
  const double in = std::max(1.0, shape.mean_input);
  const double out = std::max(1.0, shape.mean_output);
  const int64_t kv_batch = static_cast<int64_t>(static_cast<double>(c.kv_tokens) / (in + out));
  c.decode_batch = static_cast<int32_t>(std::clamp<int64_t>(kv_batch, 1, std::max(1, base.core.max_num_seqs)));
  policy::StepShape decode;
  decode.decode_seqs = c.decode_batch;
  decode.decode_context_tokens = static_cast<int64_t>(c.decode_batch * (in + out / 2));
  const double decode_step = cost.step_seconds(decode);
  c.decode_rps = decode_step > 0 ? c.decode_batch / (out * decode_step) : 0.0;
  const auto prompt = static_cast<int32_t>(std::lround(in));
  const int32_t chunk = base.core.chunk_size;
  c.prefill_seconds = cost.prefill_seconds(prompt, 0, chunk);
  double per_prompt = c.prefill_seconds;
  const int32_t packed = std::max(1, base.core.max_num_batched_tokens) / std::max(1, prompt);
  if (packed > 1) {
    policy::StepShape p;
    p.prefill_seqs = packed;
    p.prefill_tokens = packed * prompt;
    per_prompt = std::min(per_prompt, cost.step_seconds(p) / packed);
  }
  c.prefill_rps = per_prompt > 0 ? 1.0 / per_prompt : 0.0;
  c.mixed_rps = (c.prefill_rps > 0 && c.decode_rps > 0) ? 1.0 / (1.0 / c.prefill_rps + 1.0 / c.decode_rps) : 0.0;
  return c;
}

int32_t probe_requests(const ProbeOptions& options, int32_t instances) {
  const int64_t n = int64_t{options.requests} * std::max(1, instances);
  return static_cast<int32_t>(std::min<int64_t>(n, options.max_requests));
}

int32_t probe_count(const ProbeOptions& options, int32_t requests, double rate, const SloSpec& slo,
                    WorkloadShape shape) {
  const double lifetime = std::max(0.0, slo.ttft_s) + shape.mean_output * std::max(0.0, slo.tpot_s);
  const double stretched = std::ceil(rate * options.min_lifetimes * lifetime);
  const double n = std::max<double>(requests, std::min<double>(stretched, 1e9));
  return static_cast<int32_t>(std::min<double>(n, std::max(requests, options.max_requests)));
}

namespace {

// Runs `spec` at `rate` and drops the warm-up requests from the result.
StatusOr<SimResult> run_probe(const DeploymentSpec& spec, std::span<const SimRequest> workload_template,
                              const SloSpec& slo, double rate, int32_t requests, const ProbeOptions& options) {
  ECO_ASSIGN_OR_RETURN(SimClusterOptions o, build_cluster(spec));
  const int32_t n = probe_count(options, requests, rate, slo, workload_shape(workload_template));
  const std::vector<SimRequest> w = probe_workload(workload_template, n, rate, options.seed, slo);
  if (slo.ttft_s > 0 && slo.tpot_s > 0 && !w.empty()) {
    // Past the last request's SLO deadline nothing can still meet the SLO: stop there
    // (an overloaded probe would otherwise drain its whole queue). Exact: a request
    // cut off here would have missed anyway.
    int32_t max_out = 1;
    for (const SimRequest& q : w) max_out = std::max(max_out, q.output_tokens);
    const double end_s = w.back().arrival_s + slo.ttft_s + (max_out - 1) * slo.tpot_s + 1e-3;
    o.max_time = std::min(o.max_time, from_seconds(end_s));
  }
  ECO_ASSIGN_OR_RETURN(auto cluster, SimCluster::create(std::move(o)));
  ECO_ASSIGN_OR_RETURN(SimResult r, cluster->run(w));
  const auto warm = static_cast<ptrdiff_t>(options.warmup_fraction * static_cast<double>(r.requests.size()));
  r.requests.erase(r.requests.begin(), r.requests.begin() + warm);
  return r;
}

}  // namespace

StatusOr<GoodputSearch> measure_goodput(const SpecAtRate& spec_at_rate, std::span<const SimRequest> workload_template,
                                        const SloSpec& slo, double capacity_rps, int32_t requests,
                                        const ProbeOptions& options, const std::function<void()>& on_probe) {
  ECO_RETURN_IF_ERROR(validate_probe_options(options));
  if (workload_template.empty()) return invalid_argument_error("the workload template has no requests");
  if (!(capacity_rps > 0.0) || !std::isfinite(capacity_rps)) {
    return invalid_argument_error("the unit's capacity bound must be positive, got {}", capacity_rps);
  }
  auto run_at = [&](double rate) -> StatusOr<SimResult> {
    ECO_ASSIGN_OR_RETURN(DeploymentSpec spec, spec_at_rate(rate));
    auto r = run_probe(spec, workload_template, slo, rate, requests, options);
    if (on_probe) on_probe();
    return r;
  };
  const double hi = options.bracket_high * capacity_rps;
  return search_goodput(run_at, slo, hi / options.bracket_ratio, hi, options.search_steps);
}

StatusOr<double> attainment_at(const DeploymentSpec& spec, std::span<const SimRequest> workload_template,
                               const SloSpec& slo, double rate, int32_t requests, const ProbeOptions& options) {
  ECO_RETURN_IF_ERROR(validate_probe_options(options));
  ECO_ASSIGN_OR_RETURN(SimResult r, run_probe(spec, workload_template, slo, rate, requests, options));
  return slo_attainment(r, slo);
}

StatusOr<GoodputSearch> measure_mixed(const DeploymentSpec& base, const std::string& strategy, Parallelism par,
                                      int32_t instances, std::span<const SimRequest> workload_template,
                                      const SloSpec& slo, const ProbeOptions& options,
                                      const std::function<void()>& on_probe) {
  ECO_ASSIGN_OR_RETURN(InstanceCapacity cap, instance_capacity(base, par, workload_shape(workload_template)));
  const DeploymentSpec spec = mixed_unit(base, strategy, par, instances);
  return measure_goodput([&](double) -> StatusOr<DeploymentSpec> { return spec; }, workload_template, slo,
                         cap.mixed_rps * instances, probe_requests(options, instances), options, on_probe);
}

namespace {

// One node holding every GPU of the unit: the KV moves over the intra-node link
// whatever the number of helpers (Algorithm 1 assumes the transfer is cheap; where
// it is not, the final deployment's verification on the real topology shows it).
DeploymentSpec fudg_unit(const DeploymentSpec& base, RoleSpec prefill, RoleSpec decode) {
  DeploymentSpec s = mixed_unit(base, "fudg", Parallelism{}, 0);
  s.mixed = RoleSpec{};
  s.prefill = prefill;
  s.decode = decode;
  s.cluster.topology.num_nodes = 1;
  s.cluster.topology.gpus_per_node = std::max(s.cluster.topology.gpus_per_node, gpus_needed(s));
  return s;
}

}  // namespace

StatusOr<GoodputSearch> measure_prefill(const DeploymentSpec& base, Parallelism par, Parallelism helper,
                                        std::span<const SimRequest> workload_template, const SloSpec& slo,
                                        const ProbeOptions& options, const std::function<void()>& on_probe) {
  const WorkloadShape shape = workload_shape(workload_template);
  ECO_ASSIGN_OR_RETURN(InstanceCapacity cap, instance_capacity(base, par, shape));
  ECO_ASSIGN_OR_RETURN(InstanceCapacity help, instance_capacity(base, helper, shape));
  SloSpec ttft_only = slo;
  ttft_only.tpot_s = 0.0;
  auto spec_at = [&](double rate) -> StatusOr<DeploymentSpec> {
    return fudg_unit(base, RoleSpec{1, par},
                     RoleSpec{helpers_for(rate, help.decode_rps, options.helper_utilization), helper});
  };
  return measure_goodput(spec_at, workload_template, ttft_only, cap.prefill_rps, probe_requests(options, 1), options,
                         on_probe);
}

StatusOr<GoodputSearch> measure_decode(const DeploymentSpec& base, Parallelism par, Parallelism helper,
                                       std::span<const SimRequest> workload_template, const SloSpec& slo,
                                       const ProbeOptions& options, const std::function<void()>& on_probe) {
  const WorkloadShape shape = workload_shape(workload_template);
  ECO_ASSIGN_OR_RETURN(InstanceCapacity cap, instance_capacity(base, par, shape));
  ECO_ASSIGN_OR_RETURN(InstanceCapacity help, instance_capacity(base, helper, shape));
  SloSpec tpot_only = slo;
  tpot_only.ttft_s = 0.0;
  auto spec_at = [&](double rate) -> StatusOr<DeploymentSpec> {
    return fudg_unit(base, RoleSpec{helpers_for(rate, help.prefill_rps, options.helper_utilization), helper},
                     RoleSpec{1, par});
  };
  return measure_goodput(spec_at, workload_template, tpot_only, cap.decode_rps, probe_requests(options, 1), options,
                         on_probe);
}

std::string layout_name(Parallelism par) { return fmt::format("tp{}pp{}", par.tp, par.pp); }

}  // namespace ecoserve::sim
