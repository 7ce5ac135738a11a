// kvstore/paged_kv_cache.h — the paged KV cache the engine runs on: kvmeta's BlockManager
// (which sequence owns which blocks, ref counts, copy-on-write decisions) bound to KvStore's bytes,
// plus the state a quantized cache keeps outside the blocks (docs/kv_quantization.md):
//   - FP8 scales per layer (unit, calibrated on the first batch, or loaded);
//   - kvquant3 constants per layer (calibrated on the first batch, or loaded) and RoPE angles:
//     keys arrive post-RoPE, are rotated back and stored pre-RoPE (KVQuant), and the views carry
//     the table that rotates decoded keys to their positions;
//   - KIVI's residual window per sequence and layer: the newest tokens in f16, quantized into the
//     blocks when they leave the window (keys R at a time in 32-token per-channel groups, values
//     one token at a time).
//
// Every mutation goes through here so that block copies decided by the bookkeeping are applied
// to the bytes before anyone writes: AppendSlots/Fork/Truncate/Free mirror BlockManager's and
// keep a dense int32 copy of each table for the attention kernels. Running out of blocks is a
// value (false / missing blocks), never an error.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/block_manager.h"
#include "kvmeta/compaction.h"
#include "kvmeta/prefix_cache.h"
#include "kvquant/fp8_scales.h"
#include "kvquant/nuq.h"
#include "kvquant/nuq_calibration.h"
#include "kvquant/row_codec.h"
#include "kvstore/kv_access.h"
#include "kvstore/kv_store.h"

namespace kvforge::kvstore {

struct PagedKvCacheConfig {
  KvStoreConfig store;  // admission watermarks are the scheduler's business, not the cache's
  // FP8 scales: loaded ones win; otherwise calibrate on the first batch, or 1.0.
  std::optional<kvquant::Fp8Scales> fp8_scales;
  bool fp8_calibrate = false;
  bool fp8_per_head = false;
  // kvquant3: a loaded calibration wins; otherwise each layer calibrates on its first batch.
  std::optional<kvquant::NuqCalibration> nuq_calibration;
  // kvquant3 ablation: quantize keys after RoPE, like every other dtype (KVQuant's point is that
  // pre-RoPE keys have stable per-channel ranges; this measures it).
  bool nuq_post_rope_keys = false;
  // The model's RoPE, needed by kvquant3 keys (stored before RoPE, rotated after decoding).
  struct Rope {
    int32_t rot_dim = 0;  // 0: head_dim
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    bool neox = false;
    std::vector<float> freq_factors;  // rot_dim / 2 angle divisors (Llama 3), or empty
  } rope;
  // KIVI: R, the residual window (a multiple of 32; KIVI's default 128).
  int64_t kivi_residual_tokens = 128;
  // KIVI: quantize what leaves the window BEFORE the step's attention (simulated quantization,
  // Part E regime (a); R may then be 0) instead of at the next write (KIVI's reference order, so
  // a prefill chunk attends to itself in full precision).
  bool kivi_eager = false;
  // Prefix caching (kvmeta::PrefixCache). Not with KIVI: a KIVI block's rows are final only
  // below the sequence's residual window, which lives outside the blocks.
  bool prefix_caching = false;
  kvmeta::PrefixCacheMode prefix_mode = kvmeta::PrefixCacheMode::kHash;
  // Sparse decode (Quest, NSA): keep per block and KV head the min, max and sum of the post-RoPE
  // keys written (kvpolicy::BlockKeySummaries; 3 x head_dim floats per block, layer and head).
  bool key_summaries = false;
};

// What a compacted sequence keeps beside its table (travels with it when it is swapped out).
struct CompactionState {
  int64_t evicted = 0;
  int32_t lanes = 1;            // kept sets per layer: 1, or n_kv_head (per-KV-head selection)
  std::vector<SlotRange> dead;  // per lane: [layer * lanes + head]
  // kvquant3 pre-RoPE keys whose slots are not their positions: [layer][slot] -> position.
  std::vector<std::vector<int32_t>> positions;
};

class PagedKvCache final : public KvAccess {
 public:
  static Result<std::unique_ptr<PagedKvCache>> Create(const PagedKvCacheConfig& cfg);

