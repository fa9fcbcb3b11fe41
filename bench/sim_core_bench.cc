// Speed of the simulator's core: SimRuntime's event loop and SimNetwork's max-min
// flows. The simulator's goal is 1M requests over 32 instances (tens of millions of
// events) in under 10 s on one core.
//
//   BM_RuntimeScheduleRun/<n>: schedule n events at uniformly random times in
//     [0, 1000 s), then run them all (items = events; the heap holds n entries).
//   BM_RuntimeHold/<pending>: the "hold" model - a steady state of `pending` events in
//     which each event run schedules one more at now + random [0, 1 s) (items = events).
//   BM_RuntimeHoldHalfNow/<pending>: hold where every other event is zero-delay (as an
//     instance's step loop schedules try_step at now()): those skip the heap.
//   BM_RuntimeReschedule/<pending>: like hold, but each event also cancels a pending
//     event and schedules a replacement (what SimNetwork does when rates change).
//   BM_NetworkFlows/<nodes>/<concurrent>: a Topology of <nodes> x 8 GPUs (NVLink,
//     100 Gb/s NICs) with <concurrent> flows always in progress between random GPU
//     pairs (1-64 MiB each); each delivery starts the next flow (items = flows).
// Run e.g.
//   build/bench/sim_core_bench --benchmark_filter=Runtime
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sim/sim_network.h"
#include "sim/sim_runtime.h"
#include "sim/topology.h"

namespace ecoserve::sim {
namespace {

void BM_RuntimeScheduleRun(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::mt19937_64 rng(1);
  std::vector<std::int64_t> times(n);
  for (auto& t : times) t = static_cast<std::int64_t>(rng() % 1'000'000'000'000ull);
  std::uint64_t ran = 0;
  for (auto _ : state) {
    SimRuntime rt;
    for (std::int64_t t : times) rt.schedule_at(TimePoint(Duration(t)), [&ran] { ++ran; });
    rt.run();
    benchmark::DoNotOptimize(ran);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_RuntimeScheduleRun)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond);

struct Hold {
  SimRuntime rt;
  std::mt19937_64 rng{7};
  bool reschedule = false;
  bool half_now = false;  // every other event is zero-delay (a step loop's pattern)
  std::uint64_t fired = 0;
  std::vector<SimRuntime::EventId> ids;  // a ring of recently scheduled events
  std::size_t next = 0;

  void fire() {
    const std::int64_t delay = half_now && (++fired & 1) ? 0 : static_cast<std::int64_t>(rng() % 1'000'000'000);
    const SimRuntime::EventId id = rt.schedule_after(Duration(delay), [this] { fire(); });
    if (!reschedule) return;
    SimRuntime::EventId& victim = ids[next++ % ids.size()];
    if (rt.cancel(victim)) {
      victim = rt.schedule_after(Duration(static_cast<std::int64_t>(rng() % 1'000'000'000)), [this] { fire(); });
    } else {
      victim = id;
    }
  }
};

void run_hold(benchmark::State& state, bool reschedule, bool half_now = false) {
  const auto pending = static_cast<std::size_t>(state.range(0));
  Hold h;
  h.reschedule = reschedule;
  h.half_now = half_now;
  h.ids.assign(std::max<std::size_t>(pending / 4, 1), SimRuntime::kNoEvent);
  for (std::size_t i = 0; i < pending; ++i) {
    h.rt.schedule_at(TimePoint(Duration(static_cast<std::int64_t>(h.rng() % 1'000'000'000))), [&h] { h.fire(); });
  }
  for (auto _ : state) h.rt.run_one();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["pending"] = static_cast<double>(h.rt.pending());
}
void BM_RuntimeHold(benchmark::State& state) { run_hold(state, false); }
void BM_RuntimeReschedule(benchmark::State& state) { run_hold(state, true); }
void BM_RuntimeHoldHalfNow(benchmark::State& state) { run_hold(state, false, true); }
BENCHMARK(BM_RuntimeHold)->Arg(1'000)->Arg(100'000)->Arg(1'000'000);
BENCHMARK(BM_RuntimeHoldHalfNow)->Arg(1'000)->Arg(100'000);
BENCHMARK(BM_RuntimeReschedule)->Arg(1'000)->Arg(100'000)->Arg(1'000'000);

void BM_NetworkFlows(benchmark::State& state) {
  const auto nodes = static_cast<std::int32_t>(state.range(0));
  const auto concurrent = static_cast<int>(state.range(1));
  SimRuntime rt;
  SimNetwork net(rt);
  TopologyOptions o;
  o.num_nodes = nodes;
  o.gpus_per_node = 8;
  o.intra = "nvlink";
  o.inter_node_gbps = 100;
  Topology topo = std::move(Topology::create(net, o)).value();
  std::mt19937_64 rng(3);
  std::uint64_t delivered = 0;
  std::function<void()> next_flow = [&] {
    const GpuId from(static_cast<std::int32_t>(rng() % topo.num_gpus()));
    GpuId to(static_cast<std::int32_t>(rng() % topo.num_gpus()));
    if (to == from) to = GpuId((to.value + 1) % topo.num_gpus());
    const auto bytes = static_cast<std::int64_t>((1 + rng() % 64) << 20);
    net.start_flow(topo.path(from, to), bytes, [&] {
      ++delivered;
      next_flow();
    });
  };
  for (int i = 0; i < concurrent; ++i) next_flow();
  constexpr std::uint64_t kFlowsPerIteration = 1000;
  for (auto _ : state) {
    const std::uint64_t target = delivered + kFlowsPerIteration;
    while (delivered < target) rt.run_one();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kFlowsPerIteration));
  state.counters["events_per_flow"] =
      static_cast<double>(rt.events_run()) / static_cast<double>(std::max<std::uint64_t>(delivered, 1));
}
BENCHMARK(BM_NetworkFlows)
    ->Args({4, 8})
    ->Args({4, 64})
    ->Args({4, 512})
    ->Args({32, 64})
    ->Args({32, 1024})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ecoserve::sim

BENCHMARK_MAIN();
