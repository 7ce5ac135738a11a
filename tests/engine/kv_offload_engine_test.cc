// KV offload end to end on the TinyStories model, with a hot pool small enough that shared
// prefixes are evicted between rounds: greedy outputs with a RAM tier, a disk tier or both equal
// those with no tier, and the tiers are actually read from; a new engine on a warm disk directory
// loads what the previous one stored; corrupt or truncated files are refused and recomputed; KV of
// another format in the same directory is never loaded; chunks transcoded to a smaller dtype are
// smaller, load back and keep the outputs, and are never mixed with untranscoded ones; requests
// waiting behind others fetch their chunks before they are admitted;
// impossible configurations are refused.
// With a real redis-server (started here on a random loopback port): a second engine loads what
// the first stored, a killed or stopped server mid-run changes no output, a stopped server
// never stalls the other requests' steps (loads run on the loader thread), and a load that
// outlives its time-out is recomputed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_core.h"
#include "engine/llm_internal.h"
#include "kvforge/config_names.h"
#include "kvforge/llm.h"
#include "support/redis_server.h"
#include "support/story_prompts.h"
#include "support/temp_dir.h"

namespace kvforge {
namespace {

namespace fs = std::filesystem;
using testing::GoldenPrompts;
using testing::Greedy;
using testing::Prompts;
using testing::SharedPrefixPrompts;
using testing::TempDir;

// 14 blocks of 16 tokens: the shared prefix does not survive a round in the hot cache.
EngineConfig SmallPool() {
  EngineConfig c;
  c.max_model_len = 512;
  c.threads = 2;
  c.enable_prefix_caching = true;
  c.kv_cache_memory_bytes = 640 * 16 * 14;
  c.kv_offload_chunk_tokens = 32;
  return c;
}

struct RoundsRun {
  std::vector<std::vector<int32_t>> ids;  // [round * prompts + i] generated tokens
  EngineStats stats;
  int64_t cached_tokens = 0;  // sum over requests: prompt tokens not computed
};

// `count` conversations of `len` tokens (BOS, then the golden prompts' words rotated by seven per
// conversation): distinct from their first block on, together larger than the small pool.
Prompts Conversations(size_t count, size_t len) {
  std::vector<int32_t> words;
  for (const auto& g : GoldenPrompts()) words.insert(words.end(), g.begin() + 1, g.end());
  Prompts out(count, std::vector<int32_t>{1});
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; out[i].size() < len; ++k)
      out[i].push_back(words[(k + 7 * i) % words.size()]);
  return out;
}

// Each round submits the prompts together (batched) or one after another (users coming back).
RoundsRun RunRounds(const EngineConfig& c, const Prompts& prompts, int rounds,
                    bool one_at_a_time = false) {
  RoundsRun run;
  LLM llm(c);
  EXPECT_TRUE(llm.ok()) << llm.status().ToString();
  if (!llm.ok()) return run;
  std::vector<Prompts> batches;
  if (one_at_a_time) {
    for (const auto& p : prompts) batches.push_back({p});
  } else {
    batches.push_back(prompts);
  }
  for (int r = 0; r < rounds; ++r) {
    for (const Prompts& batch : batches) {
      auto outs = llm.generate(batch, Greedy(16));
      EXPECT_TRUE(outs.ok()) << outs.status().ToString();
      if (!outs.ok()) return run;
      for (const auto& o : *outs) {
        run.ids.push_back(o.outputs.at(0).token_ids);
        run.cached_tokens += o.metrics.cached_tokens;
      }
    }
  }
  run.stats = llm.stats();
  EXPECT_EQ(run.stats.kv_usage, 0.0) << "blocks left held after every request finished";
  return run;
}

std::vector<fs::path> ChunkFiles(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".kvc") out.push_back(e.path());
  return out;
}

