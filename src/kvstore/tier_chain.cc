#include "kvstore/tier_chain.h"

#include <algorithm>

#include "base/log.h"

namespace kvforge::kvstore {

namespace {
// Beliefs about remote records kept at most: 16-byte keys, about 3 MiB with the map's overhead.
constexpr size_t kMaxRemoteBeliefs = 1 << 16;
}  // namespace

TierChain::TierChain(std::vector<std::unique_ptr<KvTier>> tiers, uint64_t max_pending_bytes,
                     std::chrono::milliseconds remote_belief_age)
    : tiers_(std::move(tiers)),
      max_pending_bytes_(max_pending_bytes),
      remote_belief_age_(remote_belief_age) {
  writer_ = std::thread([this] { WriterLoop(); });
}

TierChain::~TierChain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

std::shared_ptr<const std::vector<uint8_t>> TierChain::Slot::Get() {
  std::call_once(once_, [this] {
    if (record_ || !encode_) return;
    std::optional<std::vector<uint8_t>> made = encode_();
    if (made) record_ = std::make_shared<const std::vector<uint8_t>>(std::move(*made));
    encode_ = nullptr;  // frees what it captured (the raw blocks)
  });
  return record_;
}

bool TierChain::Enqueue(Pending p) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.count(p.key) != 0) return true;  // already on its way
  if (pending_bytes_ + p.bytes > max_pending_bytes_) {
    ++dropped_;
    return false;
  }
  pending_bytes_ += p.bytes;
  pending_[p.key] = p.slot;
  queue_.push_back(std::move(p));
  wake_.notify_one();
  return true;
}

bool TierChain::Store(const TierKey& key, std::vector<uint8_t> record) {
  if (tiers_.empty()) return false;
  const uint64_t bytes = record.size();
  return Enqueue({key, std::make_shared<Slot>(std::move(record)), bytes, tiers_.size()});
}

bool TierChain::StoreLazy(const TierKey& key, uint64_t bytes, Encoder encode) {
  if (tiers_.empty()) return false;
  return Enqueue({key, std::make_shared<Slot>(std::move(encode)), bytes, tiers_.size()});
}

bool TierChain::Contains(const TierKey& key) const {
  return ContainsAny(std::span<const TierKey>(&key, 1)) == 0;
}

bool TierChain::KnownToHold(const TierKey& key) const {
  if (Queued(std::span<const TierKey>(&key, 1)) == 0) return true;
  for (const auto& t : tiers_)
    if (!t->remote() && t->Contains(key)) return true;
  return BelievedRemote(key);
}

void TierChain::NoteRemote(const TierKey& key) {
  std::lock_guard<std::mutex> lock(remote_mu_);
  const bool added = remote_seen_.insert_or_assign(key, std::chrono::steady_clock::now()).second;
  if (!added) return;
  remote_order_.push_back(key);
  while (remote_order_.size() > kMaxRemoteBeliefs) {
    // A key forgotten and noted again is in the order twice; dropping it early only costs a
    // round trip later.
    remote_seen_.erase(remote_order_.front());
    remote_order_.pop_front();
  }
}

void TierChain::ForgetRemote(const TierKey& key) {
  std::lock_guard<std::mutex> lock(remote_mu_);
  remote_seen_.erase(key);
}

bool TierChain::BelievedRemote(const TierKey& key) const {
  std::lock_guard<std::mutex> lock(remote_mu_);
  auto it = remote_seen_.find(key);
  return it != remote_seen_.end() &&
         std::chrono::steady_clock::now() - it->second < remote_belief_age_;
}

size_t TierChain::Queued(std::span<const TierKey> keys) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < keys.size(); ++i)
    if (pending_.count(keys[i]) != 0) return i;
  return keys.size();
}

size_t TierChain::ContainsAny(std::span<const TierKey> keys) const {
  size_t best = Queued(keys);
  for (const auto& t : tiers_) {
    if (best == 0) break;
    best = std::min(best, t->ContainsAny(keys.first(best)));
  }
  return best;
}

std::optional<TierChain::Found> TierChain::Fetch(const TierKey& key) {
  std::shared_ptr<Slot> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = pending_.find(key); it != pending_.end()) queued = it->second;
  }
  if (queued) {
    // Outside the lock: this may run the encoder (or wait for the writer running it).
    if (std::shared_ptr<const std::vector<uint8_t>> r = queued->Get())
      return Found{*r, tiers_.size()};
  }
  for (size_t i = 0; i < tiers_.size(); ++i) {
    // Each tier's Get counts its own miss; no Contains first (a round trip for a remote tier).
    std::optional<std::vector<uint8_t>> r = tiers_[i]->Get(key);
    if (tiers_[i]->remote()) {
      if (r) {
        NoteRemote(key);
      } else {
        ForgetRemote(key);
      }
    }
    if (!r) continue;
    if (i > 0) {  // promote into the faster tiers
      const uint64_t bytes = r->size();
      Enqueue({key, std::make_shared<Slot>(*r), bytes, i});
    }
    return Found{std::move(*r), i};
  }
  return std::nullopt;
}

void TierChain::Reject(const TierKey& key, size_t tier) {
  if (tier >= tiers_.size()) return;
  if (tiers_[tier]->remote()) ForgetRemote(key);
  tiers_[tier]->CountCorrupt();
  tiers_[tier]->Erase(key);
}

void TierChain::CountMiss() {
  for (const auto& t : tiers_) t->CountMiss();
}

void TierChain::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void TierChain::WaitForRoom(uint64_t bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] {
    return pending_bytes_ + bytes <= max_pending_bytes_ || (queue_.empty() && !busy_);
  });
}

std::vector<KvTierStats> TierChain::stats() const {
  std::vector<KvTierStats> out;
  for (const auto& t : tiers_) out.push_back(t->stats());
  return out;
}

int64_t TierChain::dropped_writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void TierChain::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and everything queued is written
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    const std::shared_ptr<const std::vector<uint8_t>> record = p.slot->Get();
    for (size_t i = 0; record && i < p.below; ++i) {
      KvTier& tier = *tiers_[i];
      if (tier.Contains(p.key)) {
        if (tier.remote()) NoteRemote(p.key);
        continue;
      }
      // A full or failing tier is counted in its stats; the other tiers still get the record.
      if (Status s = tier.Put(p.key, *record); !s.ok()) {
        KVF_LOG_DEBUG("kv offload: %s: %s", tier.name().c_str(), s.message().c_str());
      } else if (tier.remote()) {
        NoteRemote(p.key);
      }
    }
    lock.lock();
    pending_bytes_ -= p.bytes;
    pending_.erase(p.key);
    busy_ = false;
    idle_.notify_all();  // Flush waits for an empty queue, WaitForRoom for room
  }
  idle_.notify_all();
}

}  // namespace kvforge::kvstore
