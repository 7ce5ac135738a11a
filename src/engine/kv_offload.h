// engine/kv_offload.h — the engine's side of the KV offload tiers (docs/kv_cache.md#tiers):
// which chunks of a sequence's computed prefix to write down the tier chain, and how to extend a
// new sequence's hot-cache hit with chunks found below.
//
// A chunk is chunk_blocks consecutive full blocks starting at a multiple of chunk_blocks (the
// last chunk of a finished sequence may be shorter). Its key is the 128-bit chained block key
// (kvmeta/block_hash.h) of its last block, mixed with its first block's index, under the KV
// fingerprint, so one key names one range of content for one model and format, across
// processes and chunk sizes. Writes copy the blocks' bytes on the
// engine thread (a memcpy) and leave compression and I/O to the chain's writer. Loads run on a
// loader thread (kvstore/tier_loader.h): a waiting sequence asks for its chunks (Loading), is
// admitted once they are fetched, decoded and verified in full (kvstore/kv_chunk.h), and then
// only copies them into its blocks (LoadPrefix). Anything that fails, or is not there by the
// time-out, is a miss and is recomputed (docs/adr/0013-async-tier-loads.md).
// Thread-safety: engine thread only (the chain and the loader it owns are thread-safe).
#pragma once

#include <atomic>
#include <chrono>
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
#include "kvstore/block_transcoder.h"
#include "kvstore/byte_buffer_pool.h"
#include "kvstore/kv_chunk.h"
#include "kvstore/paged_kv_cache.h"
#include "kvstore/tier_chain.h"
#include "kvstore/tier_loader.h"

namespace kvforge::model {
class Model;
}

namespace kvforge::engine {

// Everything that makes KV bytes of the same tokens differ: the model file (its header and
// samples of its tensor data), the KV layout, dtypes, block size, FP8 scales, RoPE, and the chunk
// format version.
uint64_t KvFingerprint(const model::Model& model, const kvstore::PagedKvCache& cache);
// The fingerprint of chunks stored through `t`: their bytes hold other values than the pool's
// (the stored dtype's rounding), so they are never mixed with untranscoded ones.
uint64_t TranscodedFingerprint(uint64_t fingerprint, const kvstore::BlockTranscoder& t);
// The transcoder kv_offload_dtype asks for: null when it is auto or names the pool's own dtype.
Result<std::shared_ptr<const kvstore::BlockTranscoder>> MakeOffloadTranscoder(
    const EngineConfig& config, const kvstore::KvStoreConfig& pool);

struct KvOffloadStats {
  int64_t loaded_tokens = 0;  // tokens whose KV came from a tier instead of being computed
  int64_t loaded_chunks = 0;
  int64_t stored_chunks = 0;    // chunks queued for the tiers
  int64_t rejected_chunks = 0;  // found but failed verification (recomputed)
  int64_t dropped_writes = 0;   // chunks the write queue had no room for
  int64_t load_timeouts = 0;    // fetches not done by the time-out (their sequence recomputed)
  int64_t prefetches = 0;       // fetches started before their sequence could be admitted
  std::vector<KvTierStats> tiers;
};

class KvOffload {
 public:
  // nullptr (and Ok) when the config names no tier. Refuses configs the tiers cannot serve.
  static Result<std::unique_ptr<KvOffload>> Create(const EngineConfig& config,
                                                   const model::Model& model,
                                                   kvstore::PagedKvCache* cache);
  // From parts (tests): `chain` holds the tiers. transcoder: chunks are stored in its smaller
  // dtype (null: as the pool holds them); `fingerprint` must then already say so
  // (TranscodedFingerprint).
  KvOffload(kvstore::PagedKvCache* cache, std::unique_ptr<kvstore::TierChain> chain,
            uint64_t fingerprint, int64_t chunk_blocks, kvstore::ChunkCompression compression,
            std::chrono::milliseconds load_timeout = std::chrono::milliseconds(1000),
            KvOffloadWrite write = KvOffloadWrite::kThrough,
            std::shared_ptr<const kvstore::BlockTranscoder> transcoder = nullptr);
  // Writes back what is still deferred (the cache must still be alive), then stops the loader
  // before the chain it reads goes.
  ~KvOffload();