TEST(KvOffloadEngine, OutputsEqualNoTierAndTheTiersAreRead) {
  // Five conversations of 96 tokens, one request at a time: the hot pool holds about two, so the
  // second round finds each conversation's prefix only in the tiers.
  const Prompts prompts = Conversations(5, 96);
  const RoundsRun want = RunRounds(SmallPool(), prompts, 2, true);
  ASSERT_FALSE(want.ids.empty());
  EXPECT_FALSE(want.stats.kv_offload);
  EXPECT_GT(want.stats.prefix_cache_evicted_blocks, 0) << "the pool is meant to be too small";
  TempDir dir;
  struct Variant {
    std::string name;
    EngineConfig cfg;
  };
  std::vector<Variant> variants;
  EngineConfig c = SmallPool();
  c.kv_offload_ram_bytes = 8 << 20;
  variants.push_back({"ram", c});
  c = SmallPool();
  c.kv_offload_disk = dir.path() + "/disk-only";
  c.kv_offload_compression = KvOffloadCompression::kZstd;
  variants.push_back({"disk, zstd", c});
  c = SmallPool();
  c.kv_offload_ram_bytes = 64 << 10;  // a few chunks: most hits come from the disk
  c.kv_offload_disk = dir.path() + "/both";
  c.kv_offload_chunk_tokens = 16;
  c.kv_offload_compression = KvOffloadCompression::kNone;
  variants.push_back({"small ram over disk, chunks of one block, raw", c});
  // Write-back: chunks go down only as the pool evicts their blocks (here, every round).
  c = SmallPool();
  c.kv_offload_ram_bytes = 8 << 20;
  c.kv_offload_write = KvOffloadWrite::kBack;
  variants.push_back({"ram, write-back", c});
  c = SmallPool();
  c.kv_offload_ram_bytes = 64 << 10;
  c.kv_offload_disk = dir.path() + "/both-back";
  c.kv_offload_chunk_tokens = 16;
  c.kv_offload_write = KvOffloadWrite::kBack;
  variants.push_back({"small ram over disk, chunks of one block, write-back", c});
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const RoundsRun got = RunRounds(v.cfg, prompts, 2, true);
    ASSERT_EQ(got.ids.size(), want.ids.size());
    for (size_t i = 0; i < got.ids.size(); ++i)
      EXPECT_EQ(got.ids[i], want.ids[i]) << "request " << i;
    EXPECT_TRUE(got.stats.kv_offload);
    EXPECT_GT(got.stats.kv_offload_stored_chunks, 0);
    EXPECT_GT(got.stats.kv_offload_loaded_tokens, 0) << "no prefix came back from a tier";
    EXPECT_GT(got.stats.kv_offload_loaded_chunks, 0);
    EXPECT_EQ(got.stats.kv_offload_rejected_chunks, 0);
    EXPECT_EQ(got.stats.kv_offload_dropped_writes, 0);
    ASSERT_FALSE(got.stats.kv_tiers.empty());
    for (const KvTierStats& t : got.stats.kv_tiers) {
      EXPECT_GT(t.puts, 0) << t.name;
      EXPECT_LE(t.used_bytes, t.capacity_bytes) << t.name;
    }
    // A request's cached tokens are those it did not compute, from the hot cache or a tier; the
    // hot cache's own hit counter is unchanged by the tiers.
    EXPECT_EQ(got.cached_tokens - want.cached_tokens, got.stats.kv_offload_loaded_tokens);
    EXPECT_EQ(got.stats.prefix_cache_hit_tokens, want.stats.prefix_cache_hit_tokens);
    // Round two: every conversation's first 64 tokens (two whole chunks of 32, or four of 16)
    // come from a tier; the hot cache hits nothing a tier could add to.
    EXPECT_GE(got.stats.kv_offload_loaded_tokens, 5 * 64);
  }
}

TEST(KvOffloadEngine, RadixModeLoadsFromTheTiersToo) {
  // The tiers key chunks by their own chained block keys, not by the hot cache's, so the radix
  // cache (SGLang-style) gets the same loads; outputs equal the no-tier run of either mode.
  const Prompts prompts = Conversations(5, 96);
  const RoundsRun want = RunRounds(SmallPool(), prompts, 2, true);
  EngineConfig radix = SmallPool();
  ASSERT_TRUE(SetConfigField(&radix, "prefix_cache_mode", "radix").ok());
  const RoundsRun radix_only = RunRounds(radix, prompts, 2, true);
  EXPECT_EQ(radix_only.ids, want.ids);
  TempDir dir;
  EngineConfig c = radix;
  c.kv_offload_ram_bytes = 64 << 10;
  c.kv_offload_disk = dir.path();
  {
    // Write-back in radix mode: a block the tree evicts is freed (no hash), which writes back
    // the chunks it was part of. Another directory, so the check below reads the other run's.
    TempDir back_dir;
    EngineConfig b = c;
    b.kv_offload_disk = back_dir.path();
    b.kv_offload_write = KvOffloadWrite::kBack;
    const RoundsRun back = RunRounds(b, prompts, 2, true);
    EXPECT_EQ(back.ids, want.ids);
    EXPECT_GE(back.stats.kv_offload_loaded_tokens, 5 * 64 - radix_only.cached_tokens);
    EXPECT_EQ(back.stats.kv_offload_rejected_chunks, 0);
  }
  const RoundsRun got = RunRounds(c, prompts, 2, true);
  EXPECT_EQ(got.ids, want.ids);
  // Round two: each conversation's first 64 tokens are held again, the few a radix hit inside a
  // block already had and the rest from the tiers (loaded over that block's private copy).
  EXPECT_GE(got.cached_tokens, 5 * 64);
  EXPECT_GE(got.stats.kv_offload_loaded_tokens, 5 * 64 - radix_only.cached_tokens);
  EXPECT_EQ(got.cached_tokens - radix_only.cached_tokens, got.stats.kv_offload_loaded_tokens);
  EXPECT_EQ(got.stats.kv_offload_rejected_chunks, 0);
  // A hash-mode engine on the same directory reads what the radix one wrote: same bytes.
  EngineConfig h = SmallPool();
  h.kv_offload_disk = dir.path();
  const RoundsRun hash_warm = RunRounds(h, {prompts[0]}, 1);
  EXPECT_EQ(hash_warm.ids.front(), want.ids.front());
  EXPECT_GT(hash_warm.stats.kv_offload_loaded_tokens, 0);
}

