#include "engine/kv_space_adapter.h"

#include <algorithm>

#include "base/check.h"
#include "engine/kv_offload.h"
#include "kvmeta/block_hash.h"

namespace kvforge::engine {

EngineKvSpace::EngineKvSpace(kvstore::PagedKvCache* cache, int64_t swap_blocks,
                             SeqTokenSource tokens)
    : cache_(cache), tokens_(std::move(tokens)), swap_capacity_(swap_blocks) {}

bool EngineKvSpace::prefix_caching() const {
  return cache_->prefix_cache() != nullptr && tokens_ != nullptr && reserve_tokens_ == 0;
}

std::span<const int32_t> EngineKvSpace::Query(const SeqTokens& t, int64_t num_tokens) const {
  if (t.tokens == nullptr || num_tokens <= 1) return {};
  const auto n = std::min<size_t>(static_cast<size_t>(num_tokens - 1), t.tokens->size());
  return std::span<const int32_t>(t.tokens->data(), n);
}

kvmeta::PrefixMatch EngineKvSpace::MatchFor(int64_t seq, int64_t num_tokens) const {
  if (!prefix_caching() || cache_->Contains(seq)) return {};
  const SeqTokens t = tokens_(seq);
  const auto q = Query(t, num_tokens);
  if (q.empty()) return {};
  return cache_->prefix_cache()->Match(q, t.salt);
}

int64_t EngineKvSpace::CachedPrefixTokens(int64_t seq, int64_t num_tokens) const {
  return MatchFor(seq, num_tokens).num_tokens;
}

std::vector<uint64_t> EngineKvSpace::BlockKeys(std::span<const int32_t> q,
                                               std::string_view salt) const {
  std::vector<uint64_t> keys;
  const size_t bt = static_cast<size_t>(cache_->block_tokens());
  uint64_t h = kvmeta::PrefixSeed(salt);
  for (size_t k = 0; (k + 1) * bt <= q.size(); ++k) {
    h = kvmeta::ChainBlockHash(h, q.subspan(k * bt, bt));
    keys.push_back(h);
  }
  return keys;
}

int64_t EngineKvSpace::InflightPrefixTokens(int64_t seq, int64_t num_tokens) const {
  if (!prefix_caching() || inflight_.empty()) return 0;
  const SeqTokens t = tokens_(seq);
  const auto q = Query(t, num_tokens);
  const int64_t cached_blocks = CachedPrefixTokens(seq, num_tokens) / cache_->block_tokens();
  const std::vector<uint64_t> keys = BlockKeys(q, t.salt);
  int64_t k = cached_blocks;
  while (k < static_cast<int64_t>(keys.size()) && inflight_.count(keys[static_cast<size_t>(k)]))
    ++k;
  return k * cache_->block_tokens();
}

bool EngineKvSpace::PrefixLoading(int64_t seq, int64_t num_tokens) {
  return AskTiers(seq, num_tokens, /*prefetch=*/false);
}

void EngineKvSpace::PrefetchPrefix(int64_t seq, int64_t num_tokens) {
  AskTiers(seq, num_tokens, /*prefetch=*/true);
}

bool EngineKvSpace::AskTiers(int64_t seq, int64_t num_tokens, bool prefetch) {
  if (offload_ == nullptr || !prefix_caching() || cache_->Contains(seq)) return false;
  const SeqTokens t = tokens_(seq);
  const auto q = Query(t, num_tokens);
  if (q.empty()) return false;
  const auto all = std::span<const int32_t>(*t.tokens).first(
      std::min<size_t>(static_cast<size_t>(num_tokens), t.tokens->size()));
  const int64_t hot = cache_->prefix_cache()->Match(q, t.salt).num_tokens;
  if (prefetch) {
    offload_->Prefetch(seq, all, q, t.salt, hot);
    return false;
  }
  return offload_->Loading(seq, all, q, t.salt, hot);
}

int64_t EngineKvSpace::AttachCachedPrefix(int64_t seq, int64_t num_tokens) {
  if (!prefix_caching() || cache_->Contains(seq)) return 0;
  const SeqTokens t = tokens_(seq);
  const auto q = Query(t, num_tokens);
  const kvmeta::PrefixMatch m =
      q.empty() ? kvmeta::PrefixMatch{} : cache_->prefix_cache()->Match(q, t.salt);
  int64_t got = cache_->AttachPrefix(seq, m, num_tokens);
  if (got < 0) return 0;
  if (offload_ != nullptr) got = LoadFromTiers(seq, t, q, got);
  computed_[seq] = got;
  // Index the blocks this sequence will compute, so requests sharing them can wait for them.
  std::vector<uint64_t> keys = BlockKeys(q, t.salt);
  const size_t done = static_cast<size_t>(got / cache_->block_tokens());
  keys.erase(keys.begin(), keys.begin() + static_cast<long>(std::min(done, keys.size())));
  for (uint64_t k : keys) ++inflight_[k];
  if (!keys.empty()) inflight_keys_[seq] = {static_cast<int64_t>(done), std::move(keys)};
  return got;
}

int64_t EngineKvSpace::LoadFromTiers(int64_t seq, const SeqTokens& t, std::span<const int32_t> q,
                                     int64_t hot) {
  const int64_t got = offload_->LoadPrefix(seq, q, t.salt, hot);
  if (got <= hot) return hot;
  // The loaded blocks join the hot cache like computed ones, so later requests share them.
  const auto* table = cache_->manager().Find(kvmeta::MakeSeqId(seq));
  cache_->prefix_cache()->Insert(kvmeta::MakeSeqId(seq), *t.tokens, got, table->blocks(), t.salt,
                                 false);
  cache_->RebuildKeySummaries(seq);
  return got;
}

void EngineKvSpace::DropInflight(int64_t seq, int64_t computed_blocks) {
  auto it = inflight_keys_.find(seq);
  if (it == inflight_keys_.end()) return;
  // Keys are stored from the first uncomputed block on; drop those now computed.
  std::vector<uint64_t>& keys = it->second.keys;
  const int64_t first = it->second.first_block;
  int64_t drop = computed_blocks < 0 ? static_cast<int64_t>(keys.size())
                                     : std::max<int64_t>(0, computed_blocks - first);
  drop = std::min<int64_t>(drop, static_cast<int64_t>(keys.size()));
  for (int64_t i = 0; i < drop; ++i) {
    auto f = inflight_.find(keys[static_cast<size_t>(i)]);
    if (f != inflight_.end() && --f->second <= 0) inflight_.erase(f);
  }
  keys.erase(keys.begin(), keys.begin() + drop);
  it->second.first_block += drop;
  if (keys.empty()) inflight_keys_.erase(it);
}

void EngineKvSpace::OnComputed(int64_t seq, int64_t num_computed, bool in_prefill) {
  if (!prefix_caching() || !cache_->Contains(seq)) return;
  if (cache_->IsCompacted(seq)) {
    // Its slots no longer hold the token prefix: nothing of it may be published.
    DropInflight(seq, -1);
    computed_.erase(seq);
    return;
  }
  computed_[seq] = num_computed;
  const SeqTokens t = tokens_(seq);
  if (t.tokens == nullptr) return;
  kvmeta::PrefixCache* pc = cache_->prefix_cache();
  // Hash mode registers every newly full block (cheap, incremental); radix inserts prompt
  // progress as it is computed and the rest when the sequence goes (FinalInsert).
  if (pc->mode() == kvmeta::PrefixCacheMode::kHash || in_prefill) {
    const auto* table = cache_->manager().Find(kvmeta::MakeSeqId(seq));
    pc->Insert(kvmeta::MakeSeqId(seq), *t.tokens, num_computed, table->blocks(), t.salt, false);
    if (offload_ != nullptr) offload_->StoreComputed(seq, *t.tokens, num_computed, t.salt, false);
  }
  if (!in_prefill || num_computed + 1 >= static_cast<int64_t>(t.tokens->size()))
    DropInflight(seq, -1);
  else
    DropInflight(seq, num_computed / cache_->block_tokens());
}

void EngineKvSpace::FinalInsert(int64_t seq) {
  DropInflight(seq, -1);
  auto it = computed_.find(seq);
  if (it == computed_.end()) return;
  const int64_t n = it->second;
  computed_.erase(it);
  if (!prefix_caching() || !cache_->Contains(seq) || cache_->IsCompacted(seq) || n <= 0) return;
  const SeqTokens t = tokens_(seq);
  if (t.tokens == nullptr) return;
  const auto* table = cache_->manager().Find(kvmeta::MakeSeqId(seq));
  cache_->prefix_cache()->Insert(kvmeta::MakeSeqId(seq), *t.tokens, n, table->blocks(), t.salt,
                                 true);
  if (offload_ != nullptr) offload_->StoreComputed(seq, *t.tokens, n, t.salt, true);
}

int64_t EngineKvSpace::BlocksToGrow(int64_t seq, int64_t total_tokens) const {
  if (!cache_->Contains(seq) && prefix_caching()) {
    // A hit shares its full blocks; those the cache counted as free still cost one each.
    const kvmeta::PrefixMatch m = MatchFor(seq, total_tokens);
    return cache_->BlocksForTokens(total_tokens) - static_cast<int64_t>(m.full_blocks.size()) +
           cache_->prefix_cache()->NumCountedAsFree(m.full_blocks);
  }
  if (!cache_->Contains(seq))
    return cache_->BlocksForTokens(std::max(total_tokens, reserve_tokens_));
  // Tokens a policy evicted hold no slot: the scheduler counts tokens, the cache slots.
  return cache_->BlocksToGrow(seq, total_tokens - cache_->Evicted(seq));
}

bool EngineKvSpace::Grow(int64_t seq, int64_t total_tokens) {
  if (!cache_->Contains(seq))
    return cache_->AddSequence(seq, std::max(total_tokens, reserve_tokens_));
  return cache_->EnsureTokens(seq, total_tokens - cache_->Evicted(seq));
}

void EngineKvSpace::Truncate(int64_t seq, int64_t total_tokens) {
  // Positions to slots (a policy's evicted tokens hold none); the engine may have cut the
  // sequence already (before compacting it), then this changes nothing.
  const int64_t slots = total_tokens - cache_->Evicted(seq);
  if (!cache_->Contains(seq) || slots >= cache_->NumTokens(seq)) return;
  const Status st = cache_->Truncate(seq, slots);
  KVF_CHECK_MSG(st.ok(), st.message().c_str());
}

void EngineKvSpace::Free(int64_t seq) {
  FinalInsert(seq);
  if (offload_ != nullptr) offload_->Forget(seq);
  cache_->Free(seq);
  if (auto it = swapped_.find(seq); it != swapped_.end()) {
    swap_used_ -= it->second.num_blocks;
    swapped_.erase(it);
  }
}

bool EngineKvSpace::Fork(int64_t parent, int64_t child) { return cache_->Fork(parent, child).ok(); }

bool EngineKvSpace::CanSwapOut(int64_t seq) const {
  // A KIVI window lives outside the blocks and would be lost: such sequences are recomputed.
  if (cache_->has_sequence_state()) return false;
  const auto* blocks = cache_->Blocks(seq);
  return blocks != nullptr && swap_used_ + static_cast<int64_t>(blocks->size()) <= swap_capacity_;
}

bool EngineKvSpace::SwapOut(int64_t seq) {
  if (!CanSwapOut(seq)) return false;
  const auto* blocks = cache_->Blocks(seq);
  const uint64_t bb = cache_->store().block_bytes_all_layers();
  Swapped s;
  s.compaction = cache_->ExportCompaction(seq);
  s.num_tokens = cache_->NumTokens(seq);
  s.num_blocks = static_cast<int64_t>(blocks->size());
  s.bytes.resize(static_cast<size_t>(bb) * blocks->size());
  for (size_t i = 0; i < blocks->size(); ++i)
    cache_->store().ReadBlock((*blocks)[i], s.bytes.data() + i * bb);
  swap_used_ += s.num_blocks;
  FinalInsert(seq);
  cache_->Free(seq);
  swapped_[seq] = std::move(s);
  return true;
}

bool EngineKvSpace::CanSwapIn(int64_t seq) const {
  auto it = swapped_.find(seq);
  return it != swapped_.end() &&
         cache_->BlocksForTokens(it->second.num_tokens) <= cache_->num_free_blocks();
}

bool EngineKvSpace::SwapIn(int64_t seq) {
  auto it = swapped_.find(seq);
  if (it == swapped_.end() || !cache_->AddSequence(seq, it->second.num_tokens)) return false;
  const auto* blocks = cache_->Blocks(seq);
  const uint64_t bb = cache_->store().block_bytes_all_layers();
  for (size_t i = 0; i < blocks->size(); ++i)
    cache_->mutable_store().WriteBlock((*blocks)[i], it->second.bytes.data() + i * bb);
  swap_used_ -= it->second.num_blocks;
  if (it->second.compaction) cache_->ImportCompaction(seq, std::move(*it->second.compaction));
  cache_->RebuildKeySummaries(seq);          // new blocks: their sparse-decode summaries (if kept)
  if (prefix_caching()) computed_[seq] = 0;  // fresh blocks: registered again as computed
  swapped_.erase(it);
  return true;
}

}  // namespace kvforge::engine
