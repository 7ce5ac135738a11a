// kv_store.h — the bytes of the KV cache: a pool of fixed-size blocks per layer, and per-sequence
// block lists. Memory layout (see docs/kv_cache.md):
//   K (and V, separately) for layer l: [num_blocks][block_tokens][n_kv_head][head_dim]
// A contiguous cache is the special case block_tokens == max context, one block per sequence.
// This class owns only bytes plus a minimal block list per slot; the paged-attention issue moves
// ownership decisions (ref counts, copy-on-write, prefix sharing) to kvmeta.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kvforge/status.h"
#include "model/kv_access.h"

namespace kvforge::model {

struct KvStoreConfig {
  int32_t n_layer = 0;
  int32_t n_kv_head = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 16;
  int64_t num_blocks = 0;
  int32_t num_seqs = 1;   // sequence slots
  bool f16 = true;        // element type of K/V: f16 (default, like llama.cpp) or f32
};

class KvStore final : public KvAccess {
 public:
  static Result<std::unique_ptr<KvStore>> Create(const KvStoreConfig& cfg);
  ~KvStore() override;

  // Makes sure `seq` has blocks for positions [0, n_tokens). Returns false (changing nothing)
  // when the pool has too few free blocks: running out is an ordinary outcome.
  bool Reserve(int32_t seq, int64_t n_tokens);
  // Returns the slot's blocks to the pool.
  void Release(int32_t seq);
  int64_t Capacity(int32_t seq) const;
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }
  uint64_t total_bytes() const { return bytes_; }
  const KvStoreConfig& config() const { return cfg_; }

  bool is_f16() const override { return cfg_.f16; }
  uint8_t* KeyRow(int32_t layer, int32_t seq, int64_t pos) override;
  uint8_t* ValueRow(int32_t layer, int32_t seq, int64_t pos) override;
  kernels::KvPageView KeyView(int32_t layer, int32_t seq) const override;
  kernels::KvPageView ValueView(int32_t layer, int32_t seq) const override;

 private:
  explicit KvStore(const KvStoreConfig& cfg);
  uint8_t* Row(const uint8_t* layer_base, int32_t seq, int64_t pos) const;

  KvStoreConfig cfg_;
  size_t token_bytes_ = 0;
  size_t block_bytes_ = 0;
  uint64_t bytes_ = 0;
  uint8_t* data_ = nullptr;  // [2][n_layer][num_blocks][block_tokens][n_kv_head][head_dim]
  std::vector<int32_t> free_;
  std::vector<std::vector<int32_t>> tables_;  // per slot: block ids in position order
};

}  // namespace kvforge::model