TEST(KvOffloadEngine, OutputsEqualNoTierUnderPreemption) {
  // Shared-prefix prompts submitted together into the small pool: preemption, eviction and tier
  // loads mix within one batch.
  const Prompts prompts = SharedPrefixPrompts();
  const RoundsRun want = RunRounds(SmallPool(), prompts, 2);
  ASSERT_FALSE(want.ids.empty());
  TempDir dir;
  EngineConfig c = SmallPool();
  c.kv_offload_ram_bytes = 1 << 20;
  c.kv_offload_disk = dir.path();
  for (const KvOffloadWrite write : {KvOffloadWrite::kThrough, KvOffloadWrite::kBack})
    for (const PreemptionMode preempt : {PreemptionMode::kRecompute, PreemptionMode::kSwap})
      for (int64_t chunk : {16, 32}) {
        SCOPED_TRACE(std::string(ConfigName(write)) + " " + ConfigName(preempt) + " " +
                     std::to_string(chunk));
        c.kv_offload_chunk_tokens = chunk;
        c.kv_offload_write = write;
        c.preemption_mode = preempt;
        const RoundsRun got = RunRounds(c, prompts, 2);
        EXPECT_EQ(got.ids, want.ids);
        EXPECT_EQ(got.stats.kv_offload_rejected_chunks, 0);
      }
}

TEST(KvOffloadEngine, WriteBackWritesNothingThePoolKeepsUntilTheEngineCloses) {
  // A pool that keeps the prompt: write-back defers its three chunks (nothing reaches the disk
  // while the engine runs) and writes them when the engine closes; the next engine loads them.
  TempDir dir;
  EngineConfig c = SmallPool();
  c.kv_cache_memory_bytes = 640 * 16 * 64;
  c.kv_offload_disk = dir.path();
  c.kv_offload_write = KvOffloadWrite::kBack;
  const Prompts prompt = Conversations(1, 96);
  {
    LLM llm(c);
    ASSERT_TRUE(llm.ok()) << llm.status().ToString();
    auto outs = llm.generate(prompt, Greedy(16));
    ASSERT_TRUE(outs.ok());
    const EngineStats s = llm.stats();
    EXPECT_EQ(s.kv_offload_stored_chunks, 0);
    EXPECT_EQ(s.kv_offload_deferred_chunks, 3);
    EXPECT_TRUE(ChunkFiles(dir.path()).empty()) << "written before the pool dropped anything";
  }
  EXPECT_EQ(ChunkFiles(dir.path()).size(), 3u) << "the closing engine writes back what it held";
  const RoundsRun next = RunRounds(c, prompt, 1);
  EXPECT_EQ(next.stats.kv_offload_loaded_tokens, 96 - 16);
  EXPECT_EQ(next.ids, RunRounds(SmallPool(), prompt, 1).ids);
}

TEST(KvOffloadEngine, ANewEngineLoadsWhatThePreviousOneLeftOnDisk) {
  const Prompts prompts = SharedPrefixPrompts();
  TempDir dir;
  EngineConfig c = SmallPool();
  c.kv_offload_disk = dir.path();
  const RoundsRun cold = RunRounds(c, prompts, 1);
  ASSERT_FALSE(cold.ids.empty());
  EXPECT_FALSE(ChunkFiles(dir.path()).empty()) << "the engine wrote its chunks before it closed";
  const RoundsRun warm = RunRounds(c, prompts, 1);
  EXPECT_EQ(warm.ids, cold.ids);
  EXPECT_GT(warm.stats.kv_offload_loaded_tokens, cold.stats.kv_offload_loaded_tokens);
  ASSERT_EQ(warm.stats.kv_tiers.size(), 1u);
  EXPECT_GT(warm.stats.kv_tiers[0].hits, 0);
  EXPECT_GT(warm.stats.kv_tiers[0].chunks, 0) << "the index was rebuilt from the files";
}

