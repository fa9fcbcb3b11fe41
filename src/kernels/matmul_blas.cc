// OpenBLAS-backed path of matmul for large batches (see matmul_kernels.h).
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <string>
#include <string_view>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "kernels/quant.h"

namespace ecoserve::kernels::detail {
namespace {

void dequantize_q8_0_row(const std::uint8_t* src, float* dst, std::int64_t cols) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
  for (std::int64_t i = 0; i < cols / kQK8_0; ++i) {
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(b[i].d));
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * k));
      _mm256_storeu_ps(dst + 32 * i + 8 * k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    }
  }
}

}  // namespace

void make_openblas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

std::size_t blas_panel_floats(std::int64_t cols) { return static_cast<std::size_t>(kBlasRowBlock * cols); }

void matmul_blas_rows(GgmlType type, const std::uint8_t* w, std::size_t row_bytes, std::int64_t cols, const float* x,
                      std::int64_t n_tokens, std::int64_t r0, std::int64_t r1, float* y, std::int64_t y_stride,
                      float* panel) {
  ECO_CHECK_MSG(r0 % kBlasRowBlock == 0, "matmul_blas_rows: r0 not at a row block");
  make_openblas_single_threaded();
  const int n = static_cast<int>(n_tokens), k = static_cast<int>(cols), ldy = static_cast<int>(y_stride);
  for (std::int64_t p = r0; p < r1; p += kBlasRowBlock) {
    const std::int64_t pe = std::min(r1, p + kBlasRowBlock);
    const float* rows = reinterpret_cast<const float*>(w + p * row_bytes);
    if (type != GgmlType::kF32) {
      for (std::int64_t r = p; r < pe; ++r) {
        if (type == GgmlType::kQ8_0) {
          dequantize_q8_0_row(w + r * row_bytes, panel + (r - p) * cols, cols);
        } else {
          dequantize_row(type, w + r * row_bytes, panel + (r - p) * cols, cols);
        }
      }
      rows = panel;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, static_cast<int>(pe - p), k, 1.0f, x, k, rows, k, 0.0f,
                y + p, ldy);
  }
}

}  // namespace ecoserve::kernels::detail

namespace ecoserve::kernels {

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name == nullptr ? std::string() : std::string(name);
}

std::int32_t openblas_vector_bits(std::string_view core) {
  std::string name(core);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name == "skylakex" || name == "cooperlake" || name == "sapphirerapids" ? 512 : 256;
}

FloatMatmulKernel float_matmul_kernel(Isa isa, std::int64_t n_tokens) {
  if (n_tokens <= 4) return FloatMatmulKernel::kGemv;
  if (isa == Isa::kAvx512VnniZmm && n_tokens >= detail::kLanesMinTokens) return FloatMatmulKernel::kLanes;
  return n_tokens >= detail::kBlasMinTokens ? FloatMatmulKernel::kOpenBlas : FloatMatmulKernel::kTiles;
}

std::string float_matmul_kernel_name(FloatMatmulKernel kernel) {
  switch (kernel) {
    case FloatMatmulKernel::kGemv: return "gemv";
    case FloatMatmulKernel::kTiles: return "tiles";
    case FloatMatmulKernel::kLanes: return "tokens in lanes";
    case FloatMatmulKernel::kOpenBlas: return "OpenBLAS " + openblas_core();
  }
  return "";
}

std::int32_t float_matmul_vector_bits(Isa isa, std::int64_t n_tokens) {
  switch (float_matmul_kernel(isa, n_tokens)) {
    case FloatMatmulKernel::kLanes: return 512;
    case FloatMatmulKernel::kOpenBlas: return openblas_vector_bits(openblas_core());
    default: return 256;
  }
}

}  // namespace ecoserve::kernels
