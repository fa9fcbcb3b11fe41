// attend_chunk on AVX512-BF16 vectors (AttentionDims::bf16_vectors): the avx512vnni-zmm
// level's bf16 prefill attention, attention_bf16_impl.h with both products as chains of
// vdpbf16ps (32 multiply-adds per instruction, where a 512-bit FMA does 16). Built with
// AVX-512F/BW/VL/DQ and AVX512-BF16 flags (CMakeLists.txt); run only where the CPU has
// AVX512-BF16 (attention.cc).
#define ECO_BF16_NS isa_avx512bf16
#define ECO_BF16_TILES 0
#include "kernels/attention_bf16_impl.h"
