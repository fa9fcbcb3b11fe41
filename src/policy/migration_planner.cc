#include "policy/migration_planner.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "kv/block_allocator.h"

namespace ecoserve::policy {

std::string_view migration_reason_name(MigrationReason reason) {
  switch (reason) {
    case MigrationReason::kLoadBalance: return "load_balance";
    case MigrationReason::kDefragment: return "defragment";
    case MigrationReason::kDrain: return "drain";
  }
  return "unknown";
}

std::string_view migration_choice_name(MigrationChoice choice) {
  switch (choice) {
    case MigrationChoice::kShortestFirst: return "shortest";
    case MigrationChoice::kLowPriorityShortestFirst: return "low-priority";
    case MigrationChoice::kLongestFirst: return "longest";
  }
  return "unknown";
}

StatusOr<MigrationChoice> parse_migration_choice(std::string_view name) {
  for (MigrationChoice c : {MigrationChoice::kShortestFirst, MigrationChoice::kLowPriorityShortestFirst,
                            MigrationChoice::kLongestFirst}) {
    if (name == migration_choice_name(c)) return c;
  }
  return invalid_argument_error("unknown migration choice '{}' (shortest, low-priority, longest)", name);
}

Status validate(const MigrationPlannerOptions& options) {
  if (!std::isfinite(options.source_freeness)) {
    return invalid_argument_error("migration: source_freeness must be finite, got {}", options.source_freeness);
  }
  if (!std::isfinite(options.destination_freeness) || !(options.source_freeness < options.destination_freeness)) {
    return invalid_argument_error("migration: destination_freeness must be finite and > source_freeness = {}, got {}",
                                  options.source_freeness, options.destination_freeness);
  }
  if (!std::isfinite(options.min_spread) || options.min_spread < 0.0) {
    return invalid_argument_error("migration: min_spread must be finite and >= 0, got {}", options.min_spread);
  }
  if (options.max_migrations < 1) {
    return invalid_argument_error("migration: max_migrations must be >= 1, got {}", options.max_migrations);
  }
  switch (options.choice) {
    case MigrationChoice::kShortestFirst:
    case MigrationChoice::kLowPriorityShortestFirst:
    case MigrationChoice::kLongestFirst: break;
    default:
      return invalid_argument_error("migration: choice {} is not a known MigrationChoice",
                                    static_cast<int>(options.choice));
  }
  return validate(options.freeness).with_prefix("migration");
}

std::ostream& operator<<(std::ostream& os, const MigrationOrder& order) {
  return os << "r" << order.request.value << " i" << order.source.value << "->i" << order.destination.value << " "
            << migration_reason_name(order.reason);
}

StatusOr<MigrationPlanner> MigrationPlanner::create(const MigrationPlannerOptions& options) {
  ECO_RETURN_IF_ERROR(validate(options));
  return MigrationPlanner(options);
}

MigrationPlanner::MigrationPlanner(const MigrationPlannerOptions& options) : options_(options) {
  const Status s = validate(options_);
  ECO_CHECK_MSG(s.ok(), "{}", s.message());
}

namespace {

// One candidate instance (healthy, kMixed) as the planner sees it.
struct Node {
  size_t pos = 0;
  const InstanceLoad* load = nullptr;
  InstanceUsage usage;
  double freeness = 0.0;  // -infinity when draining
  bool has_migrating = false;
  bool used = false;  // in an order of this call
  int32_t block_size() const { return std::max(1, load->block_size); }
};

// a goes before b under `choice`.
bool chosen_before(MigrationChoice choice, const RequestLoad& a, const RequestLoad& b) {
  switch (choice) {
    case MigrationChoice::kShortestFirst:
      if (a.num_tokens != b.num_tokens) return a.num_tokens < b.num_tokens;
      break;
    case MigrationChoice::kLowPriorityShortestFirst:
      if (a.priority != b.priority) return a.priority < b.priority;
      if (a.num_tokens != b.num_tokens) return a.num_tokens < b.num_tokens;
      break;
    case MigrationChoice::kLongestFirst:
      if (a.num_tokens != b.num_tokens) return a.num_tokens > b.num_tokens;
      break;
  }
  return a.id < b.id;
}

// The running, non-migrating requests of `n`, in `choice` order.
std::vector<const RequestLoad*> movable(const Node& n, MigrationChoice choice) {
  std::vector<const RequestLoad*> out;
  for (const RequestLoad& r : n.load->requests) {
    if (r.running && !r.migrating) out.push_back(&r);
  }
  std::sort(out.begin(), out.end(),
            [choice](const RequestLoad* a, const RequestLoad* b) { return chosen_before(choice, *a, *b); });
  return out;
}

class Planning {
 public:
  Planning(const MigrationPlannerOptions& options, const ClusterView& view) : options_(options) {
    for (size_t i = 0; i < view.instances.size(); ++i) {
      const InstanceLoad& l = view.instances[i];
      if (!l.healthy || l.role != InstanceRole::kMixed) continue;
      Node n;
      n.pos = i;
      n.load = &l;
      n.usage = instance_usage(l, /*with_requests=*/true, options.freeness);
      n.freeness = freeness(l, /*with_requests=*/true, options.freeness);
      n.has_migrating =
          std::any_of(l.requests.begin(), l.requests.end(), [](const RequestLoad& r) { return r.migrating; });
      nodes_.push_back(n);
    }
  }

