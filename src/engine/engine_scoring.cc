// engine_scoring.cc — EngineCore's scoring path (engine_core.h): perplexity, all-position logits
// and streaming scores, as teacher-forced forward passes over one sequence of the core's own KV
// cache, outside the scheduler (which holds no request while they run).
#include <algorithm>
#include <cmath>

#include "base/strings.h"
#include "base/token_ids.h"
#include "engine/engine_core.h"

namespace kvforge {

namespace {
// The scoring sequence's id in the cache; the scheduler's sequences start at 1.
constexpr int64_t kScoringSeq = 0;
}  // namespace

Status EngineCore::RequireIdle() const {
  if (HasWork()) return Status::Unavailable("scoring needs an idle engine (requests are running)");
  return Status::Ok();
}

Status EngineCore::ScoringForward(model::Batch& batch, int64_t token_pos,
                                  engine::SeqEviction* evict, std::vector<float>* logits) {
  model::SeqChunk& chunk = batch.seqs.front();
  if (evict != nullptr) {
    if (!cache_->EnsureTokens(kScoringSeq,
                              token_pos + chunk.n_tokens - cache_->Evicted(kScoringSeq)))
      return Status::ResourceExhausted("KV cache exhausted");
    evict->PrepareChunk(*cache_, token_pos, &chunk);
  }
  KVF_RETURN_IF_ERROR(model_->Forward(batch, *cache_, ws_, *pool_, logits));
  if (evict != nullptr) {
    Result<bool> compacted = evict->AfterStep(*cache_, kScoringSeq, token_pos + chunk.n_tokens);
    if (!compacted.ok()) return compacted.error();
  }
  return Status::Ok();
}

Result<std::vector<float>> EngineCore::LogitsFor(const std::vector<int32_t>& tokens) {
  KVF_RETURN_IF_ERROR(RequireIdle());
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::InvalidArgument("no tokens");
  if (n > max_len_) return Status::InvalidArgument("more tokens than the context holds");
  KVF_RETURN_IF_ERROR(base::CheckTokenIds(tokens, model_->config().n_vocab).WithContext("tokens"));
  std::vector<float> logits;
  KVF_RETURN_IF_ERROR(ScoringPrefill(tokens, /*all_logits=*/false, &logits));
  return logits;
}

Status EngineCore::ScoringPrefill(const std::vector<int32_t>& tokens, bool all_logits,
                                  std::vector<float>* out) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = model_->config().n_vocab;
  cache_->Free(kScoringSeq);
  if (!cache_->EnsureTokens(kScoringSeq, n))
    return Status::ResourceExhausted("KV cache too small for the tokens");
  if (all_logits) out->assign(static_cast<size_t>(n * n_vocab), 0.0f);  // [n][n_vocab]
  std::vector<float> logits;
  Status st;
  for (int64_t b = 0; b < n && st.ok(); b += cfg_.max_num_batched_tokens) {
    const int64_t e = std::min(n, b + cfg_.max_num_batched_tokens);
    model::Batch batch;
    batch.tokens.assign(tokens.begin() + b, tokens.begin() + e);
    batch.seqs.push_back({kScoringSeq, b, 0, e - b, all_logits, e == n});
    st = ScoringForward(batch, b, nullptr, &logits);
    if (st.ok() && all_logits) std::copy(logits.begin(), logits.end(), out->begin() + b * n_vocab);
  }
  cache_->Free(kScoringSeq);
  if (st.ok() && !all_logits) *out = std::move(logits);
  return st;
}

Result<std::vector<float>> EngineCore::LogitsAll(const std::vector<int32_t>& tokens,
                                                 const std::vector<int64_t>& steps) {
  KVF_RETURN_IF_ERROR(RequireIdle());
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::InvalidArgument("no tokens");
  if (n > max_len_) return Status::InvalidArgument("more tokens than the context holds");
  KVF_RETURN_IF_ERROR(base::CheckTokenIds(tokens, model_->config().n_vocab).WithContext("tokens"));
  int64_t sum = 0;
  for (int64_t s : steps) {
    if (s <= 0) return Status::InvalidArgument("step sizes must be positive");
    sum += s;
  }
  if (sum != n) return Status::InvalidArgument("step sizes must add up to the token count");
  const int64_t n_vocab = model_->config().n_vocab;
  cache_->Free(kScoringSeq);
  std::unique_ptr<engine::SeqEviction> evict = engine::MakeSeqEviction(
      cfg_.kv_policy, steps.front(), static_cast<int32_t>(model_->config().n_layer), *cache_, n);
  if (!evict && !cache_->EnsureTokens(kScoringSeq, n))
    return Status::ResourceExhausted("KV cache too small");
  std::vector<float> all(static_cast<size_t>(n * n_vocab)), logits;  // [n][n_vocab]
  int64_t pos = 0;
  Status st;
  for (int64_t s : steps) {
    model::Batch batch;
    batch.tokens.assign(tokens.begin() + pos, tokens.begin() + pos + s);
    batch.seqs.push_back({kScoringSeq, pos, 0, s, true, true});
    st = ScoringForward(batch, pos, evict.get(), &logits);
    if (!st.ok()) break;
    std::copy(logits.begin(), logits.end(), all.begin() + pos * n_vocab);
    pos += s;
  }
  last_eviction_ = {};
  if (evict)
    last_eviction_ = {evict->evicted_tokens(), cache_->NumTokens(kScoringSeq), evict->peak_slots()};
  cache_->Free(kScoringSeq);
  if (!st.ok()) return st;
  return all;
}

