// Benchmarks of kernels::matmul on the stories110M shapes (dim 768, ffn 2048,
// vocab 32000, 12 layers) for F32 and Q8_0 weights at 1 and 2 threads.
//
//   BM_Matmul/type/rows/cols/n/threads: one matmul; items/s = tokens/s through
//     that matrix, bytes/s = weight bytes streamed per second. The same weights
//     are reused every iteration, so small matrices are served from cache.
//   BM_ModelMatmuls/type/n/threads: every linear layer of the model (12 x
//     {q,k,v,o,gate,up,down}, distinct weights, so they stream from DRAM like in
//     the engine) plus the 32000x768 output, for n tokens; items/s is the
//     model's decode tokens/s at batch n if matmuls were all it did.
//   BM_PrefillMatmuls/type/512/threads: the same for a 512-token prompt with
//     the output layer for the last token only (prefill tokens/s bound).
//   BM_Synth1bMatmuls/type/n/threads: the linear layers of the synth 1b preset (22 x
//     {qkv, o, gate+up, down}, dim 2048, 4 KV heads of 64, ffn 5632, vocab 32000) called as
//     the engine calls them (matmul_many for Q/K/V and for gate/up): 582 MB in Q4_K,
//     past every L3 measured, so this is decode's weight reading with nothing else the
//     step does; compare its tokens/s with `profile engine`'s for the same model. n =
//     32: a batch whose tiles and weight reads share one core (does the reading hide
//     behind the multiplies?).
//     Counters qkv_GBps, o_GBps, gate_up_GBps, down_GBps, out_GBps: the read speed of
//     each kind of call (GB/s, 10^9), for the cost of a matrix's start and end.
//   BM_OpenBlasSgemm / BM_OpenBlasSgemv: OpenBLAS on the same F32 shapes, for
//     reference (sgemv: the 32000x768 output layer, one token).
//   BM_QuantizeActs/k_format/cols/n: the activation quantization every quantized
//     matmul starts with (block format for Q8_0 and Q4_0, K format for K-quants),
//     one thread; items/s = values quantized per second.
// The GEMVs (1-4 tokens) run with this CPU's defaults; ECOSERVE_GEMV_PREFETCH=0 (or another
// distance) and ECOSERVE_GEMV_STREAMS set them, for A/B runs of one binary.
// type: 0 = f32, 1 = f16, 2 = q4_0, 8 = q8_0, 12 = q4_k, 14 = q6_k; plus 100: the
// same type repacked to the engine's kRows8 layout (108, 112; what `generate` and
// `serve` run unless --mmap). Run e.g.
//   build/bench/kernels_bench --benchmark_filter='Model|Prefill'
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "base/zeroed_buffer.h"
#include "kernels/bf16_weight_tiles.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/packed_weights.h"

