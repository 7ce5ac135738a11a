// sched/schedule_step.cc — Scheduler::Schedule(): one step's batch. Passes, in order:
//   0. promote requests that waited too long (aging);
//   1. one decode token per ready sequence of every running request, best request first;
//   2. the next prefill / recompute chunk of running requests, best first (with max_itl_ms, in
//      the time the decodes of pass 1 leave under the target);
//      (1 and 2 preempt the worst running request when a sequence cannot grow)
//   3. swap-in of swapped requests, if nothing was preempted in this step;
//   4. admission of waiting requests, if nothing was preempted and nothing is still swapped
//      (static batching: only when nothing is running either).
// See sched/scheduler.h for the policy; the state is described in sched/scheduler_internal.h.
#include <algorithm>
#include <vector>

#include "sched/scheduler.h"
#include "sched/scheduler_internal.h"

namespace kvforge::sched {

namespace {

// The share of max_itl_ms a step's floor prefill chunk may add (PrefillChunk).
constexpr double kFloorShareOfTarget = 0.25;

int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

StepPlan Scheduler::Impl::Schedule() {
  ++step;
  // A plan that was never committed is discarded: its chunks did not happen.
  for (int64_t id : inflight_seqs) {
    if (SeqState* s = FindSeq(id); s != nullptr) {
      s->inflight_end = -1;
      s->inflight_drafts = 0;
    }
  }
  inflight_seqs.clear();
  PromoteStarved();

  PlanBuilder b;
  b.budget = cfg.max_num_batched_tokens;
  // A request that preempts itself is running.back(), so it is always the last one visited.
  for (size_t i = 0; i < running.size();) {
    if (ScheduleSeqs(running[i], /*prefill=*/false, /*may_preempt=*/true, &b)) ++i;
  }
  GrantDrafts(&b);
  draft_offers.clear();
  LimitPrefillForItl(&b);
  for (size_t i = 0; i < running.size();) {
    if (ScheduleSeqs(running[i], /*prefill=*/true, /*may_preempt=*/true, &b)) ++i;
  }
  if (b.preempted.empty()) {
    // Blocks not yet promised to running prefills; with nothing running there is nobody the
    // watermark protects, which also guarantees the head of the queue can always get in.
    int64_t avail = kv->num_free_blocks() - OutstandingBlocks();
    bool exempt = running.empty();
    const bool batch_done = running.empty();
    if (!swapped.empty()) SwapInRequests(&b, &avail, &exempt);
    if (swapped.empty() && (!cfg.static_batching || batch_done)) AdmitWaiting(&b, &avail, &exempt);
  }

  StepPlan plan;
  plan.step = step;
  plan.chunks = std::move(b.decode);
  plan.chunks.insert(plan.chunks.end(), b.prefill.begin(), b.prefill.end());
  for (const ScheduledChunk& c : plan.chunks) {
    plan.num_batched_tokens += c.num_tokens;
    inflight_seqs.push_back(c.seq);
  }
  if (b.itl_cut) ++stats.num_itl_limited_steps;
  if (b.ttft_lifted) ++stats.num_ttft_lifted_steps;
  plan.preempted = std::move(b.preempted);
  plan.swapped_in = std::move(b.swapped_in);
  pending_step = step;
  return plan;
}

void Scheduler::Impl::PromoteStarved() {
  if (cfg.max_wait_steps == 0) return;
  while (!aging.empty()) {
    Req* r = aging.begin()->second;
    if (step - r->arrival_step < cfg.max_wait_steps) break;
    waiting.erase(RankOf(*r));
    aging.erase(aging.begin());
    r->promoted = true;
    waiting.emplace(RankOf(*r), r);
  }
}

void Scheduler::Impl::GrantDrafts(PlanBuilder* b) {
  if (draft_offers.empty()) return;
  for (ScheduledChunk& c : b->decode) {
    auto offer = draft_offers.find(c.seq);
    if (offer == draft_offers.end() || offer->second.max_drafts <= 0) continue;
    SeqState* s = FindSeq(c.seq);
    const Req* r = Owner(c.seq);
    if (s == nullptr || r == nullptr || !c.sample || c.num_tokens != 1) continue;
    int64_t d = DraftSlotsFor(*r, *s, offer->second, *b);
    if (d > 0 && !kv->Grow(s->id, c.pos0 + c.num_tokens + d)) d = 0;
    if (d == 0) {
      ++stats.num_drafts_refused;
      continue;
    }
    c.num_tokens += d;
    c.draft_tokens = d;
    s->inflight_end += d;
    s->inflight_drafts = d;
    s->kv_slots = std::max(s->kv_slots, s->inflight_end);
    b->budget -= d;
    stats.num_draft_slots += d;
  }
}

int64_t Scheduler::Impl::DraftSlotsFor(const Req& r, const SeqState& s, const DraftOffer& offer,
                                       const PlanBuilder& b) const {
  // Every kept draft is a token: never more than max_new_tokens leaves room for, the sampled
  // token included.
  const int64_t room = r.max_new_tokens - (s.num_tokens - r.prompt_tokens) - 1;
  const int64_t most = std::min({offer.max_drafts, b.budget, room});
  if (most <= 0) return 0;
  if (!cost.ready()) return most;
  // The step's tokens per ms without this sequence's drafts; d drafts are expected to add
  // a + a^2 + ... + a^d tokens (each kept only if those before it were) for ChunkMs of d more
  // tokens in the forward plus d x draft_ms to make them. The best d, or none when no d adds
  // tokens faster than the step.
  const double step_ms = cost.PredictMs(ShapeOf(b.decode));
  if (!(step_ms > 0)) return most;
  const double rate = static_cast<double>(b.decode.size()) / step_ms;
  const double a = std::clamp(offer.acceptance, 0.0, 1.0);
  const double draft_ms = std::max(0.0, offer.draft_ms);
  int64_t best = 0;
  double best_gain = 0, expected = 0, term = 1;
  for (int64_t d = 1; d <= most; ++d) {
    term *= a;
    expected += term;
    const double gain =
        expected - rate * (cost.ChunkMs(s.num_tokens, d, /*prefill=*/true) + d * draft_ms);
    if (gain > best_gain) {
      best_gain = gain;
      best = d;
    }
  }
  return best;
}

void Scheduler::Impl::LimitPrefillForItl(PlanBuilder* b) const {
  if (cfg.max_itl_ms <= 0 || !cfg.chunked_prefill || b->decode.empty() || !cost.ready()) return;
  if (FirstTokenAtRisk()) {
    b->ttft_lifted = true;
    return;
  }
  b->itl_limited = true;
  // Planned against the step-time tail, not the mean: most steps must land within the target.
  b->prefill_ms_left = cfg.max_itl_ms / cost.tail_factor() - cost.PredictMs(ShapeOf(b->decode));
}

bool Scheduler::Impl::FirstTokenAtRisk(const Req& r) const {
  int64_t computed = r.cached_tokens;
  for (const SeqState& s : r.seqs) {
    if (s.num_tokens > r.prompt_tokens) return false;  // has its first token (a recompute)
    computed = std::max(computed, s.num_computed);
  }
  if (computed >= r.prompt_tokens) return false;
  const double left_ms = cost.ChunkMs(computed, r.prompt_tokens - computed) * cost.tail_factor();
  return busy_ms - r.arrival_ms + left_ms >= cfg.max_ttft_ms;
}

bool Scheduler::Impl::FirstTokenAtRisk() const {
  if (cfg.max_ttft_ms <= 0) return false;
  for (const Req* r : running)
    if (FirstTokenAtRisk(*r)) return true;
  // The next request admission would take (the best-ranked waiting one).
  return !waiting.empty() && FirstTokenAtRisk(*waiting.begin()->second);
}

int64_t Scheduler::Impl::UntimedPrefillChunk(const SeqState& s, int64_t budget) const {
  const int64_t remaining = s.num_tokens - s.num_computed;
  if (budget <= 0 || remaining <= 0) return 0;
  if (cfg.chunked_prefill) {
    int64_t n = std::min(remaining, budget);
    if (cfg.long_prefill_token_threshold > 0) n = std::min(n, cfg.long_prefill_token_threshold);
    return n;
  }
  if (remaining <= budget) return remaining;
  // A recompute longer than a whole step could never run in one piece: split it.
  if (remaining > cfg.max_num_batched_tokens) return budget;
  return 0;
}

int64_t Scheduler::Impl::PrefillChunk(const SeqState& s, const PlanBuilder& b) const {
  const int64_t n = UntimedPrefillChunk(s, b.budget);
  if (!b.itl_limited || n == 0) return n;
  const int64_t fit = cost.MaxChunkTokens(b.prefill_ms_left, s.num_computed, n);
  // The step's first prefill chunk always gets a floor, so prompts never starve: at most
  // min_prefill_chunk tokens, and no more than add a quarter of the target to the step (at least
  // one), so a model whose prefill tokens are dear (a 1.1B one: ~10 ms each here) does not push
  // its decodes' steps far past the target.
  if (b.prefill.empty()) {
    const int64_t floor = std::max<int64_t>(
        1, cost.MaxChunkTokens(cfg.max_itl_ms * kFloorShareOfTarget / cost.tail_factor(),
                               s.num_computed, std::min(n, cfg.min_prefill_chunk)));
    return std::max(fit, floor);
  }
  return fit;
}

bool Scheduler::Impl::ScheduleSeqs(Req* r, bool prefill, bool may_preempt, PlanBuilder* b) {
  for (SeqState& s : r->seqs) {
    if (s.inflight_end >= 0 || Complete(*r, s)) continue;
    if ((s.num_computed < s.prefill_end) != prefill) continue;
    if (s.num_computed >= s.num_tokens) continue;  // idle: waits for a token
    if (b->num_seqs() >= cfg.max_num_seqs) return true;
    const int64_t n = prefill ? PrefillChunk(s, *b) : std::min<int64_t>(1, b->budget);
    if (n <= 0) continue;
    const int64_t end = s.num_computed + n;
    bool grown = true;
    while (!kv->Grow(s.id, end)) {
      if (!may_preempt) {
        grown = false;
        break;
      }
      Req* victim = running.back();
      Preempt(victim, b);
      if (victim == r) return false;
    }
    if (!grown) continue;
    s.kv_slots = std::max(s.kv_slots, end);
    s.inflight_end = end;
    const ScheduledChunk chunk{.request = r->id,
                               .seq = s.id,
                               .pos0 = s.num_computed,
                               .num_tokens = n,
                               .is_prefill = s.num_computed < s.prefill_end,
                               .sample = end == s.num_tokens};
    if (b->itl_limited) {
      // Decodes added after the limit was set (swap-in) spend the same time budget.
      if (prefill && n < UntimedPrefillChunk(s, b->budget)) b->itl_cut = true;
      b->prefill_ms_left -= cost.ChunkMs(s.num_computed, n, prefill);
    }
    (prefill ? b->prefill : b->decode).push_back(chunk);
    b->budget -= n;
  }
  return true;
}

void Scheduler::Impl::Preempt(Req* victim, PlanBuilder* b) {
  auto unschedule = [&](std::vector<ScheduledChunk>* chunks) {
    auto keep = std::remove_if(chunks->begin(), chunks->end(), [&](const ScheduledChunk& c) {
      if (c.request != victim->id) return false;
      b->budget += c.num_tokens;
      return true;
    });
    chunks->erase(keep, chunks->end());
  };
  unschedule(&b->decode);
  unschedule(&b->prefill);
  for (SeqState& s : victim->seqs) {
    s.inflight_end = -1;
    s.inflight_drafts = 0;
  }
  RemoveFromQueue(victim);
  b->preempted.push_back(victim->id);
  ++stats.num_preemptions;
  if (cfg.preemption_mode == PreemptionMode::kSwap && TrySwapOut(victim)) {
    ++stats.num_swap_preemptions;
    PushSwapped(victim);
    return;
  }
  ResetForRecompute(victim);
  PushWaiting(victim);
}

bool Scheduler::Impl::TrySwapOut(Req* r) {
  bool any = false;
  for (const SeqState& s : r->seqs) {
    if (s.kv_slots == 0) continue;
    any = true;
    // A partial swap-out is undone by the caller's recompute, which frees everything.
    if (!kv->CanSwapOut(s.id) || !kv->SwapOut(s.id)) return false;
  }
  return any;  // nothing to keep: recompute is free
}

void Scheduler::Impl::ResetForRecompute(Req* r) {
  for (SeqState& s : r->seqs) {
    kv->Free(s.id);
    stats.num_recomputed_tokens += s.num_computed;
    s.num_computed = 0;
    s.kv_slots = 0;
    s.inflight_end = -1;
    s.prefill_end = s.num_tokens;
  }
}

int64_t Scheduler::Impl::OutstandingBlocks() const {
  int64_t n = 0;
  for (const Req* r : running) {
    for (const SeqState& s : r->seqs) {
      if (!Complete(*r, s) && s.num_computed < s.prefill_end) {
        n += kv->BlocksToGrow(s.id, s.num_tokens);
      }
    }
    n += std::max<int64_t>(0, r->num_seqs - static_cast<int64_t>(r->seqs.size()));
  }
  return n;
}

int64_t Scheduler::Impl::AdmissionNeed(const Req& r) const {
  int64_t n = std::max<int64_t>(0, r.num_seqs - static_cast<int64_t>(r.seqs.size()));
  for (const SeqState& s : r.seqs) {
    if (!Complete(r, s)) n += kv->BlocksToGrow(s.id, s.num_tokens);
  }
  return n;
}

int64_t Scheduler::Impl::SwapInNeed(const Req& r) const {
  int64_t n = 0;
  for (const SeqState& s : r.seqs) n += CeilDiv(s.kv_slots, kv->block_tokens());
  return n;
}

void Scheduler::Impl::SwapInRequests(PlanBuilder* b, int64_t* avail, bool* exempt) {
  int64_t reserved = RunningReservation();
  while (!swapped.empty()) {
    Req* r = swapped.begin()->second;
    if (reserved + SeqReservation(*r) > cfg.max_num_seqs) break;
    const int64_t blocks = SwapInNeed(*r);
    const int64_t growth = static_cast<int64_t>(r->seqs.size()) +
                           std::max<int64_t>(0, r->num_seqs - static_cast<int64_t>(r->seqs.size()));
    if ((*exempt ? blocks : blocks + growth + watermark_blocks) > *avail) break;
    bool ok = true;
    for (const SeqState& s : r->seqs) {
      if (s.kv_slots == 0) continue;
      if (!kv->CanSwapIn(s.id) || !kv->SwapIn(s.id)) {
        ok = false;
        break;
      }
    }
    RemoveFromQueue(r);
    if (!ok) {
      // The KvSpace disagreed with the estimate: keep the request, lose its KV.
      ResetForRecompute(r);
      PushWaiting(r);
      break;
    }
    ++stats.num_swap_ins;
    *avail -= blocks + growth;
    *exempt = false;
    reserved += SeqReservation(*r);
    PushRunning(r);
    b->swapped_in.push_back(r->id);
    ScheduleSeqs(r, /*prefill=*/false, /*may_preempt=*/false, b);
    ScheduleSeqs(r, /*prefill=*/true, /*may_preempt=*/false, b);
  }
}

std::vector<Req*> Scheduler::Impl::AdmissionOrder() const {
  std::vector<Req*> order;
  order.reserve(waiting.size());
  for (const auto& [rank, r] : waiting) order.push_back(r);
  if (!kv->prefix_caching() || !cfg.cache_aware || cfg.static_batching ||
      static_cast<int64_t>(order.size()) > cfg.lpm_max_queue || order.size() < 2)
    return order;
  struct Key {
    Rank rank;
    int64_t cached;
  };
  std::vector<std::pair<Key, Req*>> keyed;
  keyed.reserve(order.size());
  for (Req* r : order) {
    int64_t cached = 0;
    for (const SeqState& s : r->seqs)
      if (!Complete(*r, s) && s.kv_slots == 0) {
        cached = kv->CachedPrefixTokens(s.id, s.num_tokens);
        break;
      }
    keyed.push_back({{RankOf(*r), cached}, r});
  }
  // Promotion and priority still come first; within them the longest cached prefix, then age.
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    const Rank& x = a.first.rank;
    const Rank& y = b.first.rank;
    if (x.promoted_class != y.promoted_class) return x.promoted_class < y.promoted_class;
    if (x.priority != y.priority) return x.priority < y.priority;
    if (a.first.cached != b.first.cached) return a.first.cached > b.first.cached;
    return x.arrival < y.arrival;
  });
  for (size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].second;
  return order;
}

