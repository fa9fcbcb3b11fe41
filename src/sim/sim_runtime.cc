#include "sim/sim_runtime.h"

#include <algorithm>
#include <utility>

#include "base/status.h"

namespace ecoserve::sim {
namespace {

constexpr std::uint64_t kSignBit = std::uint64_t{1} << 63;

std::uint64_t time_key(std::int64_t ns) { return static_cast<std::uint64_t>(ns) ^ kSignBit; }
std::int64_t time_of(std::uint64_t key) { return static_cast<std::int64_t>(key ^ kSignBit); }

// Greater than any live entry: a live entry's seq is < kMaxSeq.
constexpr std::uint64_t kSentinelWord = ~std::uint64_t{0};

}  // namespace

SimRuntime::SimRuntime(TimePoint start) : now_ns_(start.time_since_epoch().count()) {
  static_assert(sizeof(Entry) == 16);
  heap_.assign(kRoot + 1, Entry{kSentinelWord, kSentinelWord});  // padding + one group
}

SimRuntime::EventId SimRuntime::schedule_at(TimePoint t, std::function<void()> fn) {
  ECO_CHECK_MSG(static_cast<bool>(fn), "SimRuntime::schedule_at: empty callback");
  if (next_seq_ == kMaxSeq) renumber();
  const std::int64_t t_ns = std::max(t.time_since_epoch().count(), now_ns_);
  std::uint32_t slot;
  if (free_head_ != kNil) {
    slot = free_head_;
    free_head_ = slots_[slot].next_free;
  } else {
    ECO_CHECK_MSG(slots_.size() < kNil, "SimRuntime: too many pending events");
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.fn = std::move(fn);
  s.seq = next_seq_++;
  const Entry e{time_key(t_ns), (static_cast<std::uint64_t>(s.seq) << 32) | slot};
  if (t_ns == now_ns_) {
    now_queue_.push_back(e);
  } else {
    heap_push(e);
  }
  ++live_;
  return (static_cast<EventId>(s.gen) << 32) | slot;
}

SimRuntime::EventId SimRuntime::schedule_after(Duration d, std::function<void()> fn) {
  const std::int64_t d_ns = std::max<std::int64_t>(d.count(), 0);
  return schedule_at(TimePoint(Duration(now_ns_ + d_ns)), std::move(fn));
}

bool SimRuntime::cancel(EventId id) {
  const auto slot = static_cast<std::uint32_t>(id & 0xffffffffu);
  const auto gen = static_cast<std::uint32_t>(id >> 32);
  if (slot >= slots_.size()) return false;
  Slot& s = slots_[slot];
  if (s.seq == 0 || s.gen != gen) return false;
  // Destroy the callback only after the bookkeeping: its destructor may re-enter.
  std::function<void()> doomed = std::move(s.fn);
  s.fn = nullptr;
  free_slot(slot);
  --live_;
  if (size_ > 64 && size_ > 2 * live_) compact();
  return true;
}

void SimRuntime::free_slot(std::uint32_t slot) {
  Slot& s = slots_[slot];
  s.seq = 0;
  if (++s.gen == 0) s.gen = 1;
  s.next_free = free_head_;
  free_head_ = slot;
}

bool SimRuntime::next_is_queued(bool heap_live, bool queue_live) const {
  // Heap entries due now were scheduled before anything in the queue.
  return queue_live && !(heap_live && top_time_ns() == now_ns_);
}

bool SimRuntime::run_one() {
  const bool heap_live = settle_top();
  const bool queue_live = settle_now_queue();
  Entry e;
  if (next_is_queued(heap_live, queue_live)) {
    e = now_queue_[now_head_++];
  } else if (heap_live) {
    e = heap_[kRoot];
    heap_pop();
    now_ns_ = time_of(e.time_key);
  } else {
    return false;
  }
  const std::uint32_t slot = slot_of(e);
  std::function<void()> fn = std::move(slots_[slot].fn);
  slots_[slot].fn = nullptr;
  free_slot(slot);  // before the call: the event can no longer be cancelled
  --live_;
  ++events_run_;
  fn();
  return true;
}

void SimRuntime::run() {
  while (run_one()) {
  }
}

void SimRuntime::run_until(TimePoint t) {
  const std::int64_t target = t.time_since_epoch().count();
  if (target < now_ns_) return;
  for (;;) {
    const std::optional<TimePoint> next = next_event_time();
    if (!next || next->time_since_epoch().count() > target) break;
    run_one();
  }
  now_ns_ = target;
}

std::optional<TimePoint> SimRuntime::next_event_time() {
  const bool heap_live = settle_top();
  const bool queue_live = settle_now_queue();
  if (queue_live) return TimePoint(Duration(now_ns_));
  if (heap_live) return TimePoint(Duration(top_time_ns()));
  return std::nullopt;
}

std::int64_t SimRuntime::top_time_ns() const { return time_of(heap_[kRoot].time_key); }

bool SimRuntime::settle_now_queue() {
  while (now_head_ < now_queue_.size() && stale(now_queue_[now_head_])) ++now_head_;
  if (now_head_ < now_queue_.size()) {
    if (now_head_ >= 4096 && 2 * now_head_ >= now_queue_.size()) {  // a long chain at one instant
      now_queue_.erase(now_queue_.begin(), now_queue_.begin() + static_cast<std::ptrdiff_t>(now_head_));
      now_head_ = 0;
    }
    return true;
  }
  now_queue_.clear();
  now_head_ = 0;
  return false;
}

bool SimRuntime::settle_top() {
  while (size_ > 0 && stale(heap_[kRoot])) heap_pop();
  return size_ > 0;
}

// ---- the heap ------------------------------------------------------------------

void SimRuntime::heap_push(Entry e) {
  std::size_t i = kRoot + size_;
  if (i == heap_.size()) heap_.resize(heap_.size() + 4, Entry{kSentinelWord, kSentinelWord});
  ++size_;
  const unsigned __int128 k = key(e);
  while (i > kRoot) {
    const std::size_t parent = (i + 8) / 4;
    if (!(k < key(heap_[parent]))) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

void SimRuntime::heap_pop() {
  const std::size_t last = kRoot + size_ - 1;
  const Entry e = heap_[last];
  heap_[last] = Entry{kSentinelWord, kSentinelWord};
  --size_;
  if (size_ == 0) return;
  heap_[kRoot] = e;
  sift_down(kRoot);
}

void SimRuntime::sift_down(std::size_t p) {
  const std::size_t end = kRoot + size_;
  const Entry e = heap_[p];
  const unsigned __int128 ke = key(e);
  for (;;) {
    const std::size_t c = 4 * p - 8;
    if (c >= end) break;
    // The grandchildren are the next 16 entries from 4c-8: four cache lines. Fetching
    // them now overlaps their misses with this level's (large heaps are memory bound).
    if (4 * c - 8 < end) {
      const char* g = reinterpret_cast<const char*>(&heap_[4 * c - 8]);
      __builtin_prefetch(g);
      __builtin_prefetch(g + 64);
      __builtin_prefetch(g + 128);
      __builtin_prefetch(g + 192);
    }
    // A full group of four (sentinels pad the last one): a branch-free tournament.
    const unsigned __int128 k0 = key(heap_[c]), k1 = key(heap_[c + 1]);
    const unsigned __int128 k2 = key(heap_[c + 2]), k3 = key(heap_[c + 3]);
    const bool b01 = k1 < k0, b23 = k3 < k2;
    const unsigned __int128 m01 = b01 ? k1 : k0, m23 = b23 ? k3 : k2;
    const std::size_t i01 = c + b01, i23 = c + 2 + b23;
    const bool b = m23 < m01;
    const std::size_t best = b ? i23 : i01;
    const unsigned __int128 kb = b ? m23 : m01;
    if (!(kb < ke)) break;
    heap_[p] = heap_[best];
    p = best;
  }
  heap_[p] = e;
}

void SimRuntime::compact() {
  std::size_t n = 0;
  for (std::size_t i = kRoot; i < kRoot + size_; ++i) {
    if (!stale(heap_[i])) heap_[kRoot + n++] = heap_[i];
  }
  for (std::size_t i = kRoot + n; i < kRoot + size_; ++i) heap_[i] = Entry{kSentinelWord, kSentinelWord};
  size_ = n;
  if (size_ < 2) return;
  // Floyd's heapify: sift down every internal node, the last one first.
  for (std::size_t p = (kRoot + size_ - 1 + 8) / 4; p >= kRoot; --p) sift_down(p);
}

void SimRuntime::renumber() {
  // Queued events move to the heap: they follow every heap entry due now, and keep
  // doing so once renumbered.
  for (std::size_t i = now_head_; i < now_queue_.size(); ++i) {
    if (!stale(now_queue_[i])) heap_push(now_queue_[i]);
  }
  now_queue_.clear();
  now_head_ = 0;
  compact();
  std::sort(heap_.begin() + kRoot, heap_.begin() + static_cast<std::ptrdiff_t>(kRoot + size_),
            [](const Entry& a, const Entry& b) { return key(a) < key(b); });
  // A sorted array is a heap (parents sit before their children).
  for (std::size_t i = 0; i < size_; ++i) {
    Entry& e = heap_[kRoot + i];
    const auto seq = static_cast<std::uint32_t>(i + 1);
    slots_[slot_of(e)].seq = seq;
    e.seq_slot = (static_cast<std::uint64_t>(seq) << 32) | slot_of(e);
  }
  next_seq_ = static_cast<std::uint32_t>(size_ + 1);
}

}  // namespace ecoserve::sim