namespace ecoserve::kernels {
namespace {

constexpr std::int64_t kDim = 768, kFfn = 2048, kVocab = 32000, kLayers = 12;

// Random weights in the given type (values need not come from quantize_row:
// speed does not depend on them), on transparent huge pages like the engine's
// (ZeroedBuffer: the TLB misses of 4 KiB pages would be the bench's, not the engine's).
struct Weights {
  WeightView view;
  ZeroedBuffer<std::uint8_t> bytes;
};

ZeroedBuffer<std::uint8_t> weight_bytes(std::size_t n) {
  ZeroedBuffer<std::uint8_t> b = ZeroedBuffer<std::uint8_t>::create(n).value();  // checked: stops if none
  // Written once, so that every page is the buffer's own: untouched pages would all read
  // the kernel's one zero page, from the cache.
  std::memset(b.data(), 0, n);
  return b;
}

std::unique_ptr<Weights> make_weights(GgmlType type, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  auto w = std::make_unique<Weights>();
  const TypeTraits& t = *type_traits(type);
  const std::size_t rb = row_bytes(t, cols);
  w->bytes = weight_bytes(rb * rows);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  if (type == GgmlType::kF32) {
    auto* f = reinterpret_cast<float*>(w->bytes.data());
    for (std::int64_t i = 0; i < rows * cols; ++i)
      f[i] = static_cast<float>(static_cast<std::int32_t>(next())) * 1e-10f;
  } else if (type == GgmlType::kQ8_0) {
    auto* b = reinterpret_cast<BlockQ8_0*>(w->bytes.data());
    for (std::int64_t i = 0; i < rows * cols / 32; ++i) {
      b[i].d = fp32_to_fp16(0.01f);
      for (int j = 0; j < 32; ++j) b[i].qs[j] = static_cast<std::int8_t>(static_cast<int>(next() % 255) - 127);
    }
  }
  w->view = WeightView{type, w->bytes.data(), rows, cols, rb};
  return w;
}

// The weights of make_weights in the kRows8 layout.
std::unique_ptr<Weights> make_packed_weights(GgmlType type, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::unique_ptr<Weights> w = make_weights(type, rows, cols, seed);
  ZeroedBuffer<std::uint8_t> packed = weight_bytes(w->bytes.size());
  pack_rows8(type, w->bytes.data(), rows, cols, packed.data());
  w->bytes = std::move(packed);
  w->view.data = w->bytes.data();
  w->view.layout = WeightLayout::kRows8;
  return w;
}

constexpr std::int64_t kPackedCode = 100;  // type argument + this: kRows8 layout

// code: a type argument (kPackedCode + type for the kRows8 layout).
const Weights& cached_weights(std::int64_t code, std::int64_t rows, std::int64_t cols, int index) {
  static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, std::unique_ptr<Weights>> cache;
  auto& slot = cache[{code, rows, cols, index}];
  const std::uint64_t seed = rows * 31 + cols * 7 + index;
  if (!slot && code >= kPackedCode) {
    slot = make_packed_weights(static_cast<GgmlType>(code - kPackedCode), rows, cols, seed);
  }
  if (!slot) slot = make_weights(static_cast<GgmlType>(code), rows, cols, seed);
  return *slot;
}
const Weights& cached_weights(GgmlType type, std::int64_t rows, std::int64_t cols, int index) {
  return cached_weights(static_cast<std::int64_t>(type), rows, cols, index);
}

std::vector<float> make_acts(std::int64_t n) {
  std::vector<float> x(n);
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : x) v = d(rng);
  return x;
}

GgmlType type_arg(std::int64_t a) { return static_cast<GgmlType>(a % kPackedCode); }

void BM_Matmul(benchmark::State& state) {
  const GgmlType type = type_arg(state.range(0));
  const std::int64_t rows = state.range(1), cols = state.range(2), n = state.range(3);
  ThreadPool pool(static_cast<int>(state.range(4)));
  KernelContext ctx(&pool);
  const Weights& w = cached_weights(state.range(0), rows, cols, 0);
  const std::vector<float> x = make_acts(n * cols);
  std::vector<float> y(n * rows);
  for (auto _ : state) {
    matmul(w.view, x.data(), n, y.data(), ctx);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes.size()));
  state.SetLabel(std::string(type_name(type)));
}

// Reference point: OpenBLAS sgemm (single-threaded) on the same F32 shapes.
void BM_OpenBlasSgemm(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1), n = state.range(2);
  openblas_set_num_threads(1);
  const Weights& w = cached_weights(GgmlType::kF32, rows, cols, 0);
  const std::vector<float> x = make_acts(n * cols);
  std::vector<float> y(n * rows);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(rows),
                static_cast<int>(cols), 1.0f, x.data(), static_cast<int>(cols),
                reinterpret_cast<const float*>(w.bytes.data()), static_cast<int>(cols), 0.0f, y.data(),
                static_cast<int>(rows));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes.size()));
}
BENCHMARK(BM_OpenBlasSgemm)
    ->ArgNames({"rows", "cols", "n"})
    ->Args({kFfn, kDim, 1})
    ->Args({kFfn, kDim, 32})
    ->Args({kFfn, kDim, 512})
    ->Args({kDim, kFfn, 512})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Reference point for single-token decode: OpenBLAS sgemv (single-threaded) on
