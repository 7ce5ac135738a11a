// kvstore/tier_chain.h — the KV offload tiers below the hot pool, fastest first (RAM, disk,
// Redis), as one store.
//
// Writes are write-through and asynchronous: Store queues a record and a writer thread puts it
// into every tier that lacks it, so compression already done by the caller and the tiers' I/O
// never run on the engine thread. The queue is bounded in bytes; a record that does not fit is
// dropped (counted), which costs a later recompute, never a wrong answer. Fetch looks in the queue
// first (a record not encoded yet is encoded there and then, once, whichever thread gets to it
// first, so a Contains followed by a Fetch always finds it) and then in each tier in turn, and
// queues a copy of what it finds
// into the faster tiers (promotion). A record that fails verification above is reported with
// Reject, which drops it from the tier it came from. Thread-safety: every method may be called
// from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvstore/kv_tier.h"

namespace kvforge::kvstore {

class TierChain {
 public:
  // remote_belief_age: how long what the remote tiers were last seen to hold is trusted without
  // asking them (KnownToHold).
  TierChain(std::vector<std::unique_ptr<KvTier>> tiers, uint64_t max_pending_bytes,
            std::chrono::milliseconds remote_belief_age = std::chrono::seconds(60));
  ~TierChain();  // writes what is queued, then stops the writer
  TierChain(const TierChain&) = delete;
  TierChain& operator=(const TierChain&) = delete;

  size_t num_tiers() const { return tiers_.size(); }
  const KvTier& tier(size_t i) const { return *tiers_[i]; }

  // Queues `record` for every tier that lacks `key`. False when it was dropped (queue full).
  bool Store(const TierKey& key, std::vector<uint8_t> record);
  // The same, with the record made on the writer thread by `encode` (compression off the engine
  // thread); `bytes` (what encode holds, e.g. its raw input) counts against the queue bound. A
  // nullopt from encode stores nothing.
  using Encoder = std::function<std::optional<std::vector<uint8_t>>()>;
  bool StoreLazy(const TierKey& key, uint64_t bytes, Encoder encode);
  // Whether some tier (or the queue) holds `key`. No I/O for the local tiers; one round trip
  // for a remote one.
  bool Contains(const TierKey& key) const;
  // The same without any I/O: the queue, the local tiers, and what this chain last learned of the
  // remote tiers (a record it wrote there, found there or was told is there, less than
  // remote_belief_age ago). For the engine thread deciding whether to queue a chunk: a chunk a
  // remote tier holds is not copied and queued again on every hot-cache hit. The belief may be
  // stale (the remote's own LRU or TTL, a restart): that costs a later recompute, never wrong KV,
  // and the writer still asks the remote tiers before it writes to them.
  bool KnownToHold(const TierKey& key) const;
  // The index of the first of `keys` that the queue or some tier holds (keys.size(): none), with
  // one question per tier.
  size_t ContainsAny(std::span<const TierKey> keys) const;

  struct Found {
    std::vector<uint8_t> record;
    size_t tier = 0;  // index of the tier it came from; num_tiers(): the write queue
  };
  std::optional<Found> Fetch(const TierKey& key);
  void Reject(const TierKey& key, size_t tier);
  // Counts a chunk looked for and found nowhere: a miss in every tier.
  void CountMiss();

  // Blocks until the queue is empty and the writer idle (tests, benchmarks, shutdown).
  void Flush();
  // Blocks until a record of `bytes` fits in the queue (or the queue is empty): for a caller
  // that must not drop what it queues, such as the write-back of everything at shutdown.
  void WaitForRoom(uint64_t bytes);
  std::vector<KvTierStats> stats() const;
  int64_t dropped_writes() const;

 private:
  // A queued record, made at most once by whichever of the writer and a Fetch needs it first.
  class Slot {
   public:
    explicit Slot(std::vector<uint8_t> record)
        : record_(std::make_shared<const std::vector<uint8_t>>(std::move(record))) {}
    explicit Slot(Encoder encode) : encode_(std::move(encode)) {}
    // The record (null when the encoder failed); runs the encoder on first call.
    std::shared_ptr<const std::vector<uint8_t>> Get();

   private:
    std::once_flag once_;
    Encoder encode_;
    std::shared_ptr<const std::vector<uint8_t>> record_;
  };
  struct Pending {
    TierKey key;
    std::shared_ptr<Slot> slot;
    uint64_t bytes = 0;  // counted in pending_bytes_
    size_t below = 0;    // write into tiers [0, below) — all of them for a Store
  };
  bool Enqueue(Pending p);
  // The index of the first of `keys` in the write queue (keys.size(): none).
  size_t Queued(std::span<const TierKey> keys) const;
  void WriterLoop();

  // What the remote tiers were last seen to hold. Bounded (oldest belief dropped first) and aged.
  void NoteRemote(const TierKey& key);
  void ForgetRemote(const TierKey& key);
  bool BelievedRemote(const TierKey& key) const;

  std::vector<std::unique_ptr<KvTier>> tiers_;
  const uint64_t max_pending_bytes_;
  const std::chrono::milliseconds remote_belief_age_;
  mutable std::mutex remote_mu_;  // guards the two below (never held with mu_)
  std::unordered_map<TierKey, std::chrono::steady_clock::time_point, TierKeyHash> remote_seen_;
  std::deque<TierKey> remote_order_;  // insertion order of remote_seen_, for the bound
  mutable std::mutex mu_;
  std::condition_variable wake_;  // writer: work arrived or stopping
  std::condition_variable idle_;  // a record written: Flush (queue drained), WaitForRoom
  std::deque<Pending> queue_;
  // Records queued or being written, by key.
  std::unordered_map<TierKey, std::shared_ptr<Slot>, TierKeyHash> pending_;
  uint64_t pending_bytes_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  int64_t dropped_ = 0;
  std::thread writer_;
};

}  // namespace kvforge::kvstore
