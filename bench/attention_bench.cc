// Benchmark of decode attention: one token of one sequence against its paged KV
// cache (block_size 16), f32 and fp16 KV, 1 and 2 threads, in three head shapes:
// shape 0 = Llama-like GQA (n_head 32, n_head_kv 8, head_dim 128) at contexts
// 4k..32k, shape 1 = the synth 110m preset's MHA (12 heads, head_dim 64) at 128..32k,
// shape 2 = the synth 1b preset's GQA (32 heads, 4 KV heads, head_dim 64); shapes 1
// and 2 in modes 2-7.
//
//   BM_DecodeAttention/ctx/f16/threads/mode/shape: one layer's attention for one
//     decode token. mode 0 = one attend_one per query head (K/V of a KV head
//     read g = 4 times, the engine before grouping); mode 1 = one attend_group per
//     KV head (K/V read once, but one 512-byte row per 4 KiB page); mode 2 =
//     attend_token (all heads, whole position rows) split across the threads by
//     position range (flash-decoding: attend_partial + merge_partials), as the
//     engine runs a decode token (one range per thread; with 1 thread,
//     attend_token itself).
//     Work units are handed out dynamically over the pool, as the engine does.
//     mode 3 = a batch of decode tokens, as the engine's batched decode runs them: per
//     iteration each thread runs attend_token for one token of its own sequence
//     (bytes counted for all of them); mode 4 = mode 3 with each call streaming into
//     the thread's next token (kernels::DecodeStream), as the engine does. mode 5 =
//     mode 2 with every block of the context the same physical block, so K and V stay
//     in cache (in L1 where one block's K and V fit): the kernel's compute speed
//     (compare with fma_GBps, not read_GBps). mode 6 = mode 2 with each sequence's
//     blocks consecutive in memory, as kv::BlockAllocator places a sequence that grows
//     into free blocks. mode 7 = mode 2 with the context's blocks cycling through the
//     consecutive blocks that hold 1 MiB of K and V: every row from L2, not L1.
//
// Counters: bytes_per_second = K/V bytes of the context read once per KV head
// (n_ctx * n_head_kv * head_dim * 2 * elem bytes) per second (Google Benchmark shows
// it in GiB/s); read_GBps = this machine's read bandwidth with the same thread count
// (kernels::measure_read_gbps), measured before and after each run (ReadProbe;
// read_drift = how much it moved meanwhile, %); pct_of_read = achieved / read_GBps * 100;
// fma_GBps = the bytes/s at which the threads' float32 FMA peak
// (kernels::measure_f32_fma_gmacs, on the kernel's registers: 512-bit for the
// avx512vnni-zmm level's fp16 kernel, its f32 one for GQA groups of 8, and for groups of
// 2 and 4 where AttentionDims::f32_wide (Intel; ECOSERVE_ATTENTION_F32_WIDE=0|1 sets it),
// kernels::decode_attention_vector_bits) would
// run out: every K or V element takes g = n_head / n_head_kv multiply-adds, so
// elem / g bytes per multiply-add (f32, g = 4: 1 byte; fp16: 0.5); where the kernel scores
// on vdpbf16ps (decode_attention_bf16_scores: fp16, g = 8, AVX512-BF16; ECOSERVE_ATTENTION_BF16=0
// turns it off) the K multiply-adds count at the bf16 peak (measure_avx512_bf16_gmacs), the
// V ones at the FMA peak; pct_of_bound =
// achieved / min(read_GBps, fma_GBps) * 100, the roofline of the kernel on this CPU.
// The blocks of several sequences rotate so that the bytes touched between two reads
// of one sequence exceed L3 (the pool, rows of the shape's kv_dim, holds twice the L3).
//
// BM_KvRead reads the same cache without the arithmetic (the read order's ceiling), and
// BM_PrefillAttention times attend_chunk; see each.
//
//   build/bench/attention_bench --benchmark_filter=DecodeAttention
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <unistd.h>

#include "base/fp16.h"
#include "base/ids.h"
#include "base/thread_pool.h"
#include "base/zeroed_buffer.h"
#include "kernels/attention.h"
#include "kernels/machine_peak.h"
#include "kernels/matmul.h"

