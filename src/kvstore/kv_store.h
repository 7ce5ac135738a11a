// kvstore/kv_store.h — the bytes of the KV cache: a pool of fixed-size blocks, no bookkeeping.
//
// Layout (docs/kv_cache.md): K and V of layer l each occupy one region
//   [num_blocks][block_tokens][n_kv_head][head_dim]   (f16 or f32 elements)
// so attention over one layer reads contiguous token rows inside each block, and a block's bytes
// for one layer are one memcpy. Which block belongs to which sequence is kvmeta's business; this
// class only maps (layer, block, slot) to addresses and copies blocks (copy-on-write, swap).
// Regions are 64-byte aligned. Thread-safety: engine thread only; distinct rows may be written
// concurrently.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/kernels.h"
#include "kvforge/status.h"

namespace kvforge::kvstore {

struct KvStoreConfig {
  int32_t n_layer = 0;
  int32_t n_kv_head = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 16;
  int64_t num_blocks = 0;
  bool f16 = true;  // element type of K/V: f16 (default, as llama.cpp) or f32
};

enum class KvKind { kKey = 0, kValue = 1 };

class KvStore {
 public:
  static Result<std::unique_ptr<KvStore>> Create(const KvStoreConfig& cfg);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  const KvStoreConfig& config() const { return cfg_; }
  uint64_t total_bytes() const { return bytes_; }
  // Bytes one block occupies across all layers, K and V.
  uint64_t block_bytes_all_layers() const { return 2ull * cfg_.n_layer * block_bytes_; }
  // Bytes per token across all layers, K and V.
  uint64_t bytes_per_token() const { return 2ull * cfg_.n_layer * token_bytes_; }

  uint8_t* Row(KvKind kind, int32_t layer, int32_t block, int32_t slot) const {
    return data_ +
           (static_cast<size_t>(kind) * cfg_.n_layer + static_cast<size_t>(layer)) * region_bytes_ +
           static_cast<size_t>(block) * block_bytes_ + static_cast<size_t>(slot) * token_bytes_;
  }
  // Paged view of one layer for a sequence whose block ids (in position order) are `table`.
  kernels::KvPageView View(KvKind kind, int32_t layer, const int32_t* table) const;
  // Copies block src to dst in every layer, K and V (copy-on-write).
  void CopyBlock(int32_t src, int32_t dst);
  // Copies `n` tokens' rows of block src to block dst in every layer (partial copy-on-write).
  void CopyBlockPrefix(int32_t src, int32_t dst, int32_t n_tokens);
  // Serialises block `block` ([layer][K, V] order) into block_bytes_all_layers() bytes at dst,
  // and back: the unit of swapping to host memory (and later of offload tiers).
  void ReadBlock(int32_t block, uint8_t* dst) const;
  void WriteBlock(int32_t block, const uint8_t* src);

 private:
  explicit KvStore(const KvStoreConfig& cfg) : cfg_(cfg) {}
  KvStoreConfig cfg_;
  size_t token_bytes_ = 0;
  size_t block_bytes_ = 0;
  size_t region_bytes_ = 0;  // one layer's K (or V): num_blocks * block_bytes_, 64-aligned
  uint64_t bytes_ = 0;
  uint8_t* data_ = nullptr;
};

}  // namespace kvforge::kvstore
