#include "kvstore/paged_kv_cache.h"

#include "base/check.h"

namespace kvforge::kvstore {

using kvmeta::MakeSeqId;

Result<std::unique_ptr<PagedKvCache>> PagedKvCache::Create(const PagedKvCacheConfig& cfg) {
  KVF_ASSIGN_OR_RETURN(auto store, KvStore::Create(cfg.store));
  kvmeta::BlockManagerConfig mc;
  mc.num_blocks = static_cast<int32_t>(cfg.store.num_blocks);
  mc.block_tokens = cfg.store.block_tokens;
  mc.watermark = 0;
  KVF_ASSIGN_OR_RETURN(kvmeta::BlockManager mgr, kvmeta::BlockManager::Create(mc));
  std::unique_ptr<PagedKvCache> cache(new PagedKvCache(std::move(mgr), std::move(store)));
  if (cfg.prefix_caching) {
    cache->prefix_ = kvmeta::MakePrefixCache(cfg.prefix_mode, &cache->mgr_.mutable_pool());
    kvmeta::PrefixCache* pc = cache->prefix_.get();
    cache->mgr_.SetExternalRefs([pc](kvmeta::BlockId b) { return pc->HeldRefs(b); });
  }
  return cache;
}

void PagedKvCache::MakeRoom(int64_t n) {
  if (prefix_ && mgr_.num_free_blocks() < n) prefix_->Reclaim(n);
}

int64_t PagedKvCache::AttachPrefix(int64_t seq, const kvmeta::PrefixMatch& m,
                                   int64_t query_tokens) {
  if (Contains(seq)) return -1;
  std::vector<kvmeta::BlockId> full = m.full_blocks;
  int64_t tokens = static_cast<int64_t>(full.size()) * block_tokens();
  const int64_t partial = m.num_tokens - tokens;
  if (!mgr_.AttachCached(MakeSeqId(seq), full).ok()) return -1;
  if (partial > 0 && kvmeta::IsValid(m.partial_block)) {
    // Sharing the full blocks pinned them; the copy must not evict its own source.
    if (prefix_) prefix_->OnAttach(MakeSeqId(seq), m, query_tokens);
    MakeRoom(1);
    auto r = mgr_.AppendSlots(MakeSeqId(seq), partial);
    if (r.ok() && r->ok()) {
      Apply(*r);
      const int32_t dst = kvmeta::BlockIndex(mgr_.Find(MakeSeqId(seq))->blocks().back());
      store_->CopyBlockPrefix(kvmeta::BlockIndex(m.partial_block), dst,
                              static_cast<int32_t>(partial));
      tokens += partial;
    }
  } else if (prefix_) {
    prefix_->OnAttach(MakeSeqId(seq), m, query_tokens);
  }
  Refresh(seq);
  return tokens;
}

int64_t PagedKvCache::NumTokens(int64_t seq) const {
  const kvmeta::BlockTable* t = mgr_.Find(MakeSeqId(seq));
  return t ? t->num_tokens() : 0;
}

void PagedKvCache::Apply(const kvmeta::WriteOutcome& out) {
  for (const auto& c : out.copies)
    store_->CopyBlockPrefix(kvmeta::BlockIndex(c.src), kvmeta::BlockIndex(c.dst), c.num_tokens);
}

void PagedKvCache::Refresh(int64_t seq) {
  const kvmeta::BlockTable* t = mgr_.Find(MakeSeqId(seq));
  if (t == nullptr) {
    tables_.erase(seq);
    return;
  }
  auto& dense = tables_[seq];
  dense.resize(t->blocks().size());
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = kvmeta::BlockIndex(t->blocks()[i]);
}

const std::vector<int32_t>& PagedKvCache::Table(int64_t seq) const {
  auto it = tables_.find(seq);
  KVF_CHECK_MSG(it != tables_.end(), "KV access for an unknown sequence");
  return it->second;
}

bool PagedKvCache::AddSequence(int64_t seq, int64_t n_tokens) {
  MakeRoom(mgr_.BlocksForPrompt(n_tokens));
  auto r = mgr_.Allocate(MakeSeqId(seq), n_tokens);
  KVF_DCHECK(r.ok());  // a duplicate id or a negative count is a caller bug, not a shortage
  if (!r.ok() || !r->ok()) return false;
  Apply(*r);
  Refresh(seq);
  return true;
}

bool PagedKvCache::AppendSlots(int64_t seq, int64_t n) {
  MakeRoom(mgr_.BlocksNeededToAppend(MakeSeqId(seq), n));
  auto r = mgr_.AppendSlots(MakeSeqId(seq), n);
  KVF_DCHECK(r.ok());  // an unknown id is a caller bug, not a shortage
  if (!r.ok() || !r->ok()) return false;
  Apply(*r);
  Refresh(seq);
  return true;
}

bool PagedKvCache::EnsureTokens(int64_t seq, int64_t total) {
  if (!Contains(seq)) return AddSequence(seq, total);
  const int64_t have = NumTokens(seq);
  return total <= have || AppendSlots(seq, total - have);
}

Status PagedKvCache::Fork(int64_t parent, int64_t child) {
  KVF_RETURN_IF_ERROR(mgr_.Fork(MakeSeqId(parent), MakeSeqId(child)));
  Refresh(child);
  return Status::Ok();
}

Status PagedKvCache::Truncate(int64_t seq, int64_t n) {
  KVF_RETURN_IF_ERROR(mgr_.Truncate(MakeSeqId(seq), n));
  Refresh(seq);
  return Status::Ok();
}

void PagedKvCache::Free(int64_t seq) {
  if (prefix_) prefix_->OnRelease(MakeSeqId(seq));
  if (Contains(seq)) (void)mgr_.Free(MakeSeqId(seq));
  tables_.erase(seq);
}

int64_t PagedKvCache::BlocksToGrow(int64_t seq, int64_t total) const {
  if (!Contains(seq)) return mgr_.BlocksForPrompt(total);
  const int64_t have = NumTokens(seq);
  return total <= have ? 0 : mgr_.BlocksNeededToAppend(MakeSeqId(seq), total - have);
}

const std::vector<int32_t>* PagedKvCache::Blocks(int64_t seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? nullptr : &it->second;
}

int64_t PagedKvCache::LiveTokens() const {
  int64_t n = 0;
  for (kvmeta::SeqId s : mgr_.Sequences()) n += mgr_.Find(s)->num_tokens();
  return n;
}

Status PagedKvCache::CheckInvariants() const {
  KVF_RETURN_IF_ERROR(mgr_.CheckInvariants());
  if (prefix_) KVF_RETURN_IF_ERROR(prefix_->CheckInvariants());
  if (tables_.size() != static_cast<size_t>(mgr_.num_sequences()))
    return Status::Internal("dense table count differs from the block manager's");
  for (const auto& [seq, dense] : tables_) {
    const kvmeta::BlockTable* t = mgr_.Find(MakeSeqId(seq));
    if (t == nullptr || t->blocks().size() != dense.size())
      return Status::Internal("dense table out of sync for a sequence");
    for (size_t i = 0; i < dense.size(); ++i)
      if (dense[i] != kvmeta::BlockIndex(t->blocks()[i]))
        return Status::Internal("dense table entry out of sync");
  }
  return Status::Ok();
}

uint8_t* PagedKvCache::KeyRow(int32_t layer, int64_t seq, int64_t pos) {
  const auto& t = Table(seq);
  const int32_t bt = block_tokens();
  KVF_DCHECK(pos >= 0 && pos < NumTokens(seq));
  return store_->Row(KvKind::kKey, layer, t[static_cast<size_t>(pos / bt)],
                     static_cast<int32_t>(pos % bt));
}

uint8_t* PagedKvCache::ValueRow(int32_t layer, int64_t seq, int64_t pos) {
  const auto& t = Table(seq);
  const int32_t bt = block_tokens();
  KVF_DCHECK(pos >= 0 && pos < NumTokens(seq));
  return store_->Row(KvKind::kValue, layer, t[static_cast<size_t>(pos / bt)],
                     static_cast<int32_t>(pos % bt));
}

kernels::KvPageView PagedKvCache::KeyView(int32_t layer, int64_t seq) const {
  return store_->View(KvKind::kKey, layer, Table(seq).data());
}

kernels::KvPageView PagedKvCache::ValueView(int32_t layer, int64_t seq) const {
  return store_->View(KvKind::kValue, layer, Table(seq).data());
}

}  // namespace kvforge::kvstore
