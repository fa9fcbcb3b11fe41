// rows_step and chunk_key_block for the avx512 level: AVX-512F/VL/BW flags
// (CMakeLists.txt): 32 vector registers.
#define ECO_ATTN_NS isa_avx512
#define ECO_ATTN_WIDE 1
#include "kernels/attention_rows_impl.h"
