// The 512-bit decode kernel (pick_rows_fn_zmm) for CPUs with AVX512-FP16, whose fp16 caches'
// value pass multiplies in half precision (attention_rows_fp16_impl.h): AVX-512F/VL/BW/DQ and
// AVX512-FP16 flags (CMakeLists.txt). Run only where AttentionDims::fp16_math asks for it and
// the CPU has AVX512-FP16 (attention.cc).
#define ECO_ATTN_NS isa_avx512fp16
#define ECO_ATTN_WIDE 1
#define ECO_ATTN_FP16_MATH 1
#include "kernels/attention_rows_impl.h"