// the F32 output-layer shape (98 MB, streamed from DRAM like in the engine);
// compare BM_Matmul/type:0/rows:32000/cols:768/n:1/threads:1.
void BM_OpenBlasSgemv(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  openblas_set_num_threads(1);
  const Weights& w = cached_weights(GgmlType::kF32, rows, cols, 0);
  const std::vector<float> x = make_acts(cols);
  std::vector<float> y(rows);
  for (auto _ : state) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols), 1.0f,
                reinterpret_cast<const float*>(w.bytes.data()), static_cast<int>(cols), x.data(), 1, 0.0f, y.data(), 1);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(w.bytes.size()));
}
BENCHMARK(BM_OpenBlasSgemv)
    ->ArgNames({"rows", "cols"})
    ->Args({kVocab, kDim})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// All linear layers of the model for n tokens; output layer for out_tokens of them.
void run_model(benchmark::State& state, std::int64_t n, std::int64_t out_tokens) {
  const GgmlType type = type_arg(state.range(0));
  const std::int64_t code = state.range(0);
  ThreadPool pool(static_cast<int>(state.range(2)));
  KernelContext ctx(&pool);
  struct Layer {
    const Weights *q, *k, *v, *o, *gate, *up, *down;
  };
  std::vector<Layer> layers;
  for (int l = 0; l < kLayers; ++l) {
    layers.push_back({&cached_weights(code, kDim, kDim, 4 * l), &cached_weights(code, kDim, kDim, 4 * l + 1),
                      &cached_weights(code, kDim, kDim, 4 * l + 2), &cached_weights(code, kDim, kDim, 4 * l + 3),
                      &cached_weights(code, kFfn, kDim, l), &cached_weights(code, kFfn, kDim, 100 + l),
                      &cached_weights(code, kDim, kFfn, l)});
  }
  const Weights& out = cached_weights(code, kVocab, kDim, 0);
  const std::vector<float> x = make_acts(n * kFfn);
  std::vector<float> y(n * kFfn), y2(n * kFfn), logits(out_tokens * kVocab);
  std::int64_t bytes = out.bytes.size();
  for (const Layer& L : layers) {
    for (const Weights* w : {L.q, L.k, L.v, L.o, L.gate, L.up, L.down}) bytes += w->bytes.size();
  }
  for (auto _ : state) {
    for (const Layer& L : layers) {
      matmul(L.q->view, x.data(), n, y.data(), ctx);
      matmul(L.k->view, x.data(), n, y.data(), ctx);
      matmul(L.v->view, x.data(), n, y.data(), ctx);
      matmul(L.o->view, x.data(), n, y.data(), ctx);
      matmul(L.gate->view, x.data(), n, y.data(), ctx);
      matmul(L.up->view, x.data(), n, y2.data(), ctx);
      matmul(L.down->view, y2.data(), n, y.data(), ctx);
    }
    matmul(out.view, x.data() + (n - out_tokens) * kDim, out_tokens, logits.data(), ctx);
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetLabel(std::string(type_name(type)) + (code >= kPackedCode ? " rows8" : ""));
}

void BM_ModelMatmuls(benchmark::State& state) { run_model(state, state.range(1), state.range(1)); }

void BM_Synth1bMatmuls(benchmark::State& state) {
  constexpr std::int64_t kDim1b = 2048, kKvDim1b = 256, kFfn1b = 5632, kLayers1b = 22;
  const std::int64_t code = state.range(0), n = state.range(1);
  ThreadPool pool(static_cast<int>(state.range(2)));
  KernelContext ctx(&pool);
  const bool made = state.range(3) != 0;
  // made: read by the AMX bf16 tiles (avx512amx) or the AVX512-BF16 vectors (avx512vnni-zmm),
  // whichever this level runs, for the matrices that reader takes (engine::make_bf16_weights's rule).
  const Bf16WeightsReader reader = bf16_weights_reader(ctx.isa, ctx.amx_bf16, ctx.bf16_vectors, detect_cpu_features());
  if (made && reader == Bf16WeightsReader::kNone) {
    state.SkipWithError("made: neither the bf16 tiles nor the bf16 vectors run at this level on this CPU");
    return;
  }
  // Indexes 1000 on: apart from run_model's weights of the same shapes.
  std::vector<std::array<const Weights*, 7>> layers;
  std::int64_t bytes = 0;
  for (int l = 0; l < kLayers1b; ++l) {
    const int i = 1000 + 4 * l;
    layers.push_back({&cached_weights(code, kDim1b, kDim1b, i), &cached_weights(code, kKvDim1b, kDim1b, i),
                      &cached_weights(code, kKvDim1b, kDim1b, i + 1), &cached_weights(code, kDim1b, kDim1b, i + 1),
                      &cached_weights(code, kFfn1b, kDim1b, i), &cached_weights(code, kFfn1b, kDim1b, i + 1),
                      &cached_weights(code, kDim1b, kFfn1b, i)});
    for (const Weights* w : layers.back()) bytes += static_cast<std::int64_t>(w->bytes.size());
  }
  const Weights& out = cached_weights(code, kVocab, kDim1b, 1000);
  bytes += static_cast<std::int64_t>(out.bytes.size());
  const std::vector<float> x = make_acts(n * kFfn1b);
  std::vector<float> q(n * kDim1b), k(n * kKvDim1b), v(n * kKvDim1b), o(n * kDim1b), gate(n * kFfn1b),
      up(n * kFfn1b), logits(n * kVocab);
  // Time and bytes of each kind of call: qkv, o, gate+up, down (summed over the layers), output.
  std::array<double, 5> seconds{}, kind_bytes{};
  for (const auto& L : layers) {
    kind_bytes[0] += static_cast<double>(L[0]->bytes.size() + L[1]->bytes.size() + L[2]->bytes.size());
    kind_bytes[1] += static_cast<double>(L[3]->bytes.size());
    kind_bytes[2] += static_cast<double>(L[4]->bytes.size() + L[5]->bytes.size());
    kind_bytes[3] += static_cast<double>(L[6]->bytes.size());
  }
  kind_bytes[4] = static_cast<double>(out.bytes.size());
  // made: the tiles of every matrix the bf16 tiles take made once (Bf16WeightTiles), as
  // EngineOptions::bf16_weights does at load.
  Bf16WeightTiles tiles;
  if (made) {
    std::vector<const Weights*> all = {&out};
    for (const auto& L : layers) all.insert(all.end(), L.begin(), L.end());
    for (const Weights* w : all) {
      const Status st = bf16_weights_reader_takes(reader, w->view) ? tiles.add(w->view, pool) : ok_status();
      if (!st.ok()) {
        state.SkipWithError(st.message().c_str());
        return;
      }
    }
    ctx.bf16_weights = &tiles;
  }
  using Clock = std::chrono::steady_clock;
  auto timed = [&](int kind, auto&& call) {
    const Clock::time_point t0 = Clock::now();
    call();
    seconds[kind] += std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (auto _ : state) {
    for (const auto& L : layers) {
      const MatmulTarget qkv[] = {{&L[0]->view, q.data()}, {&L[1]->view, k.data()}, {&L[2]->view, v.data()}};
      timed(0, [&] { matmul_many(qkv, x.data(), n, ctx); });
      timed(1, [&] { matmul(L[3]->view, x.data(), n, o.data(), ctx); });
      const MatmulTarget ffn[] = {{&L[4]->view, gate.data()}, {&L[5]->view, up.data()}};
      timed(2, [&] { matmul_many(ffn, x.data(), n, ctx); });
      timed(3, [&] { matmul(L[6]->view, x.data(), n, o.data(), ctx); });
    }
    timed(4, [&] { matmul(out.view, x.data(), n, logits.data(), ctx); });
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * bytes);
  const double iters = static_cast<double>(state.iterations());
  const char* names[] = {"qkv_GBps", "o_GBps", "gate_up_GBps", "down_GBps", "out_GBps"};
  for (int i = 0; i < 5; ++i) {
    if (seconds[i] > 0) state.counters[names[i]] = kind_bytes[i] * iters / seconds[i] / 1e9;
  }
  state.SetLabel(std::string(type_name(type_arg(code))) + (code >= kPackedCode ? " rows8" : "") +
                 (made ? " made" : ""));
}

void BM_PrefillMatmuls(benchmark::State& state) { run_model(state, state.range(1), 1); }

constexpr std::int64_t kF32 = static_cast<std::int64_t>(GgmlType::kF32);
constexpr std::int64_t kQ8 = static_cast<std::int64_t>(GgmlType::kQ8_0);
constexpr std::int64_t kF16 = static_cast<std::int64_t>(GgmlType::kF16);
constexpr std::int64_t kQ4_0 = static_cast<std::int64_t>(GgmlType::kQ4_0);
constexpr std::int64_t kQ4_K = static_cast<std::int64_t>(GgmlType::kQ4_K);
constexpr std::int64_t kQ6_K = static_cast<std::int64_t>(GgmlType::kQ6_K);
constexpr std::int64_t kQ8Rows8 = kPackedCode + kQ8;
constexpr std::int64_t kQ4kRows8 = kPackedCode + kQ4_K;

void matmul_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "rows", "cols", "n", "threads"});
  for (std::int64_t type : {kQ8Rows8, kQ8, kF32})
    for (auto [rows, cols] : {std::pair{kDim, kDim}, {kFfn, kDim}, {kDim, kFfn}, {kVocab, kDim}})
      for (std::int64_t n : {1, 8, 16, 32, 64, 128, 512})
        for (std::int64_t threads : {1, 2}) b->Args({type, rows, cols, n, threads});
  // F16 rows on either side of the float kernels' switches (tiles, tokens in lanes on
  // avx512vnni-zmm from 32 tokens; the tiles elsewhere, prompts included).
  for (std::int64_t n : {16, 31, 32, 64, 512}) b->Args({kF16, kFfn, kDim, n, 1});
  // F16 and Q6_K (GGUF rows) decode batches: the GEMV (up to 4), then the float tiles or the
  // int8 K-quant kernels, or the bf16 tiles where the CPU has them.
  for (std::int64_t type : {kF16, kQ6_K})
    for (std::int64_t n : {2, 4, 5, 8, 12, 16, 24}) b->Args({type, kFfn, kDim, n, 1});
  // Q4_K in the engine's layout (the format most GGUF users download): the batch-1 GEMV
  // from L2 (768 x 768), L3 (2048 x 768) and DRAM (the vocabulary), and batched tiles.
  for (auto [rows, cols] : {std::pair{kDim, kDim}, {kFfn, kDim}, {kVocab, kDim}})
    for (std::int64_t n : {1, 32, 512}) b->Args({kQ4kRows8, rows, cols, n, 1});
  // Q4_K batches on two threads, each side of the avx512amx level's switch to tiles (32).
  for (auto [rows, cols] : {std::pair{kDim, kDim}, {kFfn, kDim}, {kDim, kFfn}})
    for (std::int64_t n : {16, 32, 64}) b->Args({kQ4kRows8, rows, cols, n, 2});
  // The batch-1 GEMV of each decode type from DRAM: 524288 x 2048 (604 MB in Q4_K) is past
  // every L3 measured (480 MB on the AMX Xeon, where 262144 rows of Q4_K read in part from
  // it at 19.5 GB/s, above the read probe), unlike the engine's synth 1b layers one by one.
  for (std::int64_t type : {kQ4kRows8, kQ8Rows8, kQ4_K, kQ8, kQ6_K, kF16})
    for (std::int64_t threads : {1, 2}) b->Args({type, 524288, 2048, 1, threads});
}