Status EngineCore::ScoreStream(const std::vector<int32_t>& tokens,
                               const Engine::StreamScoreCallback& on_token) {
  KVF_RETURN_IF_ERROR(RequireIdle());
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = model_->config().n_vocab;
  if (n < 2) return Status::InvalidArgument("need at least two tokens to score");
  KVF_RETURN_IF_ERROR(base::CheckTokenIds(tokens, n_vocab).WithContext("tokens"));
  const KvPolicy& policy = cfg_.kv_policy;
  const bool streaming = policy.kind == KvPolicyKind::kStreaming;
  if (!streaming && n > max_len_)
    return Status::InvalidArgument(base::StrFormat(
        "%lld tokens do not fit the context (%lld); only the streaming policy runs past it",
        (long long)n, (long long)max_len_));
  cache_->Free(kScoringSeq);
  std::unique_ptr<engine::SeqEviction> evict = engine::MakeSeqEviction(
      policy, 1, static_cast<int32_t>(model_->config().n_layer), *cache_, std::min(n, max_len_));
  std::vector<float> logits;
  Status st;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t held = streaming ? i - cache_->Evicted(kScoringSeq) : i;
    if (held + 1 > max_len_) {
      st = Status::InvalidArgument("the stream outgrew the context (budget above it?)");
      break;
    }
    if (!evict && !cache_->EnsureTokens(kScoringSeq, i + 1)) {
      st = Status::ResourceExhausted("KV cache exhausted");
      break;
    }
    model::Batch batch;
    batch.tokens = {tokens[static_cast<size_t>(i)]};
    batch.seqs.push_back({kScoringSeq, i, 0, 1, false, true});
    st = ScoringForward(batch, i, evict.get(), &logits);
    if (!st.ok()) break;
    const double nll = -sampling::Sampler::LogProb(logits.data(), n_vocab,
                                                   tokens[static_cast<size_t>(i + 1)], nullptr, 0);
    if (on_token && !on_token(i + 1, nll, cache_->NumTokens(kScoringSeq))) break;
  }
  cache_->Free(kScoringSeq);
  return st;
}

Result<PerplexityResult> EngineCore::Perplexity(const std::string& text,
                                                const PerplexityOptions& o) {
  KVF_RETURN_IF_ERROR(RequireIdle());
  if (o.ctx < 8) return Status::InvalidArgument("ctx must be at least 8");
  if (o.ctx > max_len_)
    return Status::InvalidArgument(base::StrFormat("ctx %lld exceeds the engine's context %lld",
                                                   (long long)o.ctx, (long long)max_len_));
  const std::vector<int32_t> tokens = tok_->Encode(text, true, false);
  const int64_t n_ctx = o.ctx;
  if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
    return Status::InvalidArgument(
        base::StrFormat("the text has %zu tokens; at least 2*ctx = %lld are needed", tokens.size(),
                        (long long)(2 * n_ctx)));
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (o.max_chunks >= 0) n_chunks = std::min(n_chunks, o.max_chunks);
  const int64_t first = n_ctx / 2;
  const int64_t n_vocab = model_->config().n_vocab;
  const bool add_bos = tok_->vocab().add_bos;
  PerplexityResult res;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<float> all;  // [n_ctx][n_vocab]
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t start = c * n_ctx;
    std::vector<int32_t> chunk(tokens.begin() + start, tokens.begin() + start + n_ctx);
    if (add_bos) chunk[0] = tok_->bos();
    KVF_RETURN_IF_ERROR(ScoringPrefill(chunk, /*all_logits=*/true, &all));
    for (int64_t j = first; j < n_ctx - 1; ++j) {
      const int32_t target = tokens[static_cast<size_t>(start + j + 1)];
      const double lp =
          sampling::Sampler::LogProb(all.data() + j * n_vocab, n_vocab, target, nullptr, 0);
      nll -= lp;
      nll2 += lp * lp;
      ++count;
    }
    res.running_ppl.push_back(std::exp(nll / static_cast<double>(count)));
    if (o.progress) o.progress(c + 1, n_chunks, res.running_ppl.back());
  }
  const double mean = nll / static_cast<double>(count);
  const double var = nll2 / static_cast<double>(count) - mean * mean;
  res.ppl = std::exp(mean);
  res.stderr_ppl =
      var > 0 && count > 1 ? std::sqrt(var / static_cast<double>(count - 1)) * res.ppl : 0;
  res.chunks = n_chunks;
  res.tokens_scored = count;
  res.nll_mean = mean;
  return res;
}

Status EngineCore::SaveKvScales(const std::string& path) const {
  const kvstore::KvStoreConfig& sc = cache_->store().config();
  if (kvquant::IsNuq(sc.k_dtype) || kvquant::IsNuq(sc.v_dtype))
    return cache_->nuq_calibration().Save(path);
  return cache_->fp8_scales().Save(path);
}

}  // namespace kvforge
