// engine.cc — implements kvforge::Engine (include/kvforge/engine.h): single-request generation
// and perplexity over one model, one KV store and one thread pool.
#include "kvforge/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "assets/default_model.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/token_ids.h"
#include "engine/kv_budget.h"
#include "engine/kv_calibrate.h"
#include "engine/kv_eviction.h"
#include "engine/kv_options.h"
#include "engine/stop_checker.h"
#include "engine/structured_output.h"
#include "gguf/gguf_reader.h"
#include "kernels/thread_pool.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace kvforge {

using Clock = std::chrono::steady_clock;

namespace {
double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
}  // namespace

struct Engine::Impl {
  EngineConfig opts;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<kvstore::PagedKvCache> kv;
  std::unique_ptr<kernels::ThreadPool> pool;
  model::Workspace ws;
  ModelInfo info;
  int64_t max_ctx = 0;
  EvictionSummary last_eviction;
  std::unique_ptr<engine::GrammarCache> grammars;  // made on the first constrained request

  // Prefills tokens[from..] into sequence 0 starting at position `from`; logits of the last
  // token. With an eviction policy each chunk may compact the sequence before the next.
  Status Prefill(const std::vector<int32_t>& tokens, int64_t from, std::vector<float>* logits,
                 engine::SeqEviction* evict = nullptr) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (evict == nullptr && !kv->EnsureTokens(0, n))
      return Status::ResourceExhausted("KV cache too small for the prompt");
    for (int64_t b = from; b < n; b += opts.max_num_batched_tokens) {
      const int64_t e = std::min(n, b + opts.max_num_batched_tokens);
      model::Batch batch;
      batch.tokens.assign(tokens.begin() + b, tokens.begin() + e);
      batch.seqs.push_back({0, b, 0, e - b, false, e == n});
      KVF_RETURN_IF_ERROR(Step(batch, b, evict, logits));
    }
    return Status::Ok();
  }

  // One forward of batch (one chunk of sequence 0 starting at token index `token_pos`).
  Status Step(model::Batch& batch, int64_t token_pos, engine::SeqEviction* evict,
              std::vector<float>* logits) {
    model::SeqChunk& chunk = batch.seqs.front();
    if (evict != nullptr) {
      if (!kv->EnsureTokens(0, token_pos + chunk.n_tokens - kv->Evicted(0)))
        return Status::ResourceExhausted("KV cache exhausted");
      evict->PrepareChunk(*kv, token_pos, &chunk);
    }
    KVF_RETURN_IF_ERROR(model->Forward(batch, *kv, ws, *pool, logits));
    if (evict != nullptr) {
      Result<bool> compacted = evict->AfterStep(*kv, 0, token_pos + chunk.n_tokens);
      if (!compacted.ok()) return compacted.error();
    }
    return Status::Ok();
  }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& options) {
  auto impl = std::make_unique<Impl>();
  impl->opts = options;
  if (options.threads < 0 || options.threads > 1024)
    return Status::InvalidArgument("threads must be 0..1024");
  if (options.block_size <= 0 || options.block_size > 4096)
    return Status::InvalidArgument("kv block size must be 1..4096 tokens");
  if (options.max_num_batched_tokens <= 0)
    return Status::InvalidArgument("max_num_batched_tokens (the prefill chunk) must be positive");
  if (options.max_model_len < 0) return Status::InvalidArgument("max context must be >= 0");
  if (options.model.empty()) {
    KVF_ASSIGN_OR_RETURN(impl->model, model::Model::LoadFromMemory(assets::DefaultModelData(),
                                                                   assets::DefaultModelSize(),
                                                                   assets::kDefaultModelName));
  } else {
    KVF_ASSIGN_OR_RETURN(impl->model, model::Model::Load(options.model));
    if (options.mlock)
      if (Status s = impl->model->LockWeights(); !s.ok()) KVF_LOG_WARN("%s", s.message().c_str());
  }
  impl->model->SetMlaAttention(static_cast<model::MlaAttention>(options.mla_attention));
  KVF_ASSIGN_OR_RETURN(impl->tok, tokenizer::Tokenizer::FromGguf(impl->model->file()));
  const model::ModelConfig& c = impl->model->config();
  if (impl->tok->n_vocab() > c.n_vocab)
    return Status::InvalidArgument(options.model +
                                   ": the tokenizer has more tokens than the embedding");
  impl->max_ctx =
      options.max_model_len > 0 ? options.max_model_len : std::min<int64_t>(c.n_ctx_train, 8192);
  KVF_ASSIGN_OR_RETURN(kvstore::PagedKvCacheConfig kc, engine::MakeKvCacheConfig(c, options));
  uint64_t weight_bytes = 0;
  for (const auto& t : impl->model->file().tensors()) weight_bytes += t.nbytes;
  KVF_ASSIGN_OR_RETURN(const uint64_t per_block, engine::KvBlockBytes(kc));
  const int32_t block_tokens = kc.store.block_tokens;
  const int64_t one_seq = (impl->max_ctx + block_tokens - 1) / block_tokens;
  KVF_ASSIGN_OR_RETURN(
      kc.store.num_blocks,
      engine::KvBlocksForBudget(options.kv_cache_memory_bytes, options.memory_utilization,
                                per_block, weight_bytes, one_seq));
  KVF_ASSIGN_OR_RETURN(impl->kv, kvstore::PagedKvCache::Create(kc));
  KVF_RETURN_IF_ERROR(ValidateKvPolicy(options.kv_policy).WithContext("kv_policy"));
  KVF_RETURN_IF_ERROR(engine::CheckPolicyFitsCache(options.kv_policy, *impl->kv));
  KVF_LOG_INFO("%s", engine::DescribeKvCache(*impl->kv).c_str());
  impl->pool = std::make_unique<kernels::ThreadPool>(options.threads);
  KVF_RETURN_IF_ERROR(engine::CalibrateKvAtStartup(*impl->model, *impl->tok, *impl->kv, *impl->pool,
                                                   impl->max_ctx, options.kv_scales));

  ModelInfo& i = impl->info;
  i.architecture = c.arch_name;
  i.name = c.name;
  i.n_vocab = c.n_vocab;
  i.n_embd = c.n_embd;
  i.n_layer = c.n_layer;
  i.n_head = c.n_head;
  i.n_head_kv = c.n_head_kv;
  i.head_dim = c.head_dim;
  i.n_ff = c.n_ff;
  i.n_ctx_train = c.n_ctx_train;
  i.rope_dim = c.rope_dim;
  i.rope_freq_base = c.rope_freq_base;
  i.rope_freq_scale = c.rope_freq_scale;
  i.rope_neox = c.rope_neox;
  i.rope_freq_factors = static_cast<int64_t>(c.rope_freq_factors.size());
  i.block = model::DescribeBlock(*c.traits);
  i.kv_lora_rank = c.mla.kv_lora_rank;
  i.q_lora_rank = c.mla.q_lora_rank;
  i.qk_nope_dim = c.mla.nope_dim;
  i.qk_rope_dim = c.mla.rope_dim;
  i.v_head_dim = c.mla.v_head_dim;
  i.n_expert = c.moe.n_expert;
  i.n_expert_used = c.moe.n_expert_used;
  i.n_expert_shared = c.moe.n_shared;
  i.n_ff_expert = c.moe.n_ff_expert;
  i.leading_dense = c.moe.leading_dense;
  i.rms_eps = c.rms_eps;
  i.tied_output = impl->model->weights().tied_output;
  i.n_params = 0;
  i.weight_bytes = 0;
  for (const auto& t : impl->model->file().tensors()) {
    i.n_params += static_cast<uint64_t>(t.NumElements());
    i.weight_bytes += t.nbytes;
  }
  i.tokenizer_model = impl->tok->vocab().model;
  i.bos = impl->tok->bos();
  i.eos = impl->tok->eos();
  i.kv_bytes_per_token = static_cast<uint64_t>(engine::KvBytesPerToken(kc));
  i.kv_cache_dtype = engine::KvDtypeLabel(kc.store);
  if (const auto* t = impl->model->file().Find("tokenizer.chat_template");
      t && t->type == gguf::ValueType::kString)
    i.chat_template = std::string(t->str);
  const auto& vocab = impl->tok->vocab();
  if (vocab.bos >= 0) i.bos_text = vocab.texts[static_cast<size_t>(vocab.bos)];
  if (vocab.eos >= 0) i.eos_text = vocab.texts[static_cast<size_t>(vocab.eos)];
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }
const Engine::EvictionSummary& Engine::last_eviction() const { return impl_->last_eviction; }
int64_t Engine::max_context() const { return impl_->max_ctx; }
int Engine::num_threads() const { return impl_->pool->num_threads(); }

