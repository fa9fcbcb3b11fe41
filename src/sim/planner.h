// Planner: which strategy, parallel layout and instance counts serve a workload
// within its SLO on the fewest GPUs (or with the most goodput per GPU), found by
// simulating small units and replicating them, as DistServe does (OSDI'24,
// section 4: "placement for high node-affinity clusters", Algorithm 1, and "for
// low node-affinity clusters", Algorithm 2), extended to the other strategies.
//
// Layouts (tp, pp): tp a power of two up to gpus_per_node (tensor parallelism stays
// in a node), pp a power of two, tp x pp <= the GPU budget, the model's shape
// allowing it (validate_parallelism) and its weights leaving room for a context of
// KV (build_cluster); layouts that do not fit are skipped and named in the notes.
// A "given" cost model does not depend on the layout: only tp1pp1 is tried. Layouts
// are simulated best capacity bound per GPU first (instance_capacity); one whose
// bound per GPU, times prune_slack, is below the best goodput per GPU measured so
// far is not simulated (it cannot win).
//
// Replicating a unit of goodput g to a target rate takes n = ceil(target / g) units;
// "the best layout" below is, with a target, the one whose n units take the fewest
// GPUs (ties: more goodput per GPU) and, without one, the most goodput per GPU.
//
//  nodg     one mixed instance per layout (measure_mixed); the best is replicated
//           (one instance without a target).
//  fudg     Algorithm 1 (placement "packed"): the goodput of ONE prefill instance
//           per layout under the TTFT limit (measure_prefill) and, separately, of
//           ONE decode instance under the TPOT limit (measure_decode); the best of
//           each role is replicated: n_p = ceil(target / g_p), n_d = ceil(target /
//           g_d). Without a target: the measured layouts and counts n_p, n_d <= 8
//           within the budget with the most min(n_p g_p, n_d g_d) per GPU.
//           Algorithm 2 (placement "paired"): segments of n_p prefill and n_d
//           decode instances of one pp, all in one node (pp (n_p tp_p + n_d tp_d)
//           <= gpus_per_node) so the KV moves only inside the node, ranked (as
//           layouts are, above) by the estimate min(n_p g_p, n_d g_d) from
//           Algorithm 1's units; the best paired_segments of them are simulated as
//           a whole (both limits) and the best is replicated.
//  padg     for the padg_layouts best mixed layouts and each macro size N_u of
//           padg_macro_sizes (N_l = N_u / 2) that fits the budget, one macro
//           instance of N_u temporal instances is simulated; the best is replicated
//           in whole macro instances (mitosis lays k x N_u instances out as k macros).
//  llumnix  the best nodg layout at nodg's replica count (2 without a target, when
//           the budget allows), simulated with migration (the strategy's defaults);
//           one more replica is tried when that misses the target.
//
// The goodput of a replicated candidate is the unit's times the replicas (an
// estimate); with `verify` each candidate is then simulated once at the target rate
// (or at its estimate without a target: one that misses there is tried at 90%,
// 81% and 73% of it, and its goodput lowered to the first that passes) on the real
// topology and the attainment is noted. Verification is what catches what units
// cannot show: KV crossing slow inter-node links (Algorithm 1 units run on one
// node; Algorithm 2's replicated segments are laid out by the "paired" placement,
// which interleaves P and D one to one, and pd_dispatch does not prefer a decode
// instance on the prefill instance's node), and strategies whose attainment is not
// monotone in the rate (padg concentrates requests at low load). A candidate is feasible when it fits the budget and the topology,
// reaches the target and passed verification. Recommended: without a target the
// feasible candidate with the most goodput per GPU; with one, the feasible
// candidate on the fewest GPUs (ties: more goodput per GPU).
//
// Deterministic: the same request and options give the same plan. Runs every
// simulation on the caller's thread; `progress` is called on it too.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/deployment.h"
#include "sim/planner_probe.h"
#include "sim/slo.h"

namespace ecoserve::sim {

struct PlanRequest {
  // Model, GPU, cost model, scheduler options (core), strategy options (cluster:
  // router, padg, migration...) and topology (gpus_per_node, num_nodes, intra link,
  // inter_node_gbps). num_nodes 0: as many nodes as max_gpus needs.
  DeploymentSpec base;
  std::vector<std::string> strategies;  // nodg, fudg, padg, llumnix; empty = all four
  // Lengths (and priorities, prefixes) of the requests; probes re-time them.
  std::vector<SimRequest> workload_template;
  SloSpec slo;               // both limits must be set
  double target_rate = 0.0;  // req/s; 0 = no target: the most goodput per GPU
  int32_t max_gpus = 0;      // GPU budget; 0 = the topology's (num_nodes x gpus_per_node)
};

struct PlanProgress {
  double fraction = 0.0;  // of the planned work, in [0, 1]
  std::string what;       // the unit being simulated ("nodg tp2pp1")
};

struct PlanOptions {
  ProbeOptions probe;
  std::vector<int32_t> padg_macro_sizes = {2, 4, 8};  // N_u values tried
  int32_t padg_layouts = 2;     // mixed layouts tried for padg
  int32_t paired_segments = 2;  // Algorithm 2 segments simulated
  double prune_slack = 1.25;    // see the header comment; >= 1
  bool verify = true;           // one simulation of each candidate on the real topology
  std::function<void(const PlanProgress&)> progress;
};

// One simulated unit (for the report).
struct PlanEvaluation {
  std::string strategy;  // nodg | fudg | padg | llumnix
  std::string unit;      // "mixed tp1pp1", "prefill tp2pp1", "segment P tp1pp1 x2 + D tp1pp1 x1", "macro 4 x tp1pp1"
  int32_t gpus = 0;
  double goodput = 0.0;  // req/s at the SLO (the phase's limit for fudg Algorithm 1 units)
  double goodput_per_gpu = 0.0;
  int32_t probes = 0;    // simulations run
  std::string note;      // why skipped or pruned, or the probes' summary
};

struct PlanCandidate {
  std::string strategy;
  std::string description;  // "fudg P: tp2pp1 x3, D: tp1pp1 x2, paired"
  DeploymentSpec spec;      // on the request's topology
  int32_t gpus = 0;
  double goodput = 0.0;     // req/s at the SLO attainment (replicated units: estimated)
  double goodput_per_gpu = 0.0;
  double verified_rate = 0.0;         // the rate verification ran at (0: not verified)
  double verified_attainment = -1.0;  // its attainment (-1: not verified)
  bool feasible = false;
  std::string note;
};

struct Plan {
  std::vector<PlanCandidate> candidates;  // by goodput per GPU, descending
  size_t recommended = 0;                 // index into candidates; == candidates.size() when none is feasible
  std::string reason;
  std::vector<PlanEvaluation> evaluations;  // every unit, in the order simulated
};

// INVALID_ARGUMENT for an empty workload, an unknown strategy, an SLO without both
// limits, a negative target, a GPU budget the topology does not have, or bad
// options; errors of the simulations as they are.
StatusOr<Plan> plan(const PlanRequest& request, const PlanOptions& options = {});

// The layouts the planner considers for `base` with `max_gpus` GPUs (before fit checks).
std::vector<Parallelism> candidate_layouts(const DeploymentSpec& base, int32_t max_gpus);

}  // namespace ecoserve::sim
