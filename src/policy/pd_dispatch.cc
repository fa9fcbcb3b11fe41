#include "policy/pd_dispatch.h"

namespace ecoserve::policy {

std::optional<PdDecision> pd_dispatch(const ClusterView& view, const RouteRequest& req,
                                      const PdDispatchOptions& options, const PrefixIndex* decode_index) {
  const InstanceLoad* decode = nullptr;
  for (const InstanceLoad& l : view.instances) {
    if (!l.healthy || l.role != InstanceRole::kDecode) continue;
    if (l.max_num_seqs > 0 && l.num_requests() >= l.max_num_seqs) continue;
    if (!decode || l.num_free_blocks > decode->num_free_blocks ||
        (l.num_free_blocks == decode->num_free_blocks && l.num_requests() < decode->num_requests())) {
      decode = &l;
    }
  }
  if (!decode) return std::nullopt;
  const InstanceLoad* prefill = nullptr;
  for (const InstanceLoad& l : view.instances) {
    if (!l.healthy || l.role != InstanceRole::kPrefill) continue;
    if (!prefill || l.num_waiting_tokens < prefill->num_waiting_tokens) prefill = &l;
  }
  PdDecision d{decode->id, decode->id, false};
  if (!prefill || req.prompt_len < options.remote_prefill_min_tokens) return d;
  if (decode_index && !req.block_hashes.empty()) {
    const int32_t cached = decode_index->match_instance(decode->id, req.block_hashes);
    const int64_t uncached_tokens = static_cast<int64_t>(req.prompt_len) - int64_t{cached} * decode->block_size;
    if (cached > 0 && (static_cast<double>(cached) >= options.local_prefix_fraction *
                                                           static_cast<double>(req.block_hashes.size()) ||
                       uncached_tokens < options.remote_prefill_min_tokens)) {
      return d;
    }
  }
  d.prefill = prefill->id;
  d.remote_prefill = true;
  return d;
}

}  // namespace ecoserve::policy
