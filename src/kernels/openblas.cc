// What ecoserve asks of OpenBLAS: single-threaded calls inside our own pool, and
// the name of its kernels (see matmul.h, matmul_kernels.h).
#include <cblas.h>

#include <mutex>
#include <string>

#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels::detail {

void make_openblas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

}  // namespace ecoserve::kernels::detail

namespace ecoserve::kernels {

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name == nullptr ? std::string() : std::string(name);
}

}  // namespace ecoserve::kernels
