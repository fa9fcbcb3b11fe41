// The float matmul kernels (matmul_float_impl.h) for the avx512vnni level: AVX-512F/VL/BW
// flags (CMakeLists.txt), 32 vector registers.
#define ECO_FLOAT_NS isa_avx512
#define ECO_FLOAT_WIDE 1
#include "kernels/matmul_float_impl.h"
