#include "kernels/attention.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/matmul_kernels.h"
#include "kernels/ops.h"
#include "kernels/vec_math.h"

namespace ecoserve::kernels {

namespace {

constexpr int32_t kQueryTile = 64;

// Element offset of (pos, kv_head) in the cache.
inline int64_t offset_of(const PagedKvView& kv, int32_t pos, int32_t kv_head, int32_t hd) {
  const int64_t slot = static_cast<int64_t>(kv.block_table[pos / kv.block_size].value) * kv.block_size +
                       pos % kv.block_size;
  return slot * kv.kv_dim + static_cast<int64_t>(kv_head) * hd;
}

// The hd values of (pos, kv_head) as float32: in place for a float32 cache,
// widened into `buf` for fp16.
inline const float* row_of(const void* base, const PagedKvView& kv, int32_t pos, int32_t kv_head, int32_t hd,
                           float* buf) {
  const int64_t off = offset_of(kv, pos, kv_head, hd);
  if (!kv.f16) return static_cast<const float*>(base) + off;
  fp16_to_fp32_row(static_cast<const uint16_t*>(base) + off, buf, hd);
  return buf;
}

// 8 values at element `off` of a K or V cache, as float32.
template <bool kF16>
inline __m256 load8(const void* base, int64_t off) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + off)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(base) + off);
  }
}

// In place: row[0..n) = softmax(row[0..n)), row[n..len) = 0.
void softmax_prefix(float* row, int32_t n, int32_t len) {
  __m256 vmx = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int32_t j = 0;
  for (; j + 8 <= n; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(row + j));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmx);
  float mx = lanes[0];
  for (int i = 1; i < 8; ++i) mx = std::max(mx, lanes[i]);
  for (; j < n; ++j) mx = std::max(mx, row[j]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
    _mm256_storeu_ps(row + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_store_ps(lanes, vsum);
  double sum = 0.0;
  for (int i = 0; i < 8; ++i) sum += lanes[i];
  for (; j < n; ++j) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  scale_inplace(row, static_cast<float>(1.0 / sum), n);
  std::fill(row + n, row + len, 0.0f);
}

}  // namespace

namespace {

inline float hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// attend_one for head_dim = 8 * NV: q and the output accumulators live in registers,
// and positions are walked block by block without per-position index arithmetic.
template <int NV, bool kF16>
void attend_one_fixed(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, float scale, float* out,
                      float* s) {
  constexpr int kHd = 8 * NV;
  __m256 qv[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) qv[v] = _mm256_loadu_ps(q + 8 * v);
  const int32_t B = kv.block_size;
  for (int32_t j0 = 0; j0 < n_ctx; j0 += B) {
    const int32_t n = std::min(B, n_ctx - j0);
    int64_t kr = static_cast<int64_t>(kv.block_table[j0 / B].value) * B * kv.kv_dim + static_cast<int64_t>(kv_head) * kHd;
    for (int32_t j = 0; j < n; ++j, kr += kv.kv_dim) {
      __m256 acc = _mm256_mul_ps(qv[0], load8<kF16>(kv.k, kr));
#pragma GCC unroll 16
      for (int v = 1; v < NV; ++v) acc = _mm256_fmadd_ps(qv[v], load8<kF16>(kv.k, kr + 8 * v), acc);
      s[j0 + j] = hsum8(acc) * scale;
    }
  }
  softmax_prefix(s, n_ctx, n_ctx);
  __m256 o[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) o[v] = _mm256_setzero_ps();
  for (int32_t j0 = 0; j0 < n_ctx; j0 += B) {
    const int32_t n = std::min(B, n_ctx - j0);
    int64_t vr = static_cast<int64_t>(kv.block_table[j0 / B].value) * B * kv.kv_dim + static_cast<int64_t>(kv_head) * kHd;
    for (int32_t j = 0; j < n; ++j, vr += kv.kv_dim) {
      const __m256 w = _mm256_set1_ps(s[j0 + j]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) o[v] = _mm256_fmadd_ps(w, load8<kF16>(kv.v, vr + 8 * v), o[v]);
    }
  }
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + 8 * v, o[v]);
}

