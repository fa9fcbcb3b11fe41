// attend_chunk on AMX-BF16 tiles (AttentionDims::amx_bf16): the avx512amx level's prefill
// attention, attention_bf16_impl.h with both products on the tile unit. Built with the
// avx512vnni object's flags (AVX-512, AMX-TILE, AMX-BF16, AVX-512 BF16; CMakeLists.txt).
#define ECO_BF16_NS isa_avx512amx
#define ECO_BF16_TILES 1
#include "kernels/attention_bf16_impl.h"