  const kvmeta::BlockManager& manager() const { return mgr_; }
  const KvStore& store() const { return *store_; }
  int32_t block_tokens() const { return store_->config().block_tokens; }
  const kvquant::Fp8Scales& fp8_scales() const { return scales_; }
  // kvquant3 constants (empty unless K or V is kvquant3).
  const kvquant::NuqCalibration& nuq_calibration() const { return nuq_; }
  // True when sequences carry state outside the blocks (a KIVI window), which block swapping
  // alone would lose.
  bool has_sequence_state() const { return kivi_k_ || kivi_v_; }
  int64_t kivi_residual_tokens() const { return kivi_r_; }
  // f16 bytes currently held in KIVI windows, all sequences.
  int64_t ResidualBytes() const;

  bool Contains(int64_t seq) const { return mgr_.Contains(kvmeta::MakeSeqId(seq)); }
  int64_t NumTokens(int64_t seq) const;
  // Creates `seq` with room for n_tokens. False (nothing changed) when blocks are short.
  bool AddSequence(int64_t seq, int64_t n_tokens);
  // Creates `seq` from a prefix-cache match: shares m.full_blocks and, for a token-granular hit
  // ending inside a block, copies that block's first slots into a private block. Returns the
  // tokens `seq` now holds with valid K/V (the partial part is dropped when no block is free);
  // -1 when `seq` exists already. query_tokens is what the sequence asked for (statistics).
  int64_t AttachPrefix(int64_t seq, const kvmeta::PrefixMatch& m, int64_t query_tokens);
  // nullptr when prefix caching is off.
  kvmeta::PrefixCache* prefix_cache() { return prefix_.get(); }
  const kvmeta::PrefixCache* prefix_cache() const { return prefix_.get(); }
  // Adds room for n more tokens to `seq` (copy-on-write of a shared last block included).
  bool AppendSlots(int64_t seq, int64_t n);
  // Makes sure `seq` has room for `total` tokens (no-op if it already has).
  bool EnsureTokens(int64_t seq, int64_t total);
  // `child` shares every block of `parent` (parallel sampling, beams) and copies its window.
  Status Fork(int64_t parent, int64_t child);
  // Keeps the first n tokens of `seq`. With KIVI, keys of a group cut in two are dequantized back
  // into the window (their requantization later is lossy twice).
  Status Truncate(int64_t seq, int64_t n);
  void Free(int64_t seq);
  // Blocks a new sequence of n tokens takes (appends: BlocksToGrow, which counts spare slots and
  // copy-on-write).
  int64_t BlocksForTokens(int64_t n) const { return mgr_.BlocksForPrompt(n); }
  // Blocks needed so that `seq` holds `total` slots (a new sequence when unknown), incl. CoW.
  int64_t BlocksToGrow(int64_t seq, int64_t total) const;
  // Physical blocks of `seq` in position order (nullptr when unknown).
  const std::vector<int32_t>* Blocks(int64_t seq) const;
  // Calls `observer` with a physical block whenever its content stops being kept (evicted,
  // freed, or about to be written in place: kvmeta::BlockPool::ContentDropObserver), while its
  // bytes are still intact. Null removes it.
  void SetBlockDropObserver(std::function<void(int32_t block)> observer) {
    if (!observer) {
      mgr_.mutable_pool().SetContentDropObserver(nullptr);
      return;
    }
    mgr_.mutable_pool().SetContentDropObserver(
        [f = std::move(observer)](kvmeta::BlockId b) { f(kvmeta::BlockIndex(b)); });
  }
  KvStore& mutable_store() { return *store_; }
  // Blocks a sequence can get now: free, evictable (hash cache) and reclaimable (radix cache).
  int64_t num_free_blocks() const {
    return mgr_.num_free_blocks() + (prefix_ ? prefix_->ReclaimableBlocks() : 0);
  }
  int64_t num_blocks() const { return mgr_.num_blocks(); }
  // Fraction of blocks held by sequences (cached-only blocks count as free, as in vLLM).
  double Usage() const {
    return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_blocks());
  }
  // Tokens whose KV the sequences hold (the sum of their table lengths): the one definition of
  // "live tokens" (engine statistics and KV utilization both use it).
  int64_t LiveTokens() const;

