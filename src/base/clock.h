// Time in ecoserve. Policies never read the system clock: a Clock is injected.
// SteadyClock is the live clock; ManualClock is for tests and the simulator.
// Clocks are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ecoserve {

using Duration = std::chrono::nanoseconds;
// Epoch of every ecoserve clock. TimePoint is nanoseconds since the clock's epoch.
struct EcoEpoch {
  using duration = Duration;
  using rep = duration::rep;
  using period = duration::period;
  static constexpr bool is_steady = true;
};
using TimePoint = std::chrono::time_point<EcoEpoch, Duration>;

inline double to_seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
inline double to_ms(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
inline Duration from_seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}
inline Duration from_ms(double ms) { return from_seconds(ms / 1000.0); }
inline double seconds_since_epoch(TimePoint t) { return to_seconds(t.time_since_epoch()); }

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

// std::chrono::steady_clock; epoch is arbitrary but fixed for the process.
class SteadyClock final : public Clock {
 public:
  TimePoint now() const override;
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{}) : ns_(start.time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint(Duration(ns_.load(std::memory_order_acquire))); }
  void advance(Duration d) { ns_.fetch_add(d.count(), std::memory_order_acq_rel); }
  void set(TimePoint t) { ns_.store(t.time_since_epoch().count(), std::memory_order_release); }

 private:
  std::atomic<std::int64_t> ns_;
};

}  // namespace ecoserve
