// Float-weight matmul (F32, F16, BF16): the per-ISA kernels of matmul_float_impl.h.
#include "base/status.h"
#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels::detail {

void matmul_float_rows(Isa isa, GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                       const float* x, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride) {
  ECO_CHECK_MSG(type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16,
                "matmul_float_rows: not a float type: {}", type_name(type));
  if (isa >= Isa::kAvx512Vnni) {
    isa_avx512::matmul_float_rows(type, w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride);
  } else {
    isa_avx2::matmul_float_rows(type, w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride);
  }
}

}  // namespace ecoserve::kernels::detail
