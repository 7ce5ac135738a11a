// thread_pool.h — a fixed pool of worker threads for data-parallel kernels.
//
// ParallelFor(n, fn) splits [0, n) into one contiguous range per thread (the caller's thread
// takes part) and returns when every range is done. Workers spin briefly then sleep on an atomic
// wait, so back-to-back ops in a forward pass pay no syscall. One ParallelFor at a time: the pool
// is owned by the engine thread. The other threads kvforge starts (tier writer and loader, HTTP
// workers, the router's) wait on I/O, so the pool size is the process's compute thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace kvforge::kernels {

class ThreadPool {
 public:
  // n_threads <= 0 means "one per available core".
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return n_threads_; }

  // fn(begin, end, thread_index) for disjoint ranges covering [0, n).
  using RangeFn = std::function<void(int64_t, int64_t, int)>;
  void ParallelFor(int64_t n, const RangeFn& fn);
  // Like ParallelFor but each range boundary is a multiple of `grain` (except the end).
  void ParallelForGrain(int64_t n, int64_t grain, const RangeFn& fn);
  // Ranges of `chunk` units (the last one shorter) that the threads take in turn from a shared
  // counter until none is left, so a thread slowed by the machine (a shared or virtual core)
  // does less of the work instead of holding up the others. fn may run several times per thread
  // (with the same thread_index); for work whose pieces are independent, e.g. a matmul's rows.
  void ParallelForDynamic(int64_t n, int64_t chunk, const RangeFn& fn);

  static int DefaultThreads();

 private:
  void WorkerLoop(int index);
  void RunRange(int index);
  void RunChunks(int index);
  void Dispatch(const RangeFn& fn, int64_t n, int64_t grain, bool dynamic);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};             // workers blocked in generation_.wait
  std::atomic<bool> caller_waiting_{false};  // the caller blocked in pending_.wait
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  bool dynamic_ = false;                // RunChunks instead of RunRange
  std::atomic<int64_t> next_chunk_{0};  // the next unit RunChunks hands out
};

}  // namespace kvforge::kernels
