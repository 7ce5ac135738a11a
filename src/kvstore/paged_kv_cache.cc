#include "kvstore/paged_kv_cache.h"

#include <algorithm>

#include "base/check.h"
#include "base/fp16.h"
#include "base/strings.h"
#include "kvquant/kivi.h"

namespace kvforge::kvstore {

using kvmeta::MakeSeqId;

Result<std::unique_ptr<PagedKvCache>> PagedKvCache::Create(const PagedKvCacheConfig& cfg) {
  KVF_ASSIGN_OR_RETURN(auto store, KvStore::Create(cfg.store));
  kvmeta::BlockManagerConfig mc;
  mc.num_blocks = static_cast<int32_t>(cfg.store.num_blocks);
  mc.block_tokens = cfg.store.block_tokens;
  mc.watermark = 0;
  KVF_ASSIGN_OR_RETURN(kvmeta::BlockManager mgr, kvmeta::BlockManager::Create(mc));
  std::unique_ptr<PagedKvCache> c(new PagedKvCache(std::move(mgr), std::move(store)));
  const KvStoreConfig& sc = cfg.store;
  c->kivi_k_ = IsKivi(sc.k_dtype);
  c->kivi_v_ = IsKivi(sc.v_dtype);
  c->kivi_eager_ = cfg.kivi_eager;
  c->kivi_r_ = cfg.kivi_residual_tokens;
  if (c->kivi_k_ || c->kivi_v_) {
    const int64_t min_r = cfg.kivi_eager ? 0 : kvquant::kKiviGroup;
    if (c->kivi_r_ < min_r || c->kivi_r_ % kvquant::kKiviGroup != 0 || c->kivi_r_ > (1 << 20))
      return Status::InvalidArgument(base::StrFormat(
          "KIVI residual window must be a multiple of %lld tokens (>= %lld), got %lld",
          (long long)kvquant::kKiviGroup, (long long)min_r, (long long)c->kivi_r_));
  }
  if (!c->kivi_k_) {
    KVF_ASSIGN_OR_RETURN(
        c->k_codec_, kvquant::RowCodec::Create(sc.k_dtype, sc.n_kv_head, sc.head_dim, /*key=*/true,
                                               /*turbo_qjl=*/sc.turbo_qjl));
  }
  c->nuq_k_ = kvquant::IsNuq(sc.k_dtype);
  c->nuq_v_ = kvquant::IsNuq(sc.v_dtype);
  c->nuq_post_rope_ = cfg.nuq_post_rope_keys;
  c->rope_cfg_ = cfg.rope;
  if (c->nuq_k_ || c->nuq_v_) {
    const int64_t values = static_cast<int64_t>(sc.n_kv_head) * sc.head_dim;
    if (cfg.nuq_calibration) {
      if (cfg.nuq_calibration->n_layers() != sc.n_layer || cfg.nuq_calibration->values() != values)
        return Status::InvalidArgument("the kvquant calibration was made for another model shape");
      c->nuq_ = *cfg.nuq_calibration;
      c->nuq_.Freeze();
    } else {
      c->nuq_ = kvquant::NuqCalibration(sc.n_layer, values);
    }
    const int32_t rot = cfg.rope.rot_dim > 0 ? cfg.rope.rot_dim : sc.head_dim;
    if (rot > sc.head_dim || rot % 2 != 0)
      return Status::InvalidArgument(base::StrFormat(
          "kvquant3: RoPE width %d must be even and at most head_dim %d", rot, sc.head_dim));
    if (!cfg.rope.freq_factors.empty() &&
        static_cast<int32_t>(cfg.rope.freq_factors.size()) != rot / 2)
      return Status::InvalidArgument("kvquant3: RoPE frequency factors must be rot_dim / 2");
    c->rope_ = std::make_unique<kvquant::RopeTable>(sc.head_dim, rot, cfg.rope.freq_base,
                                                    cfg.rope.freq_scale, cfg.rope.neox,
                                                    cfg.rope.freq_factors);
  }
  // KIVI values use the per-token row codec too (groups of 32 channels).
  KVF_ASSIGN_OR_RETURN(c->v_codec_,
                       kvquant::RowCodec::Create(sc.v_dtype, sc.n_kv_head, sc.head_dim));
  if (cfg.fp8_scales) {
    if (cfg.fp8_scales->n_layers() != sc.n_layer || cfg.fp8_scales->n_heads() != sc.n_kv_head)
      return Status::InvalidArgument("FP8 KV scales were made for another model shape");
    c->scales_ = *cfg.fp8_scales;
    c->scales_.Freeze();
  } else {
    c->scales_ = kvquant::Fp8Scales(sc.n_layer, sc.n_kv_head, cfg.fp8_per_head);
    c->fp8_calibrate_ = cfg.fp8_calibrate && (IsFp8(sc.k_dtype) || IsFp8(sc.v_dtype));
    if (!c->fp8_calibrate_) c->scales_.Freeze();
  }
  if (cfg.key_summaries)
    c->summaries_.assign(static_cast<size_t>(sc.n_layer) * static_cast<size_t>(sc.num_blocks) *
                             static_cast<size_t>(sc.n_kv_head) * 3 *
                             static_cast<size_t>(sc.head_dim),
                         0.0f);
  if (cfg.prefix_caching && !c->kivi_k_ && !c->kivi_v_) {
    c->prefix_ = kvmeta::MakePrefixCache(cfg.prefix_mode, &c->mgr_.mutable_pool());
    kvmeta::PrefixCache* pc = c->prefix_.get();
    c->mgr_.SetExternalRefs([pc](kvmeta::BlockId b) { return pc->HeldRefs(b); });
  }
  return c;
}

int64_t PagedKvCache::ResidualBytes() const {
  int64_t n = 0;
  for (const auto& [seq, ks] : kivi_) {
    for (const Window& w : ks.k) n += static_cast<int64_t>(w.rows.size()) * 2;
    for (const Window& w : ks.v) n += static_cast<int64_t>(w.rows.size()) * 2;
  }
  return n;
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
      // The source's summary covers at least these tokens: still an upper bound.
      CopyKeySummaries(kvmeta::BlockIndex(m.partial_block), dst);
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
  for (const auto& c : out.copies) {
    store_->CopyBlockPrefix(kvmeta::BlockIndex(c.src), kvmeta::BlockIndex(c.dst), c.num_tokens);
    CopyKeySummaries(kvmeta::BlockIndex(c.src), kvmeta::BlockIndex(c.dst));
  }
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
  if (has_sequence_state()) {
    const auto layers = static_cast<size_t>(store_->config().n_layer);
    kivi_[seq] = KiviSeq{std::vector<Window>(layers), std::vector<Window>(layers)};
  }
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
  // Blocks shared by the two hold quantized rows of positions both sequences agree on; a later
  // flush by either writes identical bytes there (same f16 window content, same codec), so
  // sharing survives without copy-on-write of flushed groups.
  if (auto it = kivi_.find(parent); it != kivi_.end()) kivi_[child] = it->second;
  if (auto it = compacted_.find(parent); it != compacted_.end()) compacted_[child] = it->second;
  return Status::Ok();
}

Status PagedKvCache::Truncate(int64_t seq, int64_t n) {
  if (auto it = kivi_.find(seq); it != kivi_.end()) {
    if (n < 0 || n > NumTokens(seq))
      return Status::InvalidArgument(
          base::StrFormat("cannot truncate to %lld tokens", (long long)n));
    // Before the blocks past n are released: a cut key group is read back from them.
    const auto& t = Table(seq);
    for (int32_t l = 0; l < store_->config().n_layer; ++l) {
      if (kivi_k_) RollbackKeys(l, t, it->second.k[static_cast<size_t>(l)], n);
      if (kivi_v_) RollbackValues(it->second.v[static_cast<size_t>(l)], n);
    }
  }
  KVF_RETURN_IF_ERROR(mgr_.Truncate(MakeSeqId(seq), n));
  Refresh(seq);
  if (auto it = compacted_.find(seq); it != compacted_.end()) {
    for (auto& d : it->second.dead) {
      d.end = std::min(d.end, n);
      d.begin = std::min(d.begin, d.end);
    }
    for (auto& p : it->second.positions) p.resize(std::min(p.size(), static_cast<size_t>(n)));
  }
  return Status::Ok();
}

void PagedKvCache::Free(int64_t seq) {
  if (prefix_) prefix_->OnRelease(MakeSeqId(seq));
  if (Contains(seq)) (void)mgr_.Free(MakeSeqId(seq));
  tables_.erase(seq);
  kivi_.erase(seq);
  compacted_.erase(seq);
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
  for (const auto& [seq, c] : compacted_) {
    if (!Contains(seq)) return Status::Internal("compaction state for an unknown sequence");
    for (const auto& p : c.positions)
      if (static_cast<int64_t>(p.size()) > NumTokens(seq))
        return Status::Internal("slot positions past the sequence's slots");
  }
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

int64_t PagedKvCache::WindowTokens(const Window& w) const {
  return static_cast<int64_t>(w.rows.size()) /
         (static_cast<int64_t>(store_->config().n_kv_head) * store_->config().head_dim);
}

const float* PagedKvCache::PreRopeKeys(int64_t pos0, int64_t n, const float* k, int64_t* stride) {
  const KvStoreConfig& sc = store_->config();
  const int64_t values = static_cast<int64_t>(sc.n_kv_head) * sc.head_dim;
  rope_->Reserve(pos0 + n);
  pre_rope_.resize(static_cast<size_t>(n * values));
  for (int64_t i = 0; i < n; ++i) {
    float* row = pre_rope_.data() + i * values;
    std::copy(k + i * *stride, k + i * *stride + values, row);
    for (int64_t h = 0; h < sc.n_kv_head; ++h) rope_->Apply(row + h * sc.head_dim, pos0 + i, true);
  }
  *stride = values;
  return pre_rope_.data();
}

void PagedKvCache::WriteAt(int32_t layer, int64_t seq, int64_t slot0, int64_t pos0, int64_t n,
                           const float* k, const float* v, int64_t stride) {
  const auto& t = Table(seq);
  int64_t stride_k = stride;
  KVF_DCHECK(slot0 >= 0 && pos0 >= 0 && n >= 0 && slot0 + n <= NumTokens(seq));
  if (auto it = compacted_.find(seq); it != compacted_.end() && !it->second.positions.empty()) {
    auto& pos = it->second.positions[static_cast<size_t>(layer)];
    pos.resize(static_cast<size_t>(slot0 + n));
    for (int64_t i = 0; i < n; ++i)
      pos[static_cast<size_t>(slot0 + i)] = static_cast<int32_t>(pos0 + i);
  }
  // An MLA latent row is its own value (v is ignored and may be null).
  if (store_->config().latent()) v = k;
  if (!summaries_.empty()) UpdateKeySummaries(layer, t, slot0, n, k, stride);  // post-RoPE keys
  if (fp8_calibrate_ && !scales_.calibrated(layer))
    scales_.Calibrate(layer, k, v, n, store_->config().head_dim, stride);
  if (nuq_k_ || nuq_v_) {
    if (nuq_k_ && !nuq_post_rope_) k = PreRopeKeys(pos0, n, k, &stride_k);
    if (!nuq_.calibrated(layer)) {
      if (nuq_k_) nuq_.Calibrate(layer, k, nullptr, n, stride_k);
      if (nuq_v_) nuq_.Calibrate(layer, nullptr, v, n, stride);
    }
  }
  if (kivi_k_) {
    WriteKiviKeys(layer, seq, slot0, n, k, stride);
  } else {
    WriteRows(KvKind::kKey, layer, t, slot0, n, k, stride_k);
  }
  if (kivi_v_) {
    WriteKiviValues(layer, seq, slot0, n, v, stride);
  } else if (!store_->config().latent()) {
    WriteRows(KvKind::kValue, layer, t, slot0, n, v, stride);
  }
}

void PagedKvCache::WriteRows(KvKind kind, int32_t layer, const std::vector<int32_t>& table,
                             int64_t pos0, int64_t n, const float* x, int64_t stride) {
  const bool key = kind == KvKind::kKey;
  const kvquant::RowCodec& codec = key ? *k_codec_ : *v_codec_;
  const float* scales = key ? scales_.key(layer) : scales_.value(layer);
  const int32_t bt = block_tokens();
  const bool nuq = kvquant::IsNuq(codec.dtype());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    uint8_t* dst = store_->SlotRow(kind, layer, table[static_cast<size_t>(p / bt)],
                                   static_cast<int32_t>(p % bt));
    if (!nuq) {
      codec.Encode(x + i * stride, dst, scales);
    } else if (key) {
      kvquant::NuqEncodeKeyRow(x + i * stride, codec.values(), nuq_.key(layer), dst);
    } else {
      kvquant::NuqEncodeValueRow(x + i * stride, codec.values(), nuq_.value(layer), dst);
    }
  }
}

namespace {

void AppendF16(const float* x, int64_t n, int64_t values, int64_t stride,
               std::vector<uint16_t>* rows) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < values; ++c) rows->push_back(Fp32ToFp16(x[i * stride + c]));
}

}  // namespace

