#include "spec/draft_model.h"

#include <limits>

namespace kvforge::spec {

namespace {

// Drafts are drawn from their own stream: the target's sampler decides acceptance.
constexpr uint64_t kDraftSeedSalt = 0x5bd1e9955bd1e995ull;

}  // namespace

DraftModel::DraftModel(std::unique_ptr<model::Model> model,
                       std::unique_ptr<kvstore::PagedKvCache> cache)
    : model_(std::move(model)), cache_(std::move(cache)) {}

int64_t DraftModel::CachedTokens(int64_t seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.cached;
}

DraftModel::SeqState& DraftModel::StateFor(const DraftAsk& ask) {
  SeqState& st = seqs_[ask.seq];
  if (!st.sampler && ask.params->temperature > 0) {
    SamplingParams p = *ask.params;
    p.seed ^= kDraftSeedSalt;
    st.sampler = std::make_unique<sampling::Sampler>(p);
  }
  return st;
}

void DraftModel::Cut(int64_t seq, SeqState& st, int64_t n) {
  if (!cache_->Contains(seq)) {
    st.cached = 0;
    return;
  }
  const int64_t keep = std::min(n, st.cached);
  if (keep < cache_->NumTokens(seq)) (void)cache_->Truncate(seq, keep);
  st.cached = keep;
}

void DraftModel::Keep(int64_t seq, int64_t n) {
  auto it = seqs_.find(seq);
  if (it != seqs_.end()) Cut(seq, it->second, n);
}

void DraftModel::Free(int64_t seq) {
  cache_->Free(seq);
  seqs_.erase(seq);
}

Result<std::vector<Draft>> DraftModel::Propose(const std::vector<DraftAsk>& asks,
                                               kernels::ThreadPool& pool) {
  const int64_t n_vocab = model_->config().n_vocab;
  std::vector<Draft> out(asks.size());
  // Per ask: its state, or null when it cannot draft this step.
  std::vector<SeqState*> live(asks.size(), nullptr);
  int32_t rounds = 0;
  for (size_t i = 0; i < asks.size(); ++i) {
    const DraftAsk& a = asks[i];
    const int64_t len = static_cast<int64_t>(a.tokens->size());
    if (a.k <= 0 || len == 0) continue;
    SeqState& st = StateFor(a);
    Cut(a.seq, st, len - 1);  // at least the last token is fed: its logits give the first draft
    // Room for every token the rounds feed: the sequence and all drafts but the last.
    if (!cache_->EnsureTokens(a.seq, len + a.k - 1)) {
      Free(a.seq);
      continue;
    }
    live[i] = &st;
    rounds = std::max(rounds, a.k);
  }
  for (int32_t round = 0; round < rounds; ++round) {
    model::Batch batch;
    std::vector<size_t> in_round;
    for (size_t i = 0; i < asks.size(); ++i) {
      if (live[i] == nullptr || static_cast<int32_t>(out[i].tokens.size()) >= asks[i].k) continue;
      SeqState& st = *live[i];
      // Round 0: what the draft has not seen (catch-up and the last token); then the last draft.
      std::vector<int32_t> feed;
      if (round == 0) {
        feed.assign(asks[i].tokens->begin() + st.cached, asks[i].tokens->end());
      } else {
        feed.push_back(out[i].tokens.back());
      }
      const int64_t begin = static_cast<int64_t>(batch.tokens.size());
      batch.tokens.insert(batch.tokens.end(), feed.begin(), feed.end());
      model::SeqChunk c;
      c.kv_seq = asks[i].seq;
      c.pos0 = st.cached;
      c.token_begin = begin;
      c.n_tokens = static_cast<int64_t>(feed.size());
      batch.seqs.push_back(c);
      st.cached += c.n_tokens;
      in_round.push_back(i);
    }
    if (in_round.empty()) break;
    KVF_RETURN_IF_ERROR(model_->Forward(batch, *cache_, ws_, pool, &logits_));
    for (size_t r = 0; r < in_round.size(); ++r) {
      const size_t i = in_round[r];
      float* row = logits_.data() + static_cast<int64_t>(r) * n_vocab;  // [n_vocab]
      SeqState& st = *live[i];
      int32_t token = -1;
      if (!st.sampler) {
        token = sampling::Sampler::Argmax(row, n_vocab);
        if (!(row[token] > -std::numeric_limits<float>::infinity())) token = -1;
      } else {
        std::vector<int32_t> history = *asks[i].tokens;
        history.insert(history.end(), out[i].tokens.begin(), out[i].tokens.end());
        sampling::TokenDistribution q = st.sampler->Distribution(row, n_vocab, history);
        token = st.sampler->Draw(q);
        if (token >= 0) out[i].q.push_back(std::move(q));
      }
      if (token < 0) {
        live[i] = nullptr;  // nothing to draft from here
        continue;
      }
      out[i].tokens.push_back(token);
    }
  }
  // Slots reserved for drafts that were never fed (a sequence that stopped early) go back.
  for (size_t i = 0; i < asks.size(); ++i)
    if (auto it = seqs_.find(asks[i].seq); it != seqs_.end() && cache_->Contains(asks[i].seq))
      if (cache_->NumTokens(asks[i].seq) > it->second.cached)
        (void)cache_->Truncate(asks[i].seq, it->second.cached);
  return out;
}

}  // namespace kvforge::spec