  Status CheckInvariants() const;

  // Eviction (docs/adr/0005). Applies a compaction plan to `seq`: the blocks the compacted prefix
  // keeps are made private (copy-on-write of shared and prefix-cached blocks), every layer's kept
  // slots move to the front (row bytes copied as they are; a KIVI stream is decoded and written
  // again, its groups re-formed), and the blocks past plan.new_slots go back to the pool.
  // reposition: positions are cache-relative (StreamingLLM): a key moved from slot s to slot d is
  // re-rotated by d - s, so slot == position again; otherwise keys keep their positions (kvquant3
  // pre-RoPE keys remember them per slot). False, nothing changed, when no block is free for the
  // copies. A compacted sequence never publishes to the prefix cache again.
  Result<bool> Compact(int64_t seq, const kvmeta::CompactionPlan& plan, bool reposition);
  // Blocks Compact(seq, plan) would take from the pool (copy-on-write of shared kept blocks).
  int64_t BlocksToCompact(int64_t seq, int64_t new_slots) const;
  // Tokens evicted from `seq` so far (slot = token index - evicted for new tokens).
  int64_t Evicted(int64_t seq) const;
  bool IsCompacted(int64_t seq) const { return compacted_.count(seq) != 0; }
  // Swapping: the state to keep while `seq`'s blocks are away (nullopt: never compacted), and
  // back once its blocks are restored.
  std::optional<CompactionState> ExportCompaction(int64_t seq) const;
  void ImportCompaction(int64_t seq, CompactionState state);
  // L2 norms of the keys of `slots` in `layer` (knorm): of KV head `kv_head`, or of all heads of
  // a row together when kv_head < 0.
  void KeyNorms(int64_t seq, int32_t layer, std::span<const int32_t> slots, float* out,
                int32_t kv_head = -1) const;
  // Live slots of `seq` in `layer` (and KV head): the table's slots minus the dead range.
  int64_t LiveSlots(int32_t layer, int64_t seq, int32_t kv_head = 0) const;
  // Whether the K and V dtypes let KV heads keep different slots (kvquant::HeadByteRanges).
  Status CheckPerHeadCompaction() const;

  // KvAccess.
  void WriteAt(int32_t layer, int64_t seq, int64_t slot0, int64_t pos0, int64_t n, const float* k,
               const float* v, int64_t stride) override;
  SlotRange DeadSlots(int32_t layer, int64_t seq, int32_t kv_head) const override;
  kvpolicy::BlockKeySummaries KeySummaries(int32_t layer) const override;
  bool has_key_summaries() const { return !summaries_.empty(); }
  // Recomputes the key summaries of `seq`'s blocks from the cache's rows (after a swap-in, whose
  // blocks are new).
  void RebuildKeySummaries(int64_t seq);
  kernels::KvPageView KeyView(int32_t layer, int64_t seq) const override;
  kernels::KvPageView ValueView(int32_t layer, int64_t seq) const override;

 private:
  // The f16 window of one stream of one layer: positions begin .. begin + n - 1 (everything
  // before `begin` is quantized in the blocks).
  struct Window {
    int64_t begin = 0;
    std::vector<uint16_t> rows;
  };
  struct KiviSeq {
    std::vector<Window> k, v;  // per layer
  };
  // Compaction of one stream of one layer: rows copied as bytes, or decoded, moved, (re-rotated)
  // and encoded again.
  void CopyKeptRows(KvKind kind, int32_t layer, const std::vector<int32_t>& table,
                    const std::vector<kvmeta::SlotMove>& moves);
  void RewriteKeptRows(KvKind kind, int32_t layer, int64_t seq, const kvmeta::CompactionPlan& plan,
                       bool rerotate);
  bool RotatesKeysOnMove(bool reposition) const;
  // Per-KV-head compaction: moves head `head`'s bytes only.
  void CopyKeptHeadRows(KvKind kind, int32_t layer, int32_t head, const std::vector<int32_t>& table,
                        const std::vector<kvmeta::SlotMove>& moves);
  Status CheckCompactionPlan(int64_t seq, const kvmeta::CompactionPlan& plan, bool reposition);

