// The 512-bit decode kernel (pick_rows_fn_zmm) for fp16 caches and GQA groups of 8 whose
// score pass multiplies on vdpbf16ps (scores_lanes: the query and K rounded to bf16, 32
// multiply-adds per instruction where a 512-bit FMA does 16; sums and the value pass in
// float): AVX-512F/VL/BW/DQ and AVX512-BF16 flags (CMakeLists.txt). Run only where
// AttentionDims::bf16_scores asks for it and the CPU has AVX512-BF16 (attention.cc,
// decode_attention_bf16_scores); null for other caches and groups.
#define ECO_ATTN_NS isa_avx512bf16dec
#define ECO_ATTN_WIDE 1
#define ECO_ATTN_BF16_SCORES 1
#include "kernels/attention_rows_impl.h"