void PagedKvCache::WriteKiviKeys(int32_t layer, int64_t seq, int64_t pos0, int64_t n,
                                 const float* k, int64_t stride) {
  const auto& t = Table(seq);
  Window& w = kivi_.at(seq).k[static_cast<size_t>(layer)];
  if (pos0 < w.begin + WindowTokens(w)) RollbackKeys(layer, t, w, pos0);  // rewriting positions
  KVF_CHECK_MSG(pos0 == w.begin + WindowTokens(w), "KV writes must be contiguous");
  const int64_t values =
      static_cast<int64_t>(store_->config().n_kv_head) * store_->config().head_dim;
  // KIVI's order: a full window is quantized R at a time when the next step starts, so the step
  // that filled it still attended in full precision.
  if (!kivi_eager_)
    while (WindowTokens(w) >= kivi_r_) FlushKeys(layer, t, w, kivi_r_);
  AppendF16(k, n, values, stride, &w.rows);
  if (kivi_eager_) {
    const int64_t unit = std::max(kivi_r_, kvquant::kKiviGroup);
    while (WindowTokens(w) >= unit) FlushKeys(layer, t, w, unit);
  }
}

void PagedKvCache::WriteKiviValues(int32_t layer, int64_t seq, int64_t pos0, int64_t n,
                                   const float* v, int64_t stride) {
  const auto& t = Table(seq);
  Window& w = kivi_.at(seq).v[static_cast<size_t>(layer)];
  if (pos0 < w.begin + WindowTokens(w)) RollbackValues(w, pos0);
  KVF_CHECK_MSG(pos0 == w.begin + WindowTokens(w), "KV writes must be contiguous");
  const int64_t values =
      static_cast<int64_t>(store_->config().n_kv_head) * store_->config().head_dim;
  // Values leave the window one token at a time, oldest first, so that a decode step attends to
  // at most R f16 values (a longer chunk keeps R - 1 older ones and all of its own). What leaves
  // depends only on the window before the write, never on n, so that cutting the written tokens
  // off again (Truncate: speculative decoding's rejected drafts) leaves the window exactly as a
  // write of only the kept ones would have.
  if (!kivi_eager_ && WindowTokens(w) >= kivi_r_)
    FlushValues(layer, t, w, WindowTokens(w) - (kivi_r_ - 1));
  AppendF16(v, n, values, stride, &w.rows);
  if (kivi_eager_ && WindowTokens(w) > kivi_r_) FlushValues(layer, t, w, WindowTokens(w) - kivi_r_);
}

