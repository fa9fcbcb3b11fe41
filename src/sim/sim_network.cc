#include "sim/sim_network.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace ecoserve::sim {
namespace {

// Transfer times past ~126 years saturate (a flow that slow never ends in a run).
constexpr double kMaxNs = 4e18;

std::int64_t seconds_to_ns(double seconds) {
  const double ns = seconds * 1e9;
  if (!(ns < kMaxNs)) return static_cast<std::int64_t>(kMaxNs);
  return std::llround(std::max(ns, 0.0));
}

}  // namespace

SimNetwork::SimNetwork(SimRuntime& runtime) : runtime_(runtime) {}

SimNetwork::~SimNetwork() {
  for (Flow& f : flows_) {
    if (f.state != State::kFree) runtime_.cancel(f.event);
  }
}

StatusOr<LinkId> SimNetwork::add_link(LinkSpec spec) {
  if (!(spec.bytes_per_second > 0) || !std::isfinite(spec.bytes_per_second)) {
    return invalid_argument_error("link '{}': bytes_per_second must be > 0 and finite, got {}",
                                  spec.name, spec.bytes_per_second);
  }
  if (spec.latency < Duration::zero()) {
    return invalid_argument_error("link '{}': latency must be >= 0, got {} ns", spec.name,
                                  spec.latency.count());
  }
  ECO_CHECK(links_.size() < 0x7fffffff);
  links_.emplace_back();
  links_.back().spec = std::move(spec);
  return LinkId(static_cast<std::int32_t>(links_.size() - 1));
}

const LinkSpec& SimNetwork::link(LinkId id) const {
  ECO_CHECK_MSG(id.value >= 0 && static_cast<std::size_t>(id.value) < links_.size(), "unknown link {}",
                id.value);
  return links_[id.value].spec;
}

LinkStats SimNetwork::link_stats(LinkId id) const {
  ECO_CHECK_MSG(id.value >= 0 && static_cast<std::size_t>(id.value) < links_.size(), "unknown link {}",
                id.value);
  const Link& l = links_[id.value];
  const std::int64_t now = now_ns();
  LinkStats s;
  s.bytes_carried = l.bytes_carried;
  for (std::uint32_t slot : l.flows) {
    const Flow& f = flows_[slot];
    s.bytes_carried += std::min(f.rate * (static_cast<double>(now - f.last_ns) / 1e9), f.remaining);
  }
  s.busy_time = Duration(l.busy_ns + (l.flows.empty() ? 0 : now - l.busy_since_ns));
  s.active_flows = static_cast<std::int32_t>(l.flows.size());
  return s;
}

Duration SimNetwork::path_latency(const std::vector<LinkId>& path) const {
  Duration total{};
  for (LinkId id : path) total += link(id).latency;
  return total;
}

// ---- flow slots ----------------------------------------------------------------

FlowId SimNetwork::id_of(std::uint32_t slot) const {
  return FlowId((static_cast<std::uint64_t>(flows_[slot].gen) << 32) | slot);
}

SimNetwork::Flow* SimNetwork::find(FlowId id) {
  return const_cast<Flow*>(static_cast<const SimNetwork*>(this)->find(id));
}

const SimNetwork::Flow* SimNetwork::find(FlowId id) const {
  const auto slot = static_cast<std::uint32_t>(id.value & 0xffffffffu);
  const auto gen = static_cast<std::uint32_t>(id.value >> 32);
  if (slot >= flows_.size()) return nullptr;
  const Flow& f = flows_[slot];
  if (f.state == State::kFree || f.gen != gen) return nullptr;
  return &f;
}

std::uint32_t SimNetwork::alloc_flow() {
  if (free_head_ != kNil) {
    const std::uint32_t slot = free_head_;
    free_head_ = flows_[slot].next_free;
    return slot;
  }
  ECO_CHECK_MSG(flows_.size() < kNil, "SimNetwork: too many flows");
  flows_.emplace_back();
  return static_cast<std::uint32_t>(flows_.size() - 1);
}

std::function<void()> SimNetwork::free_flow(std::uint32_t slot) {
  Flow& f = flows_[slot];
  std::function<void()> fn = std::move(f.on_done);
  f.on_done = nullptr;
  f.path.clear();  // keeps its capacity for the next flow in this slot
  f.state = State::kFree;
  f.event = SimRuntime::kNoEvent;
  if (++f.gen == 0) f.gen = 1;
  f.next_free = free_head_;
  free_head_ = slot;
  --active_;
  return fn;
}

// ---- public flow operations ----------------------------------------------------

