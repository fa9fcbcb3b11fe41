// Routing time per request of the NoDG routers and FuDG dispatch (pure policy
// code, what cluster::Router calls under its lock), at 2, 100 and 1,000
// instances. The target is < 10 us per decision at 1,000 instances.
//
//   BM_Route/<policy>/<instances>: one route() over a ClusterView with varied
//     loads; cache-aware also matches a 32-block prompt (512 tokens at block 16)
//     against a prefix index holding 64 prompts' chains spread over the instances
//     and records the routed prompt, as the live router does.
//   BM_PdDispatch/<instances>: fudg's choice of a prefill and a decode instance
//     (a quarter prefill).
//   BM_Freeness/<instances>/<lists>: llumnix's FreenessRouter over the router's
//     incremental per-instance sums (lists 0, what the live router does) or over
//     request lists of 32 requests per instance, a tenth high priority (lists 1).
//   BM_MigrationPlan/<instances>: one MigrationPlanner::plan() over the same view
//     (what the router runs every --migrate-interval-ms).
//   BM_Padg/<instances>: padg's PadgRouter (least-loaded macro instance of 4, then
//     Algorithms 1 and 2 with a profiled cost model's prediction).
// policy: 0 = round-robin, 1 = least-loaded, 2 = cache-aware. Run e.g.
//   build/bench/router_bench --benchmark_filter=Route
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "policy/freeness_router.h"
#include "policy/migration_planner.h"
#include "policy/padg_router.h"
#include "policy/pd_dispatch.h"
#include "policy/profiled_cost_model.h"
#include "policy/router_policy.h"

