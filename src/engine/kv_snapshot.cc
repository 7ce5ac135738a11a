// engine/kv_snapshot.cc — EngineCore::Snapshot: the KV cache as an inspector draws it (see
// include/kvforge/kv_snapshot.h). Reads the pool, the block tables, the prefix cache and the
// scheduler; changes nothing. O(blocks + requests' blocks + prefix entries).
#include <algorithm>
#include <unordered_set>
#include <utility>

#include "engine/engine_core.h"
#include "kvforge/kv_policy.h"
#include "kvmeta/block_manager.h"
#include "kvmeta/prefix_cache.h"
#include "kvquant/kv_dtype.h"
#include "kvstore/paged_kv_cache.h"
#include "sched/scheduler.h"

namespace kvforge {
namespace {

const char* StateName(sched::RequestState s) {
  switch (s) {
    case sched::RequestState::kWaiting:
      return "waiting";
    case sched::RequestState::kRunning:
      return "running";
    case sched::RequestState::kSwapped:
      return "swapped";
    case sched::RequestState::kFinished:
      break;
  }
  return "finished";
}

int QueueRank(sched::RequestState s) {
  return s == sched::RequestState::kRunning ? 0 : (s == sched::RequestState::kSwapped ? 1 : 2);
}

// Which blocks the prefix cache knows the content of: hash mode marks them in the pool (a hash
// set), radix mode holds references on them.
bool PrefixCached(const kvmeta::BlockPool& pool, const kvmeta::PrefixCache* pc, kvmeta::BlockId b) {
  if (pc == nullptr) return false;
  if (pc->mode() == kvmeta::PrefixCacheMode::kHash) return pool.Hash(b).has_value();
  return pc->HeldRefs(b) > 0;
}

// The pool's shape and dtypes, and one (free) entry per block.
void DescribePool(const kvstore::PagedKvCache& cache, KvSnapshot* snap) {
  const kvmeta::BlockPool& pool = cache.manager().pool();
  const kvstore::KvStore& store = cache.store();
  snap->block_tokens = pool.block_tokens();
  snap->num_blocks = pool.num_blocks();
  snap->bytes_per_block = store.block_bytes_all_layers();
  snap->k_dtype = std::string(kvquant::KvDtypeName(store.config().k_dtype));
  snap->v_dtype = std::string(kvquant::KvDtypeName(store.config().v_dtype));
  snap->num_streams = store.num_streams();
  snap->blocks.assign(static_cast<size_t>(snap->num_blocks), KvBlockInfo{});
}

// Counts the tables of one request's sequences into the blocks' seq_refs; returns how many
// distinct blocks they hold (swapped-out sequences hold none in the pool).
int64_t MarkTables(const kvmeta::BlockManager& mgr, const std::vector<int64_t>& seqs,
                   int64_t request_id, KvSnapshot* snap) {
  std::unordered_set<int32_t> mine;
  for (int64_t seq : seqs) {
    const kvmeta::BlockTable* t = mgr.Find(kvmeta::MakeSeqId(seq));
    if (t == nullptr) continue;
    for (kvmeta::BlockId b : t->blocks()) {
      KvBlockInfo& bi = snap->blocks[static_cast<size_t>(kvmeta::BlockIndex(b))];
      ++bi.seq_refs;
      if (bi.request_id == 0) bi.request_id = request_id;
      mine.insert(kvmeta::BlockIndex(b));
    }
  }
  return static_cast<int64_t>(mine.size());
}

// Each block's use from its table references and the prefix cache, and the LRU rank of the
// evictable (hash-mode cached) ones.
void MarkUses(const kvmeta::BlockPool& pool, const kvmeta::PrefixCache* pc, KvSnapshot* snap) {
  for (int32_t i = 0; i < pool.num_blocks(); ++i) {
    const kvmeta::BlockId b = kvmeta::MakeBlockId(i);
    KvBlockInfo& bi = snap->blocks[static_cast<size_t>(i)];
    bi.ref_count = pool.RefCount(b);
    bi.prefix_cached = pool.State(b) != kvmeta::BlockState::kFree && PrefixCached(pool, pc, b);
    bi.use = bi.seq_refs >= 2   ? KvBlockUse::kShared
             : bi.seq_refs == 1 ? KvBlockUse::kUsed
             : bi.prefix_cached ? KvBlockUse::kCached
                                : KvBlockUse::kFree;
  }
  int64_t next = 0;
  for (kvmeta::BlockId b : pool.EvictionOrder())
    snap->blocks[static_cast<size_t>(kvmeta::BlockIndex(b))].evict_rank = next++;
}

void AddPrefixEntries(const kvmeta::PrefixCache* pc, size_t max_entries, KvSnapshot* snap) {
  if (pc == nullptr) return;
  snap->prefix_mode = std::string(kvmeta::PrefixCacheModeName(pc->mode()));
  for (const kvmeta::PrefixCacheNode& n : pc->Describe(max_entries + 1)) {
    if (snap->prefix_entries.size() == max_entries) {
      snap->prefix_truncated = true;
      break;
    }
    snap->prefix_entries.push_back(
        {n.id, n.parent, n.tokens, n.blocks, n.hits, n.locked, n.last_use});
  }
}

}  // namespace

KvSnapshot EngineCore::Snapshot(size_t max_prefix_entries) const {
  KvSnapshot snap;
  snap.step = steps_;
  DescribePool(*cache_, &snap);
  // Requests, running first, then swapped, then waiting, by id within each.
  std::vector<std::pair<sched::RequestState, const Request*>> order;
  for (const auto& [id, r] : requests_) order.emplace_back(sched_->State(id), r.get());
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    const int ra = QueueRank(a.first), rb = QueueRank(b.first);
    return ra != rb ? ra < rb : a.second->id < b.second->id;
  });
  for (const auto& [state, r] : order) {
    KvRequestInfo info;
    info.id = r->id;
    info.state = StateName(state);
    info.prompt_tokens = static_cast<int64_t>(r->prompt.size());
    info.cached_tokens = std::max<int64_t>(0, sched_->NumCachedTokens(r->id));
    info.preemptions = r->metrics.num_preemptions;
    info.kv_evicted_tokens = r->metrics.kv_evicted_tokens;
    info.kv_policy = std::string(KvPolicyName(r->params.kv_policy.value_or(cfg_.kv_policy).kind));
    for (const auto& s : r->seqs) info.generated_tokens += s->n_generated;
    const std::vector<int64_t> seqs = sched_->Sequences(r->id);
    info.num_seqs = static_cast<int32_t>(seqs.size());
    for (int64_t seq : seqs) info.kv_tokens += sched_->NumKvSlots(seq);
    info.blocks = MarkTables(cache_->manager(), seqs, r->id, &snap);
    info.bytes = static_cast<uint64_t>(info.blocks) * snap.bytes_per_block;
    snap.requests.push_back(std::move(info));
  }
  MarkUses(cache_->manager().pool(), cache_->prefix_cache(), &snap);
  AddPrefixEntries(cache_->prefix_cache(), max_prefix_entries, &snap);
  return snap;
}

}  // namespace kvforge