  // `seq` has computed tokens [0, n) into its blocks: queues each complete chunk not yet below
  // (write-back: defers it until the hot pool drops one of its blocks). final: the sequence is
  // finishing, so a last partial chunk goes too.
  void StoreComputed(int64_t seq, std::span<const int32_t> tokens, int64_t n, std::string_view salt,
                     bool final);
  // Whether waiting `seq`, whose hot-cache hit is the first `have` tokens of `query`, should wait
  // for the tiers before it is admitted. `query` is the part of `tokens` (the sequence's tokens)
  // whose KV may be reused; the chunk that holds its end is looked up by the keys of `tokens`,
  // so an exact repeat of a stored sequence loads its last chunk too (all but the block that
  // holds the last token, which must be computed). The first call starts fetching the chunks after
  // the hit on the loader thread, waits a grace of 2 ms for it, and says true if it is still
  // running; later calls say true while that fetch runs. False when there is nothing below the hit
  // to look for, once the fetch is done, or once it has run past the time-out (the sequence then
  // recomputes what it would have brought).
  bool Loading(int64_t seq, std::span<const int32_t> tokens, std::span<const int32_t> query,
               std::string_view salt, int64_t have);
  // The same first step for a sequence that cannot be admitted yet (requests ahead of it hold
  // the room): starts its fetch without waiting, so Loading finds it done at admission. Nothing
  // when a fetch for it runs already or there is nothing below the hit.
  void Prefetch(int64_t seq, std::span<const int32_t> tokens, std::span<const int32_t> query,
                std::string_view salt, int64_t have);
  // Resident `seq` holds the first `have` tokens of `query` (a hot-cache hit; in radix mode it may
  // end inside a block, which is then the sequence's own copy). Copies the chunks its finished
  // fetch brought that follow the hit into new blocks of `seq`; returns the tokens it holds now
  // (>= have). Never waits for a tier: with no finished fetch it returns `have`.
  int64_t LoadPrefix(int64_t seq, std::span<const int32_t> query, std::string_view salt,
                     int64_t have);
  // For an engine with nothing to step but loads: blocks until a fetch finishes, the earliest
  // time-out passes, or `max_wait` does.
  void WaitForLoads(std::chrono::microseconds max_wait);
  bool loads_pending() const;
  void Forget(int64_t seq);

