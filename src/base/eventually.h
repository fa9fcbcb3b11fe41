// Polling for tests that watch another thread or process reach a state.
// Usage: EXPECT_TRUE(eventually([&] { return backend->idle(); }));
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace ecoserve {

// Waits until `pred` holds, checking it every `every`, or until `seconds` pass;
// returns pred()'s last value. Real time: only for tests of real threads,
// processes and sockets (deterministic tests inject a clock instead).
inline bool eventually(const std::function<bool()>& pred, double seconds = 10.0,
                       std::chrono::milliseconds every = std::chrono::milliseconds(2)) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

}  // namespace ecoserve
