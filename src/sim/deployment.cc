#include "sim/deployment.h"

#include <algorithm>

#include "sim/gpu_profile_cost_model.h"
#include "sim/roofline_cost_model.h"

namespace ecoserve::sim {

int32_t gpus_needed(const DeploymentSpec& spec) {
  if (spec.cluster.strategy == "fudg") {
    return spec.prefill.instances * spec.prefill.par.gpus() + spec.decode.instances * spec.decode.par.gpus();
  }
  return spec.mixed.instances * spec.mixed.par.gpus();
}

StatusOr<std::shared_ptr<const policy::CostModel>> make_cost_model(const DeploymentSpec& spec, Parallelism par) {
  if (spec.cost_model == "given") {
    if (!spec.given_cost_model) return invalid_argument_error("cost model 'given' without a model");
    return spec.given_cost_model;
  }
  ECO_ASSIGN_OR_RETURN(ModelSpec model, model_preset(spec.model));
  ECO_ASSIGN_OR_RETURN(GpuSpec gpu, gpu_preset(spec.gpu));
  if (spec.cost_model == "roofline") {
    ECO_ASSIGN_OR_RETURN(auto m, RooflineCostModel::create(model, gpu, par));
    return std::shared_ptr<const policy::CostModel>(std::move(m));
  }
  if (spec.cost_model == "h100-profile") {
    if (gpu.name != "h100-sxm") {
      return invalid_argument_error("the h100-profile cost model was measured on h100-sxm, not {}", gpu.name);
    }
    const std::string shape = profile_model_name(model);
    if (shape.empty()) return invalid_argument_error("the H100 profile has no model of {}'s shape", model.name);
    GpuProfileCostModel::Options o;
    o.pp = par.pp;
    ECO_ASSIGN_OR_RETURN(auto m, GpuProfileCostModel::load(spec.profile_dir, shape, par.tp, o));
    return std::shared_ptr<const policy::CostModel>(std::move(m));
  }
  return invalid_argument_error("unknown cost model '{}' (roofline, h100-profile, given)", spec.cost_model);
}

namespace {

struct Geometry {
  int32_t kv_blocks = 0;
  int32_t max_context = 0;
  int64_t kv_bytes_per_token = 0;
};

StatusOr<Geometry> geometry(const DeploymentSpec& spec, Parallelism par) {
  Geometry g;
  if (spec.cost_model == "given") {
    g.kv_blocks = spec.given_kv_blocks;
    g.max_context = spec.given_max_context;
    g.kv_bytes_per_token = spec.given_kv_bytes_per_token;
    if (g.kv_blocks <= 0 || g.max_context <= 0) {
      return invalid_argument_error("a given cost model needs KV blocks and a context ({} blocks, context {})",
                                    g.kv_blocks, g.max_context);
    }
    return g;
  }
  ECO_ASSIGN_OR_RETURN(ModelSpec model, model_preset(spec.model));
  ECO_ASSIGN_OR_RETURN(GpuSpec gpu, gpu_preset(spec.gpu));
  ECO_RETURN_IF_ERROR(validate_parallelism(model, par));
  ECO_ASSIGN_OR_RETURN(int64_t tokens, kv_capacity_tokens(model, gpu, par, spec.memory_fraction));
  g.kv_blocks = static_cast<int32_t>(std::min<int64_t>(tokens / spec.block_size, 1 << 30));
  g.max_context = spec.max_context > 0 ? spec.max_context : model.max_context;
  g.kv_bytes_per_token = model.kv_bytes_per_token();
  if (g.kv_blocks * int64_t{spec.block_size} < g.max_context) {
    return invalid_argument_error("{} with tp {} pp {} on {} holds {} tokens of KV, less than one context of {}",
                                  model.name, par.tp, par.pp, gpu.name, tokens, g.max_context);
  }
  return g;
}

}  // namespace

StatusOr<SimClusterOptions> build_cluster(const DeploymentSpec& spec) {
  SimClusterOptions o = spec.cluster;
  const std::string& strategy = o.strategy;
  const bool fudg = strategy == "fudg";
  if (fudg && (spec.prefill.instances <= 0 || spec.decode.instances <= 0)) {
    return invalid_argument_error("fudg needs prefill and decode instances ({} prefill, {} decode)",
                                  spec.prefill.instances, spec.decode.instances);
  }
  if (!fudg && spec.mixed.instances <= 0) return invalid_argument_error("{} needs at least one instance", strategy);
  if (spec.placement != "packed" && spec.placement != "paired") {
    return invalid_argument_error("unknown placement '{}' (packed, paired)", spec.placement);
  }
  // The instances in placement order, each with its role.
  std::vector<policy::InstanceRole> order;
  if (!fudg) {
    order.assign(static_cast<size_t>(spec.mixed.instances), policy::InstanceRole::kMixed);
  } else if (spec.placement == "packed") {
    order.assign(static_cast<size_t>(spec.prefill.instances), policy::InstanceRole::kPrefill);
    order.insert(order.end(), static_cast<size_t>(spec.decode.instances), policy::InstanceRole::kDecode);
  } else {
    // Interleave in proportion (the role further behind its share goes next, prefill
    // on ties), so every node gets prefill and decode instances in the global ratio.
    const int64_t np = spec.prefill.instances, nd = spec.decode.instances;
    for (int64_t p = 0, d = 0; p < np || d < nd;) {
      const bool prefill_next = d >= nd || (p < np && p * nd <= d * np);
      order.push_back(prefill_next ? policy::InstanceRole::kPrefill : policy::InstanceRole::kDecode);
      ++(prefill_next ? p : d);
    }
  }
  const int32_t per_node = o.topology.gpus_per_node;
  if (per_node <= 0) return invalid_argument_error("gpus_per_node must be >= 1");
  // Place: next free GPU, moving to the next node when an instance that fits in a
  // node would straddle two.
  int32_t next = 0;
  std::vector<std::vector<GpuId>> gpus;
  for (policy::InstanceRole role : order) {
    const Parallelism par = role == policy::InstanceRole::kMixed     ? spec.mixed.par
                            : role == policy::InstanceRole::kPrefill ? spec.prefill.par
                                                                     : spec.decode.par;
    const int32_t n = par.gpus();
    if (n <= per_node && next % per_node + n > per_node) next = (next / per_node + 1) * per_node;
    std::vector<GpuId> g;
    for (int32_t k = 0; k < n; ++k) g.push_back(GpuId(next + k));
    next += n;
    gpus.push_back(std::move(g));
  }
  const int32_t nodes_needed = (next + per_node - 1) / per_node;
  if (o.topology.num_nodes <= 0) o.topology.num_nodes = std::max(1, nodes_needed);
  if (nodes_needed > o.topology.num_nodes) {
    return invalid_argument_error("the deployment needs {} nodes of {} GPUs ({} GPUs placed), the cluster has {}",
                                  nodes_needed, per_node, next, o.topology.num_nodes);
  }
  o.instances.clear();
  int32_t counts[3] = {0, 0, 0};
  for (size_t i = 0; i < order.size(); ++i) {
    const policy::InstanceRole role = order[i];
    const Parallelism par = role == policy::InstanceRole::kMixed     ? spec.mixed.par
                            : role == policy::InstanceRole::kPrefill ? spec.prefill.par
                                                                     : spec.decode.par;
    ECO_ASSIGN_OR_RETURN(auto cost, make_cost_model(spec, par));
    ECO_ASSIGN_OR_RETURN(Geometry geo, geometry(spec, par));
    SimInstanceSpec s;
    s.role = role;
    s.cost_model = cost;
    s.gpus = gpus[i];
    s.options.core = spec.core;
    const char* prefix = role == policy::InstanceRole::kPrefill ? "p" : role == policy::InstanceRole::kDecode ? "d" : "i";
    s.options.name = prefix + std::to_string(counts[static_cast<int>(role)]++);
    if (role == policy::InstanceRole::kPrefill) s.options.core.policy = "prefill-only";
    if (strategy == "padg") {
      s.options.core.policy = "temporal";
      s.options.core.cost_model = cost;
    }
    s.options.executor.block_size = spec.block_size;
    s.options.executor.num_kv_blocks = geo.kv_blocks;
    s.options.executor.max_context = geo.max_context;
    s.options.executor.kv_bytes_per_token = geo.kv_bytes_per_token;
    s.options.record_steps = spec.record_steps;
    o.kv_bytes_per_token = geo.kv_bytes_per_token;
    o.instances.push_back(std::move(s));
  }
  if (strategy == "padg" && !o.padg_cost_model) o.padg_cost_model = o.instances[0].cost_model;
  return o;
}

}  // namespace ecoserve::sim
