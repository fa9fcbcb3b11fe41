// Bf16WeightTiles: the bf16 tiles' weights made once, at load, instead of on every call.
//
// On the avx512amx level the linear layers of batches of amx_bf16_min_tokens(type) or more
// tokens run on AMX bf16 tiles (KernelContext::amx_bf16), and each call first copies each
// 16 rows x 32 columns of its weights into a bf16 B tile (a tenth to a fifth of a prompt's
// time, most of a decode batch's of 8-32: docs/kernels.md). These tables hold a model's
// matrices as those B tiles, 2 bytes per weight besides the weights themselves, and the
// products read them in place of the copies: the same bits, the copy's time saved. A
// memory-for-speed trade (a Q8_0 model takes about 3x its file's memory, an F16 one 2x)
// that engines make by default where it fits (EngineOptions::bf16_weights, Bf16WeightsMode,
// ECOSERVE_BF16_WEIGHTS). The avx512vnni-zmm level's AVX512-BF16 vectors
// (KernelContext::bf16_vectors: F32, F16, BF16 and Q6_K in GGUF rows) read the same tiles, so
// a CPU with AVX-512 BF16 and no AMX (Zen 5; Zen 4 where that level is forced) makes them too.
//
// Contract: matrices are keyed by their data pointer, which must outlive the table and
// keep its bytes; add() before the first matmul that uses the context the table is
// attached to (KernelContext::bf16_weights), find() from any thread afterwards: a made table
// is read-only, and engines over the same model may share one (EngineOptions::bf16_tiles).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
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
  // FAILED_PRECONDITION on a CPU with neither the bf16 tiles (amx_bf16_supported) nor the
  // bf16 vectors (bf16_vectors_supported: AVX-512 BF16 makes the tiles) or for a matrix
  // the tiles do not take (amx_bf16_takes); RESOURCE_EXHAUSTED when the memory cannot be
  // reserved. Which matrices a product reads them for is the caller's choice
  // (engine::make_bf16_weights: amx_bf16_takes on AMX, bf16_vectors_takes elsewhere).
  Status add(const WeightView& w, ThreadPool& pool);

  // w's tiles (in kernels/matmul_kernels.h's amx_bf16_make_tiles layout), or null.
  const std::uint16_t* find(const WeightView& w) const;

  std::int64_t bytes() const { return bytes_; }
  std::size_t size() const { return tiles_.size(); }

 private:
  std::unordered_map<const void*, ZeroedBuffer<std::uint16_t>> tiles_;
  std::int64_t bytes_ = 0;
};

// EngineOptions::bf16_weights: whether an engine makes its bf16 tiles at load. kAuto makes
// them where the bf16 tiles run (amx_bf16 on, the avx512amx level, amx_bf16_supported) or
// the bf16 vectors do (matmul_bf16 on, the avx512vnni-zmm level, bf16_vectors_supported;
// only the matrices they take) and they fit bf16_weights_auto_fits; kOn makes them or
// fails; kOff never does.
enum class Bf16WeightsMode { kOff, kOn, kAuto };
// Which products read made tiles with these settings on `cpu` (the gates of amx_bf16_applies
// and bf16_vectors_applies less the batch size): the AMX bf16 tiles (amx_bf16 at the avx512amx
// level, amx_bf16_supported), the bf16 vectors (matmul_bf16 at the avx512vnni-zmm level,
// bf16_vectors_supported), or none; and whether `reader` reads w's (kTiles: amx_bf16_takes,
// kVectors: bf16_vectors_takes).
enum class Bf16WeightsReader { kNone, kTiles, kVectors };
Bf16WeightsReader bf16_weights_reader(Isa isa, bool amx_bf16, bool matmul_bf16, const CpuFeatures& cpu);
bool bf16_weights_reader_takes(Bf16WeightsReader reader, const WeightView& w);

// "0", "1" or "auto", as ECOSERVE_BF16_WEIGHTS spells them.
std::string_view bf16_weights_mode_name(Bf16WeightsMode mode);
// Parses 0, 1 or auto; INVALID_ARGUMENT naming `what` otherwise.
StatusOr<Bf16WeightsMode> parse_bf16_weights_mode(std::string_view text, std::string_view what);
// EngineOptions::bf16_weights's default: environment variable ECOSERVE_BF16_WEIGHTS (0, 1 or
// auto; unset: auto); another value is an INVALID_ARGUMENT error naming it.
StatusOr<Bf16WeightsMode> bf16_weights_from_env();
Bf16WeightsMode default_bf16_weights();  // bf16_weights_from_env(), kOff when it fails; once per process

// kAuto's rule (pure): make the tiles when they take at most `share` of the memory available
// at load less the KV cache's reservation (committed as its blocks fill): tile_bytes > 0 and
// tile_bytes <= share * (available_bytes - kv_bytes). The default share, a quarter, keeps
// the tiles beside the weights, the KV cache and the page cache of a host that also runs
// other work; serve divides it among its instances (each makes its own tiles).
inline constexpr double kBf16WeightsAutoShare = 0.25;
bool bf16_weights_auto_fits(std::int64_t tile_bytes, std::int64_t available_bytes, std::int64_t kv_bytes,
                            double share);

// What `mode` means on `cpu`, for `model info` and `profile`.
std::string bf16_weights_summary(Bf16WeightsMode mode, const CpuFeatures& cpu);

}  // namespace ecoserve::kernels
