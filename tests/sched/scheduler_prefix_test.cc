// Cache-aware scheduling with a prefix-caching KvSpace: admission attaches the cached prefix
// (the first chunk starts after it), waiting requests are admitted longest cached prefix first
// within their priority class, aged requests still go first, and a request whose prefix a running
// request is prefilling waits for it (but not forever, and never when nothing runs), and a
// request whose prefix the space is still loading waits beside the others, its room kept; the
// first prefix_prefetch_requests requests left waiting are offered a prefetch, in admission order.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sched/fake_kv_space.h"
#include "sched/scheduler.h"

namespace kvforge::sched::testing {
namespace {

// FakeKvSpace plus scripted prefix-cache answers (tokens cached / in flight per sequence).
class PrefixSpace final : public KvSpace {
 public:
  PrefixSpace(int32_t blocks, int32_t bt) : inner_(blocks, bt, 0) {}
  int64_t block_tokens() const override { return inner_.block_tokens(); }
  int64_t num_total_blocks() const override { return inner_.num_total_blocks(); }
  int64_t num_free_blocks() const override { return inner_.num_free_blocks(); }
  int64_t BlocksToGrow(int64_t seq, int64_t total) const override {
    return inner_.BlocksToGrow(seq, total);
  }
  bool Grow(int64_t seq, int64_t total) override { return inner_.Grow(seq, total); }
  void Free(int64_t seq) override { inner_.Free(seq); }
  void Truncate(int64_t seq, int64_t total) override { inner_.Truncate(seq, total); }
  bool Fork(int64_t p, int64_t c) override { return inner_.Fork(p, c); }
  bool CanSwapOut(int64_t) const override { return false; }
  bool SwapOut(int64_t) override { return false; }
  bool CanSwapIn(int64_t) const override { return false; }
  bool SwapIn(int64_t) override { return false; }

  bool prefix_caching() const override { return true; }
  int64_t CachedPrefixTokens(int64_t seq, int64_t) const override { return Get(cached, seq); }
  int64_t InflightPrefixTokens(int64_t seq, int64_t) const override {
    return std::max(Get(cached, seq), Get(inflight, seq));
  }
  // Says "loading" for the first loading[seq] questions about seq.
  bool PrefixLoading(int64_t seq, int64_t) override {
    asked_loading[seq]++;
    auto it = loading.find(seq);
    if (it == loading.end() || it->second <= 0) return false;
    --it->second;
    return true;
  }
  void PrefetchPrefix(int64_t seq, int64_t) override { prefetched.push_back(seq); }
  int64_t AttachCachedPrefix(int64_t seq, int64_t) override {
    const int64_t hit = Get(cached, seq);
    if (hit > 0 && !inner_.Grow(seq, hit)) return 0;
    attached[seq] = hit;
    return hit;
  }
  void OnComputed(int64_t seq, int64_t n, bool) override { computed[seq] = n; }

  std::map<int64_t, int64_t> cached, inflight, attached, computed, loading, asked_loading;
  std::vector<int64_t> prefetched;  // sequences offered a prefetch, in call order

