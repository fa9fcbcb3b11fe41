#include "kernels/machine_peak.h"

#include "kernels/cpu_features.h"
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ecoserve::kernels {
namespace {

// Not a speed test: the measurements must run and give finite, positive rates
// (a broken loop or a zero-length timing would give 0, inf or NaN).
TEST(MachinePeakTest, MeasurementsAreFiniteAndPositive) {
  const double fma = measure_f32_fma_gmacs(0.02);
  EXPECT_TRUE(std::isfinite(fma) && fma > 0) << fma;
  if (detect_cpu_features().avx512f) {
    const double zmm = measure_f32_fma_gmacs(0.02, 512);
    EXPECT_TRUE(std::isfinite(zmm) && zmm > 0) << zmm;
  }
  if (detect_cpu_features().avx512_bf16) {
    const double bf16 = measure_avx512_bf16_gmacs(0.02);
    EXPECT_TRUE(std::isfinite(bf16) && bf16 > 0) << bf16;
  }
  if (amx_bf16_supported(detect_cpu_features())) {
    const double amx = measure_amx_bf16_gmacs(0.02);
    EXPECT_TRUE(std::isfinite(amx) && amx > 0) << amx;
  }
  for (Isa isa : supported_isas(detect_cpu_features())) {  // each path's loop runs on this CPU
    const double int8 = measure_int8_dot_gmacs(isa, 0.02);
    EXPECT_TRUE(std::isfinite(int8) && int8 > 0) << int8 << " " << isa_name(isa);
  }
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const double bw = measure_read_gbps(pool, 8u << 20);
    EXPECT_TRUE(std::isfinite(bw) && bw > 0) << bw << " threads " << threads;
  }
}

}  // namespace
}  // namespace ecoserve::kernels
