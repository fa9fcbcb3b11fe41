#include "sim/sim_runtime.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace ecoserve::sim {

// Reaches into SimRuntime to test the renumbering of sequence numbers, which otherwise
// happens once per ~4 billion events.
struct SimRuntimeTestPeer {
  static void set_next_seq(SimRuntime& rt, std::uint32_t seq) { rt.next_seq_ = seq; }
  static std::uint32_t next_seq(const SimRuntime& rt) { return rt.next_seq_; }
};

namespace {

TimePoint at_ns(std::int64_t ns) { return TimePoint(Duration(ns)); }
std::int64_t ns_of(const SimRuntime& rt) { return rt.now().time_since_epoch().count(); }

TEST(SimRuntimeTest, StartsAtTheGivenTimeAndIsEmpty) {
  SimRuntime rt(at_ns(42));
  EXPECT_EQ(ns_of(rt), 42);
  EXPECT_EQ(rt.pending(), 0u);
  EXPECT_FALSE(rt.run_one());
  EXPECT_FALSE(rt.next_event_time().has_value());
  EXPECT_EQ(ns_of(rt), 42);
  EXPECT_EQ(rt.events_run(), 0u);
}

TEST(SimRuntimeTest, RunsByTimeThenFifoAmongEqualTimes) {
  SimRuntime rt;
  std::vector<std::pair<std::string, std::int64_t>> log;
  auto rec = [&](std::string name) { return [&, name] { log.emplace_back(name, ns_of(rt)); }; };
  rt.schedule_at(at_ns(5), rec("a5"));
  rt.schedule_at(at_ns(3), rec("b3"));
  rt.schedule_at(at_ns(5), rec("c5"));
  rt.schedule_at(at_ns(3), rec("d3"));
  rt.schedule_after(Duration(4), rec("e4"));
  rt.schedule_at(at_ns(5), rec("f5"));
  EXPECT_EQ(rt.pending(), 6u);
  EXPECT_EQ(rt.next_event_time(), at_ns(3));
  rt.run();
  const std::vector<std::pair<std::string, std::int64_t>> want = {
      {"b3", 3}, {"d3", 3}, {"e4", 4}, {"a5", 5}, {"c5", 5}, {"f5", 5}};
  EXPECT_EQ(log, want);
  EXPECT_EQ(rt.events_run(), 6u);
  EXPECT_EQ(rt.pending(), 0u);
  EXPECT_EQ(ns_of(rt), 5);
}

TEST(SimRuntimeTest, PastTimesRunAtNowAfterEventsAlreadyDueNow) {
  SimRuntime rt;
  std::vector<std::string> log;
  rt.schedule_at(at_ns(10), [&] {
    log.push_back("first@10");
    // Due in the past: runs at 10, after "second@10" (already scheduled for 10).
    rt.schedule_at(at_ns(2), [&] { log.push_back("past@" + std::to_string(ns_of(rt))); });
    rt.schedule_after(Duration(-7), [&] { log.push_back("negative@" + std::to_string(ns_of(rt))); });
    rt.schedule_after(Duration(0), [&] { log.push_back("zero@" + std::to_string(ns_of(rt))); });
  });
  rt.schedule_at(at_ns(10), [&] { log.push_back("second@10"); });
  rt.schedule_at(at_ns(11), [&] { log.push_back("later@11"); });
  rt.run();
  const std::vector<std::string> want = {"first@10", "second@10", "past@10", "negative@10", "zero@10",
                                         "later@11"};
  EXPECT_EQ(log, want);
}

TEST(SimRuntimeTest, CancelRemovesOnlyPendingEvents) {
  SimRuntime rt;
  std::vector<int> ran;
  const auto a = rt.schedule_at(at_ns(1), [&] { ran.push_back(1); });
  const auto b = rt.schedule_at(at_ns(2), [&] { ran.push_back(2); });
  const auto c = rt.schedule_at(at_ns(3), [&] { ran.push_back(3); });
  EXPECT_NE(a, SimRuntime::kNoEvent);
  EXPECT_NE(a, b);
  EXPECT_TRUE(rt.cancel(b));
  EXPECT_FALSE(rt.cancel(b));  // twice
  EXPECT_FALSE(rt.cancel(SimRuntime::kNoEvent));
  EXPECT_FALSE(rt.cancel(0xdeadbeef12345ull));  // never issued
  EXPECT_EQ(rt.pending(), 2u);
  EXPECT_TRUE(rt.run_one());
  EXPECT_FALSE(rt.cancel(a));  // has run
  // b's slot is reused by d; b's id must not cancel d.
  const auto d = rt.schedule_at(at_ns(4), [&] { ran.push_back(4); });
  EXPECT_FALSE(rt.cancel(b));
  EXPECT_NE(b, d);
  rt.run();
  EXPECT_EQ(ran, (std::vector<int>{1, 3, 4}));
  EXPECT_FALSE(rt.cancel(c));
  EXPECT_EQ(ns_of(rt), 4);
}

TEST(SimRuntimeTest, EventsCancelAndScheduleOthersIncludingThemselves) {
  SimRuntime rt;
  std::vector<std::string> log;
  SimRuntime::EventId self = SimRuntime::kNoEvent;
  SimRuntime::EventId victim = SimRuntime::kNoEvent;
  self = rt.schedule_at(at_ns(5), [&] {
    log.push_back("self");
    EXPECT_FALSE(rt.cancel(self));   // running: no longer pending
    EXPECT_TRUE(rt.cancel(victim));  // due at the same time, later in FIFO order
    rt.schedule_at(at_ns(5), [&] { log.push_back("child@" + std::to_string(ns_of(rt))); });
  });
  victim = rt.schedule_at(at_ns(5), [&] { log.push_back("victim"); });
  rt.run();
  EXPECT_EQ(log, (std::vector<std::string>{"self", "child@5"}));
  EXPECT_EQ(rt.events_run(), 2u);
}

TEST(SimRuntimeTest, RunUntilRunsEventsAtOrBeforeTheTargetThenSetsNow) {
  SimRuntime rt;
  std::vector<std::int64_t> ran;
  for (std::int64_t t : {1000, 2000, 3000}) rt.schedule_at(at_ns(t), [&] { ran.push_back(ns_of(rt)); });
  // An event at 2000 scheduling one for 2000 and one for 2001.
  rt.schedule_at(at_ns(2000), [&] {
    rt.schedule_at(at_ns(2000), [&] { ran.push_back(-ns_of(rt)); });
    rt.schedule_at(at_ns(2001), [&] { ran.push_back(-ns_of(rt)); });
  });
  rt.run_until(at_ns(2000));
  EXPECT_EQ(ran, (std::vector<std::int64_t>{1000, 2000, -2000}));
  EXPECT_EQ(ns_of(rt), 2000);
  EXPECT_EQ(rt.pending(), 2u);
  rt.run_until(at_ns(2500));
  EXPECT_EQ(ran, (std::vector<std::int64_t>{1000, 2000, -2000, -2001}));
  EXPECT_EQ(ns_of(rt), 2500);  // no event at 2500: the clock still moves there
  rt.run_until(at_ns(100));    // in the past: nothing happens
  EXPECT_EQ(ns_of(rt), 2500);
  // schedule_after counts from the new now.
  rt.schedule_after(Duration(100), [&] { ran.push_back(ns_of(rt)); });
  rt.run();
  EXPECT_EQ(ran, (std::vector<std::int64_t>{1000, 2000, -2000, -2001, 2600, 3000}));
}

TEST(SimRuntimeTest, PeriodicTimerReschedulesItself) {
  SimRuntime rt;
  int ticks = 0;
  std::function<void()> tick = [&] {
    ++ticks;
    if (ticks < 5) rt.schedule_after(Duration(250), tick);
  };
  rt.schedule_after(Duration(250), tick);
  rt.run();
  EXPECT_EQ(ticks, 5);
  EXPECT_EQ(ns_of(rt), 1250);
}

TEST(SimRuntimeTest, CallbackIsDestroyedOnCancelAndAfterRunning) {
  SimRuntime rt;
  auto token = std::make_shared<int>(7);
  const auto a = rt.schedule_at(at_ns(1), [token] {});
  rt.schedule_at(at_ns(2), [token] {});
  EXPECT_EQ(token.use_count(), 3);
  EXPECT_TRUE(rt.cancel(a));
  EXPECT_EQ(token.use_count(), 2);
  rt.run();
  EXPECT_EQ(token.use_count(), 1);
}

// Seeded stress: random schedules (some from inside events, some in the past) and
// random cancels; the run order must equal sorting the survivors by (due time, order
// of scheduling). Also exercises heap compaction (most events cancelled).
TEST(SimRuntimeTest, RandomScheduleAndCancelMatchesSortedReference) {
  std::mt19937_64 rng(1234);
  SimRuntime rt;
  struct Ev {
    std::int64_t due;
    std::uint64_t order;
    SimRuntime::EventId id;
    bool cancelled = false;
  };
  std::vector<Ev> evs;
  std::vector<std::uint64_t> ran;
  std::uint64_t order = 0;
  auto add = [&](std::int64_t t) {
    const std::uint64_t k = order++;
    const std::int64_t due = std::max(t, ns_of(rt));
    const auto id = rt.schedule_at(at_ns(t), [&, k] { ran.push_back(k); });
    evs.push_back(Ev{due, k, id});
  };
  for (int i = 0; i < 20000; ++i) add(static_cast<std::int64_t>(rng() % 1000));
  for (int i = 0; i < 15000; ++i) {
    Ev& e = evs[rng() % evs.size()];
    EXPECT_EQ(rt.cancel(e.id), !e.cancelled);
    e.cancelled = true;
  }
  std::size_t live = 0;
  for (const Ev& e : evs) live += e.cancelled ? 0 : 1;
  EXPECT_EQ(rt.pending(), live);
  // Run half-way, then add more (some in the past) and cancel some of the new ones.
  rt.run_until(at_ns(500));
  for (int i = 0; i < 5000; ++i) add(static_cast<std::int64_t>(rng() % 1000));
  for (int i = 0; i < 2000; ++i) {
    Ev& e = evs[evs.size() - 1 - rng() % 5000];
    EXPECT_EQ(rt.cancel(e.id), !e.cancelled);
    e.cancelled = true;
  }
  rt.run();
  // Reference: events due <= 500 among the first 20000 ran first, by (due, order);
  // then everything else by (due clamped at 500, order).
  std::vector<std::tuple<int, std::int64_t, std::uint64_t>> ref;
  for (const Ev& e : evs) {
    if (e.cancelled) continue;
    const int phase = e.order < 20000 && e.due <= 500 ? 0 : 1;
    ref.emplace_back(phase, e.due, e.order);
  }
  std::sort(ref.begin(), ref.end());
  std::vector<std::uint64_t> want;
  for (const auto& r : ref) want.push_back(std::get<2>(r));
  EXPECT_EQ(ran, want);
  EXPECT_EQ(rt.events_run(), want.size());
  EXPECT_EQ(rt.pending(), 0u);
}

// A chain of 10,000 zero-delay events at one instant (the queue of events due now is
// trimmed as it goes), interleaved with cancels of queued events.
TEST(SimRuntimeTest, LongZeroDelayChainAtOneInstant) {
  SimRuntime rt(at_ns(100));
  int ran = 0, cancelled_ran = 0;
  std::function<void()> step = [&] {
    ++ran;
    if (ran < 10000) {
      const auto doomed = rt.schedule_after(Duration(0), [&] { ++cancelled_ran; });
      rt.schedule_after(Duration(0), step);
      EXPECT_TRUE(rt.cancel(doomed));
    }
  };
  rt.schedule_at(at_ns(100), step);
  rt.schedule_at(at_ns(101), [&] { EXPECT_EQ(ran, 10000); });
  rt.run();
  EXPECT_EQ(ran, 10000);
  EXPECT_EQ(cancelled_ran, 0);
  EXPECT_EQ(ns_of(rt), 101);
  EXPECT_EQ(rt.events_run(), 10001u);
}

// When sequence numbers run out, pending events are renumbered in their order: FIFO
// among equal times still holds across the renumbering.
TEST(SimRuntimeTest, SequenceRenumberingKeepsOrder) {
  SimRuntime rt;
  std::vector<int> ran;
  SimRuntimeTestPeer::set_next_seq(rt, 0xffffffffu - 3);
  rt.schedule_at(at_ns(7), [&] { ran.push_back(1); });  // seq max-3
  const auto cancelled = rt.schedule_at(at_ns(7), [&] { ran.push_back(99); });
  rt.schedule_at(at_ns(5), [&] { ran.push_back(2); });  // seq max-1
  EXPECT_TRUE(rt.cancel(cancelled));
  rt.schedule_at(at_ns(7), [&] { ran.push_back(3); });  // renumbered first
  EXPECT_EQ(SimRuntimeTestPeer::next_seq(rt), 4u);      // 2 pending renumbered 1, 2; this one 3
  rt.schedule_at(at_ns(5), [&] { ran.push_back(4); });
  rt.schedule_at(at_ns(7), [&] { ran.push_back(5); });
  rt.run();
  EXPECT_EQ(ran, (std::vector<int>{2, 4, 1, 3, 5}));
}

// Renumbering at an instant with events due now both in the heap (scheduled earlier)
// and queued (scheduled at this instant): the order stays A, B (heap), C, D (queued), E.
TEST(SimRuntimeTest, RenumberingWithEventsDueNowKeepsFifoOrder) {
  SimRuntime rt;
  std::vector<std::string> log;
  rt.schedule_at(at_ns(10), [&] {
    log.push_back("A");
    SimRuntimeTestPeer::set_next_seq(rt, 0xffffffffu - 2);
    rt.schedule_at(at_ns(10), [&] { log.push_back("C"); });
    rt.schedule_at(at_ns(3), [&] { log.push_back("D"); });  // past: due now
    rt.schedule_after(Duration(0), [&] { log.push_back("E"); });  // renumbers first
    EXPECT_EQ(SimRuntimeTestPeer::next_seq(rt), 6u);  // B, C, D, F renumbered 1..4; E is 5
  });
  rt.schedule_at(at_ns(10), [&] { log.push_back("B"); });
  rt.schedule_at(at_ns(11), [&] { log.push_back("F"); });
  rt.run();
  EXPECT_EQ(log, (std::vector<std::string>{"A", "B", "C", "D", "E", "F"}));
}

}  // namespace
}  // namespace ecoserve::sim
