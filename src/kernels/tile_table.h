// Shared shapes of the matmul kernels (float and per-ISA int8). A compile-time
// table of register-tile kernels: fns[r][t] is the kernel for
// r + 1 rows and t + 1 tokens, Maker::fn<r + 1, t + 1>() (a kernel picks the
// tile shape for the rows and tokens left at run time). Internal linkage, as
// the per-ISA kernel builds need (matmul_quant_impl.h).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace ecoserve::kernels::detail {
namespace {

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