Result<std::vector<int32_t>> Engine::Tokenize(const std::string& text, bool add_special,
                                              bool parse_special) const {
  return impl_->tok->Encode(text, add_special, parse_special);
}

std::string Engine::TokenToPiece(int32_t token) const { return impl_->tok->TokenToPiece(token); }

Result<std::vector<float>> Engine::LogitsFor(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) return Status::InvalidArgument("no tokens");
  if (static_cast<int64_t>(tokens.size()) > impl_->max_ctx)
    return Status::InvalidArgument("more tokens than the context holds");
  impl_->kv->Free(0);
  std::vector<float> logits;
  KVF_RETURN_IF_ERROR(impl_->Prefill(tokens, 0, &logits));
  impl_->kv->Free(0);
  return logits;
}

Result<std::vector<float>> Engine::LogitsAll(const std::vector<int32_t>& tokens,
                                             const std::vector<int64_t>& steps) {
  Impl& im = *impl_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::InvalidArgument("no tokens");
  if (n > im.max_ctx) return Status::InvalidArgument("more tokens than the context holds");
  int64_t sum = 0;
  for (int64_t s : steps) {
    if (s <= 0) return Status::InvalidArgument("step sizes must be positive");
    sum += s;
  }
  if (sum != n) return Status::InvalidArgument("step sizes must add up to the token count");
  const int64_t n_vocab = im.model->config().n_vocab;
  im.kv->Free(0);
  std::unique_ptr<engine::SeqEviction> evict =
      engine::MakeSeqEviction(im.opts.kv_policy, steps.front(),
                              static_cast<int32_t>(im.model->config().n_layer), *im.kv, n);
  if (!evict && !im.kv->EnsureTokens(0, n)) return Status::ResourceExhausted("KV cache too small");
  std::vector<float> all(static_cast<size_t>(n * n_vocab)), logits;
  int64_t pos = 0;
  Status st;
  for (int64_t s : steps) {
    model::Batch batch;
    batch.tokens.assign(tokens.begin() + pos, tokens.begin() + pos + s);
    batch.seqs.push_back({0, pos, 0, s, true, true});
    st = im.Step(batch, pos, evict.get(), &logits);
    if (!st.ok()) break;
    std::copy(logits.begin(), logits.end(), all.begin() + pos * n_vocab);
    pos += s;
  }
  im.last_eviction = {};
  if (evict) im.last_eviction = {evict->evicted_tokens(), im.kv->NumTokens(0), evict->peak_slots()};
  im.kv->Free(0);
  if (!st.ok()) return st;
  return all;
}