TEST(KvOffloadEngine, AnExactRepeatLoadsAllButTheLastTokensBlock) {
  // 96 tokens: three 32-token chunks. The last token's block is computed again (its logits are
  // needed); the chunk that holds it is still found and its first block loaded. 96 + 15 computed
  // tokens are three chunks; the repeat loads all three and queues none again (with Redis
  // nothing local would have said they are there).
  const Prompts prompt = Conversations(1, 96);
  for (const bool redis_tier : {false, true}) {
    SCOPED_TRACE(redis_tier ? "redis" : "disk");
    if (redis_tier && !testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
    TempDir dir;
    std::optional<testing::RedisServer> redis;
    EngineConfig c = SmallPool();
    if (redis_tier) {
      redis.emplace();
      ASSERT_TRUE(redis->ok());
      c.kv_offload_redis = redis->url();
    } else {
      c.kv_offload_disk = dir.path();
    }
    const RoundsRun first = RunRounds(c, prompt, 1);
    const RoundsRun repeat = RunRounds(c, prompt, 1);  // a new engine: only the tier knows it
    EXPECT_EQ(repeat.ids, first.ids);
    EXPECT_EQ(repeat.stats.kv_offload_loaded_tokens, 96 - 16);
    EXPECT_EQ(repeat.cached_tokens, 96 - 16);
    EXPECT_EQ(first.stats.kv_offload_stored_chunks, 3);
    EXPECT_EQ(repeat.stats.kv_offload_stored_chunks, 0);
  }
}

TEST(KvOffloadEngine, AHotHitOnChunksHeldInRedisQueuesNothingAgain) {
  // A pool that keeps the prompt: the second round is a hot-cache hit on chunks that only Redis
  // holds below. The engine remembers what it wrote there, so it neither copies nor queues them
  // again (no local tier could say they are there).
  if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok());
  EngineConfig c = SmallPool();
  c.kv_cache_memory_bytes = 640 * 16 * 64;
  c.kv_offload_redis = redis.url();
  // One engine: round one computes and writes three chunks, round two hits them in the hot pool.
  const RoundsRun writer = RunRounds(c, Conversations(1, 96), 2);
  EXPECT_EQ(writer.ids[1], writer.ids[0]);
  EXPECT_GT(writer.cached_tokens, 0);
  EXPECT_EQ(writer.stats.kv_offload_stored_chunks, 3) << "written once, not again on the hit";
  // A fresh engine: round one loads them from Redis, round two hits them in its hot pool.
  const RoundsRun reader = RunRounds(c, Conversations(1, 96), 2);
  EXPECT_EQ(reader.ids, writer.ids);
  EXPECT_EQ(reader.stats.kv_offload_loaded_tokens, 96 - 16);
  EXPECT_EQ(reader.stats.kv_offload_stored_chunks, 0) << "what it found there is known";
}

TEST(KvOffloadEngine, CorruptOrTruncatedFilesAreRefusedAndRecomputed) {
  const Prompts prompts = SharedPrefixPrompts();
  TempDir dir;
  EngineConfig c = SmallPool();
  c.kv_offload_disk = dir.path();
  const RoundsRun first = RunRounds(c, prompts, 1);
  const std::vector<fs::path> files = ChunkFiles(dir.path());
  ASSERT_GE(files.size(), 2u);
  for (size_t i = 0; i < files.size(); ++i) {
    if (i % 2 == 0) {
      fs::resize_file(files[i], fs::file_size(files[i]) / 2);
    } else {
      // One flipped byte in the middle of the payload.
      std::fstream f(files[i], std::ios::in | std::ios::out | std::ios::binary);
      const auto at = static_cast<std::streamoff>(fs::file_size(files[i]) * 3 / 4);
      f.seekg(at);
      char b = 0;
      f.read(&b, 1);
      b = static_cast<char>(b ^ 0x10);
      f.seekp(at);
      f.write(&b, 1);
    }
  }
  const RoundsRun again = RunRounds(c, prompts, 1);
  EXPECT_EQ(again.ids, first.ids) << "a damaged chunk must be recomputed, never used";
  EXPECT_GT(again.stats.kv_offload_rejected_chunks, 0);
  ASSERT_EQ(again.stats.kv_tiers.size(), 1u);
  EXPECT_GT(again.stats.kv_tiers[0].errors, 0);
}