FlowId SimNetwork::start_flow(std::vector<LinkId> path, std::int64_t bytes, std::function<void()> on_done) {
  ECO_CHECK_MSG(bytes >= 0, "SimNetwork::start_flow: negative bytes {}", bytes);
  std::int64_t latency_ns = 0;
  for (LinkId id : path) {
    ECO_CHECK_MSG(id.value >= 0 && static_cast<std::size_t>(id.value) < links_.size(),
                  "SimNetwork::start_flow: unknown link {}", id.value);
    latency_ns += links_[id.value].spec.latency.count();
  }
  const std::uint32_t slot = alloc_flow();
  Flow& f = flows_[slot];
  f.path.assign(path.size(), 0);
  for (std::size_t i = 0; i < path.size(); ++i) f.path[i] = path[i].value;
  f.on_done = std::move(on_done);
  f.bytes = bytes;
  f.remaining = static_cast<double>(bytes);
  f.rate = 0;
  f.last_ns = now_ns();
  f.latency_ns = latency_ns;
  f.event = SimRuntime::kNoEvent;
  f.seq = next_seq_++;
  ++active_;
  bytes_sent_ += bytes;
  const FlowId id = id_of(slot);
  if (bytes == 0 || f.path.empty()) {
    f.remaining = 0;
    schedule_delivery(slot);
    return id;
  }
  f.state = State::kTransmitting;
  ++transmitting_;
  collect_component(f.path);
  advance_component();
  attach(slot);
  reallocate();
  return id;
}

bool SimNetwork::cancel_flow(FlowId id) {
  Flow* f = find(id);
  if (f == nullptr) return false;
  const auto slot = static_cast<std::uint32_t>(id.value & 0xffffffffu);
  runtime_.cancel(f->event);
  bytes_cancelled_ += f->bytes;
  if (f->state == State::kTransmitting) {
    collect_component(f->path);
    advance_component();
    detach(slot);
    --transmitting_;
    std::function<void()> doomed = free_flow(slot);
    reallocate();
    return true;  // `doomed` is destroyed last: its destructor may re-enter
  }
  std::function<void()> doomed = free_flow(slot);
  return true;
}

double SimNetwork::flow_rate(FlowId id) const {
  const Flow* f = find(id);
  return f != nullptr && f->state == State::kTransmitting ? f->rate : 0.0;
}

std::optional<double> SimNetwork::flow_remaining_bytes(FlowId id) const {
  const Flow* f = find(id);
  if (f == nullptr) return std::nullopt;
  if (f->state != State::kTransmitting) return 0.0;
  const double sent = f->rate * (static_cast<double>(now_ns() - f->last_ns) / 1e9);
  return std::max(f->remaining - sent, 0.0);
}

// ---- allocation ----------------------------------------------------------------

void SimNetwork::collect_component(const std::vector<std::int32_t>& seeds) {
  const std::uint64_t epoch = ++epoch_;
  comp_links_.clear();
  comp_flows_.clear();
  for (std::int32_t l : seeds) {
    if (links_[l].mark != epoch) {
      links_[l].mark = epoch;
      comp_links_.push_back(l);
    }
  }
  // comp_links_ doubles as the breadth-first queue.
  for (std::size_t next = 0; next < comp_links_.size(); ++next) {
    for (std::uint32_t slot : links_[comp_links_[next]].flows) {
      Flow& f = flows_[slot];
      if (f.mark == epoch) continue;
      f.mark = epoch;
      comp_flows_.push_back(slot);
      for (std::int32_t l : f.path) {
        if (links_[l].mark != epoch) {
          links_[l].mark = epoch;
          comp_links_.push_back(l);
        }
      }
    }
  }
}

void SimNetwork::advance_component() {
  const std::int64_t now = now_ns();
  for (std::uint32_t slot : comp_flows_) {
    Flow& f = flows_[slot];
    if (f.last_ns == now) continue;
    const double sent = std::min(f.rate * (static_cast<double>(now - f.last_ns) / 1e9), f.remaining);
    f.remaining -= sent;
    f.last_ns = now;
    for (std::int32_t l : f.path) links_[l].bytes_carried += sent;
  }
}

void SimNetwork::attach(std::uint32_t slot) {
  const std::int64_t now = now_ns();
  for (std::int32_t l : flows_[slot].path) {
    Link& link = links_[l];
    if (link.flows.empty()) link.busy_since_ns = now;
    link.flows.push_back(slot);
  }
}

void SimNetwork::detach(std::uint32_t slot) {
  const std::int64_t now = now_ns();
  for (std::int32_t l : flows_[slot].path) {
    Link& link = links_[l];
    auto it = std::find(link.flows.begin(), link.flows.end(), slot);
    ECO_CHECK(it != link.flows.end());
    link.flows.erase(it);  // keeps the order: allocation is a function of history only
    if (link.flows.empty()) link.busy_ns += now - link.busy_since_ns;
  }
}