bool Scheduler::Impl::DeferForInflightPrefix(const Req& r) const {
  if (!kv->prefix_caching() || !cfg.cache_aware || cfg.static_batching || r.promoted ||
      running.empty())
    return false;
  for (const SeqState& s : r.seqs) {
    if (Complete(r, s) || s.kv_slots != 0) continue;
    const int64_t inflight = kv->InflightPrefixTokens(s.id, s.num_tokens);
    return inflight >= kv->CachedPrefixTokens(s.id, s.num_tokens) + 2 * kv->block_tokens();
  }
  return false;
}

bool Scheduler::Impl::WaitsForPrefixLoad(const Req& r) const {
  if (!kv->prefix_caching()) return false;
  for (const SeqState& s : r.seqs) {
    if (Complete(r, s) || s.kv_slots != 0 || s.num_computed != 0) continue;
    return kv->PrefixLoading(s.id, s.num_tokens);  // the first sequence: its siblings share it
  }
  return false;
}

void Scheduler::Impl::AttachPrefixes(Req* r) {
  if (!kv->prefix_caching()) return;
  int64_t first_hit = 0;
  bool first = true;
  for (SeqState& s : r->seqs) {
    if (Complete(*r, s) || s.kv_slots != 0 || s.num_computed != 0) continue;
    const int64_t hit = kv->AttachCachedPrefix(s.id, s.num_tokens);
    if (hit > 0) {
      s.num_computed = std::min(hit, s.num_tokens - 1);
      s.kv_slots = hit;
    }
    if (first) first_hit = std::max<int64_t>(0, s.num_computed);
    first = false;
  }
  if (!r->admitted_once) r->cached_tokens = first_hit;
  r->admitted_once = true;
}

