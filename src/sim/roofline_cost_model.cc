#include "sim/roofline_cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ecoserve::sim {

namespace {

RooflineOp gemm(std::string_view name, double m, double k, double n, double dtype_bytes) {
  return RooflineOp{.name = name,
                    .tokens = m,
                    .flops = 2.0 * m * k * n,
                    .bytes = dtype_bytes * (k * n + m * k + m * n),
                    .elementwise = false};
}

Status validate_options(const RooflineOptions& o) {
  if (!(o.compute_efficiency_max > 0.0 && o.compute_efficiency_max <= 1.0)) {
    return invalid_argument_error("roofline: compute_efficiency_max must be in (0, 1] (got {})",
                                  o.compute_efficiency_max);
  }
  if (!(o.compute_efficiency_tokens > 0.0) || !std::isfinite(o.compute_efficiency_tokens)) {
    return invalid_argument_error("roofline: compute_efficiency_tokens must be > 0 (got {})",
                                  o.compute_efficiency_tokens);
  }
  if (!(o.memory_efficiency > 0.0 && o.memory_efficiency <= 1.0)) {
    return invalid_argument_error("roofline: memory_efficiency must be in (0, 1] (got {})", o.memory_efficiency);
  }
  if (!(o.layer_overhead_seconds >= 0.0) || !std::isfinite(o.layer_overhead_seconds)) {
    return invalid_argument_error("roofline: layer_overhead_seconds must be >= 0 (got {})", o.layer_overhead_seconds);
  }
  if (!(o.elementwise_traffic > 0.0) || !std::isfinite(o.elementwise_traffic)) {
    return invalid_argument_error("roofline: elementwise_traffic must be > 0 (got {})", o.elementwise_traffic);
  }
  return ok_status();
}

}  // namespace

namespace {

// The compute efficiency at op.tokens (ce(tokens) in the header).
double op_efficiency(const RooflineOp& op, const RooflineOptions& o) {
  return o.compute_efficiency_max * (1.0 - std::exp(-op.tokens / o.compute_efficiency_tokens));
}

// roofline_op_seconds with ce = op_efficiency(op, o) given (ignored when op.flops <= 0).
double op_seconds(const RooflineOp& op, double ce, const GpuSpec& gpu, const RooflineOptions& o,
                  bool* compute_bound) {
  double compute = 0.0;
  if (op.flops > 0.0) compute = ce > 0.0 ? op.flops / (gpu.peak_flops * ce) : 0.0;
  const double bytes = op.elementwise ? op.bytes * o.elementwise_traffic : op.bytes;
  const double memory = bytes / (gpu.hbm_bytes_per_s * o.memory_efficiency);
  if (compute_bound != nullptr) *compute_bound = compute > memory;
  return std::max(compute, memory);
}

}  // namespace

double roofline_op_seconds(const RooflineOp& op, const GpuSpec& gpu, const RooflineOptions& o, bool* compute_bound) {
  double compute = 0.0;
  if (op.flops > 0.0) {
    const double ce = op_efficiency(op, o);
    compute = ce > 0.0 ? op.flops / (gpu.peak_flops * ce) : 0.0;
  }
  const double bytes = op.elementwise ? op.bytes * o.elementwise_traffic : op.bytes;
  const double memory = bytes / (gpu.hbm_bytes_per_s * o.memory_efficiency);
  if (compute_bound != nullptr) *compute_bound = compute > memory;
  return std::max(compute, memory);
}

StatusOr<std::unique_ptr<RooflineCostModel>> RooflineCostModel::create(ModelSpec model, GpuSpec gpu, Parallelism par,
                                                                       RooflineOptions options) {
  ECO_RETURN_IF_ERROR(validate_model_spec(model));
  ECO_RETURN_IF_ERROR(validate_gpu_spec(gpu));
  ECO_RETURN_IF_ERROR(validate_parallelism(model, par));
  ECO_RETURN_IF_ERROR(validate_options(options));
  return std::unique_ptr<RooflineCostModel>(new RooflineCostModel(std::move(model), std::move(gpu), par, options));
}

double RooflineCostModel::compute_efficiency(double tokens) const {
  return options_.compute_efficiency_max * (1.0 - std::exp(-tokens / options_.compute_efficiency_tokens));
}

std::vector<RooflineOp> RooflineCostModel::layer_ops(const policy::StepShape& s) const {
  RooflineOp ops[kMaxLayerOps];
  const size_t n = fill_layer_ops(s, ops);
  return std::vector<RooflineOp>(ops, ops + n);
}