namespace ecoserve::policy {
namespace {

ClusterView make_view(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ClusterView v;
  for (int i = 0; i < n; ++i) {
    InstanceLoad l;
    l.id = InstanceId(i);
    l.num_waiting = static_cast<int32_t>(rng() % 8);
    l.num_running = static_cast<int32_t>(rng() % 64);
    l.num_waiting_tokens = static_cast<int64_t>(rng() % 4096);
    l.num_running_tokens = static_cast<int64_t>(rng() % 65536);
    l.num_free_blocks = static_cast<int32_t>(rng() % 2048);
    l.num_total_blocks = 2048;
    l.healthy = rng() % 50 != 0;
    v.instances.push_back(l);
  }
  return v;
}

std::vector<std::vector<kv::BlockHash>> make_prompts(int count, int blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<kv::BlockHash>> out(static_cast<size_t>(count));
  for (auto& p : out) {
    // Shared system prompts: 8 families share their first 8 blocks.
    const kv::BlockHash family = rng() % 8;
    for (int b = 0; b < blocks; ++b) p.push_back(b < 8 ? family * 1000 + b : rng());
  }
  return out;
}

void BM_Route(benchmark::State& state) {
  static const char* kNames[] = {"round-robin", "least-loaded", "cache-aware"};
  const int n = static_cast<int>(state.range(1));
  auto policy = make_router_policy(kNames[state.range(0)], RouterOptions{});
  const ClusterView view = make_view(n, 1);
  auto prompts = make_prompts(64, 32, 2);
  if (auto* ca = dynamic_cast<CacheAwareRouter*>(policy->get())) {
    for (size_t i = 0; i < prompts.size(); ++i) ca->index().insert(InstanceId(static_cast<int32_t>(i % n)), prompts[i]);
  }
  size_t k = 0;
  for (auto _ : state) {
    RouteRequest r;
    r.prompt_len = 512;
    r.block_hashes = prompts[k++ % prompts.size()];
    benchmark::DoNotOptimize((*policy)->route(view, r));
  }
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_Route)->ArgsProduct({{0, 1, 2}, {2, 100, 1000}});

void BM_PdDispatch(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ClusterView view = make_view(n, 3);
  for (int i = 0; i < n; ++i) {
    view.instances[static_cast<size_t>(i)].role = i < n / 4 || i == 0 ? InstanceRole::kPrefill : InstanceRole::kDecode;
  }
  if (n == 2) view.instances[1].role = InstanceRole::kDecode;
  for (auto _ : state) {
    RouteRequest r;
    r.prompt_len = 512;
    benchmark::DoNotOptimize(pd_dispatch(view, r, PdDispatchOptions{}));
  }
}
BENCHMARK(BM_PdDispatch)->Arg(2)->Arg(100)->Arg(1000);

// make_view plus request lists: 32 requests an instance, 1 in 10 high priority, 1 in 8 queued.
ClusterView make_view_with_requests(int n, uint64_t seed) {
  ClusterView v = make_view(n, seed);
  std::mt19937_64 rng(seed + 1);
  uint64_t id = 0;
  for (InstanceLoad& l : v.instances) {
    l.requests.clear();
    l.num_running = 0;
    for (int k = 0; k < 32; ++k) {
      RequestLoad r;
      r.id = RequestId(++id);
      r.priority = rng() % 10 == 0 ? 1 : 0;
      r.num_tokens = 16 + static_cast<int32_t>(rng() % 2048);
      r.num_generated = static_cast<int32_t>(rng() % 256);
      r.max_tokens = r.num_generated + 256;
      r.running = rng() % 8 != 0;
      l.num_running += r.running ? 1 : 0;
      l.requests.push_back(r);
    }
  }
  v.with_requests = true;
  return v;
}

// range(1) = 1: over the request lists; 0: over the router's incremental sums
// (InstanceLoad::virtual_blocks), what cluster::Router routes with.
void BM_Freeness(benchmark::State& state) {
  ClusterView view = make_view_with_requests(static_cast<int>(state.range(0)), 6);
  if (state.range(1) == 0) {
    for (InstanceLoad& l : view.instances) {
      l.virtual_blocks = instance_usage(l, true, FreenessOptions{}).virtual_blocks;
      l.requests.clear();
    }
    view.with_requests = false;
  }
  FreenessRouter router;
  for (auto _ : state) {
    RouteRequest r;
    r.prompt_len = 512;
    r.max_tokens = 256;
    benchmark::DoNotOptimize(router.route(view, r));
  }
}
BENCHMARK(BM_Freeness)->ArgsProduct({{2, 100, 1000}, {0, 1}});

void BM_MigrationPlan(benchmark::State& state) {
  const ClusterView view = make_view_with_requests(static_cast<int>(state.range(0)), 7);
  MigrationPlannerOptions o;
  o.max_migrations = 4;
  MigrationPlanner planner(o);
  for (auto _ : state) benchmark::DoNotOptimize(planner.plan(view));
}
BENCHMARK(BM_MigrationPlan)->Arg(2)->Arg(100)->Arg(1000);

void BM_Padg(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  ClusterView view = make_view(n, 4);
  std::mt19937_64 rng(5);
  for (InstanceLoad& l : view.instances) {
    l.pending_prefill_seconds = static_cast<double>(rng() % 3000) / 1000.0;
    l.num_slo_decoding = static_cast<int32_t>(rng() % 32);
    l.mean_saved_tpot_seconds = static_cast<double>(rng() % 2000) / 1000.0;
  }
  // A small measured-shape profile: prefill 1.5 ms per token, decode 2 ms per sequence.
  CostProfile profile;
  for (int32_t c : {0, 512}) {
    for (int32_t t : {16, 64, 256, 512}) profile.prefill.push_back({t, c, 0.0015 * t + 0.001 * c / 512});
  }
  for (int32_t c : {32, 512}) {
    for (int32_t b : {1, 8, 32}) profile.decode.push_back({b, c, 0.002 * b + 0.0005 * c / 512});
  }
  std::shared_ptr<const CostModel> cost = std::move(ProfiledCostModel::create(profile)).value();
  PadgRouter router(PadgRouterOptions{}, cost);
  std::vector<std::vector<InstanceId>> layout;
  for (int i = 0; i < n; ++i) {
    if (i % 4 == 0) layout.emplace_back();
    layout.back().push_back(InstanceId(i));
  }
  router.set_layout(layout);
  for (auto _ : state) {
    RouteRequest r;
    r.prompt_len = 512;
    benchmark::DoNotOptimize(router.decide(view, r));
  }
}
BENCHMARK(BM_Padg)->Arg(2)->Arg(100)->Arg(1000);

}  // namespace
}  // namespace ecoserve::policy

BENCHMARK_MAIN();
