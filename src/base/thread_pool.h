// ThreadPool: a fork-join pool for the engine's kernels.
//
// Owns num_threads-1 worker threads; the calling thread is thread 0 and works too.
// run() calls fn(thread, num_threads) on every thread and returns when all have
// finished. Workers spin briefly between jobs (kernels issue many small jobs per
// forward pass) and then sleep on a futex, so an idle pool costs no CPU.
// One caller at a time: run() is not reentrant and must not be called from a job.
// Each engine owns its own pool, so one process can host several engines with
// separate threads (two instances with one thread each on a 2-core machine).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace ecoserve {

// A non-owning reference to a callable; cheaper than std::function on hot paths.
template <typename Sig>
class FunctionRef;
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  FunctionRef(F&& f)  // NOLINT: implicit by design
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(a...); }) {}
  R operator()(Args... a) const { return call_(obj_, a...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  // num_threads <= 0 means all hardware threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(thread_index, num_threads) once on each thread; returns when all are done.
  void run(FunctionRef<void(int, int)> fn);

  // Splits [0, n) into contiguous ranges of at least `grain` items, one per thread
  // at most, and calls fn(begin, end) for each non-empty range.
  void parallel_for(std::int64_t n, std::int64_t grain, FunctionRef<void(std::int64_t, std::int64_t)> fn);

 private:
  void worker_main(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  const FunctionRef<void(int, int)>* job_ = nullptr;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace ecoserve
