// Half-precision conversions (IEEE fp16 via F16C, and bfloat16).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace ecoserve {

inline float fp16_to_fp32(std::uint16_t h) { return _cvtsh_ss(h); }
inline std::uint16_t fp32_to_fp16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

inline float bf16_to_fp32(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round to nearest even; NaN stays NaN.
inline std::uint16_t fp32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<std::uint16_t>((u >> 16) | 64);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace ecoserve
