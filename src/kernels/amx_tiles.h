// AMX helpers shared by the objects built with AMX flags (matmul_quant_avx512vnni.cc through
// matmul_amx_impl.h and matmul_amx_bf16_impl.h; attention_rows_avx512amx.cc); with
// bf16_transpose.h's bf16_store_transposed. Internal
// linkage only (an unnamed namespace; always-inline functions): scripts/check_isa_objects.sh
// forbids weak symbols in those objects.
#pragma once

// GCC names the AMX-TILE macro __AMX_TILE__, clang __AMXTILE__.
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !defined(__AVX512BF16__)
#error "amx_tiles.h is built only into objects compiled with -mamx-tile and -mavx512bf16"
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/bf16_transpose.h"

namespace ecoserve::kernels::detail {
namespace {

// A tile configuration (LDTILECFG's 64 bytes, palette 1): set() gives tile `tile` `rows`
// rows of `colsb` bytes; load() makes it this thread's.
struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
  void set(int tile, int r, int c) {
    rows[tile] = static_cast<std::uint8_t>(r);
    colsb[tile] = static_cast<std::uint16_t>(c);
  }
  void load() const {
    // GCC 12 does not count ldtilecfg as reading the 64 bytes: with set() inlined it once
    // dropped the rows' and columns' stores as dead and loaded a zeroed palette-1 config (the
    // next tile instruction: SIGILL). The barrier makes every store land first.
    __asm__ __volatile__("" : : "r"(this) : "memory");
    _tile_loadconfig(this);
  }
};

}  // namespace
}  // namespace ecoserve::kernels::detail
