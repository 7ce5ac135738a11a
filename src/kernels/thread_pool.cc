#include "kernels/thread_pool.h"

#include <sched.h>

#include <algorithm>

namespace kvforge::kernels {

int ThreadPool::DefaultThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : DefaultThreads()) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunRange(int index) {
  // Split [0, n) into n_threads_ chunks aligned to grain_.
  const int64_t units = (n_ + grain_ - 1) / grain_;
  const int64_t per = units / n_threads_;
  const int64_t extra = units % n_threads_;
  const int64_t ub = index * per + std::min<int64_t>(index, extra);
  const int64_t ue = ub + per + (index < extra ? 1 : 0);
  const int64_t b = std::min(n_, ub * grain_);
  const int64_t e = std::min(n_, ue * grain_);
  if (b < e) (*fn_)(b, e, index);
}

void ThreadPool::RunChunks(int index) {
  for (;;) {
    const int64_t b = next_chunk_.fetch_add(grain_, std::memory_order_relaxed);
    if (b >= n_) return;
    (*fn_)(b, std::min(n_, b + grain_), index);
  }
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load();
    // Spin briefly (back-to-back ops arrive within microseconds), then sleep so an oversubscribed
    // machine is not burned by idle workers.
    for (int spin = 0; g == seen && spin < 4000; ++spin) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      g = generation_.load();
    }
    if (g == seen) {
      sleepers_.fetch_add(1);
      while ((g = generation_.load()) == seen) generation_.wait(seen);
      sleepers_.fetch_sub(1);
    }
    seen = g;
    if (stop_.load()) return;
    if (dynamic_)
      RunChunks(index);
    else
      RunRange(index);
    if (pending_.fetch_sub(1) == 1 && caller_waiting_.load()) pending_.notify_all();
  }
}

void ThreadPool::ParallelFor(int64_t n, const RangeFn& fn) { ParallelForGrain(n, 1, fn); }

void ThreadPool::ParallelForGrain(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  Dispatch(fn, n, grain, /*dynamic=*/false);
}

void ThreadPool::ParallelForDynamic(int64_t n, int64_t chunk, const RangeFn& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n <= chunk) {
    fn(0, n, 0);
    return;
  }
  Dispatch(fn, n, chunk, /*dynamic=*/true);
}

void ThreadPool::Dispatch(const RangeFn& fn, int64_t n, int64_t grain, bool dynamic) {
  fn_ = &fn;
  n_ = n;
  grain_ = std::max<int64_t>(1, grain);
  dynamic_ = dynamic;
  next_chunk_.store(0, std::memory_order_relaxed);
  pending_.store(n_threads_ - 1);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) generation_.notify_all();
  if (dynamic)
    RunChunks(0);
  else
    RunRange(0);
  for (int spin = 0; spin < 4000 && pending_.load() != 0; ++spin) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  if (pending_.load() != 0) {
    caller_waiting_.store(true);
    int p;
    while ((p = pending_.load()) != 0) pending_.wait(p);
    caller_waiting_.store(false);
  }
  fn_ = nullptr;
}

}  // namespace kvforge::kernels