size_t RooflineCostModel::fill_layer_ops(const policy::StepShape& s, RooflineOp* out) const {
  const double prefill = std::max(s.prefill_tokens, 0);
  const double decode = std::max(s.decode_seqs, 0);
  const double t = prefill + decode;
  if (t <= 0.0) return 0;
  struct Ops {  // push_back onto the caller's array
    RooflineOp* out;
    size_t n = 0;
    void push_back(const RooflineOp& op) { out[n++] = op; }
  } ops{out};
  const double b = model_.dtype_bytes;
  const double h = model_.hidden;
  const double d = model_.head_dim();
  const double nh = static_cast<double>(model_.heads) / par_.tp;
  const double kv = kv_heads_per_gpu(model_, par_);
  const double f = static_cast<double>(model_.ffn) / par_.tp;

  ops.push_back(gemm("qkv", t, h, (nh + 2.0 * kv) * d, b));
  if (prefill > 0.0) {
    const double n = std::max(s.prefill_seqs, 1);
    const double q = prefill / n;
    const double c = static_cast<double>(std::max<int64_t>(s.prefill_context_tokens, 0)) / n;
    const double context_sum = c * n;
    ops.push_back(RooflineOp{.name = "attn_prefill",
                             .tokens = prefill,
                             .flops = 4.0 * d * nh * n * q * (c + q / 2.0),
                             .bytes = b * (2.0 * prefill * nh * d + (context_sum + prefill) * 2.0 * kv * d),
                             .elementwise = false});
  }
  if (decode > 0.0) {
    const double k_sum = static_cast<double>(std::max<int64_t>(s.decode_context_tokens, 0));
    ops.push_back(RooflineOp{.name = "attn_decode",
                             .tokens = decode,
                             .flops = 4.0 * d * nh * k_sum,
                             .bytes = b * (2.0 * decode * nh * d + k_sum * 2.0 * kv * d),
                             .elementwise = false});
  }
  ops.push_back(gemm("o", t, nh * d, h, b));
  ops.push_back(gemm("mlp_up", t, h, model_.gated_mlp ? 2.0 * f : f, b));
  ops.push_back(gemm("mlp_down", t, f, h, b));
  const double activation = model_.gated_mlp ? 3.0 * f : 2.0 * f;
  ops.push_back(RooflineOp{.name = "elementwise",
                           .tokens = t,
                           .flops = 0.0,
                           .bytes = b * t * (2.0 * 2.0 * h + 2.0 * 3.0 * h + activation),
                           .elementwise = true});
  return ops.n;
}

RooflineOp RooflineCostModel::lm_head_op(int64_t rows) const {
  const double vocab_shard = static_cast<double>((model_.vocab + par_.tp - 1) / par_.tp);
  return gemm("lm_head", static_cast<double>(rows), model_.hidden, vocab_shard, model_.dtype_bytes);
}

double RooflineCostModel::layer_seconds(const policy::StepShape& shape) const {
  const std::vector<RooflineOp> ops = layer_ops(shape);
  if (ops.empty()) return 0.0;
  double total = options_.layer_overhead_seconds;
  for (const RooflineOp& op : ops) total += roofline_op_seconds(op, gpu_, options_);
  return total;
}

RooflineBreakdown RooflineCostModel::totals(const policy::StepShape& s, bool with_ops) const {
  RooflineBreakdown out;
  RooflineOp ops[kMaxLayerOps];
  const size_t num_ops = fill_layer_ops(s, ops);
  if (num_ops == 0) return out;
  const double layers = model_.layers;
  // Most operators share a token count: compute each efficiency (an exp) once.
  double ce_tokens = -1.0, ce = 0.0;
  auto add = [&](const RooflineOp& op, double times, double traffic) {
    RooflineOpTime t{.op = op};
    if (op.flops > 0.0 && op.tokens != ce_tokens) {
      ce_tokens = op.tokens;
      ce = op_efficiency(op, options_);
    }
    t.seconds = op_seconds(op, ce, gpu_, options_, &t.compute_bound);
    (t.compute_bound ? out.compute_seconds : out.memory_seconds) += times * t.seconds;
    out.flops += times * op.flops;
    out.bytes += times * op.bytes * traffic;
    if (with_ops) out.layer_ops.push_back(std::move(t));
  };
  for (size_t i = 0; i < num_ops; ++i) add(ops[i], layers, ops[i].elementwise ? options_.elementwise_traffic : 1.0);
  const int64_t rows =
      int64_t{std::max(s.prefill_tokens > 0 ? std::max(s.prefill_seqs, 1) : 0, 0)} + std::max(s.decode_seqs, 0);
  if (rows > 0) add(lm_head_op(rows), 1.0, 1.0);
  const double tokens = std::max(s.prefill_tokens, 0) + std::max(s.decode_seqs, 0);
  const double activation_bytes = tokens * model_.hidden * model_.dtype_bytes;
  out.overhead_seconds = layers * options_.layer_overhead_seconds;
  out.tp_comm_seconds = layers * 2.0 * ring_allreduce_seconds(activation_bytes, par_.tp, gpu_);
  out.pp_comm_seconds = (par_.pp - 1) * send_seconds(activation_bytes, gpu_);
  out.total_seconds =
      out.compute_seconds + out.memory_seconds + out.overhead_seconds + out.tp_comm_seconds + out.pp_comm_seconds;
  return out;
}

RooflineBreakdown RooflineCostModel::breakdown(const policy::StepShape& s) const { return totals(s, true); }

// The simulator calls this every step: the same sums without the per-operator list.
double RooflineCostModel::step_seconds(const policy::StepShape& s) const { return totals(s, false).total_seconds; }

}  // namespace ecoserve::sim
