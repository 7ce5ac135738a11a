#include "engine/speculation.h"

#include <algorithm>
#include <cmath>

#include "base/log.h"
#include "base/strings.h"
#include "engine/kv_calibrate.h"
#include "engine/kv_options.h"

namespace kvforge::engine {

using base::StrFormat;

int32_t DraftLength(DraftStats& s, int32_t k, bool adaptive) {
  if (!adaptive) return k;
  const double a = std::clamp(s.acceptance, 0.0, 1.0);
  if (a < DraftStats::kProbeBelow) {
    if (++s.quiet_steps < s.probe_every) return 0;
    s.quiet_steps = 0;
    return 1;
  }
  s.quiet_steps = 0;
  s.probe_every = DraftStats::kProbeFirst;
  if (a >= 1.0) return k;
  // Largest d with a^d >= kProbeBelow.
  const double d = std::floor(std::log(DraftStats::kProbeBelow) / std::log(a));
  return static_cast<int32_t>(std::clamp<double>(d, 1, k));
}

void RecordVerify(DraftStats& s, int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  const int64_t trials = accepted + (accepted < drafted ? 1 : 0);
  const double rate = static_cast<double>(accepted) / static_cast<double>(trials);
  // Each trial weighs 1/8: a handful of steps moves the estimate.
  const double w = 1.0 - std::pow(1.0 - 0.125, static_cast<double>(trials));
  const bool probing = s.acceptance < DraftStats::kProbeBelow;
  s.acceptance += w * (rate - s.acceptance);
  if (probing && accepted == 0) s.probe_every = std::min(2 * s.probe_every, DraftStats::kProbeMax);
}

namespace {

Status CheckSameVocabulary(const tokenizer::Tokenizer& target, const tokenizer::Tokenizer& draft,
                           int64_t target_rows, int64_t draft_rows, const std::string& path) {
  const auto& a = target.vocab().texts;
  const auto& b = draft.vocab().texts;
  if (a.size() != b.size() || target_rows != draft_rows)
    return Status::InvalidArgument(StrFormat(
        "draft model %s: its vocabulary has %zu tokens (%lld logits), the target's %zu (%lld); "
        "speculative decoding needs the same vocabulary",
        path.c_str(), b.size(), (long long)draft_rows, a.size(), (long long)target_rows));
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      return Status::InvalidArgument(
          StrFormat("draft model %s: token %zu is '%s', the target's is '%s'; speculative "
                    "decoding needs the same vocabulary",
                    path.c_str(), i, b[i].c_str(), a[i].c_str()));
  return Status::Ok();
}

Result<std::unique_ptr<spec::DraftModel>> LoadDraft(const EngineConfig& c,
                                                    const model::Model& target,
                                                    const tokenizer::Tokenizer& tok,
                                                    const kvstore::PagedKvCache& target_cache,
                                                    kernels::ThreadPool& pool, int64_t max_len) {
  KVF_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::Load(c.speculative_model));
  KVF_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> dt,
                       tokenizer::Tokenizer::FromGguf(m->file()));
  KVF_RETURN_IF_ERROR(CheckSameVocabulary(tok, *dt, target.config().n_vocab, m->config().n_vocab,
                                          c.speculative_model));
  // The draft's KV: its own dtype, nothing evicted, as many token slots as the target's pool.
  EngineConfig dc;
  dc.kv_cache_dtype = c.speculative_kv_cache_dtype == KvCacheDtype::kAuto
                          ? KvCacheDtype::kF16
                          : c.speculative_kv_cache_dtype;
  dc.block_size = c.block_size;
  dc.kivi_residual_tokens = c.kivi_residual_tokens;
  KVF_ASSIGN_OR_RETURN(kvstore::PagedKvCacheConfig kc, MakeKvCacheConfig(m->config(), dc));
  const int64_t slots =
      std::max<int64_t>(target_cache.num_blocks() * target_cache.block_tokens(), max_len);
  kc.store.num_blocks = (slots + kc.store.block_tokens - 1) / kc.store.block_tokens;
  KVF_ASSIGN_OR_RETURN(std::unique_ptr<kvstore::PagedKvCache> cache,
                       kvstore::PagedKvCache::Create(kc));
  KVF_RETURN_IF_ERROR(CalibrateKvAtStartup(*m, *dt, *cache, pool, max_len, dc.kv_scales));
  KVF_LOG_INFO("draft model %s: %s", c.speculative_model.c_str(), DescribeKvCache(*cache).c_str());
  return std::make_unique<spec::DraftModel>(std::move(m), std::move(cache));
}

}  // namespace

Result<std::unique_ptr<Speculator>> Speculator::Create(const EngineConfig& c,
                                                       const model::Model& target,
                                                       const tokenizer::Tokenizer& tok,
                                                       const kvstore::PagedKvCache& target_cache,
                                                       kernels::ThreadPool& pool, int64_t max_len) {
  const SpeculativeMethod method = EffectiveSpeculativeMethod(c);
  if (method == SpeculativeMethod::kOff) return std::unique_ptr<Speculator>();
  if (c.contiguous_kv)
    return Status::InvalidArgument(
        "speculative decoding needs the paged KV cache (contiguous_kv reserves whole contexts)");
  if (c.kivi_eager)
    return Status::InvalidArgument(
        "speculative decoding cannot roll back kivi_eager's quantization (it quantizes drafted "
        "tokens before they are verified)");
  std::unique_ptr<Speculator> s(new Speculator());
  s->method_ = method;
  s->k_ = c.num_speculative_tokens;
  s->lookup_min_ = c.prompt_lookup_min;
  s->lookup_max_ = c.prompt_lookup_max;
  s->adaptive_ = c.speculative_adaptive;
  if (method == SpeculativeMethod::kDraftModel) {
    KVF_ASSIGN_OR_RETURN(s->draft_, LoadDraft(c, target, tok, target_cache, pool, max_len));
  }
  return s;
}

uint64_t Speculator::draft_kv_bytes() const {
  return draft_ ? draft_->cache().store().total_bytes() : 0;
}

}  // namespace kvforge::engine
