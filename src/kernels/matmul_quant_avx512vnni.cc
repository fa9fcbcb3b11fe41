// The quantized matmul kernels (matmul_quant_impl.h) built for ISA level "avx512vnni"
// (kernels/cpu_features.h), and the avx512amx level's, whose AMX kernels (Q8_0 and Q4_K
// in kRows8, matmul_amx_impl.h; the bf16 tiles, matmul_amx_bf16_impl.h) are the only
// code here with AMX and AVX-512 BF16 instructions (the
// compiler emits them only for the tile intrinsics); its compile flags are set in
// CMakeLists.txt.
#define ECO_QUANT_ISA 2
#define ECO_QUANT_NS isa_avx512vnni
#include "kernels/matmul_quant_impl.h"
#include "kernels/matmul_packed_impl.h"
#include "kernels/matmul_q8_lanes_impl.h"
#include "kernels/matmul_q4k_lanes_impl.h"
#include "kernels/matmul_q6k_zmm_impl.h"
#include "kernels/matmul_amx_impl.h"
#include "kernels/matmul_amx_bf16_impl.h"

namespace ecoserve::kernels::detail {

Int8Tiles int8_tiles_avx512vnni() {
  namespace k = isa_avx512vnni;
  return {k::kPackedGroups, k::kPackedTokens, k::kQ4kGroups, k::kQ4kTokens, k::kRowsK, k::kTokensK};
}

const QuantRowKernels* quant_row_kernels_avx512vnni() {
  namespace k = isa_avx512vnni;
  static constexpr QuantRowKernels kKernels{&k::rows_q8_0, &k::rows_q4_0, &k::rows_q4_k, &k::rows_q6_k,
                                              &k::rows_q8_0_rows8, &k::rows_q4_k_rows8};
  return &kKernels;
}

const QuantRowKernels* quant_row_kernels_avx512vnni_zmm() {
  namespace k = isa_avx512vnni;
  static constexpr QuantRowKernels kKernels{
      &k::rows_q8_0,
      &k::rows_q4_0,
      &k::rows_q4_k,
      &k::lanes_from<k::kQ6kLanesMinTokens, &QuantizedActs::q6k_lanes, &k::rows_q6k_lanes, &k::rows_q6_k_zmm>,
      &k::lanes_from<k::kLanesMinTokens, &QuantizedActs::q8_lanes, &k::rows8_q8_lanes, &k::rows_q8_0_rows8_zmm>,
      &k::lanes_from<k::kLanesMinTokens, &QuantizedActs::q4k_lanes, &k::rows8_q4k_lanes, &k::rows_q4_k_rows8_zmm>};
  return &kKernels;
}

const QuantRowKernels* quant_row_kernels_avx512amx() {
  namespace k = isa_avx512vnni;
  static constexpr QuantRowKernels kKernels{
      &k::rows_q8_0,
      &k::rows_q4_0,
      &k::rows_q4_k,
      &k::lanes_from<k::kQ6kLanesMinTokens, &QuantizedActs::q6k_lanes, &k::rows_q6k_lanes, &k::rows_q6_k_zmm>,
      &k::rows_q8_0_rows8_amx,
      &k::rows_q4_k_rows8_amx};
  return &kKernels;
}

void amx_bf16_pack_acts(const float* x, const float* up, std::int64_t cols, std::int64_t n_tokens, std::int64_t tile0,
                        std::int64_t tile1, std::uint16_t* a) {
  isa_avx512vnni::bf16_pack_acts(x, up, cols, n_tokens, tile0, tile1, a);
}

namespace {
// Calls run(K{}) with the bf16 tiles' source K of weights of `type`; false for a type
// they do not take.
template <class Fn>
bool bf16_source(GgmlType type, Fn&& run) {
  namespace k = isa_avx512vnni;
  switch (type) {
    case GgmlType::kQ8_0: run(k::Bf16Q8{}); return true;
    case GgmlType::kQ4_K: run(k::Bf16Q4k{}); return true;
    case GgmlType::kQ6_K: run(k::Bf16Plain<k::Q6kRow>{}); return true;
    case GgmlType::kF32: run(k::Bf16Plain<k::F32Row>{}); return true;
    case GgmlType::kF16: run(k::Bf16Plain<k::F16Row>{}); return true;
    case GgmlType::kBF16: run(k::Bf16Plain<k::Bf16Row>{}); return true;
    default: return false;
  }
}
}  // namespace

void amx_bf16_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                   const std::uint16_t* a, std::int64_t n_tokens, std::int64_t r0, std::int64_t r1,
                   std::int64_t run_blocks, float* y, std::int64_t y_stride, std::uint16_t* wbuf, bool vectors,
                   const std::uint16_t* made) {
  namespace k = isa_avx512vnni;
  auto run = [&](auto source) {
    using K = decltype(source);
    if (vectors) {
      k::bf16_rows<K, false>(w, row_bytes, cols, a, n_tokens, r0, r1, run_blocks, y, y_stride, wbuf, made);
    } else {
      k::bf16_rows<K, true>(w, row_bytes, cols, a, n_tokens, r0, r1, run_blocks, y, y_stride, wbuf, made);
    }
  };
  if (!bf16_source(type, run)) amx_bf16_bad_type("amx_bf16_rows", type);
}

void amx_bf16_make_tiles(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                         std::int64_t groups, std::int64_t p0, std::int64_t p1, std::uint16_t* out) {
  auto run = [&](auto source) {
    isa_avx512vnni::bf16_make_tiles<decltype(source)>(w, row_bytes, cols, groups, p0, p1, out);
  };
  if (!bf16_source(type, run)) amx_bf16_bad_type("amx_bf16_make_tiles", type);
}

}  // namespace ecoserve::kernels::detail
