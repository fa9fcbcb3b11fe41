#include "policy/pd_dispatch.h"

namespace ecoserve::policy {
namespace {

bool has_slot(const InstanceLoad& l) { return l.max_num_seqs <= 0 || l.num_requests() < l.max_num_seqs; }

// The best healthy decode instance; `node` >= 0: those on that node first.
const InstanceLoad* best_decode(const ClusterView& view, int32_t node) {
  const InstanceLoad* best = nullptr;
  auto rank = [node](const InstanceLoad& l) { return std::make_pair(has_slot(l), node >= 0 && l.node == node); };
  for (const InstanceLoad& l : view.instances) {
    if (!l.healthy || l.role != InstanceRole::kDecode) continue;
    if (!best || rank(l) > rank(*best) ||
        (rank(l) == rank(*best) &&
         (l.num_free_blocks > best->num_free_blocks ||
          (l.num_free_blocks == best->num_free_blocks && l.num_requests() < best->num_requests())))) {
      best = &l;
    }
  }
  return best;
}

}  // namespace

std::optional<PdDecision> pd_dispatch(const ClusterView& view, const RouteRequest& req,
                                      const PdDispatchOptions& options, const PrefixIndex* decode_index) {
  const InstanceLoad* decode = best_decode(view, -1);
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
  if (options.prefer_same_node && prefill->node >= 0) decode = best_decode(view, prefill->node);
  d.prefill = prefill->id;
  d.decode = decode->id;
  d.remote_prefill = true;
  return d;
}

}  // namespace ecoserve::policy
