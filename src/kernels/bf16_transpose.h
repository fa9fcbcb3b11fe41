// bf16_store_transposed: a 16 x 16 transpose of dwords (pairs of bf16) on AVX-512, shared by
// the objects that lay out bf16 operands (amx_tiles.h's users and attention_rows_avx512bf16.cc).
// Internal linkage only (an unnamed namespace; always-inline functions):
// scripts/check_isa_objects.sh forbids weak symbols in those objects.
#pragma once

#if !defined(__AVX512F__)
#error "bf16_transpose.h is built only into objects compiled with AVX-512 flags"
#endif

#include <immintrin.h>

#include <cstdint>

namespace ecoserve::kernels::detail {
namespace {

// Rows 0-15 of 16 bf16 pairs each (row n: dword k holds its columns 2k, 2k + 1) as one B
// tile at `o` (tile row k: the 16 rows' dword k): a 16 x 16 transpose of dwords in three
// steps of shuffles (pairs of rows, then fours, then 128-bit lanes).
__attribute__((always_inline)) inline void bf16_store_transposed(const __m512i* r, std::uint16_t* o) {
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + j], 128-bit lane l: rows 4i..4i+3 at dword 4l + j.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    _mm512_store_si512(o + 32 * j, _mm512_shuffle_i32x4(v0, v2, 0x88));
    _mm512_store_si512(o + 32 * (4 + j), _mm512_shuffle_i32x4(v0, v2, 0xDD));
    _mm512_store_si512(o + 32 * (8 + j), _mm512_shuffle_i32x4(v1, v3, 0x88));
    _mm512_store_si512(o + 32 * (12 + j), _mm512_shuffle_i32x4(v1, v3, 0xDD));
  }
}

}  // namespace
}  // namespace ecoserve::kernels::detail
