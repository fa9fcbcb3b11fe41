#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <vector>

namespace ecoserve {
namespace {

TEST(ThreadPoolTest, RunCallsEveryThreadOnce) {
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    std::vector<std::atomic<int>> hits(n);
    for (int rep = 0; rep < 100; ++rep) {
      pool.run([&](int t, int nt) {
        EXPECT_EQ(nt, n);
        hits[t].fetch_add(1);
      });
    }
    for (int t = 0; t < n; ++t) EXPECT_EQ(hits[t].load(), 100) << "thread " << t;
  }
}

TEST(ThreadPoolTest, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (std::int64_t n : {0, 1, 2, 5, 1000}) {
    std::vector<int> seen(n, 0);
    pool.parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) seen[i]++;
    });
    for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, GrainLimitsParts) {
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  pool.parallel_for(10, 100, [&](std::int64_t b, std::int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    calls++;
  });
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace ecoserve
