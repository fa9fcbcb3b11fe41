// The float matmul kernels (matmul_float_impl.h) at the baseline flags: 16 vector registers.
#define ECO_FLOAT_NS isa_avx2
#define ECO_FLOAT_WIDE 0
#include "kernels/matmul_float_impl.h"
