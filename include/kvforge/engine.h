// kvforge/engine.h — the embedding API: load a GGUF model, tokenize, generate, evaluate.
//
// An Engine owns one model, its tokenizer, a KV cache and a compute thread pool. Generate() runs
// one request to completion on the calling thread, streaming each token to a callback; the
// continuous-batching engine (many concurrent requests) builds on the same pieces.
// Thread-safety: one thread at a time per Engine. No exception escapes; errors are Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvforge/engine_config.h"
#include "kvforge/finish_reason.h"
#include "kvforge/sampling_params.h"
#include "kvforge/status.h"

namespace kvforge {

struct ModelInfo {
  std::string architecture;
  std::string name;
  int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
  int64_t rope_dim;
  float rope_freq_base, rope_freq_scale;
  bool rope_neox;
  int64_t rope_freq_factors;  // Llama 3's rope_freqs.weight values (0: none)
  std::string block;          // what the family's block computes, e.g. "LayerNorm, parallel
                              // attention + GELU MLP, fused qkv" (model/arch.h)
  float rms_eps;
  bool tied_output;
  // MLA (deepseek2; kv_lora_rank 0 otherwise): the latent and per-head widths.
  int64_t kv_lora_rank = 0, q_lora_rank = 0, qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  // MoE: routed experts, used per token, shared; layers before leading_dense are dense.
  int64_t n_expert = 0, n_expert_used = 0, n_expert_shared = 0, n_ff_expert = 0, leading_dense = 0;
  uint64_t n_params;
  uint64_t weight_bytes;
  std::string tokenizer_model;
  int32_t bos, eos;
  uint64_t kv_bytes_per_token;  // with the engine's KV dtype, all layers, K and V, scales included
  std::string kv_cache_dtype;   // "q8_0", or "k=q8_0,v=f16"
  std::string chat_template;    // tokenizer.chat_template (Jinja2), empty when absent
  std::string bos_text, eos_text;  // the BOS/EOS token texts, for chat templates
};

struct GenerationResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;  // generated ids (EOS excluded)
  std::string text;             // detokenized generated text (stop string excluded)
  FinishReason finish = FinishReason::kLength;
  double ttft_ms = 0;  // request start to first generated token
  double prefill_ms = 0;
  double decode_ms = 0;
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;  // tokens after the first / decode time
  std::vector<double> itl_ms;      // inter-token latencies
  std::vector<float> logprobs;     // of each generated token (raw logits, before penalties)
  // KV eviction (kv_policy): tokens evicted, the most KV slots held, the slots held at the end.
  int64_t kv_evicted_tokens = 0;
  int64_t kv_peak_tokens = 0;
  int64_t kv_final_tokens = 0;
  // Speculative decoding: tokens drafted and verified, drafts kept, verify steps.
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_verify_steps = 0;
};

// Called with each new piece of text (complete UTF-8) and its token id; return false to stop.
using TokenCallback = std::function<bool(int32_t token, const std::string& piece)>;

struct PerplexityOptions {
  int64_t ctx = 512;
  int64_t max_chunks = -1;  // -1: all
  std::function<void(int64_t chunk, int64_t n_chunks, double ppl)> progress;
};

struct PerplexityResult {
  double ppl = 0;
  double stderr_ppl = 0;
  int64_t chunks = 0;
  int64_t tokens_scored = 0;
  double nll_mean = 0;
  std::vector<double> running_ppl;  // after each chunk
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> Create(const EngineConfig& options);
  ~Engine();

  const ModelInfo& info() const;
  int64_t max_context() const;
  int num_threads() const;

  Result<std::vector<int32_t>> Tokenize(const std::string& text, bool add_special,
                                        bool parse_special) const;
  std::string TokenToPiece(int32_t token) const;

  // Runs one request to completion (or until the callback returns false).
  Result<GenerationResult> Generate(const std::vector<int32_t>& prompt,
                                    const SamplingParams& params,
                                    const TokenCallback& on_token = nullptr);

  // llama-perplexity protocol on `text`.
  Result<PerplexityResult> Perplexity(const std::string& text, const PerplexityOptions& options);

  // Raw logits for the last token after prefilling `tokens` from position 0 (tests, tools).
  Result<std::vector<float>> LogitsFor(const std::vector<int32_t>& tokens);

  // Logits for EVERY position of `tokens`, fed from position 0 in forward steps of the given
  // sizes (they must add up to tokens.size()): {n} is one teacher-forced pass, {1, 1, ...}
  // token-by-token decoding, {C, M} a prefill then a continuation. Row i (n_vocab floats)
  // predicts token i + 1. The KV cache is emptied before and after (KV evaluation, tests).
  // The engine's kv_policy runs after every step: one-shot methods treat the first step as the
  // prompt, and a fractional budget is that fraction of all the tokens.
  Result<std::vector<float>> LogitsAll(const std::vector<int32_t>& tokens,
                                       const std::vector<int64_t>& steps);
  // Scores `tokens` as one sequence fed one token per step (StreamingLLM's evaluation) under the
  // engine's kv_policy, keeping no logits: `on_token(i, nll, kv_slots)` gets the negative log
  // likelihood of tokens[i] (i >= 1) and the KV slots held; returning false stops early. Longer
  // than the context only with the streaming policy (its positions are the cache's); a
  // fractional budget is that fraction of the context.
  using StreamScoreCallback = std::function<bool(int64_t index, double nll, int64_t kv_slots)>;
  Status ScoreStream(const std::vector<int32_t>& tokens, const StreamScoreCallback& on_token);
  // KV eviction of the last LogitsAll: tokens evicted and the KV slots held at the end (zeros
  // without a policy).
  struct EvictionSummary {
    int64_t evicted_tokens = 0;
    int64_t final_tokens = 0;
    int64_t peak_tokens = 0;
  };
  const EvictionSummary& last_eviction() const;

  // Writes the FP8 KV scales in use (after first-batch calibration) to `path`, in the format
  // EngineConfig::kv_scales loads; with a kvquant3 K or V cache, its calibration instead.
  Status SaveKvScales(const std::string& path) const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvforge
