// kvstore/tier_loader.h — runs tier fetches on a worker thread, so the engine thread asks for a
// sequence's offloaded chunks, goes on stepping other sequences, and collects them once they are
// ready (docs/adr/0013-async-tier-loads.md). A slow or paused tier then costs that one sequence
// its wait, up to the caller's time-out, and never stalls a step.
// Thread-safety: every method may be called from any thread; jobs run one at a time, in order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace kvforge::kvstore {

class TierLoader {
 public:
  using Job = std::function<void()>;
  TierLoader();
  ~TierLoader();  // drops jobs not started, waits for the running one
  TierLoader(const TierLoader&) = delete;
  TierLoader& operator=(const TierLoader&) = delete;

  void Submit(Job job);
  // Blocks until a job finishes after this call starts, or `timeout` passes, or nothing is
  // queued or running (then at once). For an idle engine thread that has only loads to wait for.
  void WaitForProgress(std::chrono::microseconds timeout);
  int64_t jobs_done() const;
  bool idle() const;

 private:
  void WorkerLoop();

  mutable std::mutex mu_;
  std::condition_variable wake_;  // worker: a job arrived, or stopping
  std::condition_variable done_;  // waiters: a job finished
  std::deque<Job> queue_;
  bool running_ = false;
  bool stop_ = false;
  int64_t jobs_done_ = 0;
  std::thread worker_;
};

}  // namespace kvforge::kvstore
