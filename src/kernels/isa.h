// The kernel paths ("ISA levels") ecoserve is built with; see kernels/cpu_features.h.
#pragma once

namespace ecoserve::kernels {

enum class Isa : int { kAvx2 = 0, kAvxVnni = 1, kAvx512Vnni = 2, kAvx512VnniZmm = 3, kAvx512Amx = 4 };

}  // namespace ecoserve::kernels
