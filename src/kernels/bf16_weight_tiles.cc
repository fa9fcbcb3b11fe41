#include "kernels/bf16_weight_tiles.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels {

std::int64_t Bf16WeightTiles::bytes_for(const WeightView& w) {
  if (!amx_bf16_takes(w)) return 0;
  return (w.rows + 15) / 16 * 16 * w.cols * 2;
}

Status Bf16WeightTiles::add(const WeightView& w, ThreadPool& pool) {
  const CpuFeatures cpu = detect_cpu_features();
  if (!amx_bf16_supported(cpu) && !bf16_vectors_supported(cpu)) {
    return failed_precondition_error(
        "bf16 weights: this CPU has neither AMX-BF16 tiles nor AVX-512 BF16 vectors to read them");
  }
  if (!amx_bf16_takes(w)) {
    return failed_precondition_error("bf16 weights: the bf16 tiles do not take a {} x {} {} matrix", w.rows, w.cols,
                                     type_name(w.type));
  }
  if (tiles_.contains(w.data)) return ok_status();
  const std::int64_t bytes = bytes_for(w);
  ECO_ASSIGN_OR_RETURN(ZeroedBuffer<std::uint16_t> buf, ZeroedBuffer<std::uint16_t>::create(bytes / 2));
  const std::int64_t groups = w.rows / 8, pairs = (groups + 1) / 2;
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  std::uint16_t* out = buf.data();
  pool.run([&](int i, int parts) {
    const std::int64_t p0 = pairs * i / parts, p1 = pairs * (i + 1) / parts;
    if (p0 < p1) detail::amx_bf16_make_tiles(w.type, data, w.row_bytes, w.cols, groups, p0, p1, out);
  });
  tiles_.emplace(w.data, std::move(buf));
  bytes_ += bytes;
  return ok_status();
}

const std::uint16_t* Bf16WeightTiles::find(const WeightView& w) const {
  const auto it = tiles_.find(w.data);
  return it == tiles_.end() ? nullptr : it->second.data();
}

Bf16WeightsReader bf16_weights_reader(Isa isa, bool amx_bf16, bool matmul_bf16, const CpuFeatures& cpu) {
  if (amx_bf16 && isa == Isa::kAvx512Amx && amx_bf16_supported(cpu)) return Bf16WeightsReader::kTiles;
  if (matmul_bf16 && isa == Isa::kAvx512VnniZmm && bf16_vectors_supported(cpu)) return Bf16WeightsReader::kVectors;
  return Bf16WeightsReader::kNone;
}

bool bf16_weights_reader_takes(Bf16WeightsReader reader, const WeightView& w) {
  switch (reader) {
    case Bf16WeightsReader::kTiles: return amx_bf16_takes(w);
    case Bf16WeightsReader::kVectors: return bf16_vectors_takes(w);
    case Bf16WeightsReader::kNone: break;
  }
  return false;
}

std::string_view bf16_weights_mode_name(Bf16WeightsMode mode) {
  switch (mode) {
    case Bf16WeightsMode::kOff: return "0";
    case Bf16WeightsMode::kOn: return "1";
    case Bf16WeightsMode::kAuto: return "auto";
  }
  return "?";
}

StatusOr<Bf16WeightsMode> parse_bf16_weights_mode(std::string_view text, std::string_view what) {
  if (text == "0") return Bf16WeightsMode::kOff;
  if (text == "1") return Bf16WeightsMode::kOn;
  if (text == "auto") return Bf16WeightsMode::kAuto;
  return invalid_argument_error("{}: '{}' is not 0, 1 or auto", what, text);
}

StatusOr<Bf16WeightsMode> bf16_weights_from_env() {
  const char* v = std::getenv("ECOSERVE_BF16_WEIGHTS");
  if (v == nullptr) return Bf16WeightsMode::kAuto;
  return parse_bf16_weights_mode(v, "ECOSERVE_BF16_WEIGHTS");
}

Bf16WeightsMode default_bf16_weights() {
  static const Bf16WeightsMode kMode = [] {
    StatusOr<Bf16WeightsMode> mode = bf16_weights_from_env();
    return mode.ok() ? *mode : Bf16WeightsMode::kOff;
  }();
  return kMode;
}

bool bf16_weights_auto_fits(std::int64_t tile_bytes, std::int64_t available_bytes, std::int64_t kv_bytes,
                            double share) {
  if (tile_bytes <= 0 || available_bytes <= kv_bytes) return false;
  return static_cast<double>(tile_bytes) <= share * static_cast<double>(available_bytes - kv_bytes);
}

std::string bf16_weights_summary(Bf16WeightsMode mode, const CpuFeatures& cpu) {
  const bool tiles = amx_bf16_supported(cpu);
  if (!tiles && !bf16_vectors_supported(cpu)) {
    return mode == Bf16WeightsMode::kOn
               ? "requested (ECOSERVE_BF16_WEIGHTS=1) but not on this CPU: engines refuse to start (it needs the "
                 "bf16 tiles, AMX-BF16 and AVX-512 BF16, or the bf16 vectors, AVX-512 BF16 at the avx512vnni-zmm "
                 "level)"
               : "not on this CPU (needs the bf16 tiles, AMX-BF16 and AVX-512 BF16, or the bf16 vectors, AVX-512 "
                 "BF16 at the avx512vnni-zmm level)";
  }
  const std::string_view readers = tiles ? "the bf16 tiles (at the avx512vnni-zmm level, the bf16 vectors)"
                                         : "the bf16 vectors (the avx512vnni-zmm level's AVX512-BF16 products)";
  switch (mode) {
    case Bf16WeightsMode::kOn:
      return fmt::format("on (ECOSERVE_BF16_WEIGHTS=1): the matrices {} take are made into bf16 B tiles at load (2 "
                         "bytes per weight more memory); batches read them instead of copying the weights per call "
                         "(the same bits)",
                         readers);
    case Bf16WeightsMode::kAuto:
      return fmt::format(
          "auto (unset or ECOSERVE_BF16_WEIGHTS=auto): the weights of {} made into bf16 B tiles once at load (2 "
          "bytes per weight more memory, faster batches, the same bits) when they take at most {:.0f}% of the "
          "memory available at load less the KV cache (serve's in-process instances share one set); 0 or 1 decide{}",
          readers, 100 * kBf16WeightsAutoShare,
          tiles || cpu.fast_bf16_dot ? "" : " (the bf16 vectors run only where matmul bf16 is on, above)");
    case Bf16WeightsMode::kOff: break;
  }
  return fmt::format("off (ECOSERVE_BF16_WEIGHTS=0; 1 or auto: the weights of {} made once at load, 2 bytes per "
                     "weight more memory, faster batches)",
                     readers);
}

}  // namespace ecoserve::kernels
