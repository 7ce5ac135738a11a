// block_pool_bench.cc — Google Benchmark micro-benchmarks for kvmeta bookkeeping:
//   BM_PoolAllocateRelease        one block in, one block out (the LIFO hot path)
//   BM_PoolAllocateManyRelease/N  N blocks at once, then release them all
//   BM_PoolEvictingAllocate       free stack empty: every allocation evicts an LRU cached block
//   BM_TableDecodeAppend          one-token appends, a new block every block_tokens tokens
//   BM_ForkCopyOnWrite/T          fork a T-token sequence, append one token (CoW), free the fork
//   BM_ManagerBeamStep/W          W beams each append a token, then the worst half is pruned and
//                                 refilled by forks of the best (beam-search bookkeeping)
// items_per_second counts block operations (or tokens for the append benchmark). Bookkeeping
// only: no KV bytes move here (kvstore does the copies that BlockCopy describes).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <utility>
#include <vector>

#include "kvmeta/block_manager.h"
#include "kvmeta/block_pool.h"
#include "kvmeta/block_table.h"

namespace kvforge::kvmeta {
namespace {

constexpr int32_t kBlockTokens = 16;

BlockPool MakePool(int32_t num_blocks) {
  Result<BlockPool> pool =
      BlockPool::Create({.num_blocks = num_blocks, .block_tokens = kBlockTokens});
  if (!pool.ok()) std::abort();
  return std::move(pool).value();
}

void BM_PoolAllocateRelease(benchmark::State& state) {
  BlockPool pool = MakePool(4096);
  for (auto _ : state) {
    std::optional<BlockId> b = pool.Allocate();
    benchmark::DoNotOptimize(b);
    pool.Release(*b);
  }
  state.SetItemsProcessed(state.iterations() * 2);  // one allocate + one release
}
BENCHMARK(BM_PoolAllocateRelease);

void BM_PoolAllocateManyRelease(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  BlockPool pool = MakePool(n);
  std::vector<BlockId> blocks;
  blocks.reserve(static_cast<size_t>(n));
  for (auto _ : state) {
    blocks.clear();
    if (!pool.AllocateMany(n, &blocks)) state.SkipWithError("pool too small");
    for (BlockId b : blocks) pool.Release(b);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 2 * n);
}
BENCHMARK(BM_PoolAllocateManyRelease)->RangeMultiplier(8)->Range(16, 16384);

void BM_PoolEvictingAllocate(benchmark::State& state) {
  constexpr int32_t kBlocks = 4096;
  BlockPool pool = MakePool(kBlocks);
  int64_t evictions = 0;
  pool.SetEvictionListener([&evictions](BlockId, uint64_t) { ++evictions; });
  std::vector<BlockId> blocks;
  if (!pool.AllocateMany(kBlocks, &blocks)) std::abort();
  uint64_t hash = 1;
  for (BlockId b : blocks) {
    pool.SetHash(b, hash++);
    pool.Release(b);  // every block ends up cached and evictable
  }
  for (auto _ : state) {
    std::optional<BlockId> b = pool.Allocate();  // evicts the LRU head
    pool.SetHash(*b, hash++);
    pool.Release(*b);  // back to the LRU tail
  }
  state.SetItemsProcessed(state.iterations() * 2);
  state.counters["evictions"] = static_cast<double>(evictions);
}
BENCHMARK(BM_PoolEvictingAllocate);

void BM_TableDecodeAppend(benchmark::State& state) {
  constexpr int32_t kBlocks = 1024;
  BlockPool pool = MakePool(kBlocks);
  BlockTable table(kBlockTokens);
  int64_t tokens = 0;
  for (auto _ : state) {
    WriteOutcome w = table.AppendSlots(pool, 1);
    if (!w.ok()) {
      state.PauseTiming();
      table.Free(pool);
      state.ResumeTiming();
      w = table.AppendSlots(pool, 1);
    }
    benchmark::DoNotOptimize(w);
    ++tokens;
  }
  table.Free(pool);
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_TableDecodeAppend);

void BM_ForkCopyOnWrite(benchmark::State& state) {
  const int64_t prompt_tokens = state.range(0) + 3;  // +3: the last block is partially filled
  const auto blocks = static_cast<int32_t>(BlocksForTokens(prompt_tokens, kBlockTokens));
  BlockPool pool = MakePool(2 * blocks + 2);
  BlockTable parent(kBlockTokens);
  if (!parent.AppendSlots(pool, prompt_tokens).ok()) std::abort();
  int64_t copies = 0;
  for (auto _ : state) {
    BlockTable child = parent.Fork(pool);
    WriteOutcome w = child.AppendSlots(pool, 1);  // copy-on-write of the shared tail
    copies += static_cast<int64_t>(w.copies.size());
    child.Free(pool);
  }
  parent.Free(pool);
  state.SetItemsProcessed(state.iterations() * blocks);  // blocks shared (and released) per fork
  state.counters["copies_per_fork"] =
      benchmark::Counter(static_cast<double>(copies), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_ForkCopyOnWrite)->RangeMultiplier(4)->Range(128, 32768);

void BM_ManagerBeamStep(benchmark::State& state) {
  const auto width = static_cast<int64_t>(state.range(0));
  Result<BlockManager> created =
      BlockManager::Create({.num_blocks = 65536, .block_tokens = kBlockTokens, .watermark = 0.0});
  if (!created.ok()) std::abort();
  BlockManager manager = std::move(created).value();
  const SeqId prompt = MakeSeqId(0);
  if (!manager.Allocate(prompt, 1000).ok()) std::abort();
  std::vector<SeqId> beams;
  int64_t next_id = 1;
  for (int64_t i = 0; i < width; ++i) {
    beams.push_back(MakeSeqId(next_id++));
    if (!manager.Fork(prompt, beams.back()).ok()) std::abort();
  }
  if (!manager.Free(prompt).ok()) std::abort();
  int64_t steps = 0;
  for (auto _ : state) {
    for (SeqId beam : beams) {
      Result<WriteOutcome> w = manager.AppendSlots(beam, 1);
      benchmark::DoNotOptimize(w);
    }
    // Prune the second half, refill it with forks of the first half.
    for (int64_t i = width / 2; i < width; ++i) {
      if (!manager.Free(beams[static_cast<size_t>(i)]).ok()) std::abort();
      beams[static_cast<size_t>(i)] = MakeSeqId(next_id++);
      if (!manager.Fork(beams[static_cast<size_t>(i - width / 2)], beams[static_cast<size_t>(i)])
               .ok()) {
        std::abort();
      }
    }
    if (++steps % 512 == 0) {  // keep sequences from outgrowing the pool
      state.PauseTiming();
      for (SeqId beam : beams) {
        if (!manager.Truncate(beam, 1000).ok()) std::abort();
      }
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations() * width);
}
BENCHMARK(BM_ManagerBeamStep)->Arg(4)->Arg(16)->Arg(64);

}  // namespace
}  // namespace kvforge::kvmeta