namespace ecoserve::kernels {
namespace {

constexpr int32_t kBlock = 16;
// The row size of BM_KvRead's and BM_PrefillAttention's caches (shape 0's kv_dim); a
// shape's kv_dim must not exceed it. BM_DecodeAttention's rows are its shape's kv_dim.
constexpr int64_t kKvDim = 1024;

// The head shapes measured: a Llama-2/3-style GQA layer and the synth 110m preset's MHA.
struct Shape {
  int32_t n_head, n_head_kv, head_dim;
};
constexpr Shape kShapes[] = {{32, 8, 128}, {12, 12, 64}, {32, 4, 64}};
constexpr int32_t kPoolTokens = 32768;  // at least: 256 MiB of K+V for f32 rows of kKvDim

// Tokens of a pool of rows of `row_elems` values whose K and V together hold at least
// twice this CPU's L3 (and kPoolTokens): the Xeon's 260 MB L3 held the synth 1b shape's
// whole f32 pool of kPoolTokens (64 MiB touched), so "from DRAM" read partly from L3.
int32_t pool_tokens(int64_t row_elems, size_t elem) {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const double target = 2.0 * static_cast<double>(l3 > 0 ? l3 : 32l << 20);
  const auto tokens = static_cast<int64_t>(target / (2.0 * static_cast<double>(row_elems * elem))) + 1;
  return static_cast<int32_t>(std::max<int64_t>(kPoolTokens, (tokens + kBlock - 1) / kBlock * kBlock));
}

// A K and a V pool of rows of row_elems values (pool_tokens of them) in shuffled blocks,
// random values; a view with that kv_dim reads rows back to back.
struct Cache {
  ZeroedBuffer<uint8_t> k, v;
  std::vector<BlockId> blocks;    // physical blocks in the order sequences take them
  std::vector<BlockId> in_order;  // 0, 1, 2, ...: consecutive blocks (mode 6)
};

Cache& cache_for(bool f16, int64_t row_elems) {
  static std::map<std::pair<bool, int64_t>, std::unique_ptr<Cache>> caches;
  auto& c = caches[{f16, row_elems}];
  if (c) return *c;
  c = std::make_unique<Cache>();
  const size_t elem = f16 ? 2 : 4;
  const int32_t tokens = pool_tokens(row_elems, elem);
  const size_t n = static_cast<size_t>(tokens) * row_elems;
  c->k = std::move(ZeroedBuffer<uint8_t>::create(n * elem)).value();
  c->v = std::move(ZeroedBuffer<uint8_t>::create(n * elem)).value();
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto* buf : {&c->k, &c->v}) {
    for (size_t i = 0; i < n; ++i) {
      const float x = nd(rng);
      if (f16) {
        reinterpret_cast<uint16_t*>(buf->data())[i] = fp32_to_fp16(x);
      } else {
        reinterpret_cast<float*>(buf->data())[i] = x;
      }
    }
  }
  std::vector<int32_t> ids(tokens / kBlock);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  for (int32_t id : ids) c->blocks.push_back(BlockId(id));
  for (int32_t id = 0; id < tokens / kBlock; ++id) c->in_order.push_back(BlockId(id));
  return *c;
}

// One core's float32 multiply-adds per second, in units of 1e9, on registers of
// `bits` (256 or 512) bits.
double fma_gmacs(int bits = 256) {
  static const double g256 = measure_f32_fma_gmacs(0.3);
  if (bits != 512) return g256;
  static const double g512 = measure_f32_fma_gmacs(0.3, 512);
  return g512;
}

// One core's bf16 tile peak (multiply-adds per second / 1e9), measured once.
double amx_bf16_gmacs() {
  static const double g = measure_amx_bf16_gmacs(0.3);
  return g;
}

// One core's vdpbf16ps (zmm) peak, measured once.
double avx512_bf16_gmacs() {
  static const double g = measure_avx512_bf16_gmacs(0.3);
  return g;
}

// This machine's read bandwidth with the pool's threads (kernels::measure_read_gbps),
// measured next to each run of a benchmark case: before it (for a case's later runs
// and repetitions, the probe that ended its run before) and after it, so that a
// case's share is of the bandwidth of its own seconds. On a shared host the bandwidth
// drifts by a third within minutes, and on two threads it moved between ~31 and ~65
// GB/s from one case to the next (docs/kernels.md, nineteenth pass): a figure measured
// once per process misstates the later cases' shares.
class ReadProbe {
 public:
  // Before the timing loop: measures, unless the last probe was this case's (the same
  // tag, thread count and five arguments).
  ReadProbe(ThreadPool& pool, const benchmark::State& state, int64_t tag) : pool_(pool) {
    std::vector<int64_t> key{tag, pool.num_threads()};
    for (std::size_t i = 0; i < 5; ++i) key.push_back(state.range(i));
    Last& last = last_probe();
    if (last.key != key) last = Last{std::move(key), measure_read_gbps(pool, kProbeBytes)};
    before_ = last.gbps;
  }
  // After the timing loop: the read_GBps (the mean of the probes before and after this
  // run) and read_drift (their difference, % of the mean) counters; returns read_GBps.
  double finish(benchmark::State& state) {
    const double after = measure_read_gbps(pool_, kProbeBytes);
    last_probe().gbps = after;
    const double gbps = (before_ + after) / 2;
    state.counters["read_GBps"] = gbps;
    state.counters["read_drift"] = 100.0 * (after - before_) / gbps;
    return gbps;
  }

