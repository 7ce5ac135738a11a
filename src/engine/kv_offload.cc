#include "engine/kv_offload.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"
#include "engine/kv_options.h"
#include "gguf/gguf_reader.h"
#include "kvforge/config_names.h"
#include "kvredis/redis_tier.h"
#include "model/model.h"

namespace kvforge::engine {

using base::StrFormat;

namespace {

// How long the engine thread waits for a fetch it has just started before it lets the request
// wait in the queue instead (ADR 0013).
constexpr std::chrono::microseconds kFetchGrace{2000};

// Incremental XXH3 over plain values.
class Digest {
 public:
  Digest() : st_(XXH3_createState()) { XXH3_64bits_reset(st_); }
  ~Digest() { XXH3_freeState(st_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void Bytes(const void* p, size_t n) { XXH3_64bits_update(st_, p, n); }
  template <typename T>
  void Value(const T& v) {
    Bytes(&v, sizeof v);
  }
  uint64_t Final() const { return XXH3_64bits_digest(st_); }

 private:
  XXH3_state_t* st_;
};

kvstore::ChunkCompression StoredCompression(KvOffloadCompression c) {
  switch (c) {
    case KvOffloadCompression::kNone:
      return kvstore::ChunkCompression::kNone;
    case KvOffloadCompression::kZstd:
      return kvstore::ChunkCompression::kZstd;
    case KvOffloadCompression::kLz4:
      break;
  }
  return kvstore::ChunkCompression::kLz4;
}

}  // namespace

uint64_t KvFingerprint(const model::Model& model, const kvstore::PagedKvCache& cache) {
  Digest d;
  d.Value(kvstore::kChunkFormatVersion);
  // The model file: its header and metadata whole, and 256 bytes at the start, middle and end of
  // every tensor (two files with the same shapes but other weights differ there).
  const gguf::GgufFile& f = model.file();
  d.Value(f.file_size());
  d.Bytes(f.header_bytes().data(), f.header_bytes().size());
  for (const gguf::TensorInfo& t : f.tensors()) {
    const uint64_t n = std::min<uint64_t>(256, t.nbytes);
    for (uint64_t at : {uint64_t{0}, (t.nbytes - n) / 2, t.nbytes - n}) d.Bytes(t.data + at, n);
  }
  // The KV format.
  const kvstore::KvStoreConfig& s = cache.store().config();
  d.Value(s.n_layer);
  d.Value(s.n_kv_head);
  d.Value(s.head_dim);
  d.Value(s.block_tokens);
  d.Value(s.k_dtype);
  d.Value(s.v_dtype);
  d.Value(s.row_align_bytes);
  d.Value(s.turbo_qjl);
  d.Value(s.latent_rank);
  d.Value(cache.store().block_bytes_all_layers());
  const kvquant::Fp8Scales& sc = cache.fp8_scales();
  for (int64_t l = 0; l < sc.n_layers(); ++l) {
    d.Bytes(sc.key(l), sizeof(float) * static_cast<size_t>(sc.n_heads()));
    d.Bytes(sc.value(l), sizeof(float) * static_cast<size_t>(sc.n_heads()));
  }
  // RoPE as the forward applies it (keys are stored rotated).
  const model::ModelConfig& mc = model.config();
  d.Value(mc.rope_dim);
  d.Value(mc.rope_freq_base);
  d.Value(mc.rope_freq_scale);
  d.Value(mc.rope_neox);
  d.Bytes(mc.rope_freq_factors.data(), sizeof(float) * mc.rope_freq_factors.size());
  return d.Final();
}

uint64_t TranscodedFingerprint(uint64_t fingerprint, const kvstore::BlockTranscoder& t) {
  Digest d;
  d.Value(fingerprint);
  d.Bytes("transcoded", 10);
  d.Value(t.stored_block_bytes());
  for (size_t s = 0; s < t.num_streams(); ++s) d.Value(t.stored_dtype(s));
  return d.Final();
}

Result<std::shared_ptr<const kvstore::BlockTranscoder>> MakeOffloadTranscoder(
    const EngineConfig& c, const kvstore::KvStoreConfig& pool) {
  if (c.kv_offload_dtype == KvCacheDtype::kAuto)
    return std::shared_ptr<const kvstore::BlockTranscoder>();
  const kvquant::KvDtype stored = StoredKvDtype(c.kv_offload_dtype, c.kv_f16);
  // The pool's own dtype: nothing to transcode.
  if (stored == pool.k_dtype && stored == pool.v_dtype)
    return std::shared_ptr<const kvstore::BlockTranscoder>();
  Result<std::unique_ptr<kvstore::BlockTranscoder>> t =
      kvstore::BlockTranscoder::Create(pool, stored);
  if (!t.ok()) return t.error();
  return std::shared_ptr<const kvstore::BlockTranscoder>(std::move(*t));
}

Result<std::unique_ptr<KvOffload>> KvOffload::Create(const EngineConfig& c,
                                                     const model::Model& model,
                                                     kvstore::PagedKvCache* cache) {
  if (c.kv_offload_ram_bytes == 0 && c.kv_offload_disk.empty() && c.kv_offload_redis.empty())
    return std::unique_ptr<KvOffload>();
  if (cache->prefix_cache() == nullptr || c.contiguous_kv)
    return Status::InvalidArgument("kv offload needs prefix caching (it offloads cached prefixes)");
  const int64_t bt = cache->block_tokens();
  if (c.kv_offload_chunk_tokens <= 0 || c.kv_offload_chunk_tokens % bt != 0)
    return Status::InvalidArgument(
        StrFormat("kv_offload_chunk_tokens (%lld) must be a positive multiple of block_size (%lld)",
                  (long long)c.kv_offload_chunk_tokens, (long long)bt));
  if (c.kv_offload_load_timeout_ms <= 0)
    return Status::InvalidArgument("kv_offload_load_timeout_ms must be positive");
  if (c.kv_scales == "calibrate")
    return Status::InvalidArgument(
        "kv offload cannot be used with kv_scales 'calibrate' (the scales change after start)");
  KVF_ASSIGN_OR_RETURN(std::shared_ptr<const kvstore::BlockTranscoder> transcoder,
                       MakeOffloadTranscoder(c, cache->store().config()));
  uint64_t fp = KvFingerprint(model, *cache);
  if (transcoder) fp = TranscodedFingerprint(fp, *transcoder);
  std::vector<std::unique_ptr<kvstore::KvTier>> tiers;
  if (c.kv_offload_ram_bytes > 0) tiers.push_back(kvstore::MakeRamTier(c.kv_offload_ram_bytes));
  if (!c.kv_offload_disk.empty()) {
    KVF_ASSIGN_OR_RETURN(std::unique_ptr<kvstore::KvTier> disk,
                         kvstore::MakeDiskTier(c.kv_offload_disk, c.kv_offload_disk_bytes, fp));
    tiers.push_back(std::move(disk));
  }
  if (!c.kv_offload_redis.empty()) {
    kvredis::RedisTierOptions ro;
    ro.timeout_ms = static_cast<int>(std::min<int64_t>(c.kv_offload_redis_timeout_ms, 600000));
    ro.ttl_seconds = c.kv_offload_redis_ttl_s;
    Result<std::unique_ptr<kvstore::KvTier>> redis = kvredis::MakeRedisTier(c.kv_offload_redis, ro);
    if (!redis.ok())
      return Status(redis.error().code(), "kv_offload_redis: " + redis.error().message() +
                                              " (start redis-server, or leave the Redis tier out)");
    tiers.push_back(std::move(*redis));
  }
  // The write queue holds at most 1/4 of the largest tier, between 16 MiB and 512 MiB.
  uint64_t largest = 0;
  for (const auto& t : tiers) largest = std::max(largest, t->stats().capacity_bytes);
  const uint64_t queue = std::clamp<uint64_t>(largest / 4, 16ull << 20, 512ull << 20);
  return std::make_unique<KvOffload>(
      cache, std::make_unique<kvstore::TierChain>(std::move(tiers), queue), fp,
      c.kv_offload_chunk_tokens / bt, StoredCompression(c.kv_offload_compression),
      std::chrono::milliseconds(std::min<int64_t>(c.kv_offload_load_timeout_ms, 600000)),
      c.kv_offload_write, std::move(transcoder));
}

KvOffload::KvOffload(kvstore::PagedKvCache* cache, std::unique_ptr<kvstore::TierChain> chain,
                     uint64_t fingerprint, int64_t chunk_blocks,
                     kvstore::ChunkCompression compression, std::chrono::milliseconds load_timeout,
                     KvOffloadWrite write,
                     std::shared_ptr<const kvstore::BlockTranscoder> transcoder)
    : cache_(cache),
      chain_(std::move(chain)),
      fingerprint_(fingerprint),
      chunk_blocks_(std::max<int64_t>(1, chunk_blocks)),
      compression_(compression),
      load_timeout_(load_timeout),
      write_(write),
      transcoder_(std::move(transcoder)),
      raw_buffers_(std::make_shared<kvstore::ByteBufferPool>(4)),
      block_tokens_(cache->block_tokens()),
      block_bytes_(cache->store().block_bytes_all_layers()),
      stored_block_bytes_(transcoder_ ? transcoder_->stored_block_bytes() : block_bytes_),
      prefetch_budget_bytes_(static_cast<int64_t>(block_bytes_) *
                             std::max<int64_t>(1, cache->num_blocks())),
      loader_(std::make_unique<kvstore::TierLoader>()) {
  if (write_ == KvOffloadWrite::kBack)
    cache_->SetBlockDropObserver([this](int32_t block) { OnBlockDropped(block); });
}

KvOffload::~KvOffload() {
  if (write_ == KvOffloadWrite::kBack) {
    WriteBackAll();
    cache_->SetBlockDropObserver(nullptr);
  }
  loader_.reset();
}

kvmeta::BlockKey KvOffload::ParentKey(const std::vector<kvmeta::BlockKey>& keys, int64_t first,
                                      std::string_view salt) const {
  return first == 0 ? kvmeta::PrefixSeedKey(salt) : keys[static_cast<size_t>(first - 1)];
}

kvstore::TierKey KvOffload::TierKeyFor(const kvmeta::BlockKey& last, int64_t first) const {
  // The first block is part of the name: engines with other chunk sizes sharing a tier store
  // other ranges ending at the same block, and each must find only its own.
  const uint64_t first_u = static_cast<uint64_t>(first);
  return {fingerprint_, last.a, XXH3_64bits_withSeed(&last.b, sizeof last.b, first_u)};
}

kvstore::ChunkMeta KvOffload::Meta(const std::vector<kvmeta::BlockKey>& keys, int64_t first,
                                   int64_t count, std::string_view salt) const {
  kvstore::ChunkMeta m;
  m.fingerprint = fingerprint_;
  m.key = keys[static_cast<size_t>(first + count - 1)];
  m.parent = ParentKey(keys, first, salt);
  m.first_block = static_cast<uint32_t>(first);
  m.num_blocks = static_cast<uint32_t>(count);
  m.block_tokens = static_cast<uint32_t>(block_tokens_);
  m.block_bytes = stored_block_bytes_;
  return m;
}

void KvOffload::StoreComputed(int64_t seq, std::span<const int32_t> tokens, int64_t n,
                              std::string_view salt, bool final) {
  const std::vector<int32_t>* blocks = cache_->Blocks(seq);
  if (blocks == nullptr) return;
  const int64_t bt = cache_->block_tokens();
  n = std::min<int64_t>(n, static_cast<int64_t>(tokens.size()));
  const int64_t full = std::min<int64_t>(n / bt, static_cast<int64_t>(blocks->size()));
  Progress& p = progress_[seq];
  while (static_cast<int64_t>(p.keys.size()) < full) {
    const int64_t k = static_cast<int64_t>(p.keys.size());
    const kvmeta::BlockKey parent = ParentKey(p.keys, k, salt);
    p.keys.push_back(kvmeta::ChainBlockKey(
        parent, tokens.subspan(static_cast<size_t>(k * bt), static_cast<size_t>(bt))));
  }
  while (p.stored_blocks + chunk_blocks_ <= full) {
    StoreChunk(seq, tokens, p, p.stored_blocks, chunk_blocks_, salt);
    p.stored_blocks += chunk_blocks_;
  }
  // stored_blocks stays on the chunk boundary: if the sequence goes on (swapped back in), the
  // whole chunk is stored later under its own key.
  if (final && full > p.stored_blocks)
    StoreChunk(seq, tokens, p, p.stored_blocks, full - p.stored_blocks, salt);
}

void KvOffload::StoreChunk(int64_t seq, std::span<const int32_t> tokens, const Progress& p,
                           int64_t first, int64_t count, std::string_view salt) {
  const kvstore::ChunkMeta meta = Meta(p.keys, first, count, salt);
  const kvstore::TierKey key = TierKeyFor(meta.key, first);
  if (chain_->KnownToHold(key)) return;  // no Redis round trip on the engine thread
  const int64_t bt = cache_->block_tokens();
  const std::span<const int32_t> blocks =
      std::span<const int32_t>(*cache_->Blocks(seq))
          .subspan(static_cast<size_t>(first), static_cast<size_t>(count));
  std::vector<int32_t> ids(tokens.begin() + first * bt, tokens.begin() + (first + count) * bt);
  if (write_ == KvOffloadWrite::kBack) {
    Defer(key, meta, std::move(ids), blocks);
  } else {
    QueueChunk(key, meta, std::move(ids), blocks);
  }
}

bool KvOffload::QueueChunk(const kvstore::TierKey& key, const kvstore::ChunkMeta& meta,
                           std::vector<int32_t> ids, std::span<const int32_t> blocks) {
  const uint64_t bb = block_bytes_;
  // raw: [blocks x block_bytes], the blocks as KvStore::ReadBlock serialises them.
  // Reused from earlier chunks: no memset and no page faults on the engine thread.
  std::vector<uint8_t> raw = raw_buffers_->Take(static_cast<size_t>(bb * blocks.size()));
  for (size_t i = 0; i < blocks.size(); ++i)
    cache_->store().ReadBlock(blocks[i], raw.data() + i * bb);
  const uint64_t bytes = raw.size();
  const kvstore::ChunkCompression comp = compression_;
  const bool queued = chain_->StoreLazy(
      key, bytes,
      [meta, comp, raw = std::move(raw), ids = std::move(ids), buffers = raw_buffers_,
       transcoder = transcoder_]() mutable -> std::optional<std::vector<uint8_t>> {
        // stored: [num_blocks x stored_block_bytes], the chunk in the smaller dtype.
        std::vector<uint8_t> stored;
        std::span<const uint8_t> payload = raw;
        if (transcoder) {
          stored.resize(meta.num_blocks * meta.block_bytes);
          transcoder->ToStored(raw.data(), meta.num_blocks, stored.data());
          payload = stored;
        }
        Result<std::vector<uint8_t>> r = kvstore::EncodeChunk(meta, ids, payload, comp);
        buffers->Give(std::move(raw));
        if (!r.ok()) {
          KVF_LOG_WARN("kv offload: %s", r.error().message().c_str());
          return std::nullopt;
        }
        return std::move(*r);
      });
  if (queued) ++stats_.stored_chunks;
  return queued;
}

void KvOffload::Defer(const kvstore::TierKey& key, const kvstore::ChunkMeta& meta,
                      std::vector<int32_t> ids, std::span<const int32_t> blocks) {
  // The same content computed again (another sequence with the prefix) is deferred once; its
  // blocks are then the first sequence's, which hold the same bytes.
  if (deferred_.count(key) != 0) return;
  deferred_.emplace(key, DeferredChunk{meta, std::move(ids), {blocks.begin(), blocks.end()}});
  for (const int32_t b : blocks) deferred_by_block_[b].push_back(key);
}

void KvOffload::OnBlockDropped(int32_t block) {
  auto it = deferred_by_block_.find(block);
  if (it == deferred_by_block_.end()) return;
  const std::vector<kvstore::TierKey> keys = std::move(it->second);
  deferred_by_block_.erase(it);
  for (const kvstore::TierKey& key : keys) WriteDeferred(key, false);
}

void KvOffload::WriteDeferred(const kvstore::TierKey& key, bool wait_for_room) {
  auto it = deferred_.find(key);
  if (it == deferred_.end()) return;
  DeferredChunk c = std::move(it->second);
  deferred_.erase(it);
  for (const int32_t b : c.blocks) {
    auto bit = deferred_by_block_.find(b);
    if (bit == deferred_by_block_.end()) continue;
    std::erase(bit->second, key);
    if (bit->second.empty()) deferred_by_block_.erase(bit);
  }
  if (chain_->KnownToHold(key)) return;
  if (wait_for_room) chain_->WaitForRoom(c.meta.block_bytes * c.blocks.size());
  QueueChunk(key, c.meta, std::move(c.ids), c.blocks);
}

void KvOffload::WriteBackAll() {
  std::vector<kvstore::TierKey> keys;
  keys.reserve(deferred_.size());
  for (const auto& [key, chunk] : deferred_) keys.push_back(key);
  for (const kvstore::TierKey& key : keys) WriteDeferred(key, true);
}

std::shared_ptr<KvOffload::Fetch> KvOffload::StartFetch(int64_t seq,
                                                        std::span<const int32_t> tokens,
                                                        std::span<const int32_t> query,
                                                        std::string_view salt, int64_t have,
                                                        bool prefetch) {
  const int64_t query_blocks = static_cast<int64_t>(query.size()) / block_tokens_;
  if (have / block_tokens_ >= query_blocks) return nullptr;  // nothing below the hit to look for
  auto f = std::make_shared<Fetch>(&held_bytes_);
  f->tokens.assign(tokens.begin(), tokens.end());
  f->usable = static_cast<int64_t>(std::min(query.size(), tokens.size()));
  f->salt = std::string(salt);
  f->from_block = have / block_tokens_;
  f->deadline = std::chrono::steady_clock::now() + load_timeout_;
  f->prefetch = prefetch;
  fetches_.emplace(seq, f);
  loader_->Submit([this, f] { RunFetch(f.get()); });
  return f;
}

void KvOffload::Prefetch(int64_t seq, std::span<const int32_t> tokens,
                         std::span<const int32_t> query, std::string_view salt, int64_t have) {
  if (fetches_.count(seq) != 0) return;
  if (StartFetch(seq, tokens, query, salt, have, /*prefetch=*/true) != nullptr) ++stats_.prefetches;
}

bool KvOffload::Loading(int64_t seq, std::span<const int32_t> tokens,
                        std::span<const int32_t> query, std::string_view salt, int64_t have) {
  const int64_t query_blocks = static_cast<int64_t>(query.size()) / block_tokens_;
  if (have / block_tokens_ >= query_blocks) return false;  // nothing below the hit to look for
  auto it = fetches_.find(seq);
  if (it != fetches_.end() && it->second->prefetch &&
      it->second->done.load(std::memory_order_acquire) && it->second->budget_cut) {
    // A prefetch cut short by the bytes other waiting requests held: now that this sequence can
    // be admitted, fetch again with the budget they have handed back.
    it->second->cancelled.store(true, std::memory_order_relaxed);
    fetches_.erase(it);
    it = fetches_.end();
  }
  if (it == fetches_.end()) {
    const std::shared_ptr<Fetch> f = StartFetch(seq, tokens, query, salt, have, false);
    if (f == nullptr) return false;
    // A local tier, or a miss in Redis, answers within a grace of a few milliseconds: waiting
    // that long here saves the request a whole step of waiting.
    return !WaitForFetch(*f, kFetchGrace);
  }
  Fetch& f = *it->second;
  if (f.gave_up || f.done.load(std::memory_order_acquire)) return false;
  if (std::chrono::steady_clock::now() < f.deadline) return true;
  f.gave_up = true;
  f.cancelled.store(true, std::memory_order_relaxed);
  ++stats_.load_timeouts;
  KVF_LOG_WARN("kv offload: tier fetch for sequence %lld passed its %lld ms time-out; recomputing",
               (long long)seq, (long long)load_timeout_.count());
  return false;
}

bool KvOffload::WaitForFetch(const Fetch& f, std::chrono::microseconds grace) {
  const auto until = std::chrono::steady_clock::now() + grace;
  while (!f.done.load(std::memory_order_acquire)) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until || loader_->idle()) break;
    loader_->WaitForProgress(std::chrono::duration_cast<std::chrono::microseconds>(until - now));
  }
  return f.done.load(std::memory_order_acquire);
}

void KvOffload::RunFetch(Fetch* f) {
  const std::span<const int32_t> tokens(f->tokens);
  const int64_t bt = block_tokens_;
  // Chunks are looked up over all the sequence's full blocks (so a stored chunk that reaches past
  // the usable part is found) and used only up to the usable ones.
  const int64_t all_blocks = static_cast<int64_t>(tokens.size()) / bt;
  const int64_t usable_blocks = f->usable / bt;
  std::vector<kvmeta::BlockKey> keys;
  keys.reserve(static_cast<size_t>(all_blocks));
  for (int64_t k = 0; k < all_blocks; ++k)
    keys.push_back(kvmeta::ChainBlockKey(
        ParentKey(keys, k, f->salt),
        tokens.subspan(static_cast<size_t>(k * bt), static_cast<size_t>(bt))));
  int64_t at = f->from_block;
  while (at < usable_blocks && !f->cancelled.load(std::memory_order_relaxed)) {
    const int64_t first = at / chunk_blocks_ * chunk_blocks_;
    const int64_t full_end = first + chunk_blocks_;
    // Fetched bytes wait in memory until admission: past the budget the rest is recomputed.
    const int64_t chunk_bytes = static_cast<int64_t>(block_bytes_) * chunk_blocks_;
    // Prefetches (requests not yet admissible) may hold half of it, so the request at the head
    // of the queue always finds room.
    const int64_t budget = f->prefetch ? prefetch_budget_bytes_ / 2 : prefetch_budget_bytes_;
    if (held_bytes_.load(std::memory_order_relaxed) + chunk_bytes > budget) {
      f->budget_cut = true;
      break;
    }
    // The whole chunk, or else the longest shorter one (a sequence's last chunk) the tiers know:
    // candidates longest first, asked of each tier at once (one round trip for Redis).
    const int64_t longest = std::min(full_end, all_blocks);
    std::vector<kvstore::TierKey> candidates;
    for (int64_t e = longest; e > at; --e)
      candidates.push_back(TierKeyFor(keys[static_cast<size_t>(e - 1)], first));
    const size_t found = chain_->ContainsAny(candidates);
    const int64_t end = found < candidates.size() ? longest - static_cast<int64_t>(found) : 0;
    if (end == 0) {
      chain_->CountMiss();
      break;
    }
    FetchedChunk c;
    if (!FetchChunk(tokens, keys, first, end - first, f->salt, &c)) break;
    const int64_t bytes = static_cast<int64_t>(c.raw.size());
    held_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    f->bytes += bytes;
    f->chunks.push_back(std::move(c));
    at = end;
    if (end < full_end) break;  // a shorter chunk ends its sequence's stored prefix
  }
  f->done.store(true, std::memory_order_release);
}

bool KvOffload::FetchChunk(std::span<const int32_t> tokens,
                           const std::vector<kvmeta::BlockKey>& keys, int64_t first, int64_t count,
                           std::string_view salt, FetchedChunk* out) {
  const kvstore::ChunkMeta meta = Meta(keys, first, count, salt);
  const kvstore::TierKey key = TierKeyFor(meta.key, first);
  std::optional<kvstore::TierChain::Found> found = chain_->Fetch(key);
  if (!found) return false;
  const auto ids = tokens.subspan(static_cast<size_t>(first * block_tokens_),
                                  static_cast<size_t>(count * block_tokens_));
  Result<std::vector<uint8_t>> raw = kvstore::DecodeChunk(found->record, meta, ids);
  if (!raw.ok()) {
    KVF_LOG_WARN("kv offload: chunk %s refused, recomputing: %s", key.Hex().c_str(),
                 raw.error().message().c_str());
    chain_->Reject(key, found->tier);
    rejected_chunks_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  out->first = first;
  out->count = count;
  if (transcoder_) {
    // Back to the pool's dtype here, on the loader thread: the engine thread only copies.
    out->raw.resize(static_cast<size_t>(count) * block_bytes_);
    transcoder_->ToPool(raw->data(), count, out->raw.data());
  } else {
    out->raw = std::move(*raw);
  }
  return true;
}

int64_t KvOffload::CopyFetched(int64_t seq, const Fetch& f, int64_t have, int64_t* in_tiers_to) {
  const int64_t bt = block_tokens_;
  // First block not wholly held. A hit that ends inside a block (radix mode) holds that block as
  // its own copy (PagedKvCache::AttachPrefix), so a chunk loaded over it overwrites only a
  // private block, with the same tokens' KV.
  int64_t at = have / bt;
  const int64_t usable_blocks = f.usable / bt;
  for (const FetchedChunk& c : f.chunks) {
    // A chunk may reach past the usable blocks (it holds the block of the last token): only
    // blocks before that are used.
    const int64_t end = std::min(c.first + c.count, usable_blocks);
    if (end <= at) continue;  // the hot cache holds it now
    if (c.first > at) break;  // a gap: blocks the hot cache held when asked but lost since
    if (!cache_->EnsureTokens(seq, end * bt)) break;
    const std::vector<int32_t>& blocks = *cache_->Blocks(seq);
    if (static_cast<int64_t>(blocks.size()) < end) break;
    for (int64_t k = at; k < end; ++k)
      cache_->mutable_store().WriteBlock(
          blocks[static_cast<size_t>(k)],
          c.raw.data() + static_cast<size_t>(k - c.first) * block_bytes_);
    ++stats_.loaded_chunks;
    if (c.count == chunk_blocks_) *in_tiers_to = c.first + c.count;
    at = end;
  }
  return std::max(have, at * bt);
}

int64_t KvOffload::LoadPrefix(int64_t seq, std::span<const int32_t> query, std::string_view salt,
                              int64_t have) {
  auto it = fetches_.find(seq);
  if (it == fetches_.end()) return have;
  const std::shared_ptr<Fetch> f = std::move(it->second);
  fetches_.erase(it);
  f->cancelled.store(true, std::memory_order_relaxed);  // a fetch still running stops early
  if (f->gave_up || !f->done.load(std::memory_order_acquire) || !cache_->Contains(seq)) return have;
  // The waiting sequence's tokens do not change, but a sequence re-queued for recompute asks
  // again with more: only a fetch for exactly this query is used.
  if (static_cast<int64_t>(query.size()) != f->usable ||
      !std::equal(query.begin(), query.end(), f->tokens.begin()) || f->salt != salt)
    return have;
  int64_t in_tiers_to = 0;
  const int64_t now = CopyFetched(seq, *f, have, &in_tiers_to);
  stats_.loaded_tokens += now - have;
  // The whole chunks it brought are in the tiers already: StoreComputed starts after them (no
  // second copy of them on this thread, nor a write the remote tier would refuse as a duplicate).
  Progress& p = progress_[seq];
  p.stored_blocks = std::max(p.stored_blocks, in_tiers_to);
  return now;
}

void KvOffload::WaitForLoads(std::chrono::microseconds max_wait) {
  auto wait = max_wait;
  const auto now = std::chrono::steady_clock::now();
  bool any = false;
  for (const auto& [seq, f] : fetches_) {
    if (f->gave_up || f->done.load(std::memory_order_acquire)) continue;
    any = true;
    wait = std::min(wait, std::chrono::duration_cast<std::chrono::microseconds>(
                              std::max(f->deadline - now, std::chrono::steady_clock::duration{})));
  }
  if (any) loader_->WaitForProgress(wait);
}

bool KvOffload::loads_pending() const {
  for (const auto& [seq, f] : fetches_)
    if (!f->gave_up && !f->done.load(std::memory_order_acquire)) return true;
  return false;
}

void KvOffload::Forget(int64_t seq) {
  progress_.erase(seq);
  if (auto it = fetches_.find(seq); it != fetches_.end()) {
    it->second->cancelled.store(true, std::memory_order_relaxed);
    fetches_.erase(it);
  }
}

KvOffloadStats KvOffload::stats() const {
  KvOffloadStats s = stats_;
  s.rejected_chunks = rejected_chunks_.load(std::memory_order_relaxed);
  s.dropped_writes = chain_->dropped_writes();
  s.tiers = chain_->stats();
  return s;
}

std::string KvOffload::Describe() const {
  std::string out = StrFormat("kv offload: chunks of %lld tokens, %s, write-%s, tiers",
                              (long long)(chunk_blocks_ * cache_->block_tokens()),
                              std::string(kvstore::ChunkCompressionName(compression_)).c_str(),
                              ConfigName(write_));
  if (transcoder_) out += ", stored " + transcoder_->Describe();
  for (size_t i = 0; i < chain_->num_tiers(); ++i)
    out += (i ? " -> " : " ") + chain_->tier(i).Describe();
  return out;
}

}  // namespace kvforge::engine
