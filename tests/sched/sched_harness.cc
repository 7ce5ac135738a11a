#include "sched/sched_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>

namespace kvforge::sched::testing {
namespace {

bool Has(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<ChunkSpec> Specs(const StepPlan& plan) {
  std::vector<ChunkSpec> out;
  for (const ScheduledChunk& c : plan.chunks) out.push_back({c.seq, c.pos0, c.num_tokens});
  return out;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const ChunkSpec& c) {
  return os << "(seq " << c.seq << ", pos0 " << c.pos0 << ", n " << c.num_tokens << ")";
}

NewRequest MakeReq(RequestId id, int64_t seq, int64_t prompt, int64_t max_new, int32_t priority,
                   int32_t num_seqs) {
  return NewRequest{.id = id,
                    .seq = seq,
                    .prompt_tokens = prompt,
                    .max_new_tokens = max_new,
                    .priority = priority,
                    .num_seqs = num_seqs};
}

Harness::Harness(const HarnessConfig& config)
    : config_(config),
      kv_(config.num_blocks, config.block_tokens, config.swap_blocks),
      sched_(config.sched, &kv_) {}

Status Harness::Add(const NewRequest& r) {
  Status s = sched_.AddRequest(r);
  if (s.ok()) {
    ModelRequest m;
    m.spec = r;
    m.tokens[r.seq] = r.prompt_tokens;
    live_[r.id] = std::move(m);
  }
  return s;
}

Status Harness::Abort(RequestId id) {
  Status s = sched_.Abort(id);
  EXPECT_EQ(s.ok(), live_.count(id) != 0) << "abort of " << id << ": " << s.ToString();
  if (s.ok()) {
    live_.erase(id);
    just_retired_.push_back(id);
  }
  return s;
}

Status Harness::Drop(RequestId id, int64_t seq) {
  Status s = sched_.DropSequence(id, seq);
  if (s.ok()) live_.at(id).tokens.erase(seq);
  return s;
}

std::vector<RequestId> Harness::InState(RequestState state) const {
  std::vector<RequestId> out;
  for (const auto& [id, m] : live_) {
    if (sched_.State(id) == state) out.push_back(id);
  }
  return out;
}

double SyntheticStepMs(const StepPlan& plan) {
  const StepShape s = ShapeOf(plan.chunks);
  return 1.5 + 0.75 * static_cast<double>(s.decode_tokens) +
         0.2 * static_cast<double>(s.prefill_tokens) +
         0.001 * static_cast<double>(s.attention_pairs);
}

StepPlan Harness::Schedule() {
  StepPlan plan = sched_.Schedule();
  CheckPlan(plan);
  CheckState();
  return plan;
}

void Harness::CheckPlan(const StepPlan& plan) {
  const SchedulerConfig& cfg = config_.sched;
  EXPECT_EQ(plan.step, last_step_ + 1);
  last_step_ = plan.step;
  int64_t total = 0;
  std::set<int64_t> seqs;
  bool seen_prefill = false;
  for (const ScheduledChunk& c : plan.chunks) {
    const ChunkSpec spec{c.seq, c.pos0, c.num_tokens};
    total += c.num_tokens;
    EXPECT_TRUE(seqs.insert(c.seq).second) << "sequence scheduled twice " << spec;
    if (c.is_prefill) seen_prefill = true;
    EXPECT_FALSE(!c.is_prefill && seen_prefill) << "decode chunk after a prefill chunk " << spec;
    ASSERT_TRUE(live_.count(c.request) != 0) << "chunk of a request that is not live " << spec;
    EXPECT_EQ(sched_.State(c.request), RequestState::kRunning) << spec;
    const ModelRequest& m = live_.at(c.request);
    ASSERT_TRUE(m.tokens.count(c.seq) != 0)
        << "chunk of a sequence the request does not have " << spec;
    EXPECT_GE(c.num_tokens, 1) << spec;
    EXPECT_EQ(c.pos0, sched_.NumComputed(c.seq)) << spec;
    EXPECT_LE(c.pos0 + c.num_tokens, m.tokens.at(c.seq)) << spec;
    EXPECT_EQ(c.sample, c.pos0 + c.num_tokens == m.tokens.at(c.seq)) << spec;
    if (!c.is_prefill) {
      EXPECT_EQ(c.num_tokens, 1) << spec;
    } else if (cfg.chunked_prefill && cfg.long_prefill_token_threshold > 0) {
      EXPECT_LE(c.num_tokens, cfg.long_prefill_token_threshold) << spec;
    }
    EXPECT_LT(m.tokens.at(c.seq) - m.spec.prompt_tokens, m.spec.max_new_tokens)
        << "work scheduled for a sequence that generated max_new_tokens  " << spec;
    EXPECT_TRUE(kv_.IsResident(c.seq)) << spec;
    EXPECT_GE(kv_.Slots(c.seq), c.pos0 + c.num_tokens) << spec;
  }
  EXPECT_EQ(plan.num_batched_tokens, total);
  EXPECT_LE(total, cfg.max_num_batched_tokens) << "token budget exceeded";
  EXPECT_LE(static_cast<int64_t>(plan.chunks.size()), cfg.max_num_seqs) << "sequence cap exceeded";
  for (RequestId id : plan.preempted) {
    EXPECT_TRUE(live_.count(id) != 0) << "preempted request " << id << " was lost";
    const RequestState st = sched_.State(id);
    EXPECT_TRUE(st == RequestState::kWaiting || st == RequestState::kSwapped) << id;
    for (const ScheduledChunk& c : plan.chunks) {
      EXPECT_NE(c.request, id) << "preempted but scheduled";
    }
  }
  for (RequestId id : plan.swapped_in) {
    EXPECT_EQ(sched_.State(id), RequestState::kRunning) << id;
  }
  CheckItlTarget(plan);
}

// Decode-priority chunking: a step with decodes and prefill is predicted (by the scheduler's own
// model and tail factor, as they stood when planning) to fit max_itl_ms, unless its prefill is the
// one chunk of at most min_prefill_chunk tokens every such step may carry. Swap-ins add decodes
// after the limit is set, so those steps are not checked.
void Harness::CheckItlTarget(const StepPlan& plan) {
  const SchedulerConfig& cfg = config_.sched;
  const StepCostModel& model = sched_.step_cost_model();
  // A step max_ttft_ms lifted the limit from (a prompt at risk) is not cut.
  const int64_t lifted = sched_.Stats().num_ttft_lifted_steps;
  const bool was_lifted = lifted != ttft_lifted_seen_;
  ttft_lifted_seen_ = lifted;
  if (cfg.max_itl_ms <= 0 || !cfg.chunked_prefill || !model.ready() || !plan.swapped_in.empty() ||
      was_lifted)
    return;
  std::vector<const ScheduledChunk*> prefill;
  bool decodes = false;
  for (const ScheduledChunk& c : plan.chunks) {
    if (c.is_prefill)
      prefill.push_back(&c);
    else
      decodes = true;
  }
  if (!decodes || prefill.empty()) return;
  const double predicted = model.PredictMs(ShapeOf(plan.chunks)) * model.tail_factor();
  const bool floor_chunk = prefill.size() == 1 && prefill[0]->num_tokens <= cfg.min_prefill_chunk;
  EXPECT_TRUE(predicted <= cfg.max_itl_ms * (1 + 1e-9) + 1e-9 || floor_chunk)
      << "step " << plan.step << " predicted " << predicted << " ms over max_itl_ms "
      << cfg.max_itl_ms << " with " << prefill.size() << " prefill chunks";
}

void Harness::CheckState() {
  Status s = sched_.CheckInvariants();
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = kv_.CheckInvariants();
  EXPECT_TRUE(s.ok()) << s.ToString();
  int64_t resident = 0;
  int64_t swapped = 0;
  for (const auto& [id, m] : live_) {
    ASSERT_TRUE(sched_.Contains(id)) << "live request " << id << " lost";
    std::vector<int64_t> want;
    for (const auto& [seq, n] : m.tokens) want.push_back(seq);
    std::vector<int64_t> got = sched_.Sequences(id);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "request " << id;
    const RequestState st = sched_.State(id);
    EXPECT_NE(st, RequestState::kFinished) << "request " << id;
    for (const auto& [seq, n] : m.tokens) {
      EXPECT_EQ(sched_.NumTokens(seq), n) << "seq " << seq;
      const int64_t slots = sched_.NumKvSlots(seq);
      if (st == RequestState::kWaiting) {
        EXPECT_EQ(slots, 0) << "seq " << seq;
        EXPECT_EQ(sched_.NumComputed(seq), 0) << "seq " << seq;
        EXPECT_EQ(kv_.Slots(seq), -1) << "waiting seq " << seq << " holds KV";
      } else if (st == RequestState::kSwapped) {
        EXPECT_FALSE(kv_.IsResident(seq)) << "seq " << seq;
        if (slots > 0) {
          EXPECT_TRUE(kv_.IsSwapped(seq)) << "seq " << seq;
          EXPECT_EQ(kv_.Slots(seq), slots) << "seq " << seq;
          ++swapped;
        }
      } else {
        EXPECT_FALSE(kv_.IsSwapped(seq)) << "seq " << seq;
        EXPECT_EQ(kv_.IsResident(seq), slots > 0) << "seq " << seq;
        if (slots > 0) {
          EXPECT_EQ(kv_.Slots(seq), slots) << "seq " << seq;
          ++resident;
        }
      }
    }
  }
  for (RequestId id : just_retired_) {
    if (live_.count(id) == 0) {
      EXPECT_FALSE(sched_.Contains(id)) << "retired " << id;
    }
  }
  just_retired_.clear();
  EXPECT_EQ(kv_.num_resident_sequences(), resident) << "KV held by no running sequence";
  EXPECT_EQ(kv_.num_swapped_sequences(), swapped) << "host copies held by no swapped sequence";
  const SchedulerStats st = sched_.Stats();
  EXPECT_EQ(st.num_waiting + st.num_running + st.num_swapped, static_cast<int64_t>(live_.size()));
  EXPECT_EQ(sched_.HasWork(), !live_.empty());
}

void Harness::Complete(const StepPlan& plan, const StepActions& actions) {
  for (RequestId id : actions.abort_mid) (void)Abort(id);
  std::vector<SeqOutcome> seq_out;
  std::vector<RequestId> touched;
  for (const ScheduledChunk& c : plan.chunks) {
    if (!c.sample || live_.count(c.request) == 0) continue;
    ModelRequest& m = live_.at(c.request);
    if (m.tokens.count(c.seq) == 0) continue;
    if (!Has(touched, c.request)) touched.push_back(c.request);
    if (Has(actions.no_token, c.seq)) {
      seq_out.push_back({c.seq, false});
      continue;
    }
    if (!m.forked && m.spec.num_seqs > 1) {
      // Like the engine: the prompt's logits are sampled for every sequence; fork the others now.
      m.forked = true;
      for (int32_t k = 1; k < m.spec.num_seqs; ++k) {
        const int64_t child = c.seq + k;
        Status s = sched_.ForkSequence(c.request, c.seq, child);
        EXPECT_TRUE(s.ok()) << s.ToString();
        if (!s.ok()) continue;
        m.tokens[child] = m.tokens.at(c.seq) + 1;
        seq_out.push_back({child, true});
      }
    }
    ++m.tokens.at(c.seq);
    seq_out.push_back({c.seq, true});
  }
  std::vector<RequestOutcome> req_out;
  std::vector<RequestId> done;
  for (RequestId id : actions.finish) {
    if (live_.count(id) != 0 && !Has(touched, id)) touched.push_back(id);
  }
  for (RequestId id : touched) {
    const ModelRequest& m = live_.at(id);
    bool all = true;
    for (const auto& [seq, n] : m.tokens) {
      all = all && n - m.spec.prompt_tokens >= m.spec.max_new_tokens;
    }
    const bool finished = all || Has(actions.finish, id);
    req_out.push_back({id, finished});
    if (finished) done.push_back(id);
  }
  Status s = sched_.OnStepDone(plan, seq_out, req_out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (config_.synthetic_step_cost) sched_.ObserveStepCost(plan, SyntheticStepMs(plan));
  for (RequestId id : done) {
    live_.erase(id);
    just_retired_.push_back(id);
    ++num_finished_;
  }
  CheckState();
}

StepPlan Harness::Step(const StepActions& actions) {
  StepPlan plan = Schedule();
  Complete(plan, actions);
  return plan;
}

void RunRows(Harness* h, const std::vector<Row>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    SCOPED_TRACE(::testing::Message() << "row " << i << " (step " << i + 1 << ")");
    for (RequestId id : row.abort) EXPECT_TRUE(h->Abort(id).ok()) << "abort " << id;
    for (const NewRequest& r : row.arrive) {
      Status s = h->Add(r);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    const StepPlan plan = h->Schedule();
    EXPECT_EQ(Specs(plan), row.chunks);
    EXPECT_EQ(h->InState(RequestState::kRunning), row.running);
    EXPECT_EQ(plan.preempted, row.preempted);
    EXPECT_EQ(h->InState(RequestState::kSwapped), row.swapped);
    EXPECT_EQ(plan.swapped_in, row.swapped_in);
    h->Complete(plan, row.after);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

void RunScenario(const HarnessConfig& config, const std::vector<Row>& rows) {
  Harness h(config);
  RunRows(&h, rows);
}

}  // namespace kvforge::sched::testing