TEST(KvOffloadEngine, KvOfAnotherFormatInTheSameDirectoryIsNeverLoaded) {
  const Prompts prompts = SharedPrefixPrompts();
  TempDir dir;
  EngineConfig c = SmallPool();
  c.kv_offload_disk = dir.path();
  RunRounds(c, prompts, 1);
  const size_t files = ChunkFiles(dir.path()).size();
  ASSERT_GT(files, 0u);
  // Same model and tokens, other KV bytes: q8_0 blocks must not be read as f16 ones.
  EngineConfig q = c;
  ASSERT_TRUE(SetConfigField(&q, "kv_cache_dtype", "q8_0").ok());
  const RoundsRun other = RunRounds(q, {prompts[0]}, 1);
  EXPECT_EQ(other.stats.kv_offload_loaded_tokens, 0);
  EXPECT_EQ(other.stats.kv_offload_rejected_chunks, 0) << "kept apart by fingerprint, not refused";
  EXPECT_GT(ChunkFiles(dir.path()).size(), files) << "it stored its own chunks beside";
}

// Tokens of `got` equal to `want`, position by position, over all requests; and their count.
std::pair<size_t, size_t> AgreeingTokens(const RoundsRun& got, const RoundsRun& want) {
  size_t same = 0, total = 0;
  for (size_t i = 0; i < std::min(got.ids.size(), want.ids.size()); ++i)
    for (size_t k = 0; k < std::min(got.ids[i].size(), want.ids[i].size()); ++k, ++total)
      same += got.ids[i][k] == want.ids[i][k] ? 1 : 0;
  return {same, total};
}

TEST(KvOffloadEngine, RequestsWaitingBehindOthersPrefetchTheirChunks) {
  // Four stored conversations sent together to an engine that runs one request at a time: while
  // the first computes, the three behind it fetch their chunks (kv_offload_prefetch_requests), so
  // each is admitted with its load done. Loads and outputs are those of fetching at admission.
  const Prompts prompts = Conversations(4, 96);
  TempDir dir;
  EngineConfig c = SmallPool();
  c.kv_offload_disk = dir.path();
  const RoundsRun stored = RunRounds(c, prompts, 1, true);
  ASSERT_EQ(stored.stats.kv_offload_stored_chunks, 4 * 3);
  c.max_num_seqs = 1;
  for (const int64_t prefetch : {4, 0}) {
    SCOPED_TRACE("prefetch " + std::to_string(prefetch));
    c.kv_offload_prefetch_requests = prefetch;
    const RoundsRun got = RunRounds(c, prompts, 1);
    EXPECT_EQ(got.ids, stored.ids);
    EXPECT_EQ(got.stats.kv_offload_loaded_tokens, 4 * (96 - 16));
    EXPECT_EQ(got.stats.kv_offload_prefetches, prefetch > 0 ? 3 : 0);
    EXPECT_EQ(got.stats.kv_offload_rejected_chunks, 0);
  }
}

