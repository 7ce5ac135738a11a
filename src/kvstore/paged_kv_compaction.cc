// PagedKvCache's eviction side: applying a kvmeta::CompactionPlan to the bytes
// (docs/adr/0005-kv-slots-and-eviction.md).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/strings.h"
#include "kvquant/kivi.h"
#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore {

using kvmeta::MakeSeqId;

int64_t PagedKvCache::Evicted(int64_t seq) const {
  auto it = compacted_.find(seq);
  return it == compacted_.end() ? 0 : it->second.evicted;
}

SlotRange PagedKvCache::DeadSlots(int32_t layer, int64_t seq) const {
  auto it = compacted_.find(seq);
  if (it == compacted_.end()) return {};
  return it->second.dead[static_cast<size_t>(layer)];
}

int64_t PagedKvCache::LiveSlots(int32_t layer, int64_t seq) const {
  const SlotRange d = DeadSlots(layer, seq);
  return NumTokens(seq) - (d.end - d.begin);
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

void PagedKvCache::KeyNorms(int64_t seq, int32_t layer, std::span<const int32_t> slots,
                            float* out) const {
  const kernels::KvPageView view = KeyView(layer, seq);
  std::vector<float> row(static_cast<size_t>(view.row_values));
  for (size_t i = 0; i < slots.size(); ++i) {
    kernels::DecodeKvRow(view, slots[i], row.data());
    double sum = 0;
    for (float x : row) sum += static_cast<double>(x) * x;
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

Result<bool> PagedKvCache::Compact(int64_t seq, const kvmeta::CompactionPlan& plan,
                                   bool reposition) {
  const int32_t n_layer = store_->config().n_layer;
  if (!Contains(seq)) return Status::InvalidArgument("compaction of an unknown sequence");
  if (plan.old_slots != NumTokens(seq) || static_cast<int32_t>(plan.keep.size()) != n_layer)
    return Status::InvalidArgument(base::StrFormat(
        "compaction plan for %lld slots and %zu layers, the sequence has %lld and %d",
        (long long)plan.old_slots, plan.keep.size(), (long long)NumTokens(seq), n_layer));
  for (int32_t l = 0; l < n_layer; ++l) {
    const SlotRange d = DeadSlots(l, seq);
    for (int32_t s : plan.keep[static_cast<size_t>(l)])
      if (s >= d.begin && s < d.end) return Status::InvalidArgument("compaction keeps a dead slot");
  }
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
  if (keep_positions && c.positions.empty()) {
    c.positions.resize(static_cast<size_t>(n_layer));
    for (auto& p : c.positions) {
      p.resize(static_cast<size_t>(plan.old_slots));
      for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(i);
    }
  }
  const bool rot = RotatesKeysOnMove(reposition);
  const auto& table = Table(seq);
  for (int32_t l = 0; l < n_layer; ++l) {
    const auto li = static_cast<size_t>(l);
    if (kivi_k_ || rot) {
      RewriteKeptRows(KvKind::kKey, l, seq, plan, rot);
    } else {
      CopyKeptRows(KvKind::kKey, l, table, plan.moves[li]);
    }
    if (kivi_v_) {
      RewriteKeptRows(KvKind::kValue, l, seq, plan, false);
    } else {
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
