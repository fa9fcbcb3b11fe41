// The quantized matmul kernels (matmul_quant_impl.h) built for ISA level "avxvnni"
// (kernels/cpu_features.h); its compile flags are set in CMakeLists.txt.
#define ECO_QUANT_ISA 1
#define ECO_QUANT_NS isa_avxvnni
#include "kernels/matmul_quant_impl.h"
#include "kernels/matmul_packed_impl.h"

namespace ecoserve::kernels::detail {

Int8Tiles int8_tiles_avxvnni() {
  namespace k = isa_avxvnni;
  return {k::kPackedGroups, k::kPackedTokens, k::kQ4kGroups, k::kQ4kTokens, k::kRowsK, k::kTokensK};
}

const QuantRowKernels* quant_row_kernels_avxvnni() {
  namespace k = isa_avxvnni;
  static constexpr QuantRowKernels kKernels{&k::rows_q8_0, &k::rows_q4_0, &k::rows_q4_k, &k::rows_q6_k,
                                              &k::rows_q8_0_rows8, &k::rows_q4_k_rows8};
  return &kKernels;
}

}  // namespace ecoserve::kernels::detail
