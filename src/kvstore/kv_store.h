// kvstore/kv_store.h — the bytes of the KV cache: a pool of fixed-size blocks, no bookkeeping.
//
// Layout (docs/kv_cache.md, docs/kv_quantization.md): each stream of layer l (K and V, or one MLA
// latent whose K and V views are the same bytes) occupies one region
//   [num_blocks][rows_per_block][row_stride]
// where a row is one token encoded as the stream's dtype (codes then inline scales, see
// kvquant/row_codec.h), or for KIVI keys one group of 32 tokens (kvquant/kivi.h). Row sizes and
// strides come from KvLayout (rows padded to row_align_bytes, 64 by default). K and V may have
// different dtypes. Attention over one layer reads contiguous rows inside each block, and a
// block's bytes for one layer are one memcpy. Which block belongs to which sequence is kvmeta's
// business; this class only maps (layer, block, row) to addresses and copies blocks
// (copy-on-write, swap). Thread-safety: engine thread only; distinct rows may be written
// concurrently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "kernels/kernels.h"
#include "kvforge/status.h"
#include "kvquant/kv_dtype.h"
#include "kvstore/kv_layout.h"

namespace kvforge::kvstore {

struct KvStoreConfig {
  int32_t n_layer = 0;
  int32_t n_kv_head = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 16;
  int64_t num_blocks = 0;
  KvDtype k_dtype = KvDtype::kF16;  // element type of K: f16 (default, as llama.cpp), f32, ...
  KvDtype v_dtype = KvDtype::kF16;
  int64_t row_align_bytes = 64;  // power of two; 1 packs rows
  bool turbo_qjl = false;        // turbo K: TurboQuant-prod (QJL residual sketch), kvquant/turbo.h
  // MLA (docs/adr/0007): > 0 stores one latent stream per layer instead of K and V. Its rows are
  // head_dim = latent_rank + rope dims wide (n_kv_head 1); the K and V views are the same bytes,
  // the value being each row's first latent_rank values. v_dtype must equal k_dtype.
  int32_t latent_rank = 0;
  bool latent() const { return latent_rank > 0; }
};

enum class KvKind { kKey = 0, kValue = 1 };

class KvStore {
 public:
  // Validates the shape through KvLayout (blocks of 32 run along the token row, as llama.cpp).
  static Result<std::unique_ptr<KvStore>> Create(const KvStoreConfig& cfg);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  const KvStoreConfig& config() const { return cfg_; }
  const KvLayout& layout() const { return layout_; }
  KvDtype dtype(KvKind kind) const { return kind == KvKind::kKey ? cfg_.k_dtype : cfg_.v_dtype; }
  // Streams stored per layer: 2 (K, V), or 1 (an MLA latent, which both kinds address).
  int num_streams() const { return num_streams_; }
  uint64_t total_bytes() const { return bytes_; }
  // Bytes one block occupies across all layers, K and V (row padding included).
  uint64_t block_bytes_all_layers() const { return static_cast<uint64_t>(layout_.BlockBytes()); }
  // Bytes the store spends per token across all layers, K and V (padding included).
  uint64_t bytes_per_token() const { return block_bytes_all_layers() / cfg_.block_tokens; }
  // Tokens per row of a stream (1, or the KIVI group for KIVI keys) and the row stride.
  int32_t row_tokens(KvKind kind) const { return row_tokens_[Stream(kind)]; }
  size_t row_stride(KvKind kind) const { return row_stride_[Stream(kind)]; }

  // Row `row` (0 .. block_tokens / row_tokens - 1) of a block.
  uint8_t* Row(KvKind kind, int32_t layer, int32_t block, int32_t row) const {
    const int k = Stream(kind);
    return data_ + region_offset_[k] + static_cast<size_t>(layer) * region_bytes_[k] +
           static_cast<size_t>(block) * piece_bytes_[k] + static_cast<size_t>(row) * row_stride_[k];
  }
  // The row holding token slot `slot` of a block.
  uint8_t* SlotRow(KvKind kind, int32_t layer, int32_t block, int32_t slot) const {
    return Row(kind, layer, block, slot / row_tokens(kind));
  }
  // Paged view of one layer for a sequence whose block ids (in position order) are `table`. The
  // caller adds what lives outside the blocks (fp8 scales, a KIVI residual window).
  kernels::KvPageView View(KvKind kind, int32_t layer, const int32_t* table) const;
  // Copies the rows covering the first n tokens of block src to block dst in every layer
  // (partial copy-on-write; a partly filled KIVI key group row is copied whole).
  void CopyBlockPrefix(int32_t src, int32_t dst, int32_t n_tokens);
  // Serialises block `block` ([layer][K, V] or [layer][latent] order) into block_bytes_all_layers()
  // bytes at dst, and back: the unit of swapping to host memory (and later of offload tiers).
  void ReadBlock(int32_t block, uint8_t* dst) const;
  void WriteBlock(int32_t block, const uint8_t* src);

 private:
  KvStore(const KvStoreConfig& cfg, KvLayout layout) : cfg_(cfg), layout_(std::move(layout)) {}
  int Stream(KvKind kind) const { return num_streams_ == 1 ? 0 : static_cast<int>(kind); }
  KvStoreConfig cfg_;
  KvLayout layout_;
  int num_streams_ = 2;
  int32_t row_tokens_[2] = {1, 1};
  size_t row_stride_[2] = {0, 0};
  size_t piece_bytes_[2] = {0, 0};    // one block of one layer: rows_per_block x row_stride
  size_t region_bytes_[2] = {0, 0};   // one layer: num_blocks x piece, 64-aligned
  size_t region_offset_[2] = {0, 0};  // where the K (V) regions of all layers start
  const kvquant::TurboSpec* turbo_[2] = {nullptr, nullptr};  // turbo dtypes (registry-owned)
  uint64_t bytes_ = 0;
  uint8_t* data_ = nullptr;
};

// The KvLayoutConfig KvStore uses for `cfg` (groups along the token row; KIVI R irrelevant here).
KvLayoutConfig StoreLayoutConfig(const KvStoreConfig& cfg);

}  // namespace kvforge::kvstore
