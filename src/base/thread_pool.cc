#include "base/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace ecoserve {

namespace {
// How long an idle worker (or a caller waiting for workers) spins before sleeping on
// a futex. The forward pass issues a job every few microseconds, with serial gaps
// (sampling, streaming a token) of tens of microseconds between steps: spinning
// through those keeps dispatch at ~0.1 us instead of a futex wake-up each time.
constexpr auto kSpinBudget = std::chrono::microseconds(2000);
constexpr int kSpinCheckEvery = 256;  // pause instructions between clock reads

// Spins while pred() is true, up to kSpinBudget; returns pred()'s last value.
template <typename Pred>
bool spin_while(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBudget;
  while (true) {
    for (int i = 0; i < kSpinCheckEvery; ++i) {
      if (!pred()) return false;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
  }
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_main(int index) {
  std::uint64_t seen = 0;
  while (true) {
    std::uint64_t g = seen;
    spin_while([&] { return (g = generation_.load(std::memory_order_acquire)) == seen; });
    if (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, num_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::run(FunctionRef<void(int, int)> fn) {
  if (num_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, num_threads_);
  if (!spin_while([&] { return pending_.load(std::memory_order_acquire) != 0; })) return;
  int p;
  while ((p = pending_.load(std::memory_order_acquire)) != 0) pending_.wait(p, std::memory_order_acquire);
}

void ThreadPool::parallel_for(std::int64_t n, std::int64_t grain,
                              FunctionRef<void(std::int64_t, std::int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(1, grain);
  const std::int64_t max_parts = (n + grain - 1) / grain;
  const int parts = static_cast<int>(std::min<std::int64_t>(num_threads_, max_parts));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  run([&](int t, int) {
    if (t >= parts) return;
    const std::int64_t begin = n * t / parts;
    const std::int64_t end = n * (t + 1) / parts;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace ecoserve
