// Bf16WeightTiles: the bf16 tiles' weights made once, at load, instead of on every call.
//
// On the avx512amx level the linear layers of batches of amx_bf16_min_tokens(type) or more
// tokens run on AMX bf16 tiles (KernelContext::amx_bf16), and each call first copies each
// 16 rows x 32 columns of its weights into a bf16 B tile (a tenth to a fifth of a prompt's
// time, most of a decode batch's of 8-32: docs/kernels.md). These tables hold a model's
// matrices as those B tiles, 2 bytes per weight besides the weights themselves, and the
// products read them in place of the copies: the same bits, the copy's time saved. A
// memory-for-speed trade the operator opts into (EngineOptions::bf16_weights,
// ECOSERVE_BF16_WEIGHTS): a Q8_0 model takes about 3x its file's memory, an F16 one 2x.
//
// Contract: matrices are keyed by their data pointer, which must outlive the table and
// keep its bytes; add() before the first matmul that uses the context the table is
// attached to (KernelContext::bf16_weights), find() from any thread afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "base/thread_pool.h"
#include "base/zeroed_buffer.h"
#include "kernels/matmul.h"

namespace ecoserve::kernels {

class Bf16WeightTiles {
 public:
  // Bytes of w's tiles: 2 per weight, rows rounded up to 16 (0 if !amx_bf16_takes(w)).
  static std::int64_t bytes_for(const WeightView& w);

  // Makes w's tiles on the pool's threads (a second add of the same data does nothing).
  // FAILED_PRECONDITION on a CPU without the bf16 tiles (amx_bf16_supported) or for a
  // matrix they do not take (amx_bf16_takes); RESOURCE_EXHAUSTED when the memory cannot be
  // reserved.
  Status add(const WeightView& w, ThreadPool& pool);

  // w's tiles (in kernels/matmul_kernels.h's amx_bf16_make_tiles layout), or null.
  const std::uint16_t* find(const WeightView& w) const;

  std::int64_t bytes() const { return bytes_; }
  std::size_t size() const { return tiles_.size(); }

 private:
  std::unordered_map<const void*, ZeroedBuffer<std::uint16_t>> tiles_;
  std::int64_t bytes_ = 0;
};

// EngineOptions::bf16_weights's default: environment variable ECOSERVE_BF16_WEIGHTS (0 or 1;
// unset: off); another value is an INVALID_ARGUMENT error naming it.
StatusOr<bool> bf16_weights_from_env();
bool default_bf16_weights();  // bf16_weights_from_env(), false when it fails; once per process
// What `on` (default_bf16_weights()) means on `cpu`, for `model info` and `profile`.
std::string bf16_weights_summary(bool on, const CpuFeatures& cpu);

}  // namespace ecoserve::kernels
