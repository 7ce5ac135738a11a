// sched/scheduler.cc — requests, queues, commit (OnStepDone), forks, queries and invariants.
// Schedule() itself (batch forming, admission, preemption) is in schedule_step.cc.
#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/strings.h"
#include "sched/scheduler_internal.h"

namespace kvforge::sched {
namespace {

long long LL(int64_t v) { return static_cast<long long>(v); }

}  // namespace

Status SchedulerConfig::Validate() const {
  if (max_num_batched_tokens < 1) {
    return Status::InvalidArgument("sched: max_num_batched_tokens must be >= 1");
  }
  if (max_num_seqs < 1) return Status::InvalidArgument("sched: max_num_seqs must be >= 1");
  if (long_prefill_token_threshold < 0) {
    return Status::InvalidArgument("sched: long_prefill_token_threshold must be >= 0");
  }
  if (max_wait_steps < 0) return Status::InvalidArgument("sched: max_wait_steps must be >= 0");
  if (prefix_prefetch_requests < 0)
    return Status::InvalidArgument("sched: prefix_prefetch_requests must be >= 0");
  if (!(max_itl_ms >= 0.0) || !std::isfinite(max_itl_ms)) {
    return Status::InvalidArgument(
        base::StrFormat("sched: max_itl_ms must be finite and >= 0, got %g", max_itl_ms));
  }
  if (min_prefill_chunk < 1)
    return Status::InvalidArgument("sched: min_prefill_chunk must be >= 1");
  if (!(max_ttft_ms >= 0.0) || !std::isfinite(max_ttft_ms)) {
    return Status::InvalidArgument(
        base::StrFormat("sched: max_ttft_ms must be finite and >= 0, got %g", max_ttft_ms));
  }
  if (!(kv_watermark >= 0.0 && kv_watermark < 1.0)) {
    return Status::InvalidArgument(
        base::StrFormat("sched: kv_watermark must be in [0, 1), got %g", kv_watermark));
  }
  return Status::Ok();
}

// --- Impl: requests and queues -------------------------------------------------------------

Scheduler::Impl::Impl(const SchedulerConfig& config, KvSpace* kv_space)
    : cfg(config), kv(kv_space) {
  KVF_CHECK_MSG(kv != nullptr, "sched: null KvSpace");
  KVF_CHECK_MSG(cfg.Validate().ok(), "sched: invalid SchedulerConfig (call Validate first)");
  KVF_CHECK_MSG(kv->block_tokens() >= 1 && kv->num_total_blocks() >= 1, "sched: empty KvSpace");
  watermark_blocks = static_cast<int64_t>(
      std::floor(cfg.kv_watermark * static_cast<double>(kv->num_total_blocks())));
}

Rank Scheduler::Impl::RankOf(const Req& r) const {
  return Rank{.promoted_class = r.promoted ? 0 : 1,
              .priority = cfg.policy == Policy::kPriority ? r.priority : 0,
              .arrival = r.arrival};
}

Req* Scheduler::Impl::Find(RequestId id) const {
  auto it = requests.find(id);
  return it == requests.end() ? nullptr : it->second.get();
}

Req* Scheduler::Impl::Owner(int64_t seq) const {
  auto it = seq_owner.find(seq);
  return it == seq_owner.end() ? nullptr : it->second;
}

SeqState* Scheduler::Impl::FindSeq(int64_t seq) const {
  Req* r = Owner(seq);
  if (r == nullptr) return nullptr;
  for (SeqState& s : r->seqs) {
    if (s.id == seq) return &s;
  }
  return nullptr;
}

void Scheduler::Impl::PushWaiting(Req* r) {
  r->queue = Queue::kWaiting;
  waiting.emplace(RankOf(*r), r);
  if (!r->promoted) aging.emplace(r->arrival, r);
}

void Scheduler::Impl::PushRunning(Req* r) {
  r->queue = Queue::kRunning;
  const Rank rank = RankOf(*r);
  auto pos = std::upper_bound(running.begin(), running.end(), rank,
                              [this](const Rank& k, const Req* q) { return k < RankOf(*q); });
  running.insert(pos, r);
}

void Scheduler::Impl::PushSwapped(Req* r) {
  r->queue = Queue::kSwapped;
  swapped.emplace(RankOf(*r), r);
}

void Scheduler::Impl::RemoveFromQueue(Req* r) {
  switch (r->queue) {
    case Queue::kWaiting:
      waiting.erase(RankOf(*r));
      aging.erase(r->arrival);
      break;
    case Queue::kSwapped:
      swapped.erase(RankOf(*r));
      break;
    case Queue::kRunning:
      running.erase(std::find(running.begin(), running.end(), r));
      break;
  }
}

void Scheduler::Impl::Retire(Req* r) {
  RemoveFromQueue(r);
  for (const SeqState& s : r->seqs) {
    kv->Free(s.id);
    seq_owner.erase(s.id);
  }
  requests.erase(r->id);  // destroys *r
}

int64_t Scheduler::Impl::SeqReservation(const Req& r) {
  return std::max<int64_t>(r.num_seqs, static_cast<int64_t>(r.seqs.size()));
}

int64_t Scheduler::Impl::RunningReservation() const {
  int64_t n = 0;
  for (const Req* r : running) n += SeqReservation(*r);
  return n;
}

bool Scheduler::Impl::Complete(const Req& r, const SeqState& s) {
  return s.num_tokens - r.prompt_tokens >= r.max_new_tokens;
}

int64_t Scheduler::Impl::PostStepComputed(const SeqState& s) {
  return s.inflight_end >= 0 ? s.inflight_end - s.inflight_drafts : s.num_computed;
}

// --- Scheduler -------------------------------------------------------------------------------

Scheduler::Scheduler(const SchedulerConfig& config, KvSpace* kv)
    : impl_(std::make_unique<Impl>(config, kv)) {}

Scheduler::~Scheduler() {
  // Hand every block back: the KvSpace may outlive the scheduler.
  for (auto& [id, r] : impl_->requests) {
    for (const SeqState& s : r->seqs) impl_->kv->Free(s.id);
  }
}

const SchedulerConfig& Scheduler::config() const { return impl_->cfg; }

Status Scheduler::AddRequest(const NewRequest& nr) {
  Impl& m = *impl_;
  if (nr.prompt_tokens <= 0) return Status::InvalidArgument("sched: prompt_tokens must be > 0");
  if (nr.max_new_tokens < 1) return Status::InvalidArgument("sched: max_new_tokens must be >= 1");
  if (nr.num_seqs < 1) return Status::InvalidArgument("sched: num_seqs must be >= 1");
  if (nr.max_new_tokens > std::numeric_limits<int64_t>::max() / 4 - nr.prompt_tokens) {
    return Status::InvalidArgument("sched: prompt_tokens + max_new_tokens overflows");
  }
  if (nr.num_seqs > m.cfg.max_num_seqs) {
    return Status::InvalidArgument(
        base::StrFormat("sched: request %lld wants %d sequences, above max_num_seqs %lld",
                        LL(nr.id), nr.num_seqs, LL(m.cfg.max_num_seqs)));
  }
  if (!m.cfg.chunked_prefill && nr.prompt_tokens > m.cfg.max_num_batched_tokens) {
    return Status::InvalidArgument(base::StrFormat(
        "sched: prompt of %lld tokens exceeds max_num_batched_tokens %lld without chunked prefill",
        LL(nr.prompt_tokens), LL(m.cfg.max_num_batched_tokens)));
  }
  if (m.requests.count(nr.id) != 0) {
    return Status::InvalidArgument(base::StrFormat("sched: duplicate request id %lld", LL(nr.id)));
  }
  if (m.seq_owner.count(nr.seq) != 0) {
    return Status::InvalidArgument(
        base::StrFormat("sched: duplicate sequence id %lld", LL(nr.seq)));
  }
  // Worst case: every sequence holds prompt + max_new_tokens privately (a recompute of forked
  // sequences re-prefills each one on its own).
  const int64_t most = nr.prompt_tokens + nr.max_new_tokens;
  const int64_t per_seq =
      m.kv->BlocksToGrow(nr.seq, nr.max_kv_tokens > 0 ? std::min(nr.max_kv_tokens, most) : most);
  const int64_t total = m.kv->num_total_blocks();
  if (per_seq > total / nr.num_seqs) {
    return Status::ResourceExhausted(
        base::StrFormat("sched: request %lld needs %lld x %d KV blocks at most, the cache has %lld",
                        LL(nr.id), LL(per_seq), nr.num_seqs, LL(total)));
  }
  auto r = std::make_unique<Req>();
  r->id = nr.id;
  r->arrival = m.next_arrival++;
  r->arrival_step = m.step;
  r->arrival_ms = m.busy_ms;
  r->priority = nr.priority;
  r->num_seqs = nr.num_seqs;
  r->prompt_tokens = nr.prompt_tokens;
  r->max_new_tokens = nr.max_new_tokens;
  r->seqs.push_back(SeqState{.id = nr.seq,
                             .num_tokens = nr.prompt_tokens,
                             .num_computed = 0,
                             .prefill_end = nr.prompt_tokens});
  Req* raw = r.get();
  m.requests.emplace(nr.id, std::move(r));
  m.seq_owner.emplace(nr.seq, raw);
  m.PushWaiting(raw);
  return Status::Ok();
}

Status Scheduler::Abort(RequestId id) {
  Req* r = impl_->Find(id);
  if (r == nullptr) {
    return Status::NotFound(base::StrFormat("sched: abort of unknown request %lld", LL(id)));
  }
  impl_->Retire(r);
  return Status::Ok();
}

StepPlan Scheduler::Schedule() { return impl_->Schedule(); }

Status Scheduler::Impl::ValidateOutcomes(const StepPlan& plan,
                                         const std::vector<SeqOutcome>& seq_outcomes,
                                         const std::vector<RequestOutcome>& req_outcomes) const {
  if (pending_step == 0 || plan.step != pending_step) {
    return Status::InvalidArgument(
        base::StrFormat("sched: OnStepDone for step %lld, but the uncommitted plan is step %lld",
                        LL(plan.step), LL(pending_step)));
  }
  // Sequences and requests aborted or dropped during the step are tolerated if they were in the
  // plan; that is rare, so the plan is only searched then.
  auto in_plan = [&plan](auto field, int64_t id) {
    return std::any_of(plan.chunks.begin(), plan.chunks.end(),
                       [&](const ScheduledChunk& c) { return c.*field == id; });
  };
  for (const ScheduledChunk& c : plan.chunks) {
    const Req* r = Owner(c.seq);
    const SeqState* s = r == nullptr ? nullptr : FindSeq(c.seq);
    if (r == nullptr || r->id != c.request || s->inflight_end < 0) continue;  // gone
    if (s->num_computed != c.pos0 || s->inflight_end != c.pos0 + c.num_tokens) {
      return Status::Internal(base::StrFormat(
          "sched: chunk [%lld, +%lld) of seq %lld disagrees with its state (computed %lld)",
          LL(c.pos0), LL(c.num_tokens), LL(c.seq), LL(s->num_computed)));
    }
  }
  std::vector<int64_t> ids;
  ids.reserve(seq_outcomes.size());
  for (const SeqOutcome& o : seq_outcomes) ids.push_back(o.seq);
  std::sort(ids.begin(), ids.end());
  if (auto dup = std::adjacent_find(ids.begin(), ids.end()); dup != ids.end()) {
    return Status::InvalidArgument(
        base::StrFormat("sched: two outcomes for sequence %lld", LL(*dup)));
  }
  for (const SeqOutcome& o : seq_outcomes) {
    const Req* r = Owner(o.seq);
    if (r == nullptr) {
      if (in_plan(&ScheduledChunk::seq, o.seq)) continue;  // aborted or dropped during the step
      return Status::NotFound(
          base::StrFormat("sched: outcome for unknown sequence %lld", LL(o.seq)));
    }
    const SeqState& s = *FindSeq(o.seq);
    if (o.accepted_drafts < 0 ||
        (o.accepted_drafts > 0 && (s.inflight_end < 0 || o.accepted_drafts > s.inflight_drafts))) {
      return Status::InvalidArgument(
          base::StrFormat("sched: %lld drafts kept for sequence %lld, which had %lld draft slots",
                          LL(o.accepted_drafts), LL(o.seq), LL(s.inflight_drafts)));
    }
    if (!o.appended_token && o.accepted_drafts == 0) continue;
    if (r->queue == Queue::kWaiting || PostStepComputed(s) != s.num_tokens) {
      return Status::InvalidArgument(base::StrFormat(
          "sched: token appended to sequence %lld, which has uncomputed tokens", LL(o.seq)));
    }
    const int64_t appended = o.accepted_drafts + (o.appended_token ? 1 : 0);
    if (s.num_tokens + appended - r->prompt_tokens > r->max_new_tokens) {
      return Status::InvalidArgument(
          base::StrFormat("sched: sequence %lld already generated max_new_tokens (%lld)", LL(o.seq),
                          LL(r->max_new_tokens)));
    }
  }
  for (const RequestOutcome& o : req_outcomes) {
    if (Find(o.request) == nullptr && !in_plan(&ScheduledChunk::request, o.request)) {
      return Status::NotFound(
          base::StrFormat("sched: outcome for unknown request %lld", LL(o.request)));
    }
  }
  return Status::Ok();
}

Status Scheduler::OnStepDone(const StepPlan& plan, const std::vector<SeqOutcome>& seqs,
                             const std::vector<RequestOutcome>& requests) {
  Impl& m = *impl_;
  KVF_RETURN_IF_ERROR(m.ValidateOutcomes(plan, seqs, requests));
  std::unordered_map<int64_t, int64_t> kept_drafts;
  for (const SeqOutcome& o : seqs)
    if (o.accepted_drafts > 0) kept_drafts[o.seq] = o.accepted_drafts;
  for (int64_t id : m.inflight_seqs) {
    SeqState* s = m.FindSeq(id);
    if (s == nullptr || s->inflight_end < 0) continue;
    int64_t end = s->inflight_end;
    if (s->inflight_drafts > 0) {
      // Rejected drafts' slots go before the KV space is told what is computed.
      auto kept = kept_drafts.find(id);
      end -= s->inflight_drafts - (kept == kept_drafts.end() ? 0 : kept->second);
      m.kv->Truncate(id, end);
      s->kv_slots = end;
      s->inflight_drafts = 0;
    }
    s->num_computed = end;
    s->inflight_end = -1;
    m.kv->OnComputed(id, s->num_computed, s->num_computed <= s->prefill_end);
  }
  m.inflight_seqs.clear();
  m.pending_step = 0;
  for (const SeqOutcome& o : seqs) {
    if (SeqState* s = m.FindSeq(o.seq); s != nullptr)
      s->num_tokens += o.accepted_drafts + (o.appended_token ? 1 : 0);
  }
  for (const RequestOutcome& o : requests) {
    if (!o.finished) continue;
    if (Req* r = m.Find(o.request); r != nullptr) m.Retire(r);
  }
  return Status::Ok();
}

Status Scheduler::ForkSequence(RequestId request, int64_t parent, int64_t child) {
  Impl& m = *impl_;
  Req* r = m.Find(request);
  if (r == nullptr) {
    return Status::NotFound(base::StrFormat("sched: fork in unknown request %lld", LL(request)));
  }
  if (r->queue != Queue::kRunning) {
    return Status::InvalidArgument(
        base::StrFormat("sched: fork in request %lld, which is not running", LL(request)));
  }
  if (m.Owner(parent) != r) {
    return Status::NotFound(base::StrFormat("sched: sequence %lld is not part of request %lld",
                                            LL(parent), LL(request)));
  }
  if (m.seq_owner.count(child) != 0) {
    return Status::InvalidArgument(base::StrFormat("sched: duplicate sequence id %lld", LL(child)));
  }
  const SeqState p = *m.FindSeq(parent);  // copy: r->seqs grows below
  // The child shares every block the parent holds, so those slots must all be written (by a
  // committed step or by the forward of the step in flight), and the parent must be past its
  // prefill (forks happen at sampling points).
  const int64_t post = Impl::PostStepComputed(p);
  if (post < p.prefill_end || p.kv_slots != post) {
    return Status::InvalidArgument(base::StrFormat(
        "sched: fork of sequence %lld before it finished its prefill or with reserved slots "
        "(tokens %lld, computed %lld, prefill %lld, slots %lld)",
        LL(parent), LL(p.num_tokens), LL(post), LL(p.prefill_end), LL(p.kv_slots)));
  }
  if (!m.kv->Fork(parent, child)) {
    return Status::Internal(
        base::StrFormat("sched: KvSpace refused to fork %lld -> %lld", LL(parent), LL(child)));
  }
  SeqState c = p;
  c.id = child;
  r->seqs.push_back(c);
  m.seq_owner.emplace(child, r);
  if (c.inflight_end >= 0) m.inflight_seqs.push_back(child);
  return Status::Ok();
}

Status Scheduler::DropSequence(RequestId request, int64_t seq) {
  Impl& m = *impl_;
  Req* r = m.Find(request);
  if (r == nullptr) {
    return Status::NotFound(base::StrFormat("sched: drop in unknown request %lld", LL(request)));
  }
  auto it = std::find_if(r->seqs.begin(), r->seqs.end(),
                         [seq](const SeqState& s) { return s.id == seq; });
  if (it == r->seqs.end()) {
    return Status::NotFound(
        base::StrFormat("sched: sequence %lld is not part of request %lld", LL(seq), LL(request)));
  }
  if (r->seqs.size() == 1) {
    return Status::InvalidArgument(
        base::StrFormat("sched: sequence %lld is the last of request %lld; finish or abort it",
                        LL(seq), LL(request)));
  }
  m.kv->Free(seq);
  m.seq_owner.erase(seq);
  r->seqs.erase(it);
  return Status::Ok();
}

RequestState Scheduler::State(RequestId id) const {
  const Req* r = impl_->Find(id);
  if (r == nullptr) return RequestState::kFinished;
  switch (r->queue) {
    case Queue::kWaiting:
      return RequestState::kWaiting;
    case Queue::kRunning:
      return RequestState::kRunning;
    case Queue::kSwapped:
      return RequestState::kSwapped;
  }
  return RequestState::kFinished;
}

bool Scheduler::Contains(RequestId id) const { return impl_->Find(id) != nullptr; }

std::vector<int64_t> Scheduler::Sequences(RequestId id) const {
  std::vector<int64_t> out;
  if (const Req* r = impl_->Find(id); r != nullptr) {
    for (const SeqState& s : r->seqs) out.push_back(s.id);
  }
  return out;
}

int64_t Scheduler::NumTokens(int64_t seq) const {
  const SeqState* s = impl_->FindSeq(seq);
  return s == nullptr ? -1 : s->num_tokens;
}

int64_t Scheduler::NumCachedTokens(RequestId id) const {
  const Req* r = impl_->Find(id);
  return r == nullptr ? -1 : r->cached_tokens;
}

int64_t Scheduler::NumComputed(int64_t seq) const {
  const SeqState* s = impl_->FindSeq(seq);
  return s == nullptr ? -1 : s->num_computed;
}

int64_t Scheduler::NumKvSlots(int64_t seq) const {
  const SeqState* s = impl_->FindSeq(seq);
  return s == nullptr ? -1 : s->kv_slots;
}

SchedulerStats Scheduler::Stats() const {
  SchedulerStats s = impl_->stats;
  s.num_waiting = static_cast<int64_t>(impl_->waiting.size());
  s.num_running = static_cast<int64_t>(impl_->running.size());
  s.num_swapped = static_cast<int64_t>(impl_->swapped.size());
  s.num_running_seqs = 0;
  for (const Req* r : impl_->running) s.num_running_seqs += static_cast<int64_t>(r->seqs.size());
  s.num_steps = impl_->step;
  return s;
}

bool Scheduler::HasWork() const { return !impl_->requests.empty(); }

void Scheduler::OfferDrafts(int64_t seq, int64_t max_drafts, double acceptance, double draft_ms) {
  if (max_drafts > 0) impl_->draft_offers[seq] = {max_drafts, acceptance, draft_ms};
}

void Scheduler::ObserveStepCost(const StepPlan& plan, double ms) {
  impl_->cost.Observe(ShapeOf(plan.chunks), ms);
  if (std::isfinite(ms) && ms > 0) impl_->busy_ms += ms;
}

const StepCostModel& Scheduler::step_cost_model() const { return impl_->cost; }

StepShape ShapeOf(const std::vector<ScheduledChunk>& chunks) {
  StepShape shape;
  for (const ScheduledChunk& c : chunks) {
    // Draft slots are verified like a prefill chunk's tokens.
    (c.is_prefill ? shape.prefill_tokens : shape.decode_tokens) += c.num_tokens - c.draft_tokens;
    shape.prefill_tokens += c.draft_tokens;
    shape.attention_pairs += ChunkAttentionPairs(c.pos0, c.num_tokens);
  }
  return shape;
}

Status Scheduler::CheckInvariants() const {
  const Impl& m = *impl_;
  auto fail = [](const char* what, int64_t id) {
    return Status::Internal(base::StrFormat("sched invariant: %s (id %lld)", what, LL(id)));
  };
  if (m.waiting.size() + m.running.size() + m.swapped.size() != m.requests.size()) {
    return fail("queue sizes do not add up to the request count", 0);
  }
  for (const auto& [rank, r] : m.waiting) {
    if (m.Find(r->id) != r || r->queue != Queue::kWaiting || !(rank == m.RankOf(*r))) {
      return fail("waiting entry out of sync", r->id);
    }
    if ((m.aging.count(r->arrival) != 0) == r->promoted) return fail("aging index", r->id);
  }
  size_t non_promoted = 0;
  for (const auto& [rank, r] : m.waiting) non_promoted += r->promoted ? 0 : 1;
  if (non_promoted != m.aging.size()) return fail("aging index size", 0);
  for (const auto& [rank, r] : m.swapped) {
    if (m.Find(r->id) != r || r->queue != Queue::kSwapped || !(rank == m.RankOf(*r))) {
      return fail("swapped entry out of sync", r->id);
    }
  }
  for (size_t i = 0; i < m.running.size(); ++i) {
    const Req* r = m.running[i];
    if (m.Find(r->id) != r || r->queue != Queue::kRunning) {
      return fail("running entry out of sync", r->id);
    }
    if (i > 0 && !(m.RankOf(*m.running[i - 1]) < m.RankOf(*r))) {
      return fail("running set not sorted by rank", r->id);
    }
  }
  size_t num_seqs = 0;
  int64_t reserved = 0;
  for (const auto& [id, r] : m.requests) {
    if (r->seqs.empty()) return fail("request without sequences", id);
    num_seqs += r->seqs.size();
    if (r->queue == Queue::kRunning) reserved += r->num_seqs;
    for (const SeqState& s : r->seqs) {
      auto owner = m.seq_owner.find(s.id);
      if (owner == m.seq_owner.end() || owner->second != r.get()) {
        return fail("sequence owner", s.id);
      }
      if (!(0 <= s.num_computed && s.num_computed <= s.num_tokens)) {
        return fail("computed tokens out of range", s.id);
      }
      if (!(r->prompt_tokens <= s.num_tokens &&
            s.num_tokens <= r->prompt_tokens + r->max_new_tokens)) {
        return fail("token count out of range", s.id);
      }
      if (s.prefill_end > s.num_tokens) return fail("prefill end past the tokens", s.id);
      if (s.inflight_end >= 0 &&
          (s.inflight_end <= s.num_computed || s.inflight_end > s.kv_slots)) {
        return fail("in-flight chunk out of range", s.id);
      }
      if (r->queue == Queue::kWaiting) {
        if (s.num_computed != 0 || s.kv_slots != 0) return fail("waiting sequence holds KV", s.id);
      } else if (s.num_computed > s.kv_slots) {
        return fail("computed tokens without KV slots", s.id);
      }
      if (r->queue == Queue::kRunning && s.kv_slots > 0 &&
          m.kv->BlocksToGrow(s.id, s.kv_slots) != 0) {
        return fail("KvSpace does not hold the sequence's slots", s.id);
      }
    }
  }
  if (num_seqs != m.seq_owner.size()) return fail("sequence index size", 0);
  if (reserved > m.cfg.max_num_seqs) return fail("running reservations exceed max_num_seqs", 0);
  if (m.running.empty() && m.kv->num_free_blocks() != m.kv->num_total_blocks()) {
    return fail("KV blocks held with nothing running", m.kv->num_free_blocks());
  }
  if (m.pending_step > m.step) return fail("pending step in the future", m.pending_step);
  return Status::Ok();
}

}  // namespace kvforge::sched
