#include "router/locality_index.h"

#include <xxhash.h>

#include <algorithm>

namespace kvforge::router {

LocalityIndex::LocalityIndex(size_t block_chars, size_t max_keys)
    : block_chars_(std::max<size_t>(1, block_chars)), max_keys_(std::max<size_t>(1, max_keys)) {}

std::vector<uint64_t> LocalityIndex::Keys(std::string_view text) const {
  std::vector<uint64_t> out;
  out.reserve(text.size() / block_chars_);
  uint64_t chain = 0x6b7666726f757465ull;  // "kvfroute"
  for (size_t at = 0; at + block_chars_ <= text.size(); at += block_chars_) {
    chain = XXH3_64bits_withSeed(text.data() + at, block_chars_, chain);
    out.push_back(chain);
  }
  return out;
}

void LocalityIndex::Touch(Entry& e) { lru_.splice(lru_.begin(), lru_, e.lru); }

void LocalityIndex::Insert(std::string_view text, int worker) {
  for (uint64_t key : Keys(text)) {
    auto it = keys_.find(key);
    if (it == keys_.end()) {
      lru_.push_front(key);
      it = keys_.emplace(key, Entry{{}, lru_.begin()}).first;
    } else {
      Touch(it->second);
    }
    std::vector<int>& w = it->second.workers;
    if (std::find(w.begin(), w.end(), worker) == w.end()) w.push_back(worker);
  }
  while (keys_.size() > max_keys_) {
    keys_.erase(lru_.back());
    lru_.pop_back();
  }
}

std::vector<size_t> LocalityIndex::Match(std::string_view text, int num_workers) const {
  std::vector<size_t> seen(static_cast<size_t>(std::max(0, num_workers)), 0);
  std::vector<bool> still(seen.size(), true);  // worker matched every block so far
  size_t blocks = 0;
  for (uint64_t key : Keys(text)) {
    auto it = keys_.find(key);
    if (it == keys_.end()) break;
    ++blocks;
    for (size_t w = 0; w < seen.size(); ++w) {
      if (!still[w]) continue;
      const auto& ws = it->second.workers;
      if (std::find(ws.begin(), ws.end(), static_cast<int>(w)) != ws.end()) {
        seen[w] = blocks * block_chars_;
      } else {
        still[w] = false;
      }
    }
  }
  return seen;
}

void LocalityIndex::ForgetWorker(int worker) {
  for (auto it = keys_.begin(); it != keys_.end();) {
    std::vector<int>& w = it->second.workers;
    w.erase(std::remove(w.begin(), w.end(), worker), w.end());
    if (w.empty()) {
      lru_.erase(it->second.lru);
      it = keys_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace kvforge::router
