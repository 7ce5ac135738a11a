// engine.cc — kvforge::Engine (include/kvforge/engine.h): a synchronous front of the batched
// EngineCore. Generate submits one request and steps the core until it finishes, streaming each
// step's text; scoring forwards to the core's scoring path (engine_scoring.cc).
#include "kvforge/engine.h"

#include <algorithm>
#include <optional>

#include "engine/engine_core.h"

namespace kvforge {

struct Engine::Impl {
  std::unique_ptr<EngineCore> core;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& options) {
  auto impl = std::make_unique<Impl>();
  // One request at a time: the default KV pool holds one full context.
  KVF_ASSIGN_OR_RETURN(impl->core, EngineCore::Create(options, /*concurrent_sequences=*/1));
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->core->info(); }
const Engine::EvictionSummary& Engine::last_eviction() const {
  return impl_->core->last_eviction();
}
int64_t Engine::max_context() const { return impl_->core->max_model_len(); }
int Engine::num_threads() const { return impl_->core->num_threads(); }

Result<std::vector<int32_t>> Engine::Tokenize(const std::string& text, bool add_special,
                                              bool parse_special) const {
  return impl_->core->tokenizer().Encode(text, add_special, parse_special);
}

std::string Engine::TokenToPiece(int32_t token) const {
  return impl_->core->tokenizer().TokenToPiece(token);
}

Result<std::vector<float>> Engine::LogitsFor(const std::vector<int32_t>& tokens) {
  return impl_->core->LogitsFor(tokens);
}

Result<std::vector<float>> Engine::LogitsAll(const std::vector<int32_t>& tokens,
                                             const std::vector<int64_t>& steps) {
  return impl_->core->LogitsAll(tokens, steps);
}

Status Engine::ScoreStream(const std::vector<int32_t>& tokens,
                           const StreamScoreCallback& on_token) {
  return impl_->core->ScoreStream(tokens, on_token);
}

Result<PerplexityResult> Engine::Perplexity(const std::string& text, const PerplexityOptions& o) {
  return impl_->core->Perplexity(text, o);
}

Status Engine::SaveKvScales(const std::string& path) const {
  return impl_->core->SaveKvScales(path);
}

namespace {

// The request's result from its final output (the first completion).
GenerationResult ResultOf(const RequestOutput& out, const std::vector<int32_t>& prompt) {
  GenerationResult r;
  r.prompt_tokens = prompt;
  const CompletionOutput& c = out.outputs.front();
  r.tokens = c.token_ids;
  r.text = c.text;
  r.finish = FinishReason::kAbort;
  for (FinishReason f : {FinishReason::kLength, FinishReason::kStop})
    if (c.finish_reason == FinishReasonName(f)) r.finish = f;
  r.logprobs = c.token_logprobs;
  const RequestMetrics& m = out.metrics;
  r.ttft_ms = m.ttft_ms;
  r.prefill_ms = m.ttft_ms - m.queue_ms;
  r.prefill_tokens_per_s =
      static_cast<double>(prompt.size()) / std::max(1e-9, r.prefill_ms / 1000.0);
  r.itl_ms = m.itl_ms;
  for (double itl : m.itl_ms) r.decode_ms += itl;
  if (r.tokens.size() > 1 && r.decode_ms > 0)
    r.decode_tokens_per_s = static_cast<double>(r.tokens.size() - 1) / (r.decode_ms / 1000.0);
  r.kv_evicted_tokens = m.kv_evicted_tokens;
  r.kv_peak_tokens = m.kv_peak_tokens;
  r.kv_final_tokens = m.kv_final_tokens;
  r.spec_draft_tokens = m.spec_draft_tokens;
  r.spec_accepted_tokens = m.spec_accepted_tokens;
  r.spec_verify_steps = m.spec_verify_steps;
  return r;
}

}  // namespace

Result<GenerationResult> Engine::Generate(const std::vector<int32_t>& prompt,
                                          const SamplingParams& params,
                                          const TokenCallback& on_token) {
  EngineCore& core = *impl_->core;
  if (params.max_tokens == 0) {  // nothing to generate: only the request's checks
    SamplingParams one = params;
    one.max_tokens = 1;
    KVF_RETURN_IF_ERROR(core.ValidateRequest(prompt, one));
    GenerationResult r;
    r.prompt_tokens = prompt;
    return r;
  }
  std::optional<RequestOutput> final_output;
  bool caller_stopped = false;
  auto on_output = [&](const RequestOutput& out) {
    if (on_token && !caller_stopped && !out.delta_text.empty() && !out.delta_text[0].empty()) {
      const std::vector<int32_t>& ids = out.delta_token_ids[0];
      caller_stopped = !on_token(ids.empty() ? -1 : ids.back(), out.delta_text[0]);
    }
    if (out.finished) final_output = out;
  };
  KVF_ASSIGN_OR_RETURN(const int64_t id, core.AddRequest(prompt, params, on_output, 0));
  while (!final_output) {
    if (Status s = core.Step(); !s.ok()) {
      core.Abort(id);
      return s;
    }
    if (caller_stopped && !final_output) core.Abort(id);  // its final output ends the loop
  }
  return ResultOf(*final_output, prompt);
}

}  // namespace kvforge
