// SimNetwork: links with bandwidth and latency, and flows of bytes that share them
// max-min fairly, on a SimRuntime's simulated time.
//
// Model (a fluid model with latency added at the end):
//  - A link has a capacity C (bytes/s, per direction: a link is one direction) and a
//    latency. A flow is `bytes` bytes over a path of links.
//  - A flow transmits from the moment start_flow() is called until its last byte has
//    been sent; while transmitting it has a rate r (bytes/s) and occupies every link
//    of its path at that rate (all links at once: no store-and-forward).
//  - Rates are the max-min fair allocation over all transmitting flows (progressive
//    filling): raise every flow's rate together; when a link is full, the flows
//    crossing it are frozen at their rate (it is their bottleneck), and the others keep
//    rising with the capacity left. A flow's rate is thus set by its most contended
//    link, and capacity a bottlenecked flow cannot use goes to the others. A flow that
//    crosses a link twice counts twice there. Rates are recomputed, for the connected
//    component of flows sharing links with it, whenever a flow starts, finishes
//    transmitting or is cancelled; between those instants rates are constant.
//  - When its last byte is sent (at t_tx) the flow stops using bandwidth and is
//    delivered at t_tx + the sum of its path's link latencies: on_done runs then.
//    So one flow of B bytes alone on a path is delivered after B / min(C) + sum(latency).
//  - Times are integral nanoseconds: t_tx is rounded to the nearest nanosecond.
//    A flow whose t_tx is the current instant finishes at this instant even if another
//    flow starts or ends first at the same instant; flows finishing at the same instant
//    finish together (one reallocation) and are delivered in start order.
//  - A flow of 0 bytes, or with an empty path, never transmits: it is delivered after
//    its path latency (0 for an empty path: an event at now(), so on_done is never
//    called from inside start_flow()).
//
// Ownership: owns links and flows (and their callbacks); holds a reference to the
// SimRuntime, which must outlive it. The destructor cancels its pending events.
// Threads: single-threaded, like SimRuntime: call only from the simulation thread,
// typically from inside events. on_done may start and cancel flows.
// Cost: a start or end costs O(component flows x path length + component links x log)
// plus one runtime reschedule per flow whose rate changed. No per-flow allocation
// besides the caller's path vector and std::function's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "sim/sim_runtime.h"

namespace ecoserve::sim {

// Index of a link in its SimNetwork (0, 1, ... in the order added).
using LinkId = StrongId<struct LinkIdTag, std::int32_t>;
// A flow of a SimNetwork. Never FlowId{0}.
using FlowId = StrongId<struct FlowIdTag, std::uint64_t>;

struct LinkSpec {
  std::string name;               // for reports ("gpu3.up", "node1.nic_out")
  double bytes_per_second = 0;    // capacity, > 0 and finite
  Duration latency{};             // >= 0
};

struct LinkStats {
  double bytes_carried = 0;       // bytes that have crossed the link up to now() (fluid)
  Duration busy_time{};           // total time with at least one transmitting flow on it
  std::int32_t active_flows = 0;  // transmitting flows on it now (counted per crossing)
};

class SimNetwork {
 public:
  explicit SimNetwork(SimRuntime& runtime);
  ~SimNetwork();
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;

  // Adds a link; INVALID_ARGUMENT unless bytes_per_second is > 0 and finite and
  // latency >= 0.
  StatusOr<LinkId> add_link(LinkSpec spec);
  std::size_t num_links() const { return links_.size(); }
  // Precondition (CHECKed): `id` was returned by add_link().
  const LinkSpec& link(LinkId id) const;
  LinkStats link_stats(LinkId id) const;
  // Sum of the latencies of `path`'s links.
  Duration path_latency(const std::vector<LinkId>& path) const;

  // Starts sending `bytes` (>= 0) over `path` (links of this network; CHECKed) now;
  // on_done (may be empty) runs when the flow is delivered (see the model above).
  FlowId start_flow(std::vector<LinkId> path, std::int64_t bytes, std::function<void()> on_done);
  // Stops a flow that is not yet delivered; its on_done is destroyed without being
  // called and the others' rates are recomputed. False if delivered, cancelled or unknown.
  bool cancel_flow(FlowId id);

