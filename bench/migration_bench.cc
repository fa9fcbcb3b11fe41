// Live-migration downtime against context length (llumnix, issue 11).
//
//   build/bench/migration_bench MODEL.gguf [--threads N] [--contexts 256,512,...] [--repeats R]
//
// Two embedded instances of MODEL behind a cluster::Router (strategy llumnix, no
// planner). For each context length L, a request with an L-token prompt decodes
// on instance 0; after 4 tokens it is migrated to instance 1 (and, on the next
// repeat, back), once with staging (copies while it decodes, then stop-and-copy
// of what is left) and once as a single stop-and-copy of everything (max stages
// 1). Per row: the KV bytes moved, the stages, the downtime (stop-and-copy sent
// -> the destination runs it), the whole migration's time, and the client's
// largest gap between two tokens around the migration against its median gap
// (one decode step). Staging should keep the downtime near constant while the
// single stop-and-copy grows with L.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cluster/instance_backend.h"
#include "cluster/router.h"
#include "model/llama_model.h"

using namespace ecoserve;

namespace {

struct Row {
  int32_t context = 0;
  int32_t stages = 0;
  int64_t bytes = 0;
  double downtime_ms = 0, total_ms = 0, max_gap_ms = 0, median_gap_ms = 0;
  std::string outcome;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Row run_one(const std::shared_ptr<const model::LlamaModel>& model, int threads, int32_t context, int32_t max_stages,
            uint64_t id) {
  SteadyClock clock;
  std::vector<std::unique_ptr<cluster::GenerationBackend>> members;
  for (int i = 0; i < 2; ++i) {
    engine::EngineOptions eo;
    eo.num_threads = threads;
    eo.num_kv_blocks = (context + 256) / 16 + 8;
    eo.max_context = context + 256;
    auto b = cluster::InstanceBackend::create(model, eo, instance::InstanceOptions{}, &clock);
    if (!b.ok()) {
      std::fprintf(stderr, "error: %s\n", b.status().message().c_str());
      std::exit(1);
    }
    members.push_back(std::move(*b));
  }
  cluster::RouterOptions ro;
  ro.strategy = "llumnix";
  ro.router = "freeness";
  ro.migrate_max_stages = max_stages;
  ro.probe_interval = Duration::zero();
  auto router = cluster::Router::create(std::move(members), ro, &clock);
  if (!router.ok()) {
    std::fprintf(stderr, "error: %s\n", router.status().message().c_str());
    std::exit(1);
  }
  (*router)->start();
  instance::GenerationRequest r;
  r.id = RequestId(id);
  std::mt19937 rng(static_cast<uint32_t>(id));
  const int32_t vocab = model->config().n_vocab;
  for (int32_t i = 0; i < context; ++i) r.prompt.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 48;
  r.sampling.ignore_eos = true;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<TimePoint> token_times;
  cluster::Router* rp = router->get();
  auto sink = [&, rp](const instance::TokenEvent& ev) {
    std::lock_guard<std::mutex> lock(mu);
    if (ev.token >= 0) {
      token_times.push_back(clock.now());
      if (token_times.size() == 4) (void)rp->migrate(ev.id, "1");
    }
    if (ev.finished) {
      done = true;
      cv.notify_all();
    }
  };
  if (Status s = (*router)->submit(std::move(r), sink); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    std::exit(1);
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  Row row;
  row.context = context;
  const cluster::ClusterStats st = (*router)->cluster_stats();
  if (!st.recent_migrations.empty()) {
    const cluster::MigrationRecord& m = st.recent_migrations.back();
    row.stages = m.stages;
    row.bytes = m.bytes;
    row.downtime_ms = m.downtime_seconds * 1e3;
    row.total_ms = to_seconds(m.finished - m.started) * 1e3;
    row.outcome = m.outcome;
  }
  std::vector<double> gaps;
  for (size_t i = 1; i < token_times.size(); ++i) gaps.push_back(to_seconds(token_times[i] - token_times[i - 1]) * 1e3);
  row.median_gap_ms = median(gaps);
  if (std::getenv("MIGRATION_BENCH_GAPS")) {
    for (double g : gaps) std::fprintf(stderr, "%.1f ", g);
    std::fprintf(stderr, "\n");
  }
  // The gap that contains the migration: the largest after the 4th token (the first token's is the prefill).
  for (size_t i = 3; i < gaps.size(); ++i) row.max_gap_ms = std::max(row.max_gap_ms, gaps[i]);
  (*router)->stop();
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--threads N] [--contexts 256,512,...] [--repeats R]\n", argv[0]);
    return 2;
  }
  std::string path = argv[1];
  int threads = 1, repeats = 3;
  std::vector<int32_t> contexts = {128, 256, 512, 1024, 2048};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (flag == "--repeats") {
      repeats = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--contexts") {
      contexts.clear();
      std::stringstream ss(argv[i + 1]);
      for (std::string item; std::getline(ss, item, ',');) contexts.push_back(std::atoi(item.c_str()));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  auto model = model::LlamaModel::load(path, model::GgufFile::Load::kMmap);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  std::printf("model %s, %d thread(s) per instance, median of %d runs per row\n", path.c_str(), threads, repeats);
  std::printf("| context | mode | stages | KV moved (MB) | downtime (ms) | migration (ms) | largest gap (ms) | "
              "step (ms) |\n|---|---|---|---|---|---|---|---|\n");
  uint64_t id = 1;
  for (int32_t context : contexts) {
    for (int32_t max_stages : {4, 1}) {
      std::vector<Row> rows;
      for (int k = 0; k < repeats; ++k) rows.push_back(run_one(*model, threads, context, max_stages, id++));
      auto med = [&](auto field) {
        std::vector<double> v;
        for (const Row& r : rows) v.push_back(field(r));
        return median(v);
      };
      std::printf("| %d | %s | %.0f | %.2f | %.2f | %.1f | %.1f | %.1f |%s\n", context,
                  max_stages > 1 ? "staged" : "stop-and-copy only", med([](const Row& r) { return r.stages; }),
                  med([](const Row& r) { return static_cast<double>(r.bytes); }) / 1e6,
                  med([](const Row& r) { return r.downtime_ms; }), med([](const Row& r) { return r.total_ms; }),
                  med([](const Row& r) { return r.max_gap_ms; }), med([](const Row& r) { return r.median_gap_ms; }),
                  rows.back().outcome == "completed" ? "" : (" (" + rows.back().outcome + ")").c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
