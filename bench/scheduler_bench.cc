// Micro-benchmarks for sched::Scheduler: the cost of planning one step (Scheduler::Schedule)
// with 256 live sequences.
//   BM_Schedule256Decode       Schedule() alone, 256 sequences decoding (the plan is discarded
//                              each time, so every iteration plans the same step).
//   BM_Step256Decode           Schedule() + OnStepDone() with one token per sequence.
//   BM_Schedule256WithBacklog  as the first, with 10,000 requests waiting behind the cap.
//   BM_Step256Mixed            128 decoding + 128 prefilling in 64-token chunks, with arrivals
//                              replacing finished requests (admission every step).
// The KV space is a counting stand-in (no kvmeta): capacity arithmetic only, so the figures are
// the scheduler's own cost. Items processed = sequences scheduled.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sched/kv_space.h"
#include "sched/scheduler.h"

namespace kvforge::sched {
namespace {

class CountingKvSpace final : public KvSpace {
 public:
  CountingKvSpace(int64_t num_blocks, int64_t block_tokens)
      : block_tokens_(block_tokens), total_(num_blocks), free_(num_blocks) {}
  int64_t block_tokens() const override { return block_tokens_; }
  int64_t num_total_blocks() const override { return total_; }
  int64_t num_free_blocks() const override { return free_; }
  int64_t BlocksToGrow(int64_t seq, int64_t total_tokens) const override {
    auto it = slots_.find(seq);
    const int64_t have = it == slots_.end() ? 0 : it->second;
    return total_tokens <= have ? 0 : Blocks(total_tokens) - Blocks(have);
  }
  bool Grow(int64_t seq, int64_t total_tokens) override {
    const int64_t need = BlocksToGrow(seq, total_tokens);
    if (need > free_) return false;
    free_ -= need;
    int64_t& have = slots_[seq];
    if (total_tokens > have) have = total_tokens;
    return true;
  }
  void Truncate(int64_t seq, int64_t total_tokens) override {
    int64_t& have = slots_[seq];
    free_ += Blocks(have) - Blocks(total_tokens);
    have = total_tokens;
  }
  void Free(int64_t seq) override {
    auto it = slots_.find(seq);
    if (it == slots_.end()) return;
    free_ += Blocks(it->second);
    slots_.erase(it);
  }
  bool Fork(int64_t, int64_t) override { return false; }
  bool CanSwapOut(int64_t) const override { return false; }
  bool SwapOut(int64_t) override { return false; }
  bool CanSwapIn(int64_t) const override { return false; }
  bool SwapIn(int64_t) override { return false; }

 private:
  int64_t Blocks(int64_t tokens) const { return (tokens + block_tokens_ - 1) / block_tokens_; }

  int64_t block_tokens_;
  int64_t total_;
  int64_t free_;
  std::unordered_map<int64_t, int64_t> slots_;
};

constexpr int64_t kSeqs = 256;

struct Setup {
  std::unique_ptr<CountingKvSpace> kv;
  std::unique_ptr<Scheduler> sched;
  RequestId next_id = 1;

  Setup(int64_t budget, int64_t chunk) {
    kv = std::make_unique<CountingKvSpace>(int64_t{1} << 26, 16);
    SchedulerConfig c;
    c.max_num_seqs = kSeqs;
    c.max_num_batched_tokens = budget;
    c.long_prefill_token_threshold = chunk;
    c.kv_watermark = 0.0;
    sched = std::make_unique<Scheduler>(c, kv.get());
  }
  void Add(int64_t prompt, int64_t max_new) {
    const RequestId id = next_id++;
    (void)sched->AddRequest(
        NewRequest{.id = id, .seq = id, .prompt_tokens = prompt, .max_new_tokens = max_new});
  }
  // Runs one step with a token for every sampled sequence; finishes requests whose sequence
  // reached `max_tokens` total tokens. Returns the number of finished requests.
  int64_t Step(int64_t max_tokens) {
    const StepPlan plan = sched->Schedule();
    std::vector<SeqOutcome> seqs;
    std::vector<RequestOutcome> reqs;
    seqs.reserve(plan.chunks.size());
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.sample) continue;
      seqs.push_back({c.seq, true});
      reqs.push_back({c.request, c.pos0 + c.num_tokens + 1 >= max_tokens});
    }
    int64_t finished = 0;
    for (const RequestOutcome& r : reqs) finished += r.finished ? 1 : 0;
    (void)sched->OnStepDone(plan, seqs, reqs);
    return finished;
  }
};

// 256 sequences with 128-token prompts, all past their prefill.
std::unique_ptr<Setup> Decoding() {
  auto s = std::make_unique<Setup>(/*budget=*/8192, /*chunk=*/0);
  for (int64_t i = 0; i < kSeqs; ++i) s->Add(128, int64_t{1} << 20);
  while (s->sched->Stats().num_running < kSeqs || s->sched->NumComputed(kSeqs) < 128) {
    s->Step(int64_t{1} << 30);
  }
  s->Step(int64_t{1} << 30);
  return s;
}

void BM_Schedule256Decode(benchmark::State& state) {
  auto s = Decoding();
  for (auto _ : state) {
    StepPlan plan = s->sched->Schedule();
    benchmark::DoNotOptimize(plan.chunks.data());
  }
  state.SetItemsProcessed(state.iterations() * kSeqs);
}
BENCHMARK(BM_Schedule256Decode);

void BM_Step256Decode(benchmark::State& state) {
  auto s = Decoding();
  for (auto _ : state) s->Step(int64_t{1} << 30);
  state.SetItemsProcessed(state.iterations() * kSeqs);
}
BENCHMARK(BM_Step256Decode);

void BM_Schedule256WithBacklog(benchmark::State& state) {
  auto s = Decoding();
  for (int64_t i = 0; i < 10000; ++i) s->Add(128, 64);
  for (auto _ : state) {
    StepPlan plan = s->sched->Schedule();
    benchmark::DoNotOptimize(plan.chunks.data());
  }
  state.SetItemsProcessed(state.iterations() * kSeqs);
}
BENCHMARK(BM_Schedule256WithBacklog);

void BM_Step256Mixed(benchmark::State& state) {
  // Requests of 256 prompt tokens + 32 generated; prefill in chunks of 64 under a budget of
  // 128 decodes + 128 x 64: about half the sequences decode while the other half prefill.
  auto s = std::make_unique<Setup>(/*budget=*/128 + 128 * 64, /*chunk=*/64);
  for (int64_t i = 0; i < kSeqs; ++i) s->Add(256, 64);
  int64_t scheduled = 0;
  for (auto _ : state) {
    const int64_t finished = s->Step(256 + 32);
    for (int64_t i = 0; i < finished; ++i) s->Add(256, 64);
    scheduled += s->sched->Stats().num_running_seqs;
  }
  state.SetItemsProcessed(scheduled);
}
BENCHMARK(BM_Step256Mixed);

}  // namespace
}  // namespace kvforge::sched