  // Current rate (bytes/s) of a transmitting flow; 0 for any other flow or id.
  double flow_rate(FlowId id) const;
  // Bytes a flow has yet to send (0 once transmitted); nullopt if delivered,
  // cancelled or unknown.
  std::optional<double> flow_remaining_bytes(FlowId id) const;

  // Bytes of every flow started / delivered / cancelled so far (whole flows: a cancelled
  // flow counts its full size; bytes_sent == delivered + cancelled once none is active).
  std::int64_t bytes_sent() const { return bytes_sent_; }
  std::int64_t bytes_delivered() const { return bytes_delivered_; }
  std::int64_t bytes_cancelled() const { return bytes_cancelled_; }
  std::uint64_t flows_delivered() const { return flows_delivered_; }
  // Flows started and not yet delivered or cancelled (transmitting or in latency).
  std::size_t active_flows() const { return active_; }
  // Flows still sending bytes.
  std::size_t transmitting_flows() const { return transmitting_; }

 private:
  enum class State : std::uint8_t { kFree, kTransmitting, kPropagating };
  struct Flow {
    std::vector<std::int32_t> path;  // link indices
    std::function<void()> on_done;
    std::int64_t bytes = 0;
    double remaining = 0;            // bytes left to send as of last_ns
    double rate = 0;                 // bytes/s while transmitting
    double new_rate = 0;             // scratch of the water-filling
    std::int64_t last_ns = 0;
    std::int64_t done_ns = 0;        // due time of `event` (end of sending, or delivery)
    std::int64_t latency_ns = 0;
    SimRuntime::EventId event = SimRuntime::kNoEvent;
    std::uint64_t seq = 0;           // start order
    std::uint64_t mark = 0;          // epoch scratch
    std::uint32_t gen = 1;
    std::uint32_t next_free = 0;
    State state = State::kFree;
  };
  struct Link {
    LinkSpec spec;
    std::vector<std::uint32_t> flows;  // transmitting flows' slots, one per crossing
    double bytes_carried = 0;          // up to each flow's last_ns
    std::int64_t busy_ns = 0;
    std::int64_t busy_since_ns = 0;
    std::uint64_t mark = 0;            // epoch scratch
    double rem = 0;                    // water-filling scratch: capacity left
    std::int32_t cnt = 0;              // water-filling scratch: unfrozen crossings
  };
  static constexpr std::uint32_t kNil = 0xffffffffu;

  std::int64_t now_ns() const { return runtime_.now().time_since_epoch().count(); }
  Flow* find(FlowId id);
  const Flow* find(FlowId id) const;
  FlowId id_of(std::uint32_t slot) const;
  std::uint32_t alloc_flow();
  // Frees the slot; returns the callback so the caller can destroy or run it last.
  std::function<void()> free_flow(std::uint32_t slot);

  // Fills comp_links_ / comp_flows_ with the links and transmitting flows connected
  // to `seeds` through shared links.
  void collect_component(const std::vector<std::int32_t>& seeds);
  // Brings remaining bytes and link counters of comp_flows_ up to now.
  void advance_component();
  void attach(std::uint32_t slot);
  void detach(std::uint32_t slot);
  // Max-min rates for the flows on comp_links_; reschedules those whose end moved.
  void reallocate();
  void schedule_tx_end(std::uint32_t slot);
  void schedule_delivery(std::uint32_t slot);
  void on_tx_end(std::uint32_t slot);
  void on_delivered(std::uint32_t slot);

  SimRuntime& runtime_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::uint32_t free_head_ = kNil;
  std::uint64_t next_seq_ = 1;
  std::uint64_t epoch_ = 0;
  std::int64_t bytes_sent_ = 0;
  std::int64_t bytes_delivered_ = 0;
  std::int64_t bytes_cancelled_ = 0;
  std::uint64_t flows_delivered_ = 0;
  std::size_t active_ = 0;
  std::size_t transmitting_ = 0;
  // Scratch, reused across calls.
  std::vector<std::int32_t> comp_links_;
  std::vector<std::uint32_t> comp_flows_;
  std::vector<std::uint32_t> finished_;
  std::vector<std::pair<double, std::int32_t>> fill_heap_;
};

}  // namespace ecoserve::sim
