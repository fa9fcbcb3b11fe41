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
// policy: 0 = round-robin, 1 = least-loaded, 2 = cache-aware. Run e.g.
//   build/bench/router_bench --benchmark_filter=Route
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "policy/pd_dispatch.h"
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

}  // namespace
}  // namespace ecoserve::policy

BENCHMARK_MAIN();