TEST(KvOffloadEngine, TranscodedChunksAreSmallerAndLoadBack) {
  // kv_offload_dtype: chunks go below the pool in a smaller dtype. The same conversations as
  // above: the second round loads each one's first 64 tokens from the RAM tier, in the pool's
  // dtype again. What is written is the smaller records (q8_0 rows of 34 B for f16 rows of 64 B,
  // plus the token ids and the header: about 0.54x), and the greedy outputs stay those of no
  // tier (a loaded token's KV moves by at most the stored dtype's rounding).
  const Prompts prompts = Conversations(5, 96);
  struct Variant {
    const char* pool;
    const char* stored;
    double max_ratio;      // stored bytes / untranscoded bytes, at most
    double min_agreement;  // output tokens equal to the no-tier run, at least
  };
  for (const Variant v : {Variant{"f16", "q8_0", 0.56, 0.95}, Variant{"f32", "f16", 0.51, 1.0},
                          Variant{"f16", "q4_0", 0.32, 0.8}}) {
    SCOPED_TRACE(std::string(v.pool) + " -> " + v.stored);
    EngineConfig c = SmallPool();
    ASSERT_TRUE(SetConfigField(&c, "kv_cache_dtype", v.pool).ok());
    c.kv_cache_memory_bytes = c.kv_cache_memory_bytes * (std::string(v.pool) == "f32" ? 2 : 1);
    const RoundsRun want = RunRounds(c, prompts, 2, true);
    c.kv_offload_ram_bytes = 8 << 20;
    c.kv_offload_compression = KvOffloadCompression::kNone;  // compare the records' own sizes
    const RoundsRun plain = RunRounds(c, prompts, 2, true);
    ASSERT_TRUE(SetConfigField(&c, "kv_offload_dtype", v.stored).ok());
    const RoundsRun got = RunRounds(c, prompts, 2, true);
    ASSERT_EQ(got.ids.size(), want.ids.size());
    EXPECT_EQ(plain.ids, want.ids);
    EXPECT_GE(got.stats.kv_offload_loaded_tokens, 5 * 64);
    EXPECT_EQ(got.stats.kv_offload_loaded_tokens, plain.stats.kv_offload_loaded_tokens);
    EXPECT_EQ(got.stats.kv_offload_rejected_chunks, 0);
    ASSERT_EQ(got.stats.kv_tiers.size(), 1u);
    ASSERT_EQ(plain.stats.kv_tiers.size(), 1u);
    EXPECT_EQ(got.stats.kv_tiers[0].puts, plain.stats.kv_tiers[0].puts);
    const double ratio = static_cast<double>(got.stats.kv_tiers[0].bytes_in) /
                         static_cast<double>(plain.stats.kv_tiers[0].bytes_in);
    EXPECT_LE(ratio, v.max_ratio);
    EXPECT_GT(ratio, v.max_ratio - 0.1);
    // Round one computes everything, so it is the no-tier output exactly.
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got.ids[i], want.ids[i]) << i;
    const auto [same, total] = AgreeingTokens(got, want);
    EXPECT_GE(static_cast<double>(same), v.min_agreement * static_cast<double>(total))
        << same << " of " << total << " tokens agree";
  }
}

TEST(KvOffloadEngine, TranscodedAndUntranscodedChunksAreKeptApart) {
  // The same model, pool and tokens, but records of other values: an engine that stores q8_0
  // chunks never loads f16 ones from the same directory, nor the other way round.
  const Prompts prompts = SharedPrefixPrompts();
  TempDir dir;
  EngineConfig plain = SmallPool();
  plain.kv_offload_disk = dir.path();
  EngineConfig q = plain;
  ASSERT_TRUE(SetConfigField(&q, "kv_offload_dtype", "q8_0").ok());
  RunRounds(plain, prompts, 1);
  const RoundsRun q_run = RunRounds(q, {prompts[0]}, 1);
  EXPECT_EQ(q_run.stats.kv_offload_loaded_tokens, 0);
  EXPECT_EQ(q_run.stats.kv_offload_rejected_chunks, 0) << "kept apart by fingerprint";
  EXPECT_GT(q_run.stats.kv_offload_stored_chunks, 0);
  TempDir dir2;
  q.kv_offload_disk = plain.kv_offload_disk = dir2.path();
  RunRounds(q, prompts, 1);
  const RoundsRun plain_run = RunRounds(plain, {prompts[0]}, 1);
  EXPECT_EQ(plain_run.stats.kv_offload_loaded_tokens, 0);
  EXPECT_EQ(plain_run.stats.kv_offload_rejected_chunks, 0);
  // And each loads its own: a second q8_0 engine finds the first one's chunks.
  const RoundsRun q_again = RunRounds(q, {prompts[0]}, 1);
  EXPECT_GT(q_again.stats.kv_offload_loaded_tokens, 0);
}

TEST(KvOffloadEngine, ASecondEngineLoadsWhatTheFirstStoredInRedis) {
  if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok());
  const Prompts prompts = SharedPrefixPrompts();
  const RoundsRun want = RunRounds(SmallPool(), prompts, 1);
  EngineConfig c = SmallPool();
  c.kv_offload_redis = redis.url();
  const RoundsRun a = RunRounds(c, prompts, 1);  // instance A computes and stores
  const RoundsRun b = RunRounds(c, prompts, 1);  // instance B, a fresh engine, loads
  EXPECT_EQ(a.ids, want.ids);
  EXPECT_EQ(b.ids, want.ids);
  EXPECT_GT(b.stats.kv_offload_loaded_tokens, a.stats.kv_offload_loaded_tokens);
  ASSERT_EQ(b.stats.kv_tiers.size(), 1u);
  EXPECT_EQ(b.stats.kv_tiers[0].name, "redis");
  EXPECT_GT(b.stats.kv_tiers[0].hits, 0);
  EXPECT_EQ(b.stats.kv_tiers[0].errors, 0);
}