  PagedKvCache(kvmeta::BlockManager mgr, std::unique_ptr<KvStore> store)
      : mgr_(std::move(mgr)), store_(std::move(store)) {}
  void Apply(const kvmeta::WriteOutcome& out);
  // Radix cache: evicts cached-only blocks until `n` blocks are free in the pool.
  void MakeRoom(int64_t n);
  void Refresh(int64_t seq);
  const std::vector<int32_t>& Table(int64_t seq) const;
  int64_t WindowTokens(const Window& w) const;
  // kvquant3: the n post-RoPE key rows rotated back to pre-RoPE (scratch owned by the cache);
  // *stride becomes the scratch's row stride.
  const float* PreRopeKeys(int64_t pos0, int64_t n, const float* k, int64_t* stride);
  void WriteRows(KvKind kind, int32_t layer, const std::vector<int32_t>& table, int64_t pos0,
                 int64_t n, const float* x, int64_t stride);
  void WriteKiviKeys(int32_t layer, int64_t seq, int64_t pos0, int64_t n, const float* k,
                     int64_t stride);
  void WriteKiviValues(int32_t layer, int64_t seq, int64_t pos0, int64_t n, const float* v,
                       int64_t stride);
  // Quantizes the oldest `count` window tokens into the blocks and drops them from the window.
  void FlushKeys(int32_t layer, const std::vector<int32_t>& table, Window& w, int64_t count);
  void FlushValues(int32_t layer, const std::vector<int32_t>& table, Window& w, int64_t count);
  // Cuts a window back to positions < n (keys: dequantizes a cut group back into the window).
  void RollbackKeys(int32_t layer, const std::vector<int32_t>& table, Window& w, int64_t n);
  void RollbackValues(Window& w, int64_t n);
  void AttachWindow(const Window& w, kernels::KvPageView* view) const;

  kvmeta::BlockManager mgr_;
  std::unique_ptr<KvStore> store_;
  std::unordered_map<int64_t, std::vector<int32_t>> tables_;  // dense copies for the kernels
  std::optional<kvquant::RowCodec> k_codec_, v_codec_;        // per-token rows (not KIVI keys)
  kvquant::Fp8Scales scales_;
  bool fp8_calibrate_ = false;
  bool kivi_k_ = false, kivi_v_ = false, kivi_eager_ = false;
  int64_t kivi_r_ = 128;
  std::unordered_map<int64_t, KiviSeq> kivi_;
  std::unordered_map<int64_t, CompactionState> compacted_;
  PagedKvCacheConfig::Rope rope_cfg_;
  // kvquant3: calibration, RoPE angles for keys, and scratch for pre-RoPE key rows.
  kvquant::NuqCalibration nuq_;
  bool nuq_k_ = false, nuq_v_ = false, nuq_post_rope_ = false;
  std::unique_ptr<kvquant::RopeTable> rope_;
  std::vector<float> pre_rope_;
  // Sparse decode: [layer][block][kv head][min, max, sum][head_dim] (empty when off).
  std::vector<float> summaries_;
  void UpdateKeySummaries(int32_t layer, const std::vector<int32_t>& table, int64_t slot0,
                          int64_t n, const float* k, int64_t stride);
  void CopyKeySummaries(int32_t src, int32_t dst);
  float* SummaryOf(int32_t layer, int32_t block, int32_t kvh);
  std::unique_ptr<kvmeta::PrefixCache> prefix_;  // after mgr_: destroyed before the pool
};

}  // namespace kvforge::kvstore
