// The quantized matmul kernels (matmul_quant_impl.h) built for ISA level "avx512vnni"
// (kernels/cpu_features.h); its compile flags are set in CMakeLists.txt.
#define ECO_QUANT_ISA 2
#define ECO_QUANT_NS isa_avx512vnni
#include "kernels/matmul_quant_impl.h"
#include "kernels/matmul_packed_impl.h"

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

}  // namespace ecoserve::kernels::detail
