// PagedKvCache's eviction side: applying a kvmeta::CompactionPlan to the bytes
// (docs/adr/0005-kv-slots-and-eviction.md).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/strings.h"
#include "kvquant/kivi.h"
#include "kvquant/row_codec.h"
#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore {

using kvmeta::MakeSeqId;

int64_t PagedKvCache::Evicted(int64_t seq) const {
  auto it = compacted_.find(seq);
  return it == compacted_.end() ? 0 : it->second.evicted;
}

SlotRange PagedKvCache::DeadSlots(int32_t layer, int64_t seq, int32_t kv_head) const {
  auto it = compacted_.find(seq);
  if (it == compacted_.end()) return {};
  const CompactionState& c = it->second;
  const int32_t lane = c.lanes > 1 ? kv_head : 0;
  return c
      .dead[static_cast<size_t>(layer) * static_cast<size_t>(c.lanes) + static_cast<size_t>(lane)];
}

int64_t PagedKvCache::LiveSlots(int32_t layer, int64_t seq, int32_t kv_head) const {
  const SlotRange d = DeadSlots(layer, seq, kv_head);
  return NumTokens(seq) - (d.end - d.begin);
}

Status PagedKvCache::CheckPerHeadCompaction() const {
  const KvStoreConfig& sc = store_->config();
  for (const kvquant::KvDtype dtype : {sc.k_dtype, sc.v_dtype}) {
    Result<kvquant::HeadBytes> h = kvquant::HeadByteRanges(dtype, sc.n_kv_head, sc.head_dim, 0);
    if (!h.ok()) return Status::InvalidArgument(h.error().message());
  }
  if (nuq_k_ && !nuq_post_rope_)
    return Status::InvalidArgument(
        "kvquant3 keys are stored before RoPE with one slot->position map per layer, so KV heads "
        "cannot keep different tokens");
  return Status::Ok();
}

std::optional<CompactionState> PagedKvCache::ExportCompaction(int64_t seq) const {
  auto it = compacted_.find(seq);
  if (it == compacted_.end()) return std::nullopt;
  return it->second;
}

void PagedKvCache::ImportCompaction(int64_t seq, CompactionState state) {
  compacted_[seq] = std::move(state);
}

int64_t PagedKvCache::BlocksToCompact(int64_t seq, int64_t new_slots) const {
  const kvmeta::BlockTable* t = mgr_.Find(MakeSeqId(seq));
  if (t == nullptr) return 0;
  return t->BlocksNeededToWrite(mgr_.pool(), 0, std::min(new_slots, t->num_tokens()),
                                /*keep_cached=*/true);
}

void PagedKvCache::KeyNorms(int64_t seq, int32_t layer, std::span<const int32_t> slots, float* out,
                            int32_t kv_head) const {
  const kernels::KvPageView view = KeyView(layer, seq);
  // [row_values]: one decoded key row; the norm covers one head's slice or the whole row.
  std::vector<float> row(static_cast<size_t>(view.row_values));
  const int64_t begin = kv_head < 0 ? 0 : static_cast<int64_t>(kv_head) * view.head_dim;
  const int64_t count = kv_head < 0 ? view.row_values : view.head_dim;
  for (size_t i = 0; i < slots.size(); ++i) {
    kernels::DecodeKvRow(view, slots[i], row.data());
    double sum = 0;
    for (int64_t j = begin; j < begin + count; ++j)
      sum += static_cast<double>(row[static_cast<size_t>(j)]) * row[static_cast<size_t>(j)];
    out[i] = static_cast<float>(std::sqrt(sum));
  }
}

bool PagedKvCache::RotatesKeysOnMove(bool reposition) const {
  // kvquant3 keys are stored before RoPE and rotated to their slot when read: nothing to redo.
  return reposition && !(nuq_k_ && !nuq_post_rope_);
}

void PagedKvCache::CopyKeptRows(KvKind kind, int32_t layer, const std::vector<int32_t>& table,
                                const std::vector<kvmeta::SlotMove>& moves) {
  const int32_t bt = block_tokens();
  const size_t bytes = store_->row_stride(kind);
  for (const kvmeta::SlotMove& m : moves) {
    const uint8_t* src =
        store_->SlotRow(kind, layer, table[static_cast<size_t>(m.src / bt)], m.src % bt);
    uint8_t* dst = store_->SlotRow(kind, layer, table[static_cast<size_t>(m.dst / bt)], m.dst % bt);
    std::memmove(dst, src, bytes);
  }
}

