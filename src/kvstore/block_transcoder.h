// kvstore/block_transcoder.h — converts serialized KV blocks (KvStore::ReadBlock's form) between
// the hot pool's dtypes and a smaller dtype for the offload tiers, so a chunk below the pool takes
// fewer bytes in RAM, on disk and in Redis (docs/adr/0015-offload-transcoding.md).
//
// Forms (both [n_blocks] blocks back to back):
//   pool block   = KvLayout of the pool: [layer][stream][rows_per_block][row_stride], the rows
//                  padded to the pool's row alignment;
//   stored block = the same order with each stream in its stored dtype and rows packed (no
//                  padding): [layer][stream][rows_per_block][row_bytes].
// A stream whose dtype takes more bytes per row than the stored dtype is decoded to floats and
// re-encoded (kvquant/row_codec.h); a stream that is not larger is copied as it is. ToPool is not
// the inverse of ToStored: it returns the pool-dtype encoding of the stored values, so a load
// costs the stored dtype's rounding (what the user chose in exchange for the bytes).
// Supported: pool streams of f32, f16, bf16, int8, q8_0 and q4_0 (their rows decode without the
// cache's scales or calibration), stored dtypes f16, bf16, int8, q8_0 and q4_0; MLA latents too.
// Thread-safety: immutable after Create; the conversions may run on any thread at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "kvquant/kv_dtype.h"
#include "kvquant/row_codec.h"
#include "kvstore/kv_layout.h"
#include "kvstore/kv_store.h"

namespace kvforge::kvstore {

class BlockTranscoder {
 public:
  // InvalidArgument (with the reason) when `stored` is not a supported target, a pool stream's
  // dtype cannot be decoded alone, no stream would shrink, or a row does not split into the
  // stored dtype's 32-value blocks.
  static Result<std::unique_ptr<BlockTranscoder>> Create(const KvStoreConfig& pool,
                                                         kvquant::KvDtype stored);

  uint64_t pool_block_bytes() const { return static_cast<uint64_t>(pool_.BlockBytes()); }
  uint64_t stored_block_bytes() const { return static_cast<uint64_t>(stored_.BlockBytes()); }
  // The dtype each stream of a layer is stored as ({K, V} or {latent}).
  size_t num_streams() const { return streams_.size(); }
  kvquant::KvDtype stored_dtype(size_t stream) const { return streams_[stream].stored.dtype(); }
  // "k f16 -> q8_0, v f16 -> q8_0 (0.53x the bytes)" for the start-up log.
  std::string Describe() const;

  // pool: [n_blocks x pool_block_bytes()] -> out: [n_blocks x stored_block_bytes()].
  void ToStored(const uint8_t* pool, int64_t n_blocks, uint8_t* out) const;
  // stored: [n_blocks x stored_block_bytes()] -> out: [n_blocks x pool_block_bytes()], padding
  // bytes zero.
  void ToPool(const uint8_t* stored, int64_t n_blocks, uint8_t* out) const;

 private:
  struct StreamCodecs {
    kvquant::RowCodec pool;
    kvquant::RowCodec stored;
    bool copy = false;  // the same dtype both ways: rows are copied
  };
  BlockTranscoder(KvLayout pool, KvLayout stored, std::vector<StreamCodecs> streams)
      : pool_(std::move(pool)), stored_(std::move(stored)), streams_(std::move(streams)) {}
  // Converts one block: every layer's rows of every stream from `from` (layout a) to `to` (b).
  enum class Direction { kToStored, kToPool };
  void ConvertBlock(const uint8_t* from, uint8_t* to, Direction d) const;

  KvLayout pool_;
  KvLayout stored_;
  std::vector<StreamCodecs> streams_;  // [streams per layer]
};

}  // namespace kvforge::kvstore