 private:
  static int64_t Get(const std::map<int64_t, int64_t>& m, int64_t k) {
    auto it = m.find(k);
    return it == m.end() ? 0 : it->second;
  }
  FakeKvSpace inner_;
};

SchedulerConfig Config(int64_t max_seqs) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 512;
  c.max_num_seqs = max_seqs;
  c.kv_watermark = 0;
  return c;
}

// Runs steps until `id` is admitted; returns the admission order of the requests seen.
std::vector<RequestId> AdmissionOrder(Scheduler& s, int steps) {
  std::vector<RequestId> order;
  for (int i = 0; i < steps && s.HasWork(); ++i) {
    StepPlan p = s.Schedule();
    std::vector<RequestOutcome> done;
    for (const auto& c : p.chunks) {
      if (c.is_prefill && c.pos0 <= 64 &&
          std::find(order.begin(), order.end(), c.request) == order.end())
        order.push_back(c.request);
      if (c.sample) done.push_back({c.request, true});  // one token is enough here
    }
    std::vector<SeqOutcome> seqs;
    EXPECT_TRUE(s.OnStepDone(p, seqs, done).ok());
  }
  return order;
}

TEST(SchedulerPrefixTest, AdmitsLongestCachedPrefixFirstAndStartsAfterIt) {
  PrefixSpace kv(64, 16);
  Scheduler s(Config(1), &kv);
  // Requests 1..3 wait behind a running request 9; their cached prefixes are 0, 64 and 32.
  ASSERT_TRUE(s.AddRequest({.id = 9, .seq = 90, .prompt_tokens = 20, .max_new_tokens = 4}).ok());
  StepPlan first = s.Schedule();
  ASSERT_EQ(first.chunks.size(), 1u);
  kv.cached = {{10, 0}, {20, 64}, {30, 32}};
  for (int i = 1; i <= 3; ++i)
    ASSERT_TRUE(
        s.AddRequest({.id = i, .seq = 10 * i, .prompt_tokens = 80, .max_new_tokens = 4}).ok());
  ASSERT_TRUE(s.OnStepDone(first, {}, {{9, true}}).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].request, 2);  // longest cached prefix
  EXPECT_EQ(p.chunks[0].pos0, 64);    // starts after the hit
  EXPECT_EQ(p.chunks[0].num_tokens, 16);
  EXPECT_EQ(s.NumCachedTokens(2), 64);
  ASSERT_TRUE(s.OnStepDone(p, {}, {{2, true}}).ok());
  const auto order = AdmissionOrder(s, 10);
  EXPECT_EQ(order, (std::vector<RequestId>{3, 1}));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerPrefixTest, AgedRequestsStillGoFirst) {
  PrefixSpace kv(64, 16);
  SchedulerConfig c = Config(1);
  c.max_wait_steps = 2;
  Scheduler s(c, &kv);
  ASSERT_TRUE(s.AddRequest({.id = 9, .seq = 90, .prompt_tokens = 20, .max_new_tokens = 8}).ok());
  ASSERT_TRUE(s.AddRequest({.id = 1, .seq = 10, .prompt_tokens = 40, .max_new_tokens = 2}).ok());
  // Request 9 runs for several steps; meanwhile 1 ages past max_wait_steps.
  for (int i = 0; i < 4; ++i) {
    StepPlan p = s.Schedule();
    std::vector<SeqOutcome> seqs;
    for (const auto& ch : p.chunks)
      if (ch.sample) seqs.push_back({ch.seq, true});
    ASSERT_TRUE(s.OnStepDone(p, seqs, {}).ok());
  }
  kv.cached = {{20, 64}};
  ASSERT_TRUE(s.AddRequest({.id = 2, .seq = 20, .prompt_tokens = 80, .max_new_tokens = 2}).ok());
  ASSERT_TRUE(s.Abort(9).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].request, 1);  // promoted by aging, despite no cached prefix
}

TEST(SchedulerPrefixTest, WaitsForAPrefixBeingPrefilledNotForever) {
  PrefixSpace kv(64, 16);
  Scheduler s(Config(8), &kv);
  ASSERT_TRUE(s.AddRequest({.id = 1, .seq = 10, .prompt_tokens = 100, .max_new_tokens = 2}).ok());
  StepPlan a = s.Schedule();
  ASSERT_EQ(a.chunks.size(), 1u);
  // Request 2 shares 96 tokens that request 1 is computing right now: it is held back.
  kv.inflight = {{20, 96}};
  ASSERT_TRUE(s.AddRequest({.id = 2, .seq = 20, .prompt_tokens = 110, .max_new_tokens = 2}).ok());
  ASSERT_TRUE(s.OnStepDone(a, {{10, true}}, {}).ok());
  StepPlan b = s.Schedule();
  for (const auto& c : b.chunks) EXPECT_NE(c.request, 2);
  EXPECT_GT(s.Stats().num_prefix_deferrals, 0);
  // The prefix landed in the cache: request 2 is admitted and starts after it.
  kv.inflight.clear();
  kv.cached = {{20, 96}};
  ASSERT_TRUE(s.OnStepDone(b, {}, {{1, true}}).ok());
  StepPlan c = s.Schedule();
  ASSERT_EQ(c.chunks.size(), 1u);
  EXPECT_EQ(c.chunks[0].request, 2);
  EXPECT_EQ(c.chunks[0].pos0, 96);
  EXPECT_EQ(kv.attached[20], 96);
}

TEST(SchedulerPrefixTest, NothingRunningMeansNoDeferral) {
  PrefixSpace kv(64, 16);
  Scheduler s(Config(8), &kv);
  kv.inflight = {{10, 96}};  // stale answer: nobody runs, so nobody will compute it
  ASSERT_TRUE(s.AddRequest({.id = 1, .seq = 10, .prompt_tokens = 100, .max_new_tokens = 2}).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].request, 1);
}

// Commits a plan with one token for every sampled chunk; an empty plan has nothing to commit.
void Commit(Scheduler& s, const StepPlan& p) {
  if (p.empty()) return;
  std::vector<SeqOutcome> seqs;
  for (const auto& c : p.chunks)
    if (c.sample) seqs.push_back({c.seq, true});
  ASSERT_TRUE(s.OnStepDone(p, seqs, {}).ok());
}

