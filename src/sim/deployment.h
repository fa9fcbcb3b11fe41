// Deployment: a cluster described the way a user (or the planner) thinks of it -
// strategy, model, GPU, how many instances of each role with which tensor and
// pipeline parallelism, on which nodes - turned into the SimClusterOptions the
// simulator runs: a cost model per role (roofline, the H100 profile, or a given
// one such as the CPU profile), KV blocks per instance from GPU memory, and GPU
// placement on the topology.
//
// Placement. Instances take GPUs in order, node by node; an instance never
// straddles a node when its GPUs fit in one (tensor-parallel groups stay on their
// NVLink/PCIe switch). `placement`:
//   "packed"    roles in order (prefill instances first, then decode): DistServe's
//               high-node-affinity layout (Algorithm 1), KV moves wherever.
//   "paired"    prefill and decode instances interleave in proportion (P D P D ...
//               for 1:1, P D D D P D D D ... for 1:3), so every node holds both
//               roles in the global ratio: Algorithm 2 (low node affinity). With
//               pd_dispatch's same-node preference the KV then moves inside a node.
// Pure (no I/O except loading the H100 profile when asked for it); thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "instance/instance_core.h"
#include "policy/cost_model.h"
#include "sim/gpu_spec.h"
#include "sim/model_spec.h"
#include "sim/sim_cluster.h"

namespace ecoserve::sim {

struct RoleSpec {
  int32_t instances = 0;
  Parallelism par;
};

struct DeploymentSpec {
  SimClusterOptions cluster;  // strategy and its policy options, topology (nodes may be 0: as many as needed)
  std::string model = "llama-2-7b";  // preset (model_spec.h)
  std::string gpu = "a100-80gb";     // preset (gpu_spec.h)
  // "roofline" | "h100-profile" (profile_dir; needs gpu h100-sxm and a profiled shape) |
  // "given" (given_cost_model with given_* geometry: e.g. a CPU profile from `ecoserve profile cost`).
  std::string cost_model = "roofline";
  std::string profile_dir = "../shared/data/profiles/h100-bf16";
  std::shared_ptr<const policy::CostModel> given_cost_model;
  int32_t given_kv_blocks = 0;
  int32_t given_max_context = 0;
  int64_t given_kv_bytes_per_token = 0;
  RoleSpec mixed{1, {}};  // nodg, padg, llumnix
  RoleSpec prefill;       // fudg
  RoleSpec decode;        // fudg
  std::string placement = "packed";
  // Scheduler of every instance; `policy` applies to mixed instances under nodg and
  // llumnix and to fudg's decode instances, as serve does (they also prefill the
  // prompts dispatch keeps local); fudg's prefill instances run prefill-only, padg temporal.
  instance::InstanceCoreOptions core;
  int32_t block_size = 16;
  double memory_fraction = 0.9;
  int32_t max_context = 0;  // 0: the model's
  bool record_steps = false;
};

// GPUs the deployment uses.
int32_t gpus_needed(const DeploymentSpec& spec);

// INVALID_ARGUMENT for unknown presets, roles that do not fit the strategy, a model
// that does not fit the GPUs of an instance (with how much it needs), a
// parallelism the model does not allow, or more GPUs than the topology has.
StatusOr<SimClusterOptions> build_cluster(const DeploymentSpec& spec);

// The cost model of one instance of `par` under `spec` (what build_cluster gives it).
StatusOr<std::shared_ptr<const policy::CostModel>> make_cost_model(const DeploymentSpec& spec, Parallelism par);

}  // namespace ecoserve::sim