void PagedKvCache::FlushKeys(int32_t layer, const std::vector<int32_t>& table, Window& w,
                             int64_t count) {
  const int64_t values =
      static_cast<int64_t>(store_->config().n_kv_head) * store_->config().head_dim;
  const int bits = kvquant::KiviBits(store_->config().k_dtype);
  const int32_t bt = block_tokens();
  std::vector<float> group(static_cast<size_t>(kvquant::kKiviGroup * values));
  for (int64_t g0 = 0; g0 < count; g0 += kvquant::kKiviGroup) {
    for (size_t i = 0; i < group.size(); ++i)
      group[i] = Fp16ToFp32(w.rows[static_cast<size_t>(g0 * values) + i]);
    const int64_t p = w.begin + g0;
    kvquant::KiviEncodeKeyGroup(
        group.data(), kvquant::kKiviGroup, values, values, bits,
        store_->SlotRow(KvKind::kKey, layer, table[static_cast<size_t>(p / bt)],
                        static_cast<int32_t>(p % bt)));
  }
  w.rows.erase(w.rows.begin(), w.rows.begin() + count * values);
  w.begin += count;
}

void PagedKvCache::FlushValues(int32_t layer, const std::vector<int32_t>& table, Window& w,
                               int64_t count) {
  const int64_t values = v_codec_->values();
  const int32_t bt = block_tokens();
  std::vector<float> row(static_cast<size_t>(values));
  for (int64_t j = 0; j < count; ++j) {
    for (int64_t c = 0; c < values; ++c)
      row[static_cast<size_t>(c)] = Fp16ToFp32(w.rows[static_cast<size_t>(j * values + c)]);
    const int64_t p = w.begin + j;
    v_codec_->Encode(row.data(),
                     store_->SlotRow(KvKind::kValue, layer, table[static_cast<size_t>(p / bt)],
                                     static_cast<int32_t>(p % bt)));
  }
  w.rows.erase(w.rows.begin(), w.rows.begin() + count * values);
  w.begin += count;
}