  std::vector<MigrationOrder> run() {
    drain();
    int32_t budget = options_.max_migrations;
    load_balance(budget);
    if (options_.defragment) defragment(budget);
    return std::move(orders_);
  }

 private:
  bool destination(const Node& n) const { return !n.load->draining && !n.has_migrating && !n.used; }

  // Destinations not used yet, freest first (ties: lower position), that pass `extra`.
  template <typename Pred>
  std::vector<Node*> destinations(Pred extra) {
    std::vector<Node*> out;
    for (Node& n : nodes_) {
      if (destination(n) && extra(n)) out.push_back(&n);
    }
    std::stable_sort(out.begin(), out.end(), [](const Node* a, const Node* b) { return a->freeness > b->freeness; });
    return out;
  }

  static bool fits(const Node& dst, const RequestLoad& r) {
    return kv::blocks_for_tokens(int64_t{r.num_tokens} + 1, dst.block_size()) <= dst.load->num_free_blocks;
  }

  // Anti-ping-pong: with r moved, the destination stays at least as free as the source.
  bool no_ping_pong(const Node& src, const Node& dst, const RequestLoad& r) const {
    const int64_t v_src = virtual_usage_blocks(r, src.block_size(), options_.freeness);
    const int64_t v_dst = virtual_usage_blocks(r, dst.block_size(), options_.freeness);
    const InstanceUsage src_after{src.usage.virtual_blocks - v_src, src.usage.num_running - 1};
    const InstanceUsage dst_after{dst.usage.virtual_blocks + v_dst, dst.usage.num_running + 1};
    return freeness_of(*dst.load, dst_after) >= freeness_of(*src.load, src_after);
  }

  void emit(const RequestLoad& r, Node& src, Node& dst, MigrationReason reason) {
    orders_.push_back(MigrationOrder{r.id, src.load->id, dst.load->id, reason});
    src.used = true;
    dst.used = true;
  }

  void drain() {
    std::vector<Node*> dsts = destinations([](const Node&) { return true; });
    const size_t limit = std::max(static_cast<size_t>(options_.max_migrations), dsts.size());
    size_t count = 0;
    for (Node& src : nodes_) {
      if (!src.load->draining) continue;
      for (const RequestLoad* r : movable(src, options_.choice)) {
        if (count >= limit) return;
        for (Node* dst : dsts) {
          if (dst->used || !fits(*dst, *r)) continue;
          orders_.push_back(MigrationOrder{r->id, src.load->id, dst->load->id, MigrationReason::kDrain});
          dst->used = true;  // the draining source stays usable for its next request
          ++count;
          break;
        }
      }
    }
  }

  void load_balance(int32_t& budget) {
    std::vector<Node*> srcs;
    for (Node& n : nodes_) {
      if (n.load->draining || n.has_migrating || n.used || !(n.freeness < options_.source_freeness)) continue;
      if (movable(n, options_.choice).empty()) continue;
      srcs.push_back(&n);
    }
    std::stable_sort(srcs.begin(), srcs.end(), [](const Node* a, const Node* b) { return a->freeness < b->freeness; });
    std::vector<Node*> dsts =
        destinations([this](const Node& n) { return n.freeness > options_.destination_freeness; });
    for (size_t i = 0; i < std::min(srcs.size(), dsts.size()) && budget > 0; ++i) {
      Node& src = *srcs[i];
      Node& dst = *dsts[i];
      if (dst.freeness - src.freeness < options_.min_spread) break;
      for (const RequestLoad* r : movable(src, options_.choice)) {
        if (fits(dst, *r) && no_ping_pong(src, dst, *r)) {
          emit(*r, src, dst, MigrationReason::kLoadBalance);
          --budget;
          break;
        }
      }
    }
  }

  void defragment(int32_t& budget) {
    int64_t cluster_free = 0;
    for (const Node& n : nodes_) {
      if (!n.load->draining) cluster_free += n.load->num_free_blocks;
    }
    for (Node& src : nodes_) {
      if (budget <= 0) return;
      if (src.load->draining || src.has_migrating || src.used) continue;
      const auto head = std::find_if(src.load->requests.begin(), src.load->requests.end(),
                                     [](const RequestLoad& r) { return !r.running; });
      if (head == src.load->requests.end()) continue;
      const int64_t need = kv::blocks_for_tokens(int64_t{head->num_tokens} + 1, src.block_size());
      if (need <= src.load->num_free_blocks || cluster_free < need) continue;
      std::vector<Node*> dsts = destinations([&src](const Node& n) { return &n != &src; });
      bool moved = false;
      for (const RequestLoad* r : movable(src, options_.choice)) {
        for (Node* dst : dsts) {
          if (fits(*dst, *r) && no_ping_pong(src, *dst, *r)) {
            emit(*r, src, *dst, MigrationReason::kDefragment);
            --budget;
            moved = true;
            break;
          }
        }
        if (moved) break;
      }
    }
  }

  const MigrationPlannerOptions& options_;
  std::vector<Node> nodes_;  // candidates in position order
  std::vector<MigrationOrder> orders_;
};

}  // namespace

std::vector<MigrationOrder> MigrationPlanner::plan(const ClusterView& view) const {
  if (!view.with_requests) return {};
  return Planning(options_, view).run();
}

}  // namespace ecoserve::policy