template <int NV>
void attend_one_fixed(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, float scale, float* out,
                      float* s) {
  if (kv.f16) return attend_one_fixed<NV, true>(q, kv_head, n_ctx, kv, scale, out, s);
  attend_one_fixed<NV, false>(q, kv_head, n_ctx, kv, scale, out, s);
}

}  // namespace

void attend_one(const float* q, int32_t kv_head, int32_t n_ctx, const PagedKvView& kv, const AttentionDims& d,
                float* out, AttentionScratch& scratch) {
  const int32_t hd = d.head_dim;
  scratch.scores.resize(n_ctx);
  float* s = scratch.scores.data();
  switch (hd) {
    case 16: return attend_one_fixed<2>(q, kv_head, n_ctx, kv, d.scale, out, s);
    case 32: return attend_one_fixed<4>(q, kv_head, n_ctx, kv, d.scale, out, s);
    case 64: return attend_one_fixed<8>(q, kv_head, n_ctx, kv, d.scale, out, s);
    case 128: return attend_one_fixed<16>(q, kv_head, n_ctx, kv, d.scale, out, s);
    default: break;
  }
  scratch.k.resize(hd);
  float* buf = scratch.k.data();
  for (int32_t j = 0; j < n_ctx; ++j) s[j] = dot(q, row_of(kv.k, kv, j, kv_head, hd, buf), hd) * d.scale;
  softmax_prefix(s, n_ctx, n_ctx);
  std::fill(out, out + hd, 0.0f);
  for (int32_t j = 0; j < n_ctx; ++j) axpy(s[j], row_of(kv.v, kv, j, kv_head, hd, buf), out, hd);
}

void attend_chunk(const float* q, int64_t q_stride, int32_t n_q, int32_t start, int32_t kv_head,
                  const PagedKvView& kv, const AttentionDims& d, float* out, int64_t out_stride,
                  AttentionScratch& scratch) {
  const int32_t hd = d.head_dim;
  const int32_t n_ctx = start + n_q;
  const int32_t group = d.n_head / d.n_head_kv;
  detail::make_openblas_single_threaded();
  // Gather this KV head's keys and values into contiguous [n_ctx, hd] matrices.
  scratch.k.resize(static_cast<size_t>(n_ctx) * hd);
  scratch.v.resize(static_cast<size_t>(n_ctx) * hd);
  for (int32_t j = 0; j < n_ctx; ++j) {
    float* kd = scratch.k.data() + static_cast<size_t>(j) * hd;
    float* vd = scratch.v.data() + static_cast<size_t>(j) * hd;
    const int64_t off = offset_of(kv, j, kv_head, hd);
    if (kv.f16) {
      fp16_to_fp32_row(static_cast<const uint16_t*>(kv.k) + off, kd, hd);
      fp16_to_fp32_row(static_cast<const uint16_t*>(kv.v) + off, vd, hd);
    } else {
      std::memcpy(kd, static_cast<const float*>(kv.k) + off, hd * sizeof(float));
      std::memcpy(vd, static_cast<const float*>(kv.v) + off, hd * sizeof(float));
    }
  }
  scratch.scores.resize(static_cast<size_t>(kQueryTile) * n_ctx);
  float* s = scratch.scores.data();
  for (int32_t g = 0; g < group; ++g) {
    const int32_t h = kv_head * group + g;
    for (int32_t i0 = 0; i0 < n_q; i0 += kQueryTile) {
      const int32_t rows = std::min(kQueryTile, n_q - i0);
      const int32_t len = start + i0 + rows;  // keys the last row of the tile sees
      const float* qt = q + static_cast<int64_t>(i0) * q_stride + static_cast<int64_t>(h) * hd;
      // S[rows, len] = scale * Q_tile K[0..len)^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, len, hd, d.scale, qt, static_cast<int>(q_stride),
                  scratch.k.data(), hd, 0.0f, s, len);
      for (int32_t r = 0; r < rows; ++r) softmax_prefix(s + static_cast<int64_t>(r) * len, start + i0 + r + 1, len);
      // O_tile[rows, hd] = P V[0..len)
      float* ot = out + static_cast<int64_t>(i0) * out_stride + static_cast<int64_t>(h) * hd;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, len, 1.0f, s, len, scratch.v.data(), hd, 0.0f,
                  ot, static_cast<int>(out_stride));
    }
  }
}

}  // namespace ecoserve::kernels