void SimNetwork::reallocate() {
  // Progressive filling over the links of the component. fill_heap_ is a min-heap of
  // (fair share, link); shares only grow as flows freeze, so an entry whose share has
  // grown is pushed back with the new value. Ties go to the lower link index.
  const auto cmp = std::greater<std::pair<double, std::int32_t>>();
  fill_heap_.clear();
  const std::uint64_t counted = ++epoch_;
  std::size_t unfrozen = 0;
  for (std::int32_t l : comp_links_) {
    Link& link = links_[l];
    link.rem = link.spec.bytes_per_second;
    link.cnt = static_cast<std::int32_t>(link.flows.size());
    if (link.cnt > 0) fill_heap_.emplace_back(link.rem / link.cnt, l);
    for (std::uint32_t slot : link.flows) {
      if (flows_[slot].mark != counted) {
        flows_[slot].mark = counted;
        ++unfrozen;
      }
    }
  }
  std::make_heap(fill_heap_.begin(), fill_heap_.end(), cmp);
  const std::uint64_t epoch = ++epoch_;
  comp_flows_.clear();  // now: the flows given a rate, in freezing order
  double level = 0;
  while (unfrozen > 0 && !fill_heap_.empty()) {
    std::pop_heap(fill_heap_.begin(), fill_heap_.end(), cmp);
    const auto [share, l] = fill_heap_.back();
    fill_heap_.pop_back();
    Link& link = links_[l];
    if (link.cnt == 0) continue;
    const double current = std::max(link.rem / link.cnt, level);
    if (current > share) {
      fill_heap_.emplace_back(current, l);
      std::push_heap(fill_heap_.begin(), fill_heap_.end(), cmp);
      continue;
    }
    level = current;
    for (std::uint32_t slot : link.flows) {
      Flow& f = flows_[slot];
      if (f.mark == epoch) continue;
      f.mark = epoch;
      f.new_rate = current;
      comp_flows_.push_back(slot);
      --unfrozen;
      for (std::int32_t pl : f.path) {
        links_[pl].rem -= current;
        links_[pl].cnt -= 1;
      }
    }
  }
  const std::int64_t now = now_ns();
  for (std::uint32_t slot : comp_flows_) {
    Flow& f = flows_[slot];
    const bool scheduled = f.event != SimRuntime::kNoEvent;
    // Unchanged rate: the end stays where it was. Due now: it ends at this instant.
    if (scheduled && (f.new_rate == f.rate || f.done_ns <= now)) {
      f.rate = f.new_rate;
      continue;
    }
    f.rate = f.new_rate;
    schedule_tx_end(slot);
  }
}

void SimNetwork::schedule_tx_end(std::uint32_t slot) {
  Flow& f = flows_[slot];
  runtime_.cancel(f.event);
  f.done_ns = now_ns() + seconds_to_ns(f.remaining / f.rate);
  f.event = runtime_.schedule_at(TimePoint(Duration(f.done_ns)), [this, slot] { on_tx_end(slot); });
}

void SimNetwork::schedule_delivery(std::uint32_t slot) {
  Flow& f = flows_[slot];
  f.state = State::kPropagating;
  f.done_ns = now_ns() + f.latency_ns;
  f.event = runtime_.schedule_at(TimePoint(Duration(f.done_ns)), [this, slot] { on_delivered(slot); });
}

void SimNetwork::on_tx_end(std::uint32_t slot) {
  const std::int64_t now = now_ns();
  collect_component(flows_[slot].path);
  advance_component();
  // Every flow of the component due now ends now, in start order.
  finished_.clear();
  for (std::uint32_t s : comp_flows_) {
    if (flows_[s].done_ns <= now) finished_.push_back(s);
  }
  std::sort(finished_.begin(), finished_.end(),
            [this](std::uint32_t a, std::uint32_t b) { return flows_[a].seq < flows_[b].seq; });
  for (std::uint32_t s : finished_) {
    Flow& f = flows_[s];
    if (s != slot) runtime_.cancel(f.event);
    for (std::int32_t l : f.path) links_[l].bytes_carried += f.remaining;  // rounding residue
    f.remaining = 0;
    f.rate = 0;
    detach(s);
    --transmitting_;
    schedule_delivery(s);
  }
  reallocate();
}

void SimNetwork::on_delivered(std::uint32_t slot) {
  Flow& f = flows_[slot];
  bytes_delivered_ += f.bytes;
  ++flows_delivered_;
  std::function<void()> fn = free_flow(slot);
  if (fn) fn();
}

}  // namespace ecoserve::sim
