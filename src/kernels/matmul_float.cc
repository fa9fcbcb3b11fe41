// Float-weight matmul (F32, F16, BF16): the per-ISA kernels of matmul_float_impl.h.
#include <string>

#include "base/status.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels::detail {

void matmul_float_rows(Isa isa, GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols,
                       const float* x, std::int64_t r0, std::int64_t r1, std::int64_t t0, std::int64_t t1, float* y,
                       std::int64_t y_stride, std::int32_t gemv_prefetch) {
  ECO_CHECK_MSG(type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16,
                "matmul_float_rows: not a float type: {}", type_name(type));
  if (isa >= Isa::kAvx512VnniZmm) {
    isa_avx512::matmul_float_rows_zmm(type, w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride, gemv_prefetch);
  } else if (isa >= Isa::kAvx512Vnni) {
    isa_avx512::matmul_float_rows(type, w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride, gemv_prefetch);
  } else {
    isa_avx2::matmul_float_rows(type, w, row_bytes, cols, x, r0, r1, t0, t1, y, y_stride, gemv_prefetch);
  }
}

}  // namespace ecoserve::kernels::detail

namespace ecoserve::kernels {

FloatMatmulKernel float_matmul_kernel(Isa isa, std::int64_t n_tokens) {
  if (n_tokens <= 4) return FloatMatmulKernel::kGemv;
  if (isa >= Isa::kAvx512VnniZmm && n_tokens >= detail::kLanesMinTokens) return FloatMatmulKernel::kLanes;
  return FloatMatmulKernel::kTiles;
}

std::string float_matmul_kernel_name(FloatMatmulKernel kernel) {
  switch (kernel) {
    case FloatMatmulKernel::kGemv: return "gemv";
    case FloatMatmulKernel::kTiles: return "tiles";
    case FloatMatmulKernel::kLanes: return "tokens in lanes";
  }
  return "";
}

std::int32_t float_matmul_vector_bits(Isa isa, std::int64_t n_tokens) {
  // The zmm level's tiles hold two rows per register (tile_zmm); the GEMV is 256-bit everywhere.
  const FloatMatmulKernel k = float_matmul_kernel(isa, n_tokens);
  return k == FloatMatmulKernel::kLanes || (k == FloatMatmulKernel::kTiles && isa >= Isa::kAvx512VnniZmm) ? 512 : 256;
}

std::string float_matmul_kernels_summary(Isa isa) {
  std::string s;
  FloatMatmulKernel last{};
  for (std::int64_t n = 1; n <= 4096; ++n) {
    const FloatMatmulKernel k = float_matmul_kernel(isa, n);
    if (n > 1 && k == last) continue;
    if (!s.empty()) s += ", ";
    s += float_matmul_kernel_name(k);
    if (k == FloatMatmulKernel::kTiles && float_matmul_vector_bits(isa, n) == 512) s += " (512-bit)";
    s += n == 1 ? " up to " : " from ";
    if (n == 1) {
      std::int64_t e = 1;
      while (float_matmul_kernel(isa, e + 1) == k) ++e;
      s += std::to_string(e) + (e == 1 ? " token" : " tokens");
    } else {
      s += std::to_string(n);
    }
    last = k;
  }
  return s;
}

}  // namespace ecoserve::kernels