 private:
  static constexpr size_t kProbeBytes = size_t{512} << 20;
  struct Last {
    std::vector<int64_t> key;  // the case it was measured for
    double gbps = 0;
  };
  static Last& last_probe() {
    static Last last;
    return last;
  }
  ThreadPool& pool_;
  double before_ = 0;
};

void BM_DecodeAttention(benchmark::State& state) {
  const int32_t n_ctx = static_cast<int32_t>(state.range(0));
  const bool f16 = state.range(1) != 0;
  ThreadPool pool(static_cast<int>(state.range(2)));
  const int mode = static_cast<int>(state.range(3));
  const Shape shape = kShapes[state.range(4)];
  Cache& cache = cache_for(f16, int64_t{shape.n_head_kv} * shape.head_dim);
  ReadProbe probe(pool, state, 0);
  const int32_t blocks_per_seq = (n_ctx + kBlock - 1) / kBlock;
  const int32_t n_seqs = std::max<int32_t>(1, static_cast<int32_t>(cache.blocks.size()) / blocks_per_seq);
  const int32_t kHead = shape.n_head, kHeadKv = shape.n_head_kv, kHeadDim = shape.head_dim;
  const int64_t kv_dim = int64_t{kHeadKv} * kHeadDim;
  AttentionDims dims{kHead, kHeadKv, kHeadDim, 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  dims.fp16_math = default_attention_fp16_math();  // as the engine sets it (ECOSERVE_ATTENTION_FP16_MATH)
  dims.bf16_scores = default_attention_bf16();      // and ECOSERVE_ATTENTION_BF16
  const int32_t group = kHead / kHeadKv;
  std::vector<float> q(static_cast<size_t>(kHead) * kHeadDim), out(q.size());
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& x : q) x = nd(rng);
  std::vector<AttentionScratch> scratch(pool.num_threads());
  // mode 2: the context in `splits` position ranges, merged.
  const int32_t splits = pool.num_threads();
  std::vector<AttentionPartial> partials(splits);
  // mode 5: every position of the context in one physical block (K and V stay in cache).
  // mode 7: the context's blocks cycle through the first consecutive blocks that hold 1 MiB
  // of K and V (in L2, not in L1): the kernel's speed when every row comes from L2.
  std::vector<BlockId> hot(static_cast<size_t>(blocks_per_seq), cache.blocks[0]);
  if (mode == 7) {
    const int64_t block_bytes = int64_t{kBlock} * kv_dim * (f16 ? 2 : 4) * 2;
    const int64_t set = std::max<int64_t>(1, (int64_t{1} << 20) / block_bytes);
    for (int32_t i = 0; i < blocks_per_seq; ++i) hot[i] = cache.in_order[i % set];
  }
  // Sequence sq's blocks (taken modulo the sequences the cache holds).
  auto view = [&](int32_t sq) {
    const BlockId* first = (mode == 6 ? cache.in_order : cache.blocks).data() + (sq % n_seqs) * blocks_per_seq;
    const std::span<const BlockId> table(mode == 5 || mode == 7 ? hot.data() : first, blocks_per_seq);
    return PagedKvView{cache.k.data(), cache.v.data(), kv_dim, kBlock, table, f16};
  };
  int32_t seq = 0;
  if (mode == 3 || mode == 4) {
    const int32_t T = pool.num_threads();
    std::vector<std::vector<float>> outs(T, std::vector<float>(q.size()));
    bool warm = false;
    for (auto _ : state) {
      pool.run([&](int thread, int) {
        const PagedKvView kv = view(seq + thread), next = view(seq + T + thread);
        DecodeStream stream;
        if (mode == 4) {
          stream.next = &next;
          stream.next_n_ctx = n_ctx;
          stream.started = warm;
        }
        attend_token(q.data(), n_ctx, kv, dims, outs[thread].data(), scratch[thread], stream);
      });
      warm = true;
      seq = (seq + T) % n_seqs;
      benchmark::DoNotOptimize(outs[0].data());
      benchmark::ClobberMemory();
    }
  } else {
    for (auto _ : state) {
      const PagedKvView kv = view(seq);
      seq = (seq + 1) % n_seqs;
      if ((mode == 2 || mode >= 5) && splits == 1) {
        attend_token(q.data(), n_ctx, kv, dims, out.data(), scratch[0]);
      } else {
        const int32_t units = mode == 0 ? kHead : mode == 1 ? kHeadKv : splits;
        std::atomic<int32_t> next{0};
        pool.run([&](int thread, int) {
          for (int32_t u = next.fetch_add(1); u < units; u = next.fetch_add(1)) {
            if (mode == 0) {
              attend_one(q.data() + u * kHeadDim, u / group, n_ctx, kv, dims, out.data() + u * kHeadDim,
                         scratch[thread]);
            } else if (mode == 1) {
              attend_group(q.data() + u * group * kHeadDim, u, n_ctx, kv, dims, out.data() + u * group * kHeadDim,
                           scratch[thread]);
            } else {
              const int32_t b = static_cast<int32_t>(int64_t{n_ctx} * u / splits);
              const int32_t e = static_cast<int32_t>(int64_t{n_ctx} * (u + 1) / splits);
              attend_partial(q.data(), b, e, kv, dims, partials[u], scratch[thread]);
            }
          }
        });
        if (mode == 2 || mode >= 5) merge_partials(partials, kHead, kHeadDim, out.data());
      }
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
  }
  const int32_t tokens = mode == 3 || mode == 4 ? pool.num_threads() : 1;  // per iteration
  const double kv_bytes = static_cast<double>(n_ctx) * kv_dim * 2 * (f16 ? 2 : 4) * tokens;
  state.SetBytesProcessed(static_cast<int64_t>(kv_bytes * static_cast<double>(state.iterations())));
  // The FMA peak on the registers the kernel uses (512-bit: the zmm level's wide kernel).
  const int bits = decode_attention_vector_bits(dims.isa, kHeadDim, mode == 0 ? 1 : group, f16, dims.f32_wide);
  double fma_gbps = fma_gmacs(bits) * pool.num_threads() * (f16 ? 2.0 : 4.0) / group;
  if (mode != 0 && decode_attention_bf16_scores(dims.bf16_scores, dims.fp16_math, dims.isa, f16, group, kHeadDim)) {
    // Scores on vdpbf16ps, values on FMAs: each position's 4 bytes per dimension (K and V
    // in fp16) take group multiply-adds at each peak.
    fma_gbps = 4.0 * pool.num_threads() / (group / avx512_bf16_gmacs() + group / fma_gmacs(bits));
  }
  const double achieved = kv_bytes * static_cast<double>(state.iterations());  // / seconds: kIsRate
  const double peak = probe.finish(state);
  state.counters["fma_GBps"] = fma_gbps;
  state.counters["pct_of_read"] = benchmark::Counter(achieved * 100.0 / (peak * 1e9), benchmark::Counter::kIsRate);
  state.counters["pct_of_bound"] =
      benchmark::Counter(achieved * 100.0 / (std::min(peak, fma_gbps) * 1e9), benchmark::Counter::kIsRate);
}

void decode_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"ctx", "f16", "threads", "mode", "shape"});
  for (int64_t mode : {0, 1, 2})
    for (int64_t f16 : {0, 1})
      for (int64_t threads : {1, 2})
        for (int64_t ctx : {4096, 8192, 16384, 32768}) {
          b->Args({ctx, f16, threads, mode, 0});
        }
  for (int64_t shape : {1, 2})
    for (int64_t f16 : {0, 1})
      for (int64_t threads : {1, 2})
        for (int64_t ctx : {128, 1024, 4096, 32768}) {
          b->Args({ctx, f16, threads, 2, shape});
        }
  for (int64_t f16 : {0, 1}) b->Args({4096, f16, 1, 5, 2});
  for (int64_t f16 : {0, 1}) b->Args({4096, f16, 1, 5, 1});
  for (int64_t shape : {0, 2})
    for (int64_t f16 : {0, 1})
      for (int64_t threads : {1, 2})
        for (int64_t ctx : {4096, 32768}) b->Args({ctx, f16, threads, 6, shape});
  for (int64_t shape : {0, 1, 2})
    for (int64_t f16 : {0, 1})
      for (int64_t threads : {1, 2})
        for (int64_t ctx : {128, 512, 2048})
          for (int64_t mode : {3, 4}) b->Args({ctx, f16, threads, mode, shape});
  for (int64_t f16 : {0, 1}) b->Args({4096, f16, 1, 5, 0});
  for (int64_t shape : {0, 1, 2})
    for (int64_t f16 : {0, 1}) b->Args({4096, f16, 1, 7, shape});
}

