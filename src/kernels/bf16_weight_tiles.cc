#include "kernels/bf16_weight_tiles.h"

#include <algorithm>

#include "kernels/matmul_kernels.h"

namespace ecoserve::kernels {

std::int64_t Bf16WeightTiles::bytes_for(const WeightView& w) {
  if (!amx_bf16_takes(w)) return 0;
  return (w.rows + 15) / 16 * 16 * w.cols * 2;
}

Status Bf16WeightTiles::add(const WeightView& w, ThreadPool& pool) {
  if (!amx_bf16_supported(detect_cpu_features())) {
    return failed_precondition_error("bf16 weights: this CPU has no AMX-BF16 tiles (or not AVX-512 BF16)");
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

StatusOr<bool> bf16_weights_from_env() { return switch_from_env("ECOSERVE_BF16_WEIGHTS", false); }

bool default_bf16_weights() {
  static const bool kOn = [] {
    StatusOr<bool> on = bf16_weights_from_env();
    return on.ok() && *on;
  }();
  return kOn;
}

std::string bf16_weights_summary(bool on, const CpuFeatures& cpu) {
  if (!amx_bf16_supported(cpu)) {
    return on ? "requested (ECOSERVE_BF16_WEIGHTS=1) but not on this CPU: engines refuse to start (it needs the bf16 "
                "tiles: AMX-BF16 and AVX-512 BF16)"
              : "not on this CPU (needs the bf16 tiles: AMX-BF16 and AVX-512 BF16)";
  }
  return on ? "on (ECOSERVE_BF16_WEIGHTS=1): the matrices the bf16 tiles take are made into their bf16 B tiles at "
              "load (2 bytes per weight more memory); batches on the tiles read them instead of copying the "
              "weights per call (the same bits)"
            : "off (unset or ECOSERVE_BF16_WEIGHTS=0; 1: the bf16 tiles' weights made once at load, 2 bytes per "
              "weight more memory, faster batches on the tiles)";
}

}  // namespace ecoserve::kernels
