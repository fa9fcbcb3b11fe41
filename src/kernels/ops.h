// Element-wise and row-wise operations of the Llama forward pass (AVX2).
// Pure functions on caller-owned buffers; thread-safe.
#pragma once

#include <cstdint>

namespace ecoserve::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may alias x.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);

// Rotary embedding of one token's heads in place: `x` holds n_heads heads of head_dim
// values; the first rope_dim dims of each head rotate. theta_i = pos * freq_scale *
// base^(-2i/rope_dim). neox=false rotates adjacent pairs (x[2i], x[2i+1]) (ggml's
// normal mode, arch llama); neox=true rotates (x[i], x[i + rope_dim/2]) (qwen2).
// cos_sin holds rope_dim/2 (cos, sin) pairs for this position: see rope_cos_sin().
// Each pair (x0, x1) becomes (fma(x0, c, -(x1 s)), fma(x0, s, x1 c)), in the vector lanes
// and the scalar tail alike.
void rope_cos_sin(int64_t pos, int32_t rope_dim, float base, float freq_scale, float* cos_sin);
void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, bool neox,
                const float* cos_sin);

// out[i] = silu(gate[i]) * up[i]; out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// Sum of a[i]*b[i].
float dot(const float* a, const float* b, int64_t n);
// y[i] += a * x[i].
void axpy(float a, const float* x, float* y, int64_t n);
// y[i] += x[i].
void add_inplace(float* y, const float* x, int64_t n);
// y[i] *= a.
void scale_inplace(float* y, float a, int64_t n);

// fp16 (IEEE half) rows: y[i] = x[i] rounded to nearest even, and back (exact).
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);
void fp16_to_fp32_row(const uint16_t* x, float* y, int64_t n);

}  // namespace ecoserve::kernels