Status Engine::ScoreStream(const std::vector<int32_t>& tokens,
                           const StreamScoreCallback& on_token) {
  Impl& im = *impl_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = im.model->config().n_vocab;
  if (n < 2) return Status::InvalidArgument("need at least two tokens to score");
  KVF_RETURN_IF_ERROR(base::CheckTokenIds(tokens, n_vocab).WithContext("tokens"));
  const KvPolicy& policy = im.opts.kv_policy;
  const bool streaming = policy.kind == KvPolicyKind::kStreaming;
  if (!streaming && n > im.max_ctx)
    return Status::InvalidArgument(base::StrFormat(
        "%lld tokens do not fit the context (%lld); only the streaming policy runs past it",
        (long long)n, (long long)im.max_ctx));
  im.kv->Free(0);
  std::unique_ptr<engine::SeqEviction> evict = engine::MakeSeqEviction(
      policy, 1, static_cast<int32_t>(im.model->config().n_layer), *im.kv, std::min(n, im.max_ctx));
  std::vector<float> logits;
  Status st;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t held = streaming ? i - im.kv->Evicted(0) : i;
    if (held + 1 > im.max_ctx) {
      st = Status::InvalidArgument("the stream outgrew the context (budget above it?)");
      break;
    }
    if (!evict && !im.kv->EnsureTokens(0, i + 1)) {
      st = Status::ResourceExhausted("KV cache exhausted");
      break;
    }
    model::Batch batch;
    batch.tokens = {tokens[static_cast<size_t>(i)]};
    batch.seqs.push_back({0, i, 0, 1, false, true});
    st = im.Step(batch, i, evict.get(), &logits);
    if (!st.ok()) break;
    const double nll = -sampling::Sampler::LogProb(logits.data(), n_vocab,
                                                   tokens[static_cast<size_t>(i + 1)], nullptr, 0);
    if (on_token && !on_token(i + 1, nll, im.kv->NumTokens(0))) break;
  }
  im.kv->Free(0);
  return st;
}

