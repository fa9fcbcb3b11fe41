// Shared shapes of the matmul kernels (float and per-ISA int8). A compile-time
// table of register-tile kernels: fns[r][t] is the kernel for
// r + 1 rows and t + 1 tokens, Maker::fn<r + 1, t + 1>() (a kernel picks the
// tile shape for the rows and tokens left at run time). Internal linkage, as
// the per-ISA kernel builds need (matmul_quant_impl.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace ecoserve::kernels::detail {
namespace {

// Lines a register tile prefetches into L2 for the tile after it (the next rows'
// weights), spread over its steps: a burst of them before the tile stalled on the
// full miss queue (5% of a batch-32 decode step on Zen 4). Empty on the GEMV paths.
struct TilePrefetch {
  const char* p = nullptr;
  std::int64_t lines = 0;
  // Lines per step for a tile of `steps` steps.
  std::int64_t per_step(std::int64_t steps) const { return steps > 0 ? (lines + steps - 1) / steps : 0; }
  // Prefetches lines [k0, k0 + n) that exist.
  void issue(std::int64_t k0, std::int64_t n) const {
    for (std::int64_t k = k0, e = k0 + n < lines ? k0 + n : lines; k < e; ++k) _mm_prefetch(p + 64 * k, _MM_HINT_T1);
  }
};

// The GEMV's software prefetch of the line `ahead` bytes past weight byte w
// (KernelContext::gemv_prefetch, > 0); the kRows8 tiles built for it call it once per
// 64 bytes of weights they read. The address is formed as an integer: it may lie past
// the matrix (a prefetch never faults), where a pointer may not point.
inline void prefetch_ahead(const std::uint8_t* w, std::int64_t ahead) {
  const auto at = reinterpret_cast<std::uintptr_t>(w) + static_cast<std::uintptr_t>(ahead);
  _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T1);
}

// Software prefetch of a GEMV's kStreams weight streams: `ahead` bytes ahead of where
// each stream reads (0: none). upto(rows, end) is called as the streams' rows are
// read, end = the bytes of the current rows read so far (from the row start), and
// prefetches the lines for [done, end) + ahead; reset() at each new row. A row's
// successor in a stream is the next row in memory, so the lines past a row's end are
// the ones read next. On an Intel Xeon (family 6 model 207) one core's hardware
// prefetchers alone keep too few DRAM reads in flight: 4 streams of F16 dot products
// read 12.9 GB/s, 15.7-16.0 with the lines 1 KiB ahead (the plain read probe: 16.2);
// on Zen 4 a float sweep 4 KiB ahead was 10% slower (KernelContext::gemv_prefetch).
template <int kStreams>
class GemvPrefetch {
 public:
  explicit GemvPrefetch(std::int64_t ahead) : ahead_(ahead) {}
  void reset() { done_ = 0; }
  void upto(const std::uint8_t* const* rows, std::int64_t end) {
    if (ahead_ <= 0) return;
    for (; done_ < end; done_ += 64) {
#pragma GCC unroll 8
      for (int s = 0; s < kStreams; ++s) prefetch_ahead(rows[s] + done_, ahead_);
    }
  }

 private:
  std::int64_t ahead_;
  std::int64_t done_ = 0;
};

// The `lines` lines from p handed out to `tiles` token tiles, an equal share each.
class PrefetchShares {
 public:
  PrefetchShares(const char* p, std::int64_t lines, std::int64_t tiles)
      : p_(p), lines_(lines), share_((lines + tiles - 1) / tiles) {}
  TilePrefetch next() {
    const std::int64_t n = share_ < lines_ - at_ ? share_ : lines_ - at_;
    const TilePrefetch pf{p_ + 64 * at_, n};
    at_ += n;
    return pf;
  }

 private:
  const char* p_;
  std::int64_t lines_, share_, at_ = 0;
};

template <class Fn, int R, int T>
struct TileTable {
  Fn fns[R][T];
};

template <class Fn, int R, int T, class Maker, int... Is>
constexpr TileTable<Fn, R, T> make_tile_table_impl(std::integer_sequence<int, Is...>) {
  TileTable<Fn, R, T> table{};
  ((table.fns[Is / T][Is % T] = Maker::template fn<Is / T + 1, Is % T + 1>()), ...);
  return table;
}

template <class Fn, int R, int T, class Maker>
constexpr TileTable<Fn, R, T> make_tile_table() {
  return make_tile_table_impl<Fn, R, T, Maker>(std::make_integer_sequence<int, R * T>{});
}

// Decode batches of 1-4 tokens take the kernels' multi-stream GEMV paths:
// calls fn(std::integral_constant<int, n_tokens>{}) and returns true for
// n_tokens in 1..4, else returns false.
template <class Fn>
bool dispatch_gemv_tokens(std::int64_t n_tokens, Fn&& fn) {
  switch (n_tokens) {
    case 1: fn(std::integral_constant<int, 1>{}); return true;
    case 2: fn(std::integral_constant<int, 2>{}); return true;
    case 3: fn(std::integral_constant<int, 3>{}); return true;
    case 4: fn(std::integral_constant<int, 4>{}); return true;
    default: return false;
  }
}

}  // namespace
}  // namespace ecoserve::kernels::detail
