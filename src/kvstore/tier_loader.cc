#include "kvstore/tier_loader.h"

namespace kvforge::kvstore {

TierLoader::TierLoader() {
  worker_ = std::thread([this] { WorkerLoop(); });
}

TierLoader::~TierLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  worker_.join();
}

void TierLoader::Submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void TierLoader::WaitForProgress(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t seen = jobs_done_;
  done_.wait_for(lock, timeout,
                 [&] { return jobs_done_ != seen || (queue_.empty() && !running_) || stop_; });
}

int64_t TierLoader::jobs_done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_done_;
}

bool TierLoader::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !running_;
}

void TierLoader::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    job();
    job = nullptr;  // frees what it captured before waiters wake
    lock.lock();
    running_ = false;
    ++jobs_done_;
    done_.notify_all();
  }
  running_ = false;
  done_.notify_all();
}

}  // namespace kvforge::kvstore
