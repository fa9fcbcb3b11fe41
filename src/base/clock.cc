#include "base/clock.h"

namespace ecoserve {

TimePoint SteadyClock::now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(
      std::chrono::steady_clock::now().time_since_epoch()));
}

}  // namespace ecoserve