Status Engine::SaveKvScales(const std::string& path) const {
  const kvstore::KvStoreConfig& sc = impl_->kv->store().config();
  if (kvquant::IsNuq(sc.k_dtype) || kvquant::IsNuq(sc.v_dtype))
    return impl_->kv->nuq_calibration().Save(path);
  return impl_->kv->fp8_scales().Save(path);
}

Result<GenerationResult> Engine::Generate(const std::vector<int32_t>& prompt,
                                          const SamplingParams& params,
                                          const TokenCallback& on_token) {
  KVF_RETURN_IF_ERROR(params.Validate());
  Impl& im = *impl_;
  const int64_t n_vocab = im.model->config().n_vocab;
  if (prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  KVF_RETURN_IF_ERROR(base::CheckTokenIds(prompt, n_vocab).WithContext("prompt"));
  for (const auto& [id, bias] : params.logit_bias)
    if (id >= n_vocab)
      return Status::InvalidArgument(base::StrFormat(
          "logit_bias: token id %d is outside the vocabulary (%lld)", id, (long long)n_vocab));
  std::optional<engine::SequenceGrammar> grammar;
  if (params.structured_outputs.enabled()) {
    if (!im.grammars) im.grammars = std::make_unique<engine::GrammarCache>(*im.tok);
    KVF_ASSIGN_OR_RETURN(auto masker, im.grammars->Get(params.structured_outputs));
    grammar.emplace(std::move(masker), engine::EndTokens(*im.grammars, params),
                    params.structured_outputs);
  }
  const KvPolicy kv_policy = params.kv_policy.value_or(im.opts.kv_policy);
  KVF_RETURN_IF_ERROR(ValidateKvPolicy(kv_policy).WithContext("kv_policy"));
  KVF_RETURN_IF_ERROR(engine::CheckPolicyFitsCache(kv_policy, *im.kv));
  const bool streaming = kv_policy.kind == KvPolicyKind::kStreaming;
  std::unique_ptr<engine::SeqEviction> evict =
      engine::MakeSeqEviction(kv_policy, static_cast<int64_t>(prompt.size()),
                              static_cast<int32_t>(im.model->config().n_layer), *im.kv);
  const int64_t need =
      engine::ContextTokensNeeded(kv_policy, static_cast<int64_t>(prompt.size()), params.max_tokens,
                                  im.kv->block_tokens(), im.max_ctx);
  if (need > im.max_ctx)
    return Status::InvalidArgument(base::StrFormat(
        "this request needs %lld tokens (prompt %zu + max_tokens %d) but the context holds %lld",
        (long long)need, prompt.size(), params.max_tokens, (long long)im.max_ctx));
  if (im.kv->BlocksForTokens(need) > im.kv->num_blocks())
    return Status::ResourceExhausted(base::StrFormat(
        "this request needs %lld KV blocks but the cache has %lld (raise --kv-cache-memory)",
        (long long)im.kv->BlocksForTokens(need), (long long)im.kv->num_blocks()));
  GenerationResult r;
  r.prompt_tokens = prompt;
  const auto t0 = Clock::now();
  im.kv->Free(0);
  std::vector<float> logits;
  KVF_RETURN_IF_ERROR(im.Prefill(prompt, 0, &logits, evict.get()));
  r.prefill_ms = MsSince(t0);
  r.prefill_tokens_per_s = prompt.size() / std::max(1e-9, r.prefill_ms / 1000.0);

  sampling::Sampler sampler(params);
  engine::StopChecker stop(*im.tok, params);
  std::vector<int32_t> history = prompt;
  auto last = Clock::now();
  Clock::time_point first_token_time;
  bool stopped = false;
  while (static_cast<int32_t>(r.tokens.size()) < params.max_tokens) {
    std::vector<float> raw;
    if (params.logprobs > 0) raw.assign(logits.begin(), logits.begin() + n_vocab);
    int32_t tok = -1;
    if (!grammar || grammar->Mask(logits.data(), n_vocab))
      tok = sampler.Sample(logits.data(), n_vocab, history);
    if (tok < 0) {  // nothing may be sampled (a grammar's dead end): the sequence ends here
      r.finish = FinishReason::kStop;
      stopped = true;
      const std::string rest = stop.Flush();
      if (on_token && !rest.empty()) on_token(-1, rest);
      break;
    }
    const auto now = Clock::now();
    if (r.tokens.empty() && !stopped) {
      r.ttft_ms = std::chrono::duration<double, std::milli>(now - t0).count();
      first_token_time = now;
    } else {
      r.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    }
    last = now;
    const engine::TokenOutcome out = stop.Accept(tok, static_cast<int32_t>(r.tokens.size()));
    if (out.keep_token) {
      r.tokens.push_back(tok);
      if (params.logprobs > 0)
        r.logprobs.push_back(sampling::Sampler::LogProb(raw.data(), n_vocab, tok, nullptr, 0));
      history.push_back(tok);
      if (grammar) grammar->Accept(tok);
    }
    // Text safe to stream: complete UTF-8, nothing that could begin a stop string, cut at a stop.
    const bool caller_goes_on =
        !on_token || out.text.empty() || on_token(out.keep_token ? tok : -1, out.text);
    if (out.finished || !caller_goes_on) {
      r.finish = out.finished ? out.reason : FinishReason::kAbort;
      stopped = true;
      break;
    }
    if (grammar && grammar->MustEnd()) {  // a complete sentence that allows nothing more
      r.finish = FinishReason::kStop;
      stopped = true;
      const std::string rest = stop.Flush();
      if (on_token && !rest.empty()) on_token(-1, rest);
      break;
    }
    const int64_t pos = static_cast<int64_t>(history.size()) - 1;
    // Context full: finish with "length" (streaming counts slots: its positions are the cache's).
    const int64_t held = streaming ? pos - im.kv->Evicted(0) : pos;
    if (held + 1 >= im.max_ctx) break;
    if (!evict && !im.kv->EnsureTokens(0, pos + 1))
      return Status::ResourceExhausted("KV cache exhausted");
    model::Batch batch;
    batch.tokens = {tok};
    batch.seqs.push_back({0, pos, 0, 1, false, true});
    KVF_RETURN_IF_ERROR(im.Step(batch, pos, evict.get(), &logits));
  }
  if (evict) {
    r.kv_evicted_tokens = evict->evicted_tokens();
    r.kv_peak_tokens = evict->peak_slots();
    r.kv_final_tokens = im.kv->NumTokens(0);
  }
  if (!stopped) {  // the context is full (or max_tokens was 0)
    r.finish = FinishReason::kLength;
    const std::string rest = stop.Flush();
    if (on_token && !rest.empty()) on_token(-1, rest);
  }
  r.text = stop.text();
  if (!r.tokens.empty()) {
    r.decode_ms = std::chrono::duration<double, std::milli>(last - first_token_time).count();
    if (r.tokens.size() > 1 && r.decode_ms > 0)
      r.decode_tokens_per_s = (r.tokens.size() - 1) / (r.decode_ms / 1000.0);
  }
  im.kv->Free(0);
  return r;
}

Result<PerplexityResult> Engine::Perplexity(const std::string& text, const PerplexityOptions& o) {
  Impl& im = *impl_;
  if (o.ctx < 8) return Status::InvalidArgument("ctx must be at least 8");
  if (o.ctx > im.max_ctx)
    return Status::InvalidArgument(base::StrFormat("ctx %lld exceeds the engine's context %lld",
                                                   (long long)o.ctx, (long long)im.max_ctx));
  const std::vector<int32_t> tokens = im.tok->Encode(text, true, false);
  const int64_t n_ctx = o.ctx;
  if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
    return Status::InvalidArgument(
        base::StrFormat("the text has %zu tokens; at least 2*ctx = %lld are needed", tokens.size(),
                        (long long)(2 * n_ctx)));
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (o.max_chunks >= 0) n_chunks = std::min(n_chunks, o.max_chunks);
  const int64_t first = n_ctx / 2;
  const int64_t n_vocab = im.model->config().n_vocab;
  const bool add_bos = im.tok->vocab().add_bos;
  PerplexityResult res;
  double nll = 0, nll2 = 0;
  int64_t count = 0;
  std::vector<float> logits;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t start = c * n_ctx;
    std::vector<int32_t> chunk(tokens.begin() + start, tokens.begin() + start + n_ctx);
    if (add_bos) chunk[0] = im.tok->bos();
    im.kv->Free(0);
    if (!im.kv->EnsureTokens(0, n_ctx))
      return Status::ResourceExhausted("KV cache too small for ctx");
    // Whole chunk in steps of prefill_chunk tokens, logits for every token.
    std::vector<float> all(static_cast<size_t>(n_ctx * n_vocab));
    for (int64_t b = 0; b < n_ctx; b += im.opts.max_num_batched_tokens) {
      const int64_t e = std::min(n_ctx, b + im.opts.max_num_batched_tokens);
      model::Batch batch;
      batch.tokens.assign(chunk.begin() + b, chunk.begin() + e);
      batch.seqs.push_back({0, b, 0, e - b, true, true});
      KVF_RETURN_IF_ERROR(im.model->Forward(batch, *im.kv, im.ws, *im.pool, &logits));
      std::copy(logits.begin(), logits.end(), all.begin() + b * n_vocab);
    }
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
  im.kv->Free(0);
  const double mean = nll / static_cast<double>(count);
  double var = nll2 / static_cast<double>(count) - mean * mean;
  res.ppl = std::exp(mean);
  res.stderr_ppl =
      var > 0 && count > 1 ? std::sqrt(var / static_cast<double>(count - 1)) * res.ppl : 0;
  res.chunks = n_chunks;
  res.tokens_scored = count;
  res.nll_mean = mean;
  return res;
}

}  // namespace kvforge