void PagedKvCache::CopyKeptHeadRows(KvKind kind, int32_t layer, int32_t head,
                                    const std::vector<int32_t>& table,
                                    const std::vector<kvmeta::SlotMove>& moves) {
  const KvStoreConfig& sc = store_->config();
  const kvquant::KvDtype dtype = kind == KvKind::kKey ? sc.k_dtype : sc.v_dtype;
  // CheckCompactionPlan refused dtypes without separate head bytes.
  const kvquant::HeadBytes hb =
      kvquant::HeadByteRanges(dtype, sc.n_kv_head, sc.head_dim, head).value();
  const int32_t bt = block_tokens();
  for (const kvmeta::SlotMove& m : moves) {
    const uint8_t* src =
        store_->SlotRow(kind, layer, table[static_cast<size_t>(m.src / bt)], m.src % bt);
    uint8_t* dst = store_->SlotRow(kind, layer, table[static_cast<size_t>(m.dst / bt)], m.dst % bt);
    for (int part = 0; part < hb.parts; ++part)
      std::memmove(dst + hb.offset[part], src + hb.offset[part],
                   static_cast<size_t>(hb.bytes[part]));
  }
}

void PagedKvCache::RewriteKeptRows(KvKind kind, int32_t layer, int64_t seq,
                                   const kvmeta::CompactionPlan& plan, bool rerotate) {
  const KvStoreConfig& sc = store_->config();
  const int64_t values = static_cast<int64_t>(sc.n_kv_head) * sc.head_dim;
  const bool key = kind == KvKind::kKey;
  kernels::KvPageView view = key ? KeyView(layer, seq) : ValueView(layer, seq);
  view.rope = nullptr;  // decode what is stored (pre-RoPE kvquant3 keys stay pre-RoPE)
  view.positions = nullptr;
  const auto& keep = plan.keep[static_cast<size_t>(layer)];
  // [new_slots][values]: kept rows in their new order, zeros for the layer's dead tail.
  std::vector<float> rows(static_cast<size_t>(plan.new_slots * values), 0.0f);
  const int32_t rot = rope_cfg_.rot_dim > 0 ? rope_cfg_.rot_dim : sc.head_dim;
  for (size_t i = 0; i < keep.size(); ++i) {
    float* row = rows.data() + static_cast<int64_t>(i) * values;
    kernels::DecodeKvRow(view, keep[i], row);
    const int64_t delta = static_cast<int64_t>(i) - keep[i];
    if (rerotate && delta != 0)
      kernels::Rope(row, sc.n_kv_head, sc.head_dim, rot, delta, rope_cfg_.freq_base,
                    rope_cfg_.freq_scale, rope_cfg_.neox,
                    rope_cfg_.freq_factors.empty() ? nullptr : rope_cfg_.freq_factors.data());
  }
  const bool kivi = key ? kivi_k_ : kivi_v_;
  if (!kivi) {
    WriteRows(kind, layer, Table(seq), 0, static_cast<int64_t>(keep.size()), rows.data(), values);
    return;
  }
  // KIVI: the stream is written again from slot 0, a window at a time, so groups re-form and the
  // residual window ends holding the newest kept tokens, as after a prefill.
  KiviSeq& ks = kivi_.at(seq);
  (key ? ks.k : ks.v)[static_cast<size_t>(layer)] = Window{};
  const int64_t unit = std::max(kivi_r_, kvquant::kKiviGroup);
  for (int64_t p0 = 0; p0 < plan.new_slots; p0 += unit) {
    const int64_t n = std::min(unit, plan.new_slots - p0);
    if (key) {
      WriteKiviKeys(layer, seq, p0, n, rows.data() + p0 * values, values);
    } else {
      WriteKiviValues(layer, seq, p0, n, rows.data() + p0 * values, values);
    }
  }
}

Status PagedKvCache::CheckCompactionPlan(int64_t seq, const kvmeta::CompactionPlan& plan,
                                         bool reposition) {
  const KvStoreConfig& sc = store_->config();
  if (!Contains(seq)) return Status::InvalidArgument("compaction of an unknown sequence");
  const int32_t lanes = plan.lanes_per_layer;
  if (lanes != 1 && lanes != sc.n_kv_head)
    return Status::InvalidArgument(base::StrFormat(
        "compaction plan with %d lanes per layer; the cache has %d KV heads", lanes, sc.n_kv_head));
  if (plan.old_slots != NumTokens(seq) ||
      static_cast<int64_t>(plan.keep.size()) != static_cast<int64_t>(sc.n_layer) * lanes)
    return Status::InvalidArgument(base::StrFormat(
        "compaction plan for %lld slots and %zu lanes, the sequence has %lld slots and %d layers "
        "of %d lanes",
        (long long)plan.old_slots, plan.keep.size(), (long long)NumTokens(seq), sc.n_layer, lanes));
  if (lanes > 1) {
    KVF_RETURN_IF_ERROR(CheckPerHeadCompaction());
    if (reposition)
      return Status::InvalidArgument("per-KV-head compaction cannot re-assign positions");
  }
  auto it = compacted_.find(seq);
  if (it != compacted_.end() && it->second.lanes > lanes)
    return Status::InvalidArgument("a per-KV-head compacted sequence needs per-head plans");
  for (int32_t l = 0; l < sc.n_layer; ++l)
    for (int32_t h = 0; h < lanes; ++h) {
      const SlotRange d = DeadSlots(l, seq, h);
      for (int32_t s : plan.keep[static_cast<size_t>(l * lanes + h)])
        if (s >= d.begin && s < d.end)
          return Status::InvalidArgument("compaction keeps a dead slot");
    }
  return Status::Ok();
}