TEST(SchedulerPrefixTest, ARequestWhosePrefixIsLoadingWaitsWhileOthersRun) {
  PrefixSpace kv(64, 16);
  Scheduler s(Config(8), &kv);
  kv.loading = {{10, 3}};  // three questions answered "still loading"
  ASSERT_TRUE(s.AddRequest({.id = 1, .seq = 10, .prompt_tokens = 60, .max_new_tokens = 2}).ok());
  ASSERT_TRUE(s.AddRequest({.id = 2, .seq = 20, .prompt_tokens = 40, .max_new_tokens = 8}).ok());
  for (int step = 0; step < 3; ++step) {
    StepPlan q = s.Schedule();
    ASSERT_FALSE(q.empty()) << "step " << step << ": request 2 goes on while 1 loads";
    for (const auto& c : q.chunks) EXPECT_EQ(c.request, 2) << "step " << step;
    Commit(s, q);
  }
  EXPECT_EQ(s.Stats().num_prefix_load_waits, 3);
  StepPlan r = s.Schedule();
  bool admitted = false;
  for (const auto& c : r.chunks) admitted |= c.request == 1 && c.pos0 == 0;
  EXPECT_TRUE(admitted) << "loaded: admitted";
  EXPECT_EQ(kv.asked_loading[10], 4);
  Commit(s, r);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerPrefixTest, ALoadingRequestKeepsItsRoom) {
  // 6 blocks of 16: request 1 (60 tokens, 4 blocks) loads; request 2 (40 tokens, 3 blocks) fits
  // only if 1's room is given away, so it waits for 1 as plain FCFS would.
  PrefixSpace kv(6, 16);
  Scheduler s(Config(8), &kv);
  kv.loading = {{10, 2}};
  ASSERT_TRUE(s.AddRequest({.id = 1, .seq = 10, .prompt_tokens = 60, .max_new_tokens = 2}).ok());
  ASSERT_TRUE(s.AddRequest({.id = 2, .seq = 20, .prompt_tokens = 40, .max_new_tokens = 2}).ok());
  for (int step = 0; step < 2; ++step) EXPECT_TRUE(s.Schedule().empty()) << "step " << step;
  StepPlan r = s.Schedule();
  ASSERT_FALSE(r.chunks.empty());
  EXPECT_EQ(r.chunks[0].request, 1);
  Commit(s, r);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerPrefixTest, RequestsLeftWaitingAreOfferedAPrefetchInAdmissionOrder) {
  // One running slot: request 9 runs; 1..5 wait (cached prefixes make the admission order 3, 2,
  // then 1, 4, 5 by arrival). Each step offers the first two waiting a prefetch, in that order.
  PrefixSpace kv(64, 16);
  SchedulerConfig c = Config(1);
  c.prefix_prefetch_requests = 2;
  Scheduler s(c, &kv);
  ASSERT_TRUE(s.AddRequest({.id = 9, .seq = 90, .prompt_tokens = 20, .max_new_tokens = 4}).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].request, 9);
  EXPECT_TRUE(kv.prefetched.empty()) << "nobody was left waiting";
  kv.cached = {{20, 32}, {30, 64}};
  for (int i = 1; i <= 5; ++i)
    ASSERT_TRUE(
        s.AddRequest({.id = i, .seq = 10 * i, .prompt_tokens = 80, .max_new_tokens = 4}).ok());
  // Request 9 decodes (it holds the one slot): the first two waiting are offered.
  ASSERT_TRUE(s.OnStepDone(p, {{90, true}}, {}).ok());
  p = s.Schedule();
  EXPECT_EQ(kv.prefetched, (std::vector<int64_t>{30, 20}));
  ASSERT_TRUE(s.OnStepDone(p, {}, {{9, true}}).ok());
  // Request 3 is admitted next; 2 and 1 are offered.
  kv.prefetched.clear();
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].request, 3);
  EXPECT_EQ(kv.prefetched, (std::vector<int64_t>{20, 10}));
  ASSERT_TRUE(s.OnStepDone(p, {}, {{3, true}}).ok());
  // Off: nothing is offered.
  PrefixSpace kv_off(64, 16);
  c.prefix_prefetch_requests = 0;
  Scheduler off(c, &kv_off);
  ASSERT_TRUE(off.AddRequest({.id = 9, .seq = 90, .prompt_tokens = 20, .max_new_tokens = 4}).ok());
  ASSERT_TRUE(off.AddRequest({.id = 1, .seq = 10, .prompt_tokens = 80, .max_new_tokens = 4}).ok());
  off.Schedule();
  EXPECT_TRUE(kv_off.prefetched.empty());
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerPrefixTest, CommitsReportComputedTokens) {
  PrefixSpace kv(64, 16);
  Scheduler s(Config(8), &kv);
  kv.cached = {{10, 32}};
  ASSERT_TRUE(s.AddRequest({.id = 1, .seq = 10, .prompt_tokens = 50, .max_new_tokens = 2}).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].pos0, 32);
  EXPECT_EQ(p.chunks[0].num_tokens, 18);
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}}, {}).ok());
  EXPECT_EQ(kv.computed[10], 50);
  EXPECT_EQ(s.NumComputed(10), 50);
}

}  // namespace
}  // namespace kvforge::sched::testing
