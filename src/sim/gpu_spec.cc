#include "sim/gpu_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

namespace ecoserve::sim {

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr double kNvlinkHopLatencySeconds = 2e-6;  // assumed (see gpu_spec.h)
constexpr double kPcieHopLatencySeconds = 8e-6;    // assumed: PCIe P2P / through the host

struct Preset {
  std::string_view name;
  double peak_flops;
  double hbm_bytes_per_s;
  int64_t memory_gib;
  std::string_view link;
  double link_bytes_per_s;
};

constexpr std::array<Preset, 6> kPresets{{
    // NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB): BF16 312 TFLOPS (624 with
    // sparsity), HBM2e 2,039 GB/s, NVLink 600 GB/s (bidirectional).
    {"a100-80gb", 312e12, 2039e9, 80, "nvlink", 300e9},
    // A800 80GB SXM: the A100 with NVLink cut to 400 GB/s (bidirectional).
    {"a800", 312e12, 2039e9, 80, "nvlink", 200e9},
    // NVIDIA H100 datasheet (SXM): BF16 1,979 TFLOPS with sparsity (989.4 dense),
    // HBM3 3.35 TB/s, 80 GB, NVLink 900 GB/s (bidirectional).
    {"h100-sxm", 989.4e12, 3.35e12, 80, "nvlink", 450e9},
    // NVIDIA H200 datasheet (SXM): BF16 1,979 TFLOPS with sparsity, HBM3e 4.8 TB/s,
    // 141 GB, NVLink 900 GB/s.
    {"h200", 989.4e12, 4.8e12, 141, "nvlink", 450e9},
    // NVIDIA L20: BF16 119.5 TFLOPS dense, GDDR6 864 GB/s, 48 GB, PCIe 4.0 x16
    // (64 GB/s bidirectional), no NVLink.
    {"l20", 119.5e12, 864e9, 48, "pcie", 32e9},
    // NVIDIA L40S datasheet: BF16 362.05 TFLOPS (733 with sparsity), GDDR6 864 GB/s,
    // 48 GB, PCIe 4.0 x16, no NVLink.
    {"l40s", 362.05e12, 864e9, 48, "pcie", 32e9},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

double gib(double bytes) { return bytes / static_cast<double>(kGiB); }

}  // namespace

Status validate_gpu_spec(const GpuSpec& g) {
  const std::pair<std::string_view, double> fields[] = {{"peak_flops", g.peak_flops},
                                                        {"hbm_bytes_per_s", g.hbm_bytes_per_s},
                                                        {"memory_bytes", static_cast<double>(g.memory_bytes)},
                                                        {"intra_link_bytes_per_s", g.intra_link_bytes_per_s}};
  for (const auto& [field, value] : fields) {
    if (!(value > 0.0) || !std::isfinite(value)) {
      return invalid_argument_error("gpu '{}': {} must be > 0 (got {})", g.name, field, value);
    }
  }
  if (!(g.intra_link_hop_latency_s >= 0.0)) {
    return invalid_argument_error("gpu '{}': intra_link_hop_latency_s must be >= 0", g.name);
  }
  if (g.intra_link != "nvlink" && g.intra_link != "pcie") {
    return invalid_argument_error("gpu '{}': intra_link must be 'nvlink' or 'pcie' (got '{}')", g.name, g.intra_link);
  }
  return ok_status();
}

StatusOr<GpuSpec> gpu_preset(std::string_view name) {
  const std::string key = lower(name);
  for (const Preset& p : kPresets) {
    if (p.name != key) continue;
    GpuSpec g;
    g.name = std::string(p.name);
    g.peak_flops = p.peak_flops;
    g.hbm_bytes_per_s = p.hbm_bytes_per_s;
    g.memory_bytes = p.memory_gib * kGiB;
    g.intra_link = std::string(p.link);
    g.intra_link_bytes_per_s = p.link_bytes_per_s;
    g.intra_link_hop_latency_s = p.link == "nvlink" ? kNvlinkHopLatencySeconds : kPcieHopLatencySeconds;
    return g;
  }
  return invalid_argument_error("unknown gpu preset '{}' (known: {})", name, fmt::join(gpu_preset_names(), ", "));
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

Status validate_parallelism(const ModelSpec& m, Parallelism par) {
  if (par.tp < 1 || par.pp < 1) {
    return invalid_argument_error("tp and pp must be >= 1 (got tp={}, pp={})", par.tp, par.pp);
  }
  if (m.heads % par.tp != 0) {
    return invalid_argument_error("model '{}': tp={} does not divide its {} attention heads", m.name, par.tp, m.heads);
  }
  if (m.ffn % par.tp != 0) {
    return invalid_argument_error("model '{}': tp={} does not divide its ffn size {}", m.name, par.tp, m.ffn);
  }
  if (m.kv_heads % par.tp != 0 && par.tp % m.kv_heads != 0) {
    return invalid_argument_error("model '{}': tp={} and its {} kv heads do not divide one another", m.name, par.tp,
                                  m.kv_heads);
  }
  if (par.pp > m.layers) {
    return invalid_argument_error("model '{}': pp={} is more than its {} layers", m.name, par.pp, m.layers);
  }
  return ok_status();
}

int32_t kv_heads_per_gpu(const ModelSpec& m, Parallelism par) { return (m.kv_heads + par.tp - 1) / par.tp; }

int32_t layers_per_stage(const ModelSpec& m, Parallelism par) { return (m.layers + par.pp - 1) / par.pp; }

int64_t weight_bytes_per_gpu(const ModelSpec& m, Parallelism par) {
  const int64_t embedding_matrices = par.pp == 1 ? (m.tied_embeddings ? 1 : 2) : 1;
  const int64_t params =
      int64_t{layers_per_stage(m, par)} * m.layer_params() / par.tp + embedding_matrices * m.vocab * m.hidden / par.tp;
  return params * m.dtype_bytes;
}

StatusOr<int64_t> kv_capacity_tokens(const ModelSpec& m, const GpuSpec& g, Parallelism par, double memory_fraction) {
  ECO_RETURN_IF_ERROR(validate_model_spec(m));
  ECO_RETURN_IF_ERROR(validate_gpu_spec(g));
  ECO_RETURN_IF_ERROR(validate_parallelism(m, par));
  if (!(memory_fraction > 0.0 && memory_fraction <= 1.0)) {
    return invalid_argument_error("memory_fraction must be in (0, 1] (got {})", memory_fraction);
  }
  const double usable = static_cast<double>(g.memory_bytes) * memory_fraction;
  const double weights = static_cast<double>(weight_bytes_per_gpu(m, par));
  const double reserve = static_cast<double>(kActivationReserveBytesPerGpu);
  const double free_bytes = usable - weights - reserve;
  const double kv_per_token = 2.0 * kv_heads_per_gpu(m, par) * m.head_dim() * m.dtype_bytes * layers_per_stage(m, par);
  if (free_bytes < kv_per_token) {
    const double per_gpu_room = usable - reserve;
    const auto gpus_needed = per_gpu_room > 0.0
                                 ? static_cast<int64_t>(std::ceil(static_cast<double>(m.weight_bytes()) / per_gpu_room))
                                 : int64_t{0};
    return resource_exhausted_error(
        "{} does not fit on {} x {} (tp={}, pp={}): its weights need {:.1f} GiB per GPU ({:.1f} GiB in all), but a "
        "GPU has {:.1f} GiB usable ({:.0f}% of {:.1f} GiB) minus a {:.1f} GiB activation reserve; the weights alone "
        "need at least {} GPUs",
        m.name, par.gpus(), g.name, par.tp, par.pp, gib(weights), gib(static_cast<double>(m.weight_bytes())),
        gib(usable), memory_fraction * 100.0, gib(static_cast<double>(g.memory_bytes)), gib(reserve), gpus_needed);
  }
  return static_cast<int64_t>(std::floor(free_bytes / kv_per_token));
}

double ring_allreduce_seconds(double bytes, int32_t ranks, const GpuSpec& g) {
  if (ranks <= 1) return 0.0;
  const double steps = 2.0 * (ranks - 1);
  return steps / ranks * bytes / g.intra_link_bytes_per_s + steps * g.intra_link_hop_latency_s;
}

double send_seconds(double bytes, const GpuSpec& g) {
  return bytes / g.intra_link_bytes_per_s + g.intra_link_hop_latency_s;
}

}  // namespace ecoserve::sim
