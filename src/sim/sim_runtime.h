// SimRuntime: the simulator's clock and event loop (LevelDB's Env, for simulated time).
//
// Owns the simulated clock and every pending event (a callback and the time it is due).
// Time moves only when an event runs: run_one() pops the earliest event, sets now() to
// its time and calls it. Everything in a simulation that needs time or a timer (the
// instances' step loop, the network's flow completions, request arrivals) is given a
// SimRuntime& and schedules events on it; nothing reads a system clock.
//
// Order guarantee (deterministic): events run by due time, then by the order in which
// they were scheduled (FIFO among equal times). An event scheduled for a time before
// now() is due at now() and runs after the events already due at now(). Callbacks may
// schedule and cancel events, including at now().
//
// Threads: single-threaded. Unlike Clock's general note, a SimRuntime is not
// thread-safe: it, and now(), may be used only from the thread that drives the
// simulation (the one calling run*/schedule*), normally from inside the events.
//
// Cost: a 4-ary heap of 16-byte POD entries (time, then sequence and slot packed in
// one word, compared as one 128-bit key without branches), laid out so that each
// node's four children fill one 64-byte cache line. Callbacks live in a slot vector
// with a free list, so scheduling allocates nothing beyond what std::function itself
// needs (libstdc++ stores captures of up to 16 bytes inline, e.g. [this, index]).
// Cancellation is lazy: the slot is freed at once and its heap entry skipped when it
// surfaces; the heap is compacted when cancelled entries outnumber pending ones.
// Events scheduled for the current instant (zero delay, or a time in the past) skip
// the heap: they go to a FIFO queue, which keeps the order above because every heap
// entry due now was scheduled before now() reached its time. Sequence numbers are 32-bit and are renumbered (order kept) when they run out,
// about once per 4 billion events. Memory: 16 bytes of heap and ~48 bytes of slot
// per pending event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <optional>
#include <vector>

#include "base/clock.h"

namespace ecoserve::sim {

class SimRuntime final : public Clock {
 public:
  // Identifies a scheduled event for cancel(). Never kNoEvent; ids of events that
  // have run or been cancelled are not reused in practice (a slot's generation would
  // have to wrap 2^32 times).
  using EventId = std::uint64_t;
  static constexpr EventId kNoEvent = 0;

  explicit SimRuntime(TimePoint start = TimePoint{});
  SimRuntime(const SimRuntime&) = delete;
  SimRuntime& operator=(const SimRuntime&) = delete;

  // The simulated time: the due time of the event running or last run (or the start,
  // or the target of the last run_until()). Never decreases.
  TimePoint now() const override { return TimePoint(Duration(now_ns_)); }

  // Schedules fn to run at t (at now() if t is earlier). fn must not be empty.
  EventId schedule_at(TimePoint t, std::function<void()> fn);
  // schedule_at(now() + d); a negative d means now().
  EventId schedule_after(Duration d, std::function<void()> fn);
  // Removes a pending event; true if it was pending (false if it has run, is running,
  // was cancelled before, or the id is unknown). Destroys the callback at once.
  bool cancel(EventId id);

  // Runs the next event (advancing now() to its time); false when none is pending.
  bool run_one();
  // Runs events until none is pending.
  void run();
  // Runs every event due at or before t (including those they schedule for <= t),
  // then sets now() to t. If t < now() nothing runs and now() stays.
  void run_until(TimePoint t);

  // Due time of the next pending event, if any.
  std::optional<TimePoint> next_event_time();
  // Number of pending (scheduled, not yet run, not cancelled) events.
  std::size_t pending() const { return live_; }
  // Number of events run so far.
  std::uint64_t events_run() const { return events_run_; }

 private:
  friend struct SimRuntimeTestPeer;  // sim_runtime_test.cc: forces the renumbering

  // A heap entry: stale when slots_[slot].seq != seq. Ordered by (time, seq).
  struct Entry {
    std::uint64_t time_key;  // time in ns with the sign bit flipped: unsigned order = time order
    std::uint64_t seq_slot;  // seq << 32 | slot
  };
  struct Slot {
    std::function<void()> fn;
    std::uint32_t seq = 0;  // of the pending event held here; 0 = free
    std::uint32_t gen = 1;  // bumped whenever the slot is freed; part of EventId
    std::uint32_t next_free = 0;
  };
  template <typename T>
  struct CacheLineAllocator {
    using value_type = T;
    CacheLineAllocator() = default;
    template <typename U>
    CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT
    T* allocate(std::size_t n) {
      return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
    }
    void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(64)); }
    friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
  };
  static constexpr std::uint32_t kNil = 0xffffffffu;
  static constexpr std::uint32_t kMaxSeq = 0xffffffffu;
  // The root lives at index 3 and the children of node p at 4p-8 .. 4p-5, so every
  // group of siblings starts at a multiple of 4 entries (64 bytes). Indices 0..2 are
  // padding; entries past the last live one are sentinels (greater than any entry).
  static constexpr std::size_t kRoot = 3;

  static unsigned __int128 key(const Entry& e) {
    return (static_cast<unsigned __int128>(e.time_key) << 64) | e.seq_slot;
  }
  static std::uint32_t slot_of(const Entry& e) { return static_cast<std::uint32_t>(e.seq_slot); }
  bool stale(const Entry& e) const { return slots_[slot_of(e)].seq != (e.seq_slot >> 32); }
  std::int64_t top_time_ns() const;
  void free_slot(std::uint32_t slot);
  void heap_push(Entry e);
  void heap_pop();
  void sift_down(std::size_t p);
  // Pops stale entries off the top; true if a live entry is on top.
  bool settle_top();
  // Drops stale entries at the head of now_queue_; true if a live one is there.
  bool settle_now_queue();
  // Whether the next event comes from now_queue_ (false: the heap), given both settled.
  bool next_is_queued(bool heap_live, bool queue_live) const;
  // Drops stale entries and rebuilds the heap.
  void compact();
  // Renumbers pending events 1..n in their order, when sequence numbers run out.
  void renumber();

  std::int64_t now_ns_;
  std::uint32_t next_seq_ = 1;
  std::uint64_t events_run_ = 0;
  std::size_t live_ = 0;  // pending events
  std::size_t size_ = 0;  // heap entries, stale included
  std::vector<Entry, CacheLineAllocator<Entry>> heap_;
  // Events due at now_ns_ scheduled while now_ns_ was already that time, in order;
  // [now_head_, size) are unread. Empty whenever time advances.
  std::vector<Entry> now_queue_;
  std::size_t now_head_ = 0;
  std::vector<Slot> slots_;
  std::uint32_t free_head_ = kNil;
};

}  // namespace ecoserve::sim