TEST(KvOffloadEngine, AKilledOrStoppedRedisChangesNoOutput) {
  if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
  const Prompts prompts = Conversations(5, 96);
  const RoundsRun want = RunRounds(SmallPool(), prompts, 2, true);
  for (const bool stop : {false, true}) {
    SCOPED_TRACE(stop ? "SIGSTOP" : "SIGKILL");
    testing::RedisServer redis;
    ASSERT_TRUE(redis.ok());
    EngineConfig c = SmallPool();
    c.kv_offload_redis = redis.url();
    c.kv_offload_redis_timeout_ms = 50;
    LLM llm(c);
    ASSERT_TRUE(llm.ok()) << llm.status().ToString();
    std::vector<std::vector<int32_t>> ids;
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < prompts.size(); ++i) {
        if (round == 1 && i == 2) stop ? redis.Pause() : redis.Kill();  // mid-run
        auto outs = llm.generate({prompts[i]}, Greedy(16));
        ASSERT_TRUE(outs.ok()) << outs.status().ToString();
        ids.push_back(outs->at(0).outputs.at(0).token_ids);
      }
    }
    EXPECT_EQ(ids, want.ids) << "a failed tier must mean recompute, never other output";
    const EngineStats st = llm.stats();
    ASSERT_EQ(st.kv_tiers.size(), 1u);
    EXPECT_GT(st.kv_tiers[0].errors, 0) << "the failure was noticed";
    EXPECT_GT(st.kv_offload_loaded_tokens, 0) << "before the failure the tier served";
    redis.Resume();
  }
}

// Engine B on a Redis that engine A filled with prompt P's chunks: Q runs, Redis stops, P
// arrives and must load from it. Returns after Q finished; P is still waiting then.
struct StalledLoad {
  std::vector<int32_t> q_ids;
  bool p_started = false;  // P had a token when Q finished
  int64_t waits = 0;       // admissions of P put off by then
};

StalledLoad RunQWhileRedisStops(EngineCore* core, testing::RedisServer* redis,
                                const std::vector<int32_t>& p, const std::vector<int32_t>& q,
                                std::vector<int32_t>* p_ids, bool* p_done) {
  StalledLoad out;
  bool q_started = false, q_done = false;
  auto qid = core->AddRequest(
      q, Greedy(16),
      [&](const RequestOutput& o) {
        q_started = true;
        if (o.finished) {
          out.q_ids = o.outputs.at(0).token_ids;
          q_done = true;
        }
      },
      0);
  EXPECT_TRUE(qid.ok());
  // Q's own look in Redis (a miss) must be over before Redis stops.
  for (int steps = 0; !q_started && steps < 2000; ++steps) EXPECT_TRUE(core->Step().ok());
  EXPECT_TRUE(q_started);
  redis->Pause();
  auto pid = core->AddRequest(
      p, Greedy(16),
      [p_ids, p_done](const RequestOutput& o) {
        *p_ids = o.outputs.at(0).token_ids;
        if (o.finished) *p_done = true;
      },
      0);
  EXPECT_TRUE(pid.ok());
  for (int steps = 0; !q_done && steps < 2000; ++steps) EXPECT_TRUE(core->Step().ok());
  EXPECT_TRUE(q_done) << "Q did not finish while Redis was stopped: a step waited for it";
  out.p_started = !p_ids->empty();
  out.waits = core->Stats().kv_offload_load_waits;
  return out;
}

// Engine A stores P in `redis` (its destructor flushes the writes); returns the configuration of
// engine B on the same server, whose calls a stopped server holds for 20 s.
EngineConfig StoreThenConfigB(const testing::RedisServer& redis, const std::vector<int32_t>& p,
                              int64_t load_timeout_ms) {
  EngineConfig c = SmallPool();
  c.kv_offload_redis = redis.url();
  RunRounds(c, {p}, 1);
  c.kv_offload_redis_timeout_ms = 20000;
  c.kv_offload_load_timeout_ms = load_timeout_ms;
  return c;
}

TEST(KvOffloadEngine, AStoppedRedisNeverStallsAStep) {
  if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
  const Prompts prompts = Conversations(2, 96);
  const RoundsRun want = RunRounds(SmallPool(), prompts, 1, true);  // ids[0]: P, ids[1]: Q
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok());
  LLM llm(StoreThenConfigB(redis, prompts[0], 60000));
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  EngineCore* core = engine::CoreOf(llm);
  std::vector<int32_t> p_ids;
  bool p_done = false;
  const StalledLoad s = RunQWhileRedisStops(core, &redis, prompts[0], prompts[1], &p_ids, &p_done);
  redis.Resume();
  EXPECT_EQ(s.q_ids, want.ids[1]);
  EXPECT_FALSE(s.p_started) << "P was admitted before its chunks came";
  EXPECT_GT(s.waits, 0);
  for (int steps = 0; !p_done && steps < 5000; ++steps) ASSERT_TRUE(core->Step().ok());
  ASSERT_TRUE(p_done) << "P did not finish once Redis came back";
  EXPECT_EQ(p_ids, want.ids[0]);
  const EngineStats st = llm.stats();
  EXPECT_GT(st.kv_offload_loaded_tokens, 0) << "P's prefix came from Redis";
  EXPECT_EQ(st.kv_offload_load_timeouts, 0);
}