BENCHMARK(BM_DecodeAttention)->Apply(decode_args)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The ceiling of decode attention's reads, without its arithmetic: one thread reads a
// sequence's K and V rows (shape 0's 8 KV heads x head_dim 128: 2 KiB per position in
// an fp16 cache, 4 KiB in an f32 one) of n_ctx positions, a tile of 8 positions at
// a time (K, then V), summing them with integer adds and nothing else.
//
//   BM_KvRead/ctx/f16/consecutive/prefetch/interleaved: consecutive 0 = the sequence's
//     16-position blocks in the cache's shuffled order (as BM_DecodeAttention reads
//     them), 1 = physically consecutive (as a fresh cache hands them out); prefetch 0 =
//     none (the hardware prefetchers only), 1 = every line of the rows 32 positions on
//     (kPrefetchAhead), into L2, in row order and one line per line read, as the 512-bit
//     decode kernel does (RowPrefetch), 2 = only the first 8 lines of the block after
//     the next, at each block start; interleaved 0 = each row front to back, r = r rows
//     side by side, one KV head's slice (256 bytes fp16, 512 f32) of each in turn (4:
//     the score pass's order; the V pass reads 8 rows side by side in smaller pieces).
//
// Counters as BM_DecodeAttention's: read_GBps, pct_of_read. On the Zen 5 of
// docs/kernels.md's twelfth pass (read_GBps 40), pct_of_read: shuffled blocks 42-58%
// without prefetch, 71-81% with it (either order); consecutive blocks 88-96% with or
// without it in row order, 88-95% interleaved with it (43-49% without). Fifteenth pass
// (same VM, read_GBps 41), with prefetch, fp16 / f32: rows front to back 85-90% / 79-91%,
// side by side 2 rows 83-88% / 78-83%, 4 rows 79-88% / 74-81%, 8 rows 62-86% / 72-78%.
void BM_KvRead(benchmark::State& state) {
  const int32_t n_ctx = static_cast<int32_t>(state.range(0));
  const bool f16 = state.range(1) != 0;
  const bool consecutive = state.range(2) != 0;
  const int prefetch = static_cast<int>(state.range(3));
  const int32_t side = static_cast<int32_t>(state.range(4));  // rows side by side (0: front to back)
  const int64_t kRowBytes = kKvDim * (f16 ? 2 : 4);
  const int64_t kHeadBytes = int64_t{kShapes[0].head_dim} * (f16 ? 2 : 4);
  constexpr int32_t kTile = 8, kAhead = 32;
  ThreadPool pool(1);
  ReadProbe probe(pool, state, 1);
  Cache& cache = cache_for(f16, kKvDim);
  const int32_t blocks_per_seq = (n_ctx + kBlock - 1) / kBlock;
  const int32_t n_seqs = std::max<int32_t>(1, static_cast<int32_t>(cache.blocks.size()) / blocks_per_seq);
  // Every sequence's row offsets (bytes), kAhead past its end wrapping to its start.
  std::vector<std::vector<int64_t>> rows(n_seqs);
  for (int32_t sq = 0; sq < n_seqs; ++sq) {
    for (int32_t p = 0; p < n_ctx + kAhead + kBlock; ++p) {
      const int32_t b = sq * blocks_per_seq + (p % n_ctx) / kBlock;
      const int64_t block = consecutive ? b : cache.blocks[static_cast<size_t>(b)].value;
      rows[sq].push_back((block * kBlock + (p % n_ctx) % kBlock) * kRowBytes);
    }
  }
  auto add = [](__m256i acc, const char* at) {
    return _mm256_add_epi32(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
  };
  int32_t seq = 0;
  for (auto _ : state) {
    const std::vector<int64_t>& off = rows[seq];
    seq = (seq + 1) % n_seqs;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (int32_t p0 = 0; p0 < n_ctx; p0 += kTile) {
      for (const uint8_t* base : {cache.k.data(), cache.v.data()}) {
        const char* c = reinterpret_cast<const char*>(base);
        if (prefetch == 2 && p0 % kBlock == 0) {
          for (int64_t b = 0; b < 8 * 64; b += 64) _mm_prefetch(c + off[p0 + 2 * kBlock] + b, _MM_HINT_T1);
        }
        // prefetch 1: the rows kAhead on, line after line, as many lines per step as it reads.
        int64_t pf_line = 0;
        auto issue = [&](int lines) {
          if (prefetch != 1) return;
          for (int i = 0; i < lines; ++i, ++pf_line) {
            const int64_t j = pf_line / (kRowBytes / 64);
            _mm_prefetch(c + off[p0 + j + kAhead] + pf_line % (kRowBytes / 64) * 64, _MM_HINT_T1);
          }
        };
        if (side == 0) {
          for (int32_t j = 0; j < kTile; ++j) {
            for (int64_t b = 0; b < kRowBytes; b += 64) {
              issue(1);
              a0 = add(a0, c + off[p0 + j] + b);
              a1 = add(a1, c + off[p0 + j] + b + 32);
            }
          }
        } else {
          for (int32_t j0 = 0; j0 < kTile; j0 += side) {
            for (int64_t h = 0; h < kRowBytes; h += kHeadBytes) {
              issue(static_cast<int>(side * kHeadBytes / 64));
              for (int32_t j = j0; j < j0 + side; ++j) {
                for (int64_t b = h; b < h + kHeadBytes; b += 64) {
                  a0 = add(a0, c + off[p0 + j] + b);
                  a1 = add(a1, c + off[p0 + j] + b + 32);
                }
              }
            }
          }
        }
      }
    }
    benchmark::DoNotOptimize(_mm256_extract_epi32(_mm256_add_epi32(a0, a1), 0));
  }
  const double bytes = 2.0 * n_ctx * kRowBytes * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  const double peak = probe.finish(state);
  state.counters["pct_of_read"] = benchmark::Counter(bytes * 100.0 / (peak * 1e9), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_KvRead)
    ->ArgNames({"ctx", "f16", "consecutive", "prefetch", "interleaved"})
    ->ArgsProduct({{8192}, {1, 0}, {0, 1}, {0, 1, 2}, {0, 2, 4, 8}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// One layer's prefill attention on one thread: a prompt of n_q tokens (positions 0..n_q)
// of one sequence, every KV head (attend_chunk per KV head, as the engine's prefill
// units). Counters: GMACs = the causal multiply-adds (q.k and p.v, token i sees i + 1
// positions) per second in units of 1e9; pct_of_peak = GMACs / one core's float32 FMA peak
// on the registers the kernel uses (prefill_attention_vector_bits), or the bf16 peak of the
// tiles or vectors.
void BM_PrefillAttention(benchmark::State& state) {
  const int32_t n_q = static_cast<int32_t>(state.range(0));
  const bool f16 = state.range(1) != 0;
  const Shape shape = kShapes[state.range(2)];
  Cache& cache = cache_for(f16, kKvDim);  // only the first blocks are read
  const int64_t kv_dim = int64_t{shape.n_head_kv} * shape.head_dim;
  const int64_t q_dim = int64_t{shape.n_head} * shape.head_dim;
  AttentionDims dims{shape.n_head, shape.n_head_kv, shape.head_dim,
                     1.0f / std::sqrt(static_cast<float>(shape.head_dim))};
  const int64_t bf16 = state.range(3);  // 0 float, 1 AMX tiles, 2 AVX512-BF16 vectors
  const CpuFeatures cpu = detect_cpu_features();
  if (bf16 == 1) {
    if (!amx_bf16_supported(cpu)) {
      state.SkipWithError("no AMX-BF16 on this CPU: attend_chunk's bf16 tiles do not run here");
      return;
    }
    dims.amx_bf16 = true;
    dims.isa = Isa::kAvx512Amx;
  } else if (bf16 == 2) {
    if (!cpu.avx512_bf16 || !isa_supported(Isa::kAvx512VnniZmm, cpu)) {
      state.SkipWithError("no AVX512-BF16 at the avx512vnni-zmm level: attend_chunk's bf16 vectors do not run here");
      return;
    }
    dims.bf16_vectors = true;
    dims.isa = Isa::kAvx512VnniZmm;
  } else {
    dims.bf16_vectors = false;
  }
  std::vector<float> q(static_cast<size_t>(n_q) * q_dim), out(q.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& x : q) x = nd(rng);
  const std::span<const BlockId> table(cache.blocks.data(), static_cast<size_t>((n_q + kBlock - 1) / kBlock));
  const PagedKvView kv{cache.k.data(), cache.v.data(), kv_dim, kBlock, table, f16};
  AttentionScratch scratch;
  for (auto _ : state) {
    for (int32_t h = 0; h < shape.n_head_kv; ++h) {
      attend_chunk(q.data(), q_dim, n_q, 0, h, kv, dims, out.data(), q_dim, scratch);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double macs = 2.0 * shape.n_head * shape.head_dim * (static_cast<double>(n_q) * (n_q + 1) / 2);
  state.counters["GMACs"] =
      benchmark::Counter(macs * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  const double peak = bf16 == 1   ? amx_bf16_gmacs()
                      : bf16 == 2 ? avx512_bf16_gmacs()
                                  : fma_gmacs(prefill_attention_vector_bits(dims.isa, shape.head_dim));
  state.counters["pct_of_peak"] =
      benchmark::Counter(macs * 100.0 / (peak * 1e9) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// bf16 1: AttentionDims::amx_bf16 (the avx512amx level's bf16 tiles; pct_of_peak then counts
// the tiles' bf16 peak, kernels::measure_amx_bf16_gmacs, not the float FMAs'); 2:
// AttentionDims::bf16_vectors (AVX512-BF16 at the avx512vnni-zmm level; the vdpbf16ps peak,
// kernels::measure_avx512_bf16_gmacs); 0: the float kernel.
BENCHMARK(BM_PrefillAttention)
    ->ArgNames({"n_q", "f16", "shape", "bf16"})
    ->ArgsProduct({{512, 2048, 4096}, {0, 1}, {0, 1, 2}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ecoserve::kernels

BENCHMARK_MAIN();