void PagedKvCache::RollbackKeys(int32_t layer, const std::vector<int32_t>& table, Window& w,
                                int64_t n) {
  const int64_t values =
      static_cast<int64_t>(store_->config().n_kv_head) * store_->config().head_dim;
  if (n >= w.begin) {
    w.rows.resize(static_cast<size_t>(std::min(n - w.begin, WindowTokens(w)) * values));
    return;
  }
  // Keys leave the window in whole units; restore the unit containing n from its groups.
  const int64_t unit = kivi_eager_ ? std::max(kivi_r_, kvquant::kKiviGroup) : kivi_r_;
  const int64_t begin = n / unit * unit;
  const int bits = kvquant::KiviBits(store_->config().k_dtype);
  const int32_t bt = block_tokens();
  std::vector<uint16_t> rows;
  std::vector<float> tok(static_cast<size_t>(values));
  for (int64_t p = begin; p < n; ++p) {
    const uint8_t* row = store_->SlotRow(KvKind::kKey, layer, table[static_cast<size_t>(p / bt)],
                                         static_cast<int32_t>(p % bt));
    kvquant::KiviDecodeKeyToken(row, p % kvquant::kKiviGroup, values, bits, 0, values, tok.data());
    for (float x : tok) rows.push_back(Fp32ToFp16(x));
  }
  w.begin = begin;
  w.rows = std::move(rows);
}

