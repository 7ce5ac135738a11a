// kvstore/byte_buffer_pool.h — reuses large byte buffers of one size between the thread that fills
// them and the thread that is done with them. The offload's chunk copies are megabytes each: a
// fresh vector costs a memset and a page fault per 4 KiB on the engine thread, a reused one
// neither.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kvforge::kvstore {

class ByteBufferPool {
 public:
  // Keeps at most `max_buffers` returned buffers.
  explicit ByteBufferPool(size_t max_buffers) : max_buffers_(max_buffers) {}

  // A buffer of exactly `size` bytes: a returned one of that size (its old bytes still in it,
  // for the caller to overwrite), or a new zeroed one.
  std::vector<uint8_t> Take(size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].size() != size) continue;
        std::vector<uint8_t> out = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));  // keeps the age order
        ++reused_;
        return out;
      }
    }
    return std::vector<uint8_t>(size);
  }
  // Hands a buffer back; the oldest kept one goes when the pool is full.
  void Give(std::vector<uint8_t> buffer) {
    if (buffer.empty() || max_buffers_ == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() == max_buffers_) free_.erase(free_.begin());
    free_.push_back(std::move(buffer));
  }
  size_t kept() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }
  int64_t reused() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reused_;
  }

 private:
  const size_t max_buffers_;
  mutable std::mutex mu_;
  std::vector<std::vector<uint8_t>> free_;  // returned buffers, oldest first
  int64_t reused_ = 0;
};

}  // namespace kvforge::kvstore
