#include "sim/cost_model_executor.h"

#include <cstring>

namespace ecoserve::sim {

policy::StepShape step_shape(const StepPlan& plan) {
  policy::StepShape shape;
  for (const SeqStep& s : plan.seqs) {
    const int64_t total = static_cast<int64_t>(s.prompt_tokens.size() + s.output_tokens.size());
    const int32_t n = static_cast<int32_t>(s.tokens.size());
    const bool decode = n == 1 && !s.output_tokens.empty() && s.num_computed + 1 == total;
    if (decode) {
      ++shape.decode_seqs;
      shape.decode_context_tokens += s.num_computed + 1;
    } else {
      ++shape.prefill_seqs;
      shape.prefill_tokens += n;
      shape.prefill_context_tokens += s.num_computed;
    }
  }
  return shape;
}

CostModelExecutor::CostModelExecutor(CostModelExecutorOptions options,
                                     std::shared_ptr<const policy::CostModel> cost_model)
    : options_(options), cost_model_(std::move(cost_model)) {}

StatusOr<StepOutput> CostModelExecutor::execute(const StepPlan& plan) {
  if (options_.on_plan) options_.on_plan(plan);
  last_shape_ = step_shape(plan);
  double seconds = cost_model_->step_seconds(last_shape_);
  const int64_t swapped = static_cast<int64_t>(plan.swap_out.size() + plan.swap_in.size());
  if (swapped > 0 && options_.host_bytes_per_second > 0) {
    seconds += static_cast<double>(swapped) * options_.block_size * options_.kv_bytes_per_token /
               options_.host_bytes_per_second;
  }
  if (!plan.seqs.empty()) seconds += options_.step_overhead_seconds;
  last_seconds_ = seconds;
  StepOutput out;
  out.seqs.reserve(plan.seqs.size());
  for (const SeqStep& s : plan.seqs) {
    if (static_cast<int64_t>(s.block_table.size()) * options_.block_size <
        s.num_computed + static_cast<int64_t>(s.tokens.size())) {
      return invalid_argument_error("request {}: {} blocks do not cover {} positions", s.id.value,
                                    s.block_table.size(), s.num_computed + s.tokens.size());
    }
    if (!s.sample && !s.return_logits) continue;
    SeqOutput o;
    o.id = s.id;
    o.token = s.sample ? options_.sample_token : -1;
    out.seqs.push_back(std::move(o));
  }
  return out;
}

namespace {
constexpr uint32_t kDescriptorMagic = 0x53494d4b;  // "SIMK"
}

StatusOr<std::vector<uint8_t>> CostModelExecutor::export_kv(std::span<const BlockId> blocks, int32_t begin,
                                                            int32_t end) const {
  if (begin < 0 || end < begin || static_cast<int64_t>(blocks.size()) * options_.block_size < end) {
    return invalid_argument_error("export of positions [{}, {}) from {} blocks", begin, end, blocks.size());
  }
  std::vector<uint8_t> out(12);
  std::memcpy(out.data(), &kDescriptorMagic, 4);
  std::memcpy(out.data() + 4, &begin, 4);
  std::memcpy(out.data() + 8, &end, 4);
  return out;
}

StatusOr<int32_t> CostModelExecutor::import_kv(std::span<const uint8_t> blob, std::span<const BlockId> blocks) {
  uint32_t magic = 0;
  int32_t begin = 0, end = 0;
  if (blob.size() != 12) return invalid_argument_error("a simulated KV descriptor has 12 bytes, got {}", blob.size());
  std::memcpy(&magic, blob.data(), 4);
  std::memcpy(&begin, blob.data() + 4, 4);
  std::memcpy(&end, blob.data() + 8, 4);
  if (magic != kDescriptorMagic) return failed_precondition_error("not a simulated KV descriptor");
  if (begin < 0 || end < begin || static_cast<int64_t>(blocks.size()) * options_.block_size < end) {
    return invalid_argument_error("positions [{}, {}) do not fit {} blocks", begin, end, blocks.size());
  }
  return end - begin;
}

double ConstantCostModel::step_seconds(const policy::StepShape& s) const {
  if (s.prefill_seqs == 0 && s.decode_seqs == 0) return 0.0;
  return fixed_ + per_prefill_token_ * s.prefill_tokens + per_decode_seq_ * s.decode_seqs;
}

}  // namespace ecoserve::sim
