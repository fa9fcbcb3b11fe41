// rows_step and chunk_key_block for the avx2 level: AVX2 + FMA (the baseline flags).
#define ECO_ATTN_NS isa_avx2
#define ECO_ATTN_WIDE 0
#include "kernels/attention_rows_impl.h"