void model_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "n", "threads"});
  for (std::int64_t type : {kQ8Rows8, kQ8, kF32})
    for (std::int64_t n : {1, 2, 3, 4, 8, 32, 64})
      for (std::int64_t threads : {1, 2}) b->Args({type, n, threads});
  // The other weight types at decode (their bytes are left zero: speed does not depend on values).
  for (std::int64_t type : {kF16, kQ4_0, kQ4_K, kQ6_K})
    for (std::int64_t n : {1, 8}) b->Args({type, n, 1});
}

void synth1b_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "n", "threads", "made"});
  for (std::int64_t type : {kQ4kRows8, kQ8Rows8})
    for (std::int64_t n : {1, 4, 32, 512})
      for (std::int64_t threads : {1, 2}) b->Args({type, n, threads, 0});
  // F16 and Q6_K (GGUF rows) prompts: float tiles and int8 K-quant kernels, or bf16 tiles.
  for (std::int64_t type : {1, 14})
    for (std::int64_t threads : {1, 2}) b->Args({type, 512, threads, 0});
  // And their decode batches.
  for (std::int64_t type : {1, 14})
    for (std::int64_t n : {1, 4, 8, 16, 32}) b->Args({type, n, 1, 0});
  // Batches and prompts with the bf16 tiles made at load (AMX-BF16 or AVX512-BF16 CPUs), each
  // beside the same batch without (made 0 above, and here at the others); F32 (4.4 GB of
  // weights) at decode batches only.
  for (std::int64_t type : {kQ8Rows8, kQ4kRows8, kF16, kQ6_K, kF32}) {
    for (std::int64_t n : {2, 4, 8, 12, 16, 24, 32, 64, 512}) {
      if (type == kF32 && n > 32) continue;
      const bool rows8 = type >= kPackedCode;
      if (rows8 && n == 2) continue;
      const bool listed = type == kF32 ? false
                          : rows8      ? n == 4 || n == 32 || n == 512
                                       : n == 4 || n == 8 || n == 16 || n == 32 || n == 512;
      if (!listed) b->Args({type, n, 1, 0});
      b->Args({type, n, 1, 1});
    }
  }
}

void prefill_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"type", "n", "threads"});
  for (std::int64_t type : {kQ8Rows8, kQ8, kF32})
    for (std::int64_t threads : {1, 2}) b->Args({type, 512, threads});
}

void BM_QuantizeActs(benchmark::State& state) {
  const bool k_format = state.range(0) != 0;
  const std::int64_t cols = state.range(1), n = state.range(2);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n * cols));
  for (float& v : x) v = dist(rng);
  std::vector<std::uint8_t> scratch(detail::quantized_acts_bytes(n, cols));
  const detail::QuantizedActs acts = detail::layout_quantized_acts(scratch.data(), n, cols, k_format);
  for (auto _ : state) {
    detail::quantize_acts(x.data(), cols, 0, n, acts);
    benchmark::DoNotOptimize(scratch.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n * cols);
}

BENCHMARK(BM_QuantizeActs)
    ->ArgNames({"k_format", "cols", "n"})
    ->ArgsProduct({{0, 1}, {768, 2048}, {1, 32, 512}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Matmul)->Apply(matmul_args)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ModelMatmuls)->Apply(model_args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Synth1bMatmuls)->Apply(synth1b_args)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PrefillMatmuls)->Apply(prefill_args)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ecoserve::kernels

BENCHMARK_MAIN();