void PagedKvCache::RollbackValues(Window& w, int64_t n) {
  const int64_t values = v_codec_->values();
  if (n >= w.begin) {
    w.rows.resize(static_cast<size_t>(std::min(n - w.begin, WindowTokens(w)) * values));
  } else {
    w.begin = n;  // quantized values stay quantized
    w.rows.clear();
  }
}

void PagedKvCache::AttachWindow(const Window& w, kernels::KvPageView* view) const {
  view->recent = reinterpret_cast<const uint8_t*>(w.rows.data());
  view->recent_stride =
      static_cast<size_t>(store_->config().n_kv_head) * store_->config().head_dim * 2;
  view->recent_begin = w.begin;
}

kernels::KvPageView PagedKvCache::KeyView(int32_t layer, int64_t seq) const {
  kernels::KvPageView v = store_->View(KvKind::kKey, layer, Table(seq).data());
  v.scales = scales_.key(layer);
  if (nuq_k_) {
    v.nuq = &nuq_.key(layer);
    v.rope = nuq_post_rope_ ? nullptr : rope_.get();
    v.nuq_key = true;
    if (auto it = compacted_.find(seq); it != compacted_.end() && !it->second.positions.empty())
      v.positions = it->second.positions[static_cast<size_t>(layer)].data();
  }
  if (kivi_k_) AttachWindow(kivi_.at(seq).k[static_cast<size_t>(layer)], &v);
  return v;
}

kernels::KvPageView PagedKvCache::ValueView(int32_t layer, int64_t seq) const {
  if (store_->config().latent()) return KeyView(layer, seq);  // the same rows (ADR 0007)
  kernels::KvPageView v = store_->View(KvKind::kValue, layer, Table(seq).data());
  v.scales = scales_.value(layer);
  if (nuq_v_) v.nuq = &nuq_.value(layer);
  if (kivi_v_) AttachWindow(kivi_.at(seq).v[static_cast<size_t>(layer)], &v);
  return v;
}

}  // namespace kvforge::kvstore