void Scheduler::Impl::PrefetchWaiting(const std::vector<Req*>& order,
                                      const std::vector<bool>& admitted) {
  if (!kv->prefix_caching() || cfg.static_batching) return;
  int64_t offered = 0;
  for (size_t i = 0; i < order.size() && offered < cfg.prefix_prefetch_requests; ++i) {
    if (admitted[i]) continue;
    const Req& r = *order[i];
    for (const SeqState& s : r.seqs) {
      if (Complete(r, s) || s.kv_slots != 0 || s.num_computed != 0) continue;
      kv->PrefetchPrefix(s.id, s.num_tokens);  // the first sequence: its siblings share it
      break;
    }
    ++offered;
  }
}

void Scheduler::Impl::AdmitWaiting(PlanBuilder* b, int64_t* avail, bool* exempt) {
  int64_t reserved = RunningReservation();
  const std::vector<Req*> order = AdmissionOrder();
  std::vector<bool> admitted(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    Req* r = order[i];
    if (!cfg.static_batching && (b->budget <= 0 || b->num_seqs() >= cfg.max_num_seqs)) break;
    if (reserved + SeqReservation(*r) > cfg.max_num_seqs) break;
    if (DeferForInflightPrefix(*r)) {
      ++stats.num_prefix_deferrals;
      continue;
    }
    const int64_t need = AdmissionNeed(*r);
    if (need + (*exempt ? 0 : watermark_blocks) > *avail) break;
    if (!cfg.static_batching && (!cfg.chunked_prefill || b->itl_limited)) {
      // Without chunking the first prefill must run whole in this step; under the ITL target
      // a request is admitted only when its first chunk fits the step's time left.
      auto first = std::find_if(r->seqs.begin(), r->seqs.end(),
                                [r](const SeqState& s) { return !Complete(*r, s); });
      if (first != r->seqs.end() && PrefillChunk(*first, *b) == 0) break;
    }
    if (WaitsForPrefixLoad(*r)) {
      // Its room stays reserved, so the requests behind it are admitted only beside it.
      ++stats.num_prefix_load_waits;
      *avail -= need;
      reserved += SeqReservation(*r);
      continue;
    }
    admitted[i] = true;
    waiting.erase(RankOf(*r));
    aging.erase(r->arrival);
    *avail -= need;
    *exempt = false;
    reserved += SeqReservation(*r);
    AttachPrefixes(r);
    PushRunning(r);
    ScheduleSeqs(r, /*prefill=*/true, /*may_preempt=*/false, b);
  }
  // Whatever stopped admission, the requests left waiting may fetch their prefixes meanwhile.
  PrefetchWaiting(order, admitted);
}

}  // namespace kvforge::sched
