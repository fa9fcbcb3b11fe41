// Virtual usage and freeness (Llumnix, OSDI'24, section 4.3): how busy an
// instance looks to Llumnix's dispatch, migration and scaling.
//
// Virtual usage V of a request, in KV blocks of the instance's block_size:
//   - running (holds KV): its physical blocks, blocks_for(num_tokens);
//   - queued (not running): its demand, blocks_for(num_tokens + 1) - the prompt
//     plus its first output token. Every queued request counts (not only the
//     head of the queue, as in the paper: simpler, and a deep queue should look
//     busy to the dispatcher);
//   - plus, for a high-priority request (priority > 0), a headroom of
//     blocks_for(min(remaining_output_tokens, high_priority_headroom_tokens))
//     with remaining_output_tokens = max(0, max_tokens - num_generated), so it
//     can grow without being preempted and its instance looks busier (fewer
//     requests land beside it).
//
// Freeness F = (M - sum V) / B of an instance, with M = num_total_blocks and
// B = the batch size = its number of running requests (at least 1). Unit:
// blocks per running request - roughly how many blocks each request of the batch
// can still grow by, so F x block_size is about how many more decode steps the
// batch can run before the memory is full. F is negative when the instance is
// overloaded (its queue's demand exceeds the free memory), and -infinity for a
// draining or unhealthy instance (infinite virtual usage: it takes nothing).
//
// Pure functions over plain data: no clock, no threads, no I/O; callable from
// any thread.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "policy/cluster_view.h"

namespace ecoserve::policy {

struct FreenessOptions {
  // Headroom added to each high-priority (priority > 0) request's virtual usage,
  // in tokens: headroom blocks = blocks_for(min(remaining_output_tokens,
  // high_priority_headroom_tokens)). 0 disables the headroom.
  int32_t high_priority_headroom_tokens = 1024;
};

// OK when high_priority_headroom_tokens >= 0; INVALID_ARGUMENT naming the field otherwise.
Status validate(const FreenessOptions& options);

// Virtual usage of one request in blocks (block_size > 0), as above.
int64_t virtual_usage_blocks(const RequestLoad& r, int32_t block_size, const FreenessOptions& options);

// What freeness is computed from: sum V and B of one instance.
struct InstanceUsage {
  int64_t virtual_blocks = 0;  // sum V
  int32_t num_running = 0;     // B before clamping to at least 1
};

// sum V and the running count of `inst`. With `with_requests` (the view's
// ClusterView::with_requests), from inst.requests (every request, migrating ones
// included: they still hold their KV here). Without it, from the InstanceLoad
// aggregates: B = num_running and sum V = inst.virtual_blocks when the router
// keeps it (>= 0), else num_total_blocks - num_free_blocks +
// blocks_for(num_waiting_tokens) (no priorities: no headroom).
InstanceUsage instance_usage(const InstanceLoad& inst, bool with_requests, const FreenessOptions& options);

// F = (num_total_blocks - usage.virtual_blocks) / max(1, usage.num_running).
double freeness_of(const InstanceLoad& inst, const InstanceUsage& usage);

// Freeness of `inst`: -infinity when it is draining or unhealthy, else
// freeness_of(inst, instance_usage(inst, with_requests, options)). The role is
// not looked at (callers filter kMixed).
double freeness(const InstanceLoad& inst, bool with_requests, const FreenessOptions& options);

// The same, from the request list when inst.requests is non-empty and from the
// aggregates otherwise (an instance without requests whose accounting is
// consistent has no used blocks, so both agree). Prefer the overload above with
// the view's with_requests when a view is at hand.
double freeness(const InstanceLoad& inst, const FreenessOptions& options);

}  // namespace ecoserve::policy
