// router/locality_index.h — which worker has probably cached which prompt prefix, as the router
// saw it (SGLang's cache-aware router keeps a character radix tree per worker for this).
//
// Prompts are cut into blocks of `block_chars` characters; block i's key is a hash chained over
// blocks 0..i, so one key names one whole prefix. Each key remembers the workers it was routed to
// and when. A match walks the chain and returns, per worker, how many leading characters it has
// seen. The index is bounded (`max_keys`); the least recently used keys go first. It is an
// estimate by design: the worker's own cache may have evicted what the router remembers.
// Thread-safety: none (the router holds a lock).
#pragma once

#include <cstdint>
#include <list>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvforge::router {

class LocalityIndex {
 public:
  LocalityIndex(size_t block_chars, size_t max_keys);

  // Records that `text` was sent to `worker`.
  void Insert(std::string_view text, int worker);
  // For each worker in [0, num_workers): the leading characters of `text` it has seen
  // (a multiple of block_chars).
  std::vector<size_t> Match(std::string_view text, int num_workers) const;
  // Forgets a worker (it died or restarted with an empty cache).
  void ForgetWorker(int worker);
  size_t size() const { return keys_.size(); }
  size_t block_chars() const { return block_chars_; }

 private:
  struct Entry {
    std::vector<int> workers;           // distinct
    std::list<uint64_t>::iterator lru;  // position in lru_
  };
  // Chained keys of text's full blocks.
  std::vector<uint64_t> Keys(std::string_view text) const;
  void Touch(Entry& e);

  const size_t block_chars_;
  const size_t max_keys_;
  std::unordered_map<uint64_t, Entry> keys_;
  std::list<uint64_t> lru_;  // most recent first
};

}  // namespace kvforge::router