TEST(KvOffloadEngine, ALoadPastItsTimeOutIsRecomputed) {
  if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
  const Prompts prompts = Conversations(2, 96);
  const RoundsRun want = RunRounds(SmallPool(), prompts, 1, true);
  testing::RedisServer redis;
  ASSERT_TRUE(redis.ok());
  LLM llm(StoreThenConfigB(redis, prompts[0], 30));
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  EngineCore* core = engine::CoreOf(llm);
  std::vector<int32_t> p_ids;
  bool p_done = false;
  const StalledLoad s = RunQWhileRedisStops(core, &redis, prompts[0], prompts[1], &p_ids, &p_done);
  EXPECT_EQ(s.q_ids, want.ids[1]);
  // Redis stays stopped: P gives up on it after 30 ms and computes its prompt.
  for (int steps = 0; !p_done && steps < 5000; ++steps) ASSERT_TRUE(core->Step().ok());
  ASSERT_TRUE(p_done) << "P never gave up on the stopped Redis";
  EXPECT_EQ(p_ids, want.ids[0]);
  const EngineStats st = llm.stats();
  EXPECT_EQ(st.kv_offload_load_timeouts, 1);
  EXPECT_EQ(st.kv_offload_loaded_tokens, 0);
  redis.Resume();  // lets the loader's call return before the engine goes
}

TEST(KvOffloadEngine, AnUnreachableRedisAtStartIsAClearError) {
  if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
  std::string url;
  {
    testing::RedisServer gone;
    ASSERT_TRUE(gone.ok());
    url = gone.url();
  }
  EngineConfig c = SmallPool();
  c.kv_offload_redis = url;
  LLM llm(c);
  ASSERT_FALSE(llm.ok());
  EXPECT_NE(llm.status().message().find("kv_offload_redis"), std::string::npos)
      << llm.status().ToString();
  c.kv_offload_redis = "localhost:6379";
  LLM bad(c);
  EXPECT_FALSE(bad.ok()) << "a URL without redis:// is refused";
}

TEST(KvOffloadEngine, RefusesConfigurationsTheTiersCannotServe) {
  TempDir dir;
  const std::string not_a_dir = dir.path() + "/file";
  std::ofstream(not_a_dir) << "x";
  struct Case {
    std::string name;
    EngineConfig cfg;
    std::string says;
  };
  std::vector<Case> cases;
  EngineConfig c = SmallPool();
  c.kv_offload_ram_bytes = 1 << 20;
  c.enable_prefix_caching = false;
  cases.push_back({"no prefix cache", c, "prefix caching"});
  c = SmallPool();
  c.kv_offload_ram_bytes = 1 << 20;
  c.kv_offload_chunk_tokens = 24;
  cases.push_back({"chunk not a multiple of the block", c, "multiple of block_size"});
  c = SmallPool();
  c.kv_offload_disk = not_a_dir;
  cases.push_back({"disk path is a file", c, not_a_dir});
  c = SmallPool();
  c.kv_offload_ram_bytes = 1 << 20;
  EXPECT_TRUE(SetConfigField(&c, "kv_offload_dtype", "bf16").ok());
  cases.push_back({"a stored dtype no smaller than the pool's", c, "not smaller"});
  c = SmallPool();
  c.kv_offload_ram_bytes = 1 << 20;
  EXPECT_TRUE(SetConfigField(&c, "kv_cache_dtype", "fp8").ok());
  EXPECT_TRUE(SetConfigField(&c, "kv_offload_dtype", "q4_0").ok());
  cases.push_back({"an fp8 pool transcoded", c, "cannot be transcoded"});
  c = SmallPool();
  c.kv_offload_ram_bytes = 1 << 20;
  EXPECT_TRUE(SetConfigField(&c, "kv_offload_dtype", "kivi2").ok());
  cases.push_back({"a stored dtype a chunk cannot take", c, "can be stored as"});
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    LLM llm(k.cfg);
    ASSERT_FALSE(llm.ok());
    EXPECT_NE(llm.status().message().find(k.says), std::string::npos) << llm.status().ToString();
  }
}

}  // namespace
}  // namespace kvforge
