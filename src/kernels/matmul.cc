#include "kernels/matmul.h"

#include <algorithm>

#include "base/status.h"
#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels {
namespace {

// Rows are handed to threads in units of 16 so no two threads write the same
// 64-byte line of y (and kRows8 groups of 8 rows stay whole).
constexpr std::int64_t kRowUnit = 16;
// Quantize activations on all threads only when there is enough of them.
constexpr std::int64_t kParallelQuantizeElems = 64 * 1024;

bool is_float_type(GgmlType t) { return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16; }
bool is_quantized_type(GgmlType t) {
  return t == GgmlType::kQ8_0 || t == GgmlType::kQ4_0 || t == GgmlType::kQ4_K || t == GgmlType::kQ6_K;
}

// Contiguous share `i` of [0, n) split in `parts`, in whole units (except the last).
inline void share(std::int64_t n, std::int64_t unit, int i, int parts, std::int64_t* begin, std::int64_t* end) {
  const std::int64_t units = (n + unit - 1) / unit;
  *begin = std::min(n, units * i / parts * unit);
  *end = std::min(n, units * (i + 1) / parts * unit);
}

}  // namespace

void matmul(const WeightView& w, const float* x, std::int64_t n_tokens, float* y, KernelContext& ctx) {
  const TypeTraits* traits = type_traits(w.type);
  ECO_CHECK_MSG(traits != nullptr && (is_float_type(w.type) || is_quantized_type(w.type)),
                "matmul: unsupported weight type {}", type_name(w.type));
  ECO_CHECK_MSG(w.rows >= 0 && w.cols > 0 && n_tokens >= 0, "matmul: bad shape rows={} cols={} n_tokens={}", w.rows,
                w.cols, n_tokens);
  ECO_CHECK_MSG(w.cols % traits->block_elems == 0, "matmul: cols={} is not a multiple of the {} block size {}", w.cols,
                traits->name, traits->block_elems);
  ECO_CHECK_MSG(w.row_bytes == row_bytes(*traits, w.cols), "matmul: row_bytes={} but a {} row of {} values has {}",
                w.row_bytes, traits->name, w.cols, row_bytes(*traits, w.cols));
  ECO_CHECK_MSG(w.layout == WeightLayout::kGguf ||
                    ((w.type == GgmlType::kQ8_0 || w.type == GgmlType::kQ4_K) && w.rows % 8 == 0),
                "matmul: the kRows8 layout needs q8_0 or q4_K with rows % 8 == 0, not {} with {} rows", traits->name,
                w.rows);
  if (w.rows == 0 || n_tokens == 0) return;
  ECO_CHECK_MSG(w.data != nullptr && x != nullptr && y != nullptr, "matmul: null data pointer");
  ECO_CHECK_MSG(ctx.pool != nullptr, "matmul: KernelContext without a thread pool");

  const auto* wdata = static_cast<const std::uint8_t*>(w.data);
  ThreadPool& pool = *ctx.pool;
  const int nthreads = pool.num_threads();
  // Split rows across threads unless there are too few rows for it.
  const bool split_rows = w.rows >= 4 * kRowUnit * nthreads || n_tokens < 2 * nthreads;

  // rows_fn(thread, r0, r1, t0, t1) on every thread's share.
  auto run = [&](auto&& rows_fn) {
    if (nthreads == 1) {
      rows_fn(0, 0, w.rows, 0, n_tokens);
      return;
    }
    pool.run([&](int i, int parts) {
      std::int64_t r0 = 0, r1 = w.rows, t0 = 0, t1 = n_tokens;
      if (split_rows) {
        share(w.rows, kRowUnit, i, parts, &r0, &r1);
      } else {
        share(n_tokens, 1, i, parts, &t0, &t1);
      }
      if (r0 < r1 && t0 < t1) rows_fn(i, r0, r1, t0, t1);
    });
  };

  if (n_tokens >= detail::kBlasMinTokens && is_float_type(w.type)) {
    float* panels = nullptr;
    const std::size_t panel_floats = detail::blas_panel_floats(w.cols);
    if (w.type != GgmlType::kF32) {
      const std::size_t need = (panel_floats * nthreads + 16) * sizeof(float);
      if (ctx.scratch.size() < need) ctx.scratch.resize(need);
      auto base = reinterpret_cast<std::uintptr_t>(ctx.scratch.data());
      panels = reinterpret_cast<float*>((base + 63) / 64 * 64);
    }
    auto blas_rows = [&](int i, int parts) {
      std::int64_t r0, r1;
      share(w.rows, kRowUnit, i, parts, &r0, &r1);
      if (r0 < r1) {
        detail::matmul_blas_rows(w.type, wdata, w.row_bytes, w.cols, x, n_tokens, r0, r1, y, w.rows,
                                 panels ? panels + panel_floats * i : nullptr);
      }
    };
    if (nthreads == 1) {
      blas_rows(0, 1);
    } else {
      pool.run(blas_rows);
    }
    return;
  }

  if (is_float_type(w.type)) {
    run([&](int, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1) {
      detail::matmul_float_rows(w.type, wdata, w.row_bytes, w.cols, x, r0, r1, t0, t1, y, w.rows);
    });
    return;
  }

  const std::size_t need = detail::quantized_acts_bytes(n_tokens, w.cols);
  if (ctx.scratch.size() < need) ctx.scratch.resize(need);
  const detail::QuantizedActs acts =
      detail::layout_quantized_acts(ctx.scratch.data(), n_tokens, w.cols, detail::takes_k_format(w.type));
  if (nthreads > 1 && n_tokens > 1 && n_tokens * w.cols >= kParallelQuantizeElems) {
    pool.run([&](int i, int parts) {
      std::int64_t t0, t1;
      share(n_tokens, 1, i, parts, &t0, &t1);
      if (t0 < t1) detail::quantize_acts(x, w.cols, t0, t1, acts);
    });
  } else {
    detail::quantize_acts(x, w.cols, 0, n_tokens, acts);
  }
  const std::size_t per_thread = static_cast<std::size_t>(detail::kQuantScratchFloatsPerBlock * (w.cols / 32) + 128);
  if (ctx.tile_scratch.size() < per_thread * nthreads) ctx.tile_scratch.resize(per_thread * nthreads);
  const detail::QuantRowsFn kernel = detail::quant_rows_kernel(ctx.isa, w.type, w.layout);
  run([&](int i, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1) {
    kernel(wdata, w.row_bytes, acts, r0, r1, t0, t1, y, w.rows, ctx.tile_scratch.data() + per_thread * i);
  });
}

}  // namespace ecoserve::kernels