  // Write-back: queues every deferred chunk now (at shutdown, or to make the tiers complete).
  void WriteBackAll();
  int64_t deferred_chunks() const { return static_cast<int64_t>(deferred_.size()); }

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
  // A verified chunk a fetch brought: blocks [first, first + count) of its query.
  struct FetchedChunk {
    int64_t first = 0;
    int64_t count = 0;
    std::vector<uint8_t> raw;  // [count x block_bytes], the blocks as KvStore::ReadBlock wrote them
  };
  // One sequence's fetch, shared by the engine thread and the loader. The loader fills `chunks`
  // and then sets `done` (release); the engine reads them after seeing it (acquire).
  struct Fetch {
    explicit Fetch(std::atomic<int64_t>* held_bytes) : held(held_bytes) {}
    ~Fetch() { held->fetch_sub(bytes); }  // what it held leaves the prefetch budget
    std::vector<int32_t> tokens;  // the sequence's tokens; chunks are keyed and checked by them
    int64_t usable = 0;           // tokens [0, usable) may be loaded (checked again at admission)
    std::string salt;
    int64_t from_block = 0;  // the first block not in the hot hit when it was asked for
    std::chrono::steady_clock::time_point deadline;
    std::vector<FetchedChunk> chunks;  // in block order, contiguous from from_block's chunk
    int64_t bytes = 0;                 // raw bytes in chunks, counted in *held
    std::atomic<int64_t>* held;
    std::atomic<bool> cancelled{false};
    std::atomic<bool> done{false};
    bool gave_up = false;   // engine thread: past the time-out; the sequence recomputes
    bool prefetch = false;  // started before its sequence could be admitted (set before Submit)
    // Loader: stopped at the held-bytes budget with chunks still to look for (set before done).
    bool budget_cut = false;
  };
  kvstore::ChunkMeta Meta(const std::vector<kvmeta::BlockKey>& keys, int64_t first, int64_t count,
                          std::string_view salt) const;
  void StoreChunk(int64_t seq, std::span<const int32_t> tokens, const Progress& p, int64_t first,
                  int64_t count, std::string_view salt);
  // Copies the chunk's blocks ([count] physical ids) and queues it; false when the queue had no
  // room (dropped, counted by the chain).
  bool QueueChunk(const kvstore::TierKey& key, const kvstore::ChunkMeta& meta,
                  std::vector<int32_t> ids, std::span<const int32_t> blocks);
  // Write-back: a computed chunk not written yet, held until one of its blocks is dropped.
  struct DeferredChunk {
    kvstore::ChunkMeta meta;
    std::vector<int32_t> ids;     // [num_blocks x block_tokens] its tokens
    std::vector<int32_t> blocks;  // [num_blocks] the physical blocks that hold it
  };
  void Defer(const kvstore::TierKey& key, const kvstore::ChunkMeta& meta, std::vector<int32_t> ids,
             std::span<const int32_t> blocks);
  // The cache's block-drop observer: writes back every deferred chunk `block` is part of, while
  // its bytes are intact.
  void OnBlockDropped(int32_t block);
  // Queues the deferred chunk `key` (if it is not below already) and forgets it.
  // wait_for_room: block until the queue has room rather than drop it.
  void WriteDeferred(const kvstore::TierKey& key, bool wait_for_room);
  // Starts fetching the chunks after the hot hit of `have` tokens for `seq` on the loader thread;
  // null when there is nothing below the hit to look for. prefetch: the sequence cannot be
  // admitted yet (its fetch may hold only half the budget, and is redone at admission if cut).
  std::shared_ptr<Fetch> StartFetch(int64_t seq, std::span<const int32_t> tokens,
                                    std::span<const int32_t> query, std::string_view salt,
                                    int64_t have, bool prefetch);
  // Blocks until `f` is done or `grace` passes; whether it is done.
  bool WaitForFetch(const Fetch& f, std::chrono::microseconds grace);
  // Loader thread: finds, fetches and verifies the chunks of `f`'s tokens from its first block on,
  // stopping at the first one no tier has, a failure, a cancel, or the prefetch byte budget.
  void RunFetch(Fetch* f);
  // Fetches and verifies the chunk [first, first + count) of `tokens`; false if it is not usable.
  bool FetchChunk(std::span<const int32_t> tokens, const std::vector<kvmeta::BlockKey>& keys,
                  int64_t first, int64_t count, std::string_view salt, FetchedChunk* out);
  // Writes `f`'s chunks that continue the hot hit of `have` tokens into `seq`; returns its tokens.
  // *in_tiers_to: the end block of the last whole chunk used (0: none).
  int64_t CopyFetched(int64_t seq, const Fetch& f, int64_t have, int64_t* in_tiers_to);

  kvstore::PagedKvCache* cache_;
  std::unique_ptr<kvstore::TierChain> chain_;
  const uint64_t fingerprint_;
  const int64_t chunk_blocks_;
  const kvstore::ChunkCompression compression_;
  const std::chrono::milliseconds load_timeout_;
  const KvOffloadWrite write_;
  // Chunks below the pool in a smaller dtype (null: the pool's bytes). Shared with queued encoders.
  const std::shared_ptr<const kvstore::BlockTranscoder> transcoder_;
  // Chunk copies handed back by the writer once encoded (shared: queued encoders outlive us).
  std::shared_ptr<kvstore::ByteBufferPool> raw_buffers_;
  const int64_t block_tokens_;  // the cache's, read once (the loader must not touch the cache)
  const uint64_t block_bytes_;  // one block over all layers
  const uint64_t stored_block_bytes_;    // one block as a chunk record holds it (transcoded or not)
  const int64_t prefetch_budget_bytes_;  // fetched bytes held at most (the hot pool's size)
  std::unordered_map<int64_t, Progress> progress_;
  // Write-back: deferred chunks by tier key, and the keys each physical block is part of.
  std::unordered_map<kvstore::TierKey, DeferredChunk, kvstore::TierKeyHash> deferred_;
  std::unordered_map<int32_t, std::vector<kvstore::TierKey>> deferred_by_block_;
  KvOffloadStats stats_;
  std::atomic<int64_t> rejected_chunks_{0};  // counted by the loader
  std::atomic<int64_t> held_bytes_{0};       // raw bytes held by fetches (declared before them)
  std::unordered_map<int64_t, std::shared_ptr<Fetch>> fetches_;  // by waiting sequence
  // Last: destroyed first, so no job runs once the members above start going.
  std::unique_ptr<kvstore::TierLoader> loader_;
};

}  // namespace kvforge::engine
