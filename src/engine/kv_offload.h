// engine/kv_offload.h — the engine's side of the KV offload tiers (docs/kv_cache.md#tiers):
// which chunks of a sequence's computed prefix to write down the tier chain, and how to extend a
// new sequence's hot-cache hit with chunks found below.
//
// A chunk is chunk_blocks consecutive full blocks starting at a multiple of chunk_blocks (the
// last chunk of a finished sequence may be shorter). Its key is the 128-bit chained block key
// (kvmeta/block_hash.h) of its last block, mixed with its first block's index, under the KV
// fingerprint, so one key names one range of content for one model and format, across
// processes and chunk sizes. Writes copy the blocks' bytes on the
// engine thread (a memcpy) and leave compression and I/O to the chain's writer. Loads are
// verified in full (kvstore/kv_chunk.h); anything that fails is a miss and is recomputed.
// Thread-safety: engine thread only (the chain it owns is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvforge/engine_config.h"
#include "kvforge/kv_tier_stats.h"
#include "kvmeta/block_hash.h"
#include "kvstore/kv_chunk.h"
#include "kvstore/paged_kv_cache.h"
#include "kvstore/tier_chain.h"

namespace kvforge::model {
class Model;
}

namespace kvforge::engine {

// Everything that makes KV bytes of the same tokens differ: the model file (its header and
// samples of its tensor data), the KV layout, dtypes, block size, FP8 scales, RoPE, and the chunk
// format version.
uint64_t KvFingerprint(const model::Model& model, const kvstore::PagedKvCache& cache);

struct KvOffloadStats {
  int64_t loaded_tokens = 0;  // tokens whose KV came from a tier instead of being computed
  int64_t loaded_chunks = 0;
  int64_t stored_chunks = 0;    // chunks queued for the tiers
  int64_t rejected_chunks = 0;  // found but failed verification (recomputed)
  int64_t dropped_writes = 0;   // chunks the write queue had no room for
  std::vector<KvTierStats> tiers;
};

class KvOffload {
 public:
  // nullptr (and Ok) when the config names no tier. Refuses configs the tiers cannot serve.
  static Result<std::unique_ptr<KvOffload>> Create(const EngineConfig& config,
                                                   const model::Model& model,
                                                   kvstore::PagedKvCache* cache);
  // From parts (tests): `chain` holds the tiers.
  KvOffload(kvstore::PagedKvCache* cache, std::unique_ptr<kvstore::TierChain> chain,
            uint64_t fingerprint, int64_t chunk_blocks, kvstore::ChunkCompression compression);

  // `seq` has computed tokens [0, n) into its blocks: queues each complete chunk not yet below.
  // final: the sequence is finishing, so a last partial chunk goes too.
  void StoreComputed(int64_t seq, std::span<const int32_t> tokens, int64_t n, std::string_view salt,
                     bool final);
  // Resident `seq` holds the first `have` tokens of `query` (a hot-cache hit; in radix mode it may
  // end inside a block, which is then the sequence's own copy).
  // Loads the chunks that follow from the tiers into new blocks of `seq`; returns the tokens it
  // holds now (>= have).
  int64_t LoadPrefix(int64_t seq, std::span<const int32_t> query, std::string_view salt,
                     int64_t have);
  void Forget(int64_t seq) { progress_.erase(seq); }

  KvOffloadStats stats() const;
  std::string Describe() const;  // for the start-up log
  void Flush() { chain_->Flush(); }
  uint64_t fingerprint() const { return fingerprint_; }
  int64_t chunk_blocks() const { return chunk_blocks_; }

 private:
  struct Progress {
    std::vector<kvmeta::BlockKey> keys;  // [full blocks seen] chained keys
    int64_t stored_blocks = 0;           // blocks [0, stored_blocks) are in chunks already
  };
  kvmeta::BlockKey ParentKey(const std::vector<kvmeta::BlockKey>& keys, int64_t first,
                             std::string_view salt) const;
  // The tier key of the chunk that starts at block `first` and ends with the block keyed `last`.
  kvstore::TierKey TierKeyFor(const kvmeta::BlockKey& last, int64_t first) const;
  kvstore::ChunkMeta Meta(const std::vector<kvmeta::BlockKey>& keys, int64_t first, int64_t count,
                          std::string_view salt) const;
  void StoreChunk(int64_t seq, std::span<const int32_t> tokens, const Progress& p, int64_t first,
                  int64_t count, std::string_view salt);
  // Tries the chunk [first, first + count) of `query`; true when its blocks [from, ...) are now
  // written into `seq`.
  bool LoadChunk(int64_t seq, std::span<const int32_t> query,
                 const std::vector<kvmeta::BlockKey>& keys, int64_t first, int64_t count,
                 int64_t from, std::string_view salt);

  kvstore::PagedKvCache* cache_;
  std::unique_ptr<kvstore::TierChain> chain_;
  const uint64_t fingerprint_;
  const int64_t chunk_blocks_;
  const kvstore::ChunkCompression compression_;
  std::unordered_map<int64_t, Progress> progress_;
  KvOffloadStats stats_;
};

}  // namespace kvforge::engine
