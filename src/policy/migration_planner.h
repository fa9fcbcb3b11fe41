// MigrationPlanner: which running requests Llumnix (OSDI'24, sections 4.4.2 and
// 4.4.3) live-migrates between instances, and where. Pure: plan() is a function
// of the options and a ClusterView that has with_requests (freeness from
// policy/freeness.h); no clock, no threads, no I/O, no state, so the live router
// and the simulator plan the same orders. Callable from any thread.
//
// The caller (every --migrate-interval-ms) carries the orders out; a request
// being migrated shows up as RequestLoad::migrating until it has moved.
//
// Rules of plan(view), in this order (without view.with_requests: no orders):
//
//  Candidates are healthy kMixed instances. A destination is also non-draining,
//  has no migrating request (one migration per instance at a time) and takes at
//  most one order per plan() call. A request to move is running (it holds KV:
//  queued requests have nothing to migrate) and not already migrating. A
//  destination "fits" request r when blocks_for(r.num_tokens + 1) <= its
//  num_free_blocks (its KV plus the next token).
//
//  1. Drain (reason kDrain). Every draining instance, in position order, moves
//     its running non-migrating requests (in `choice` order) to the freest
//     destinations (by current freeness, descending; ties: the lower position)
//     that fit them, each destination used once, at most
//     max(max_migrations, number of destinations) drain orders per call; the
//     rest move in later calls. A draining instance is exempt from "one
//     migration per instance": it may send several requests at once and while
//     some are still migrating, so it empties quickly. Queued requests of a
//     draining instance are not migrated (they have no KV): they start there
//     (it takes no new requests, its freeness being -infinity) or the router
//     re-routes them. There is no freeness check: drained requests must go.
//
//  2. Load balance (reason kLoadBalance). Sources: candidates that are not
//     draining, have no migrating request, have a running non-migrating
//     request and freeness < source_freeness, least free first (ties: lower
//     position). Destinations (as above, unused by step 1) with freeness >
//     destination_freeness, freest first (ties: lower position). The i-th
//     source pairs with the i-th destination while F(dst) - F(src) >=
//     min_spread (the spreads only shrink down the lists, so the first pair
//     below it ends the step). On each pair the first request in `choice` order
//     that the destination fits and that passes the anti-ping-pong check moves;
//     a pair with no such request gives no order (the next pair is tried).
//     Anti-ping-pong: with r moved, the destination's freeness
//     (M_d - V_d - v_d(r)) / max(1, B_d + 1) must be >= the source's
//     (M_s - V_s + v_s(r)) / max(1, B_s - 1), so the next round does not move it
//     (or another request) straight back.
//
//  3. Defragmentation (reason kDefragment, when `defragment`). An instance (in
//     position order; not draining, no migrating request, in no order of this
//     call) whose head queued request (the first non-running one in its list)
//     cannot start - blocks_for(num_tokens + 1) > its num_free_blocks - while
//     the cluster has the room (the num_free_blocks of all healthy kMixed
//     non-draining instances sum to at least that) moves one running request
//     away: the first in `choice` order for which some other destination fits
//     it and passes the anti-ping-pong check; the freest such destination takes
//     it. One request per instance per call; later calls continue until the
//     head fits.
//
//  Steps 2 and 3 together issue at most max_migrations orders per call (a rate
//  limit on migration traffic); step 1 has its own limit. Orders come out in
//  the order above: drain orders, then load-balance pairs in pairing order, then
//  defragmentation in position order. Same view, same orders.
//
//  Request choice (`choice`; ties: lower RequestId):
//    kShortestFirst            fewest num_tokens first (least KV to copy);
//    kLowPriorityShortestFirst lowest priority first, then fewest num_tokens
//                              (high-priority requests are not disturbed);
//    kLongestFirst             most num_tokens first (frees the most memory).
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>
#include <vector>

#include "base/ids.h"
#include "base/status.h"
#include "policy/cluster_view.h"
#include "policy/freeness.h"

namespace ecoserve::policy {

enum class MigrationReason : uint8_t { kLoadBalance, kDefragment, kDrain };
// "load_balance", "defragment", "drain".
std::string_view migration_reason_name(MigrationReason reason);

enum class MigrationChoice : uint8_t { kShortestFirst, kLowPriorityShortestFirst, kLongestFirst };
// "shortest", "low-priority", "longest".
std::string_view migration_choice_name(MigrationChoice choice);
// The inverse of migration_choice_name; INVALID_ARGUMENT naming the accepted names otherwise.
StatusOr<MigrationChoice> parse_migration_choice(std::string_view name);

struct MigrationPlannerOptions {
  // Freeness is in blocks per running request (policy/freeness.h). An instance
  // below source_freeness may give a request away: with the default, its batch
  // fills its memory within about 2 x block_size decode steps (or its queue
  // already cannot start, F < 0).
  double source_freeness = 2.0;
  // An instance above destination_freeness may take one: every request of its
  // batch could still grow by 16 blocks (256 tokens at block_size 16).
  double destination_freeness = 16.0;
  // No load-balance pair unless F(dst) - F(src) >= min_spread, so small
  // imbalances do not cost a migration.
  double min_spread = 8.0;
  // Load-balance plus defragmentation orders per plan() call (per interval).
  int32_t max_migrations = 1;
  MigrationChoice choice = MigrationChoice::kLowPriorityShortestFirst;
  bool defragment = true;
  FreenessOptions freeness;
};

// OK when the thresholds are finite, source_freeness < destination_freeness (no
// instance is both), min_spread >= 0, max_migrations >= 1, `choice` is a known
// value and `freeness` is valid; INVALID_ARGUMENT naming the field otherwise.
Status validate(const MigrationPlannerOptions& options);

struct MigrationOrder {
  RequestId request;
  InstanceId source;
  InstanceId destination;
  MigrationReason reason = MigrationReason::kLoadBalance;
  friend bool operator==(const MigrationOrder&, const MigrationOrder&) = default;
};
// "r7 i0->i2 load_balance".
std::ostream& operator<<(std::ostream& os, const MigrationOrder& order);

class MigrationPlanner {
 public:
  // INVALID_ARGUMENT when `options` are invalid.
  static StatusOr<MigrationPlanner> create(const MigrationPlannerOptions& options);
  // `options` must be valid (validate()); CHECKed.
  explicit MigrationPlanner(const MigrationPlannerOptions& options);

  // The orders for this interval (rules above). Called every
  // --migrate-interval-ms by the router (and the simulator) with a view that
  // has with_requests.
  std::vector<MigrationOrder> plan(const ClusterView& view) const;

  const MigrationPlannerOptions& options() const { return options_; }

 private:
  MigrationPlannerOptions options_;
};

// Whether the next copy stage of a live migration is the last (stop-and-copy):
// when at most `last_stage_tokens` positions are left to copy (`computed` - the
// `loaded` ones), or when this stage would be the `max_stages`-th (a request
// decoding faster than it copies). cluster::Router and sim::SimCluster both ask.
inline bool migration_stage_is_last(int32_t stages_done, int32_t computed, int32_t loaded, int32_t max_stages,
                                    int32_t last_stage_tokens) {
  return stages_done + 1 >= max_stages || computed - loaded <= last_stage_tokens;
}

}  // namespace ecoserve::policy
