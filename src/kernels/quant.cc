#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "base/fp16.h"
#include "base/status.h"

namespace ecoserve::kernels {
namespace {

inline int nearest_int(float f) { return static_cast<int>(std::lrintf(f)); }

// ---- Q8_0: value = q * d ----
void dequant_q8_0(const BlockQ8_0* x, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = x[i].qs[j] * d;
  }
}

void quant_q8_0(const float* x, BlockQ8_0* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK8_0;
    float amax = 0;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<std::int8_t>(std::roundf(xb[j] * id));
  }
}

// ---- Q4_0: value = (q - 8) * d; low nibbles hold elements 0..15, high 16..31 ----
void dequant_q4_0(const BlockQ4_0* x, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[i * kQK4_0 + j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[i * kQK4_0 + j + kQK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void quant_q4_0(const float* x, BlockQ4_0* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kQK4_0;
    float amax = 0, max = 0;  // max: the signed value of largest magnitude
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(xb[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(xb[j + kQK4_0 / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
    }
  }
}

// ---- Q4_K ----
// 8 sub-blocks of 32; sub-block j has a 6-bit scale sc and 6-bit min m:
// value = d * sc * q - dmin * m, q in 0..15.
inline void get_scale_min_k4(int j, const std::uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void dequant_q4_k(const BlockQ4_K* x, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const std::uint8_t* q = x[i].qs;
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    int is = 0;
    for (int j = 0; j < kQK_K; j += 64) {
      int sc, m;
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

// Fits x[0..n) ~ scale * L - min with L in 0..nmax, min >= 0, by least squares over
// a small grid of candidate scales around (max - min) / nmax. Returns scale; *the_min = min.
float fit_scale_min(int n, int nmax, const float* x, std::uint8_t* L, float* the_min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *the_min = -lo;
    return 0.0f;
  }
  float best_scale = (hi - lo) / nmax, best_min = -lo, best_err = INFINITY;
  std::uint8_t trial[kQK_K];
  for (int step = -10; step <= 10; ++step) {
    const float iscale = (nmax + 0.1f * step) / (hi - lo);
    if (iscale <= 0) continue;
    for (int i = 0; i < n; ++i) trial[i] = static_cast<std::uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax));
    // Least squares for x ~ a * l + b.
    double sl = 0, sll = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      sl += trial[i];
      sll += double(trial[i]) * trial[i];
      sx += x[i];
      slx += double(trial[i]) * x[i];
    }
    const double det = n * sll - sl * sl;
    if (det <= 0) continue;
    double a = (n * slx - sl * sx) / det;
    double b = (sll * sx - sl * slx) / det;
    if (b > 0) {  // the min must be <= 0 in value space (dmin * m >= 0)
      b = 0;
      a = sll > 0 ? slx / sll : 0;
    }
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = a * trial[i] + b - x[i];
      err += e * e;
    }
    if (err < best_err && a > 0) {
      best_err = err;
      best_scale = static_cast<float>(a);
      best_min = static_cast<float>(-b);
    }
  }
  *the_min = best_min;
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::uint8_t>(std::clamp(nearest_int((x[i] + best_min) / best_scale), 0, nmax));
  return best_scale;
}

void quant_q4_k(const float* x, BlockQ4_K* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, x += kQK_K) {
    std::uint8_t L[kQK_K];
    float scales[8], mins[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      scales[j] = fit_scale_min(32, 15, x + 32 * j, L + 32 * j, &mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    std::memset(y[i].scales, 0, kKScaleSize);
    for (int j = 0; j < 8; ++j) {
      const int ls = std::min(63, nearest_int(inv_scale * scales[j]));
      const int lm = std::min(63, nearest_int(inv_min * mins[j]));
      if (j < 4) {
        y[i].scales[j] = static_cast<std::uint8_t>(ls);
        y[i].scales[j + 4] = static_cast<std::uint8_t>(lm);
      } else {
        y[i].scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        y[i].scales[j - 4] |= static_cast<std::uint8_t>((ls >> 4) << 6);
        y[i].scales[j] |= static_cast<std::uint8_t>((lm >> 4) << 6);
      }
    }
    y[i].d = fp32_to_fp16(max_scale / 63.f);
    y[i].dmin = fp32_to_fp16(max_min / 63.f);
    // Re-quantize against the scales as stored.
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      get_scale_min_k4(j, y[i].scales, &sc, &m);
      const float d = fp16_to_fp32(y[i].d) * sc;
      if (d == 0) {
        std::fill(L + 32 * j, L + 32 * j + 32, 0);
        continue;
      }
      const float dm = fp16_to_fp32(y[i].dmin) * m;
      for (int ii = 0; ii < 32; ++ii) {
        L[32 * j + ii] = static_cast<std::uint8_t>(std::clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, 15));
      }
    }
    std::uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
      q += 32;
    }
  }
}

// ---- Q6_K ----
// 16 sub-blocks of 16 with int8 scales; value = d * scale * (q - 32), q in 0..63.
void dequant_q6_k(const BlockQ6_K* x, float* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const std::uint8_t* ql = x[i].ql;
    const std::uint8_t* qh = x[i].qh;
    const std::int8_t* sc = x[i].scales;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void quant_q6_k(const float* x, BlockQ6_K* y, std::int64_t nb) {
  for (std::int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      float amax = 0, max = 0;
      for (int j = 0; j < 16; ++j) {
        if (std::fabs(x[16 * ib + j]) > amax) {
          amax = std::fabs(x[16 * ib + j]);
          max = x[16 * ib + j];
        }
      }
      scales[ib] = max / -32.f;  // maps the largest-magnitude value to -32
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    std::uint8_t L[kQK_K];
    if (max_abs_scale == 0) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      std::fill(L, L + kQK_K, 32);
    } else {
      const float iscale = -128.f / max_scale;
      y[i].d = fp32_to_fp16(1.f / iscale);
      for (int ib = 0; ib < 16; ++ib) y[i].scales[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
      for (int ib = 0; ib < 16; ++ib) {
        const float d = fp16_to_fp32(y[i].d) * y[i].scales[ib];
        for (int j = 0; j < 16; ++j) {
          const int l = d != 0 ? std::clamp(nearest_int(x[16 * ib + j] / d), -32, 31) : 0;
          L[16 * ib + j] = static_cast<std::uint8_t>(l + 32);
        }
      }
    }
    std::uint8_t* ql = y[i].ql;
    std::uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const std::uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
        const std::uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<std::uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                          ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
  }
}

// Blocks in a row of n elements of `type`; aborts, naming `fn`, when the type is
// unsupported or n is not a whole number of blocks.
std::int64_t checked_block_count(GgmlType type, std::int64_t n, std::string_view fn) {
  const TypeTraits* t = type_traits(type);
  ECO_CHECK_MSG(t && t->supported, "{}: unsupported type {}", fn, type_name(type));
  ECO_CHECK_MSG(n % t->block_elems == 0, "{}: n={} not a multiple of {}", fn, n, t->block_elems);
  return n / t->block_elems;
}

}  // namespace

void dequantize_row(GgmlType type, const void* src, float* dst, std::int64_t n) {
  const std::int64_t nb = checked_block_count(type, n, "dequantize_row");
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
      return;
    case GgmlType::kF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
    case GgmlType::kBF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case GgmlType::kQ8_0: return dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case GgmlType::kQ4_0: return dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case GgmlType::kQ4_K: return dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case GgmlType::kQ6_K: return dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    default: ECO_CHECK_MSG(false, "dequantize_row: unsupported type {}", type_name(type));
  }
}

void quantize_row(GgmlType type, const float* src, void* dst, std::int64_t n) {
  const std::int64_t nb = checked_block_count(type, n, "quantize_row");
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
      return;
    case GgmlType::kF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case GgmlType::kBF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case GgmlType::kQ8_0: return quant_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case GgmlType::kQ4_0: return quant_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case GgmlType::kQ4_K: return quant_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
    case GgmlType::kQ6_K: return quant_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
    default: ECO_CHECK_MSG(false, "quantize_row: unsupported type {}", type_name(type));
  }
}

}  // namespace ecoserve::kernels
