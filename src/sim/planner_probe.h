// The measurements the placement planner (planner.h) is built from: the goodput
// of one small deployment ("unit") found by simulating it at probed request rates.
//
//   retime            a workload's lengths at a new rate (seeded Poisson arrivals)
//   instance_capacity what one instance of a parallel layout can do at most (from its
//                     cost model and KV size), to bracket the search and prune layouts
//   measure_*         goodput of a unit: one mixed instance (nodg), N instances
//                     (padg macro instance, llumnix replicas), one prefill instance
//                     fed by enough decode instances that they never hold it back,
//                     one decode instance fed by enough prefill instances, or any
//                     deployment whose shape may depend on the probed rate
//
// Every probe runs the template's requests, in order, cycled when it is shorter,
// re-timed at the probed rate with one seed for all rates (common random numbers: a
// probe at twice the rate sees the same arrivals twice as dense, so attainment falls
// with the rate as smoothly as the policies allow). Each request carries the SLO's
// targets (padg routes by them). How many: `requests` (scaled for units of several
// instances), but at least enough that arrivals span min_lifetimes request
// lifetimes (TTFT limit + mean output x TPOT limit), at most max_requests: a run
// shorter than a few lifetimes hides an overload in the SLO's slack. The first
// warmup_fraction of the requests (which met an empty cluster) are simulated but
// not counted.
//
// Pure functions of their arguments: the same inputs give the same answers. They
// run whole simulations on the caller's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/deployment.h"
#include "sim/sim_cluster.h"
#include "sim/slo.h"

namespace ecoserve::sim {

// `requests` with arrival times of a Poisson process of `rate` req/s (the first at
// 0, exponential gaps with mean 1/rate from a splitmix64 stream of `seed`); lengths,
// priorities and prefixes kept. The unit-rate arrival times depend only on the seed
// and the position: retime(w, 2r, s)[i].arrival_s == retime(w, r, s)[i].arrival_s / 2.
// Empty for rate <= 0.
std::vector<SimRequest> retime(std::span<const SimRequest> requests, double rate, uint64_t seed);

struct ProbeOptions {
  int32_t requests = 300;       // requests per probe of one instance; multi-instance units scale it
  int32_t max_requests = 4000;  // cap of the scaled and lifetime-stretched count
  double min_lifetimes = 10;    // arrivals span at least this many request lifetimes (above)
  double warmup_fraction = 0.1; // of the requests, not counted
  int search_steps = 5;        // bisections per goodput search (search_goodput)
  uint64_t seed = 1;           // arrival times
  double bracket_high = 1.25;  // the search starts at hi = bracket_high x the unit's capacity bound
  double bracket_ratio = 32;   // and lo = hi / bracket_ratio
  // Helper instances (decode instances behind a measured prefill instance and vice
  // versa) are added until their capacity bound is this loaded at the probed rate.
  double helper_utilization = 0.5;
};

// Status of ProbeOptions (positive counts, 0 < helper_utilization <= 1, ...).
Status validate_probe_options(const ProbeOptions& options);

// The probe's workload: `count` requests of the template (cycled), re-timed at
// `rate` with `seed`, each with slo_ttft_s/slo_tpot_s of `slo`.
std::vector<SimRequest> probe_workload(std::span<const SimRequest> workload_template, int32_t count, double rate,
                                       uint64_t seed, const SloSpec& slo);

// Mean prompt and output lengths of a workload (0 for an empty one).
struct WorkloadShape {
  double mean_input = 0.0;
  double mean_output = 0.0;
};
WorkloadShape workload_shape(std::span<const SimRequest> requests);

// Upper estimates of one instance's throughput in req/s for a workload of this
// shape, from its cost model with the base's scheduler limits:
//   decode_batch = min(max_num_seqs, KV tokens / (in + out)), at least 1
//   decode_rps   = decode_batch / (out x step(decode_batch decodes at context in + out/2))
//   prefill_rps  = 1 / the cheaper of a prompt alone (chunked) and its share of a
//                  step packing max_num_batched_tokens / in prompts
//   mixed_rps    = 1 / (1 / prefill_rps + 1 / decode_rps)
// The layout's errors (build_cluster's: it does not fit, bad tp) as they are.
struct InstanceCapacity {
  Parallelism par;
  int64_t kv_tokens = 0;
  int32_t decode_batch = 0;
  double prefill_seconds = 0.0;  // one mean prompt alone
  double prefill_rps = 0.0;
  double decode_rps = 0.0;
  double mixed_rps = 0.0;
};
StatusOr<InstanceCapacity> instance_capacity(const DeploymentSpec& base, Parallelism par, WorkloadShape shape);

// A deployment to probe at a given rate (its size may depend on the rate).
using SpecAtRate = std::function<StatusOr<DeploymentSpec>(double rate)>;

// How many requests a probe at `rate` runs, for a base count of `requests` (see above).
int32_t probe_count(const ProbeOptions& options, int32_t requests, double rate, const SloSpec& slo,
                    WorkloadShape shape);

// search_goodput over simulations of spec_at_rate(rate) with probe_count(requests)
// requests, bracketed by capacity_rps (hi = bracket_high x capacity_rps), the
// warm-up not counted. `on_probe` (optional) is called after each probe.
StatusOr<GoodputSearch> measure_goodput(const SpecAtRate& spec_at_rate, std::span<const SimRequest> workload_template,
                                        const SloSpec& slo, double capacity_rps, int32_t requests,
                                        const ProbeOptions& options, const std::function<void()>& on_probe = {});

// One simulation of `spec` at `rate` (probe_count(requests) requests, warm-up not counted): the attainment.
StatusOr<double> attainment_at(const DeploymentSpec& spec, std::span<const SimRequest> workload_template,
                               const SloSpec& slo, double rate, int32_t requests, const ProbeOptions& options);

// `instances` mixed instances of `par` under `strategy` (nodg, padg, llumnix), the
// base's other settings, probe topology (as many nodes as needed).
DeploymentSpec mixed_unit(const DeploymentSpec& base, const std::string& strategy, Parallelism par, int32_t instances);

// The base count of requests per probe for a unit of `instances` instances.
int32_t probe_requests(const ProbeOptions& options, int32_t instances);

// Goodput of `instances` mixed instances of `par` (mixed_unit) under the full SLO.
StatusOr<GoodputSearch> measure_mixed(const DeploymentSpec& base, const std::string& strategy, Parallelism par,
                                      int32_t instances, std::span<const SimRequest> workload_template,
                                      const SloSpec& slo, const ProbeOptions& options,
                                      const std::function<void()>& on_probe = {});

// fudg: goodput of ONE prefill instance of `par` under the TTFT limit alone (the
// decode side is `helper` instances, as many as the rate needs at helper_utilization).
// The unit is simulated on one node large enough for all of its GPUs, so the KV
// moves over the intra-node link however many helpers there are.
StatusOr<GoodputSearch> measure_prefill(const DeploymentSpec& base, Parallelism par, Parallelism helper,
                                        std::span<const SimRequest> workload_template, const SloSpec& slo,
                                        const ProbeOptions& options, const std::function<void()>& on_probe = {});
// fudg: goodput of ONE decode instance of `par` under the TPOT limit alone (fed by
// `helper` prefill instances, likewise).
StatusOr<GoodputSearch> measure_decode(const DeploymentSpec& base, Parallelism par, Parallelism helper,
                                       std::span<const SimRequest> workload_template, const SloSpec& slo,
                                       const ProbeOptions& options, const std::function<void()>& on_probe = {});

// "tp2pp1".
std::string layout_name(Parallelism par);

}  // namespace ecoserve::sim