Result<bool> PagedKvCache::Compact(int64_t seq, const kvmeta::CompactionPlan& plan,
                                   bool reposition) {
  KVF_RETURN_IF_ERROR(CheckCompactionPlan(seq, plan, reposition));
  const int32_t n_layer = store_->config().n_layer;
  const int32_t lanes = plan.lanes_per_layer;
  const int64_t need = BlocksToCompact(seq, plan.new_slots);
  MakeRoom(need);
  if (need > mgr_.num_free_blocks()) return false;
  // The sequence stops being a prefix of anything: the prefix cache forgets its progress, and
  // the blocks it keeps become private (cached and shared contents stay intact for others).
  if (prefix_) prefix_->OnRelease(MakeSeqId(seq));
  KVF_ASSIGN_OR_RETURN(kvmeta::WriteOutcome w, mgr_.MakeWritable(MakeSeqId(seq), 0, plan.new_slots,
                                                                 /*keep_cached=*/true));
  if (!w.ok()) return false;
  Apply(w);
  Refresh(seq);
  CompactionState& c = compacted_[seq];
  const bool keep_positions = nuq_k_ && !nuq_post_rope_ && !reposition;
  if (c.dead.empty()) c.dead.assign(static_cast<size_t>(n_layer), SlotRange{});
  if (lanes > c.lanes) {  // a layer's dead range becomes each of its heads' (first per-head plan)
    std::vector<SlotRange> per_head;
    for (const SlotRange& d : c.dead)
      per_head.insert(per_head.end(), static_cast<size_t>(lanes), d);
    c.dead = std::move(per_head);
    c.lanes = lanes;
  }
  if (keep_positions && c.positions.empty()) {
    c.positions.resize(static_cast<size_t>(n_layer));
    for (auto& p : c.positions) {
      p.resize(static_cast<size_t>(plan.old_slots));
      for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(i);
    }
  }
  const bool rot = RotatesKeysOnMove(reposition);
  const bool latent = store_->config().latent();
  const auto& table = Table(seq);
  for (int32_t l = 0; l < n_layer && lanes > 1; ++l)
    for (int32_t h = 0; h < lanes; ++h) {
      const size_t lane = static_cast<size_t>(l * lanes + h);
      CopyKeptHeadRows(KvKind::kKey, l, h, table, plan.moves[lane]);
      if (!latent) CopyKeptHeadRows(KvKind::kValue, l, h, table, plan.moves[lane]);
      const int64_t kept = plan.kept(lane);
      c.dead[lane] = kept < plan.new_slots ? SlotRange{kept, plan.new_slots} : SlotRange{};
    }
  for (int32_t l = 0; l < n_layer && lanes == 1; ++l) {
    const auto li = static_cast<size_t>(l);
    if (kivi_k_ || rot) {
      RewriteKeptRows(KvKind::kKey, l, seq, plan, rot);
    } else {
      CopyKeptRows(KvKind::kKey, l, table, plan.moves[li]);
    }
    if (kivi_v_) {
      RewriteKeptRows(KvKind::kValue, l, seq, plan, false);
    } else if (!latent) {  // a latent's V view is its K rows, moved above
      CopyKeptRows(KvKind::kValue, l, table, plan.moves[li]);
    }
    const int64_t kept = plan.kept(li);
    c.dead[li] = kept < plan.new_slots ? SlotRange{kept, plan.new_slots} : SlotRange{};
    if (keep_positions) {
      auto& p = c.positions[li];
      for (size_t i = 0; i < plan.keep[li].size(); ++i)
        p[i] = p[static_cast<size_t>(plan.keep[li][i])];  // ascending keep: read before written
      p.resize(static_cast<size_t>(plan.new_slots));
    }
  }
  c.evicted += plan.evicted();
  KVF_RETURN_IF_ERROR(mgr_.Truncate(MakeSeqId(seq), plan.new_slots));
  Refresh(seq);
  return true;
}

}  // namespace kvforge::kvstore
