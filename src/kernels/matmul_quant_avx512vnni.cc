// The quantized matmul kernels (matmul_quant_impl.h) built for ISA level "avx512vnni"
// (kernels/cpu_features.h), and the avx512amx level's, whose AMX kernels (Q8_0 and Q4_K
// in kRows8, matmul_amx_impl.h) are the only code here with AMX instructions (the
// compiler emits them only for the tile intrinsics); its compile flags are set in
// CMakeLists.txt.
#define ECO_QUANT_ISA 2
#define ECO_QUANT_NS isa_avx512vnni
#include "kernels/matmul_quant_impl.h"
#include "kernels/matmul_packed_impl.h"
#include "kernels/matmul_amx_impl.h"

namespace ecoserve::kernels::detail {

const QuantRowKernels* quant_row_kernels_avx512vnni() {
  namespace k = isa_avx512vnni;
  static constexpr QuantRowKernels kKernels{&k::rows_q8_0, &k::rows_q4_0, &k::rows_q4_k, &k::rows_q6_k,
                                              &k::rows_q8_0_rows8, &k::rows_q4_k_rows8};
  return &kKernels;
}

const QuantRowKernels* quant_row_kernels_avx512vnni_zmm() {
  namespace k = isa_avx512vnni;
  static constexpr QuantRowKernels kKernels{&k::rows_q8_0, &k::rows_q4_0, &k::rows_q4_k, &k::rows_q6_k,
                                              &k::rows_q8_0_rows8_zmm, &k::rows_q4_k_rows8_zmm};
  return &kKernels;
}

const QuantRowKernels* quant_row_kernels_avx512amx() {
  namespace k = isa_avx512vnni;
  static constexpr QuantRowKernels kKernels{&k::rows_q8_0, &k::rows_q4_0, &k::rows_q4_k, &k::rows_q6_k,
                                              &k::rows_q8_0_rows8_amx, &k::rows_q4_k_rows8_amx};
  return &kKernels;
}

}  // namespace ecoserve::kernels::detail
