// kvforge/llm.h — the serving API, shaped like vLLM's: a continuous-batching engine over a paged
// KV cache.
//
//   kvforge::LLM llm({.model = "model.gguf", .max_model_len = 4096,
//                     .kv_cache_memory_bytes = 2ull << 30, .max_num_batched_tokens = 2048,
//                     .max_num_seqs = 64});
//   if (!llm.ok()) { /* llm.status() says why */ }
//   auto outputs = llm.generate(prompts, kvforge::SamplingParams{.temperature = 0.8f, .max_tokens =
//   128});
//
// `LLM::generate` runs every prompt concurrently through iteration-level scheduling (requests join
// and leave the running batch between forward steps; all scheduled tokens of a step share one
// batched forward pass) and returns one RequestOutput per prompt in input order. `AsyncEngine`
// is the form the HTTP server uses: one engine thread owns the model, scheduler and KV cache;
// other threads Submit() requests, receive streamed outputs through a callback, and Abort().
// No exception escapes; errors are Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvforge/engine_config.h"
#include "kvforge/finish_reason.h"
#include "kvforge/kv_snapshot.h"
#include "kvforge/kv_tier_stats.h"
#include "kvforge/sampling_params.h"
#include "kvforge/status.h"

namespace kvforge {

struct CompletionOutput {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;      // "stop" | "length" | "abort"
  std::string stop_string;        // final output: the stop string that ended it; empty: none did
  double cumulative_logprob = 0;  // sum of chosen tokens' log-probabilities
  // Per generated token, when SamplingParams::logprobs > 0: the chosen token's log-probability
  // and the top-N alternatives (id, logprob).
  std::vector<float> token_logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
};

struct RequestMetrics {
  double queue_ms = 0;         // arrival to first scheduled
  double ttft_ms = 0;          // arrival to first generated token
  double e2e_ms = 0;           // arrival to finish
  std::vector<double> itl_ms;  // inter-token latencies (first sequence)
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;  // all sequences
  int64_t num_preemptions = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
  // KV eviction (first sequence): tokens evicted so far, the most KV slots it held, and the
  // slots it holds after the latest step.
  int64_t kv_evicted_tokens = 0;
  int64_t kv_peak_tokens = 0;
  int64_t kv_final_tokens = 0;
  // Speculative decoding (all sequences): tokens drafted and verified, drafts kept, and the
  // forward steps that verified drafts.
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_verify_steps = 0;
};

struct RequestOutput {
  int64_t request_id = 0;
  std::vector<int32_t> prompt_token_ids;
  std::vector<CompletionOutput> outputs;  // n completions
  bool finished = false;
  RequestMetrics metrics;
  // Streaming deltas: the text/token ids added since the previous callback, per completion.
  std::vector<std::string> delta_text;
  std::vector<std::vector<int32_t>> delta_token_ids;
};

struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t num_swapped = 0;
  int64_t num_preemptions = 0;
  double kv_usage = 0;  // used blocks / total blocks
  int64_t kv_total_blocks = 0;
  int64_t kv_block_tokens = 0;
  uint64_t kv_bytes = 0;
  int64_t live_tokens = 0;     // tokens whose KV sequences hold (PagedKvCache::LiveTokens)
  int64_t reserved_slots = 0;  // token slots in blocks held by sequences
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t steps = 0;
  // Prefix cache (zeros when off): admitted sequences that queried it, prompt tokens they asked
  // for and found, cached blocks dropped to make room, blocks holding cached content now.
  bool prefix_caching = false;
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_query_tokens = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prefix_cache_evicted_blocks = 0;
  int64_t prefix_cache_blocks = 0;
  int64_t prefix_deferrals = 0;   // admissions held back for a prefix another request computes
  int64_t itl_limited_steps = 0;  // steps whose prefill max_itl_ms cut
  int64_t ttft_lifted_steps = 0;  // steps left uncut for a prompt at risk of max_ttft_ms
  int64_t kv_compactions = 0;     // KV eviction compactions applied
  int64_t kv_shared_blocks = 0;   // in-use blocks referenced by more than one sequence
  // KV eviction per policy (KvPolicyName), in the order the policies were first used.
  struct KvPolicyCounts {
    std::string policy;
    int64_t evicted_tokens = 0;
    int64_t compactions = 0;
  };
  std::vector<KvPolicyCounts> kv_policies;
  // KV offload tiers (docs/kv_cache.md#tiers; zeros and no tiers when off): prompt tokens whose KV
  // was loaded from a tier, chunks loaded, queued for writing, refused on load (corrupt, foreign)
  // and dropped for want of queue room; then each tier's own counters, fastest first.
  bool kv_offload = false;
  int64_t kv_offload_loaded_tokens = 0;
  int64_t kv_offload_loaded_chunks = 0;
  int64_t kv_offload_stored_chunks = 0;
  int64_t kv_offload_rejected_chunks = 0;
  int64_t kv_offload_dropped_writes = 0;
  int64_t kv_offload_load_timeouts = 0;  // requests admitted without chunks still loading
  int64_t kv_offload_load_waits = 0;     // admissions put off (per step) for chunks on their way
  int64_t kv_offload_prefetches = 0;     // fetches started while their request waited behind others
  int64_t kv_offload_deferred_chunks = 0;  // write-back: chunks waiting for the pool to drop them
  std::vector<KvTierStats> kv_tiers;
  // Speculative decoding (zeros when off; vLLM's spec_decode metrics): the method, verify chunks
  // run ("drafts"), tokens drafted and verified, drafts kept; draft slots the scheduler granted
  // and offers it refused (budget, blocks, or a compute-bound step); the draft model's KV bytes.
  std::string spec_method;  // "off", "ngram", "draft_model"
  int64_t spec_num_drafts = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;  // [draft position]: drafts kept at that position
  int64_t spec_granted_slots = 0;
  int64_t spec_refused_offers = 0;
  uint64_t spec_draft_kv_bytes = 0;
};

// Called on the engine thread with each request's progress; the last call has finished = true.
using OutputCallback = std::function<void(const RequestOutput&)>;

class EngineCore;  // src/engine
class LLM;
namespace engine {
EngineCore* CoreOf(LLM& llm);  // src/engine/llm_internal.h: kvforge's own tools and tests only
}

class AsyncEngine {
 public:
  static Result<std::unique_ptr<AsyncEngine>> Create(const EngineConfig& config);
  ~AsyncEngine();  // aborts what is still running and joins the engine thread

  // Queues a request (tokens, or text tokenized with the model's tokenizer) and returns its id.
  // Invalid parameters and requests that can never fit are rejected here, before scheduling.
  Result<int64_t> Submit(std::vector<int32_t> prompt, const SamplingParams& params,
                         OutputCallback cb, int32_t priority = 0);
  Result<int64_t> SubmitText(const std::string& prompt, const SamplingParams& params,
                             OutputCallback cb, int32_t priority = 0);
  // Queues several requests at once (all validated first: one bad request queues none), so the
  // engine schedules them together from its next step, as LLM::generate does. Returns the ids
  // in order; `callbacks` has one entry per prompt.
  Result<std::vector<int64_t>> SubmitBatch(std::vector<std::vector<int32_t>> prompts,
                                           const std::vector<SamplingParams>& params,
                                           std::vector<OutputCallback> callbacks);
  // Stops a request in any state and frees its blocks; its callback gets a final "abort" output.
  void Abort(int64_t request_id);
  // The counters as the engine thread last refreshed them (after each step): a request whose
  // final output came in the step still running is not counted yet.
  EngineStats Stats() const;
  // The counters once the step running now (if any) has ended, so everything already delivered
  // to a callback is counted (an idle engine wakes for it). kUnavailable when no answer comes
  // within timeout_ms (a long step) or on shutdown.
  Result<EngineStats> CurrentStats(int timeout_ms = 2000) const;
  // The KV cache as an inspector draws it (kvforge/kv_snapshot.h), taken by the engine thread
  // between two steps (an idle engine wakes for it); at most max_prefix_entries prefix cache
  // entries, and in *stats (when given) the engine's counters at that same moment. kUnavailable
  // when no answer comes within timeout_ms (a long step) or on shutdown.
  Result<KvSnapshot> KvCacheSnapshot(size_t max_prefix_entries = 2000, int timeout_ms = 2000,
                                     EngineStats* stats = nullptr) const;
  Result<std::vector<int32_t>> Tokenize(const std::string& text, bool add_special,
                                        bool parse_special) const;
  // render_special: control tokens give their text (skip_special_tokens=False).
  std::string Detokenize(const std::vector<int32_t>& ids, bool render_special = false) const;
  int64_t max_model_len() const;
  // Model facts for front ends (the HTTP server), fixed at Create; callable from any thread.
  std::string model_name() const;      // GGUF general.name; empty when the file has none
  std::string chat_template() const;   // GGUF tokenizer.chat_template (Jinja2); empty when absent
  std::string bos_text() const;        // the BOS token's text; empty when the vocabulary has none
  std::string eos_text() const;        // the EOS token's text; empty when the vocabulary has none
  int64_t vocab_size() const;          // valid token ids are 0 .. vocab_size() - 1
  const EngineConfig& config() const;  // the configuration the engine was created with

 private:
  struct Impl;
  explicit AsyncEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class LLM {
 public:
  explicit LLM(const EngineConfig& config);
  ~LLM();
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  Result<std::vector<RequestOutput>> generate(const std::vector<std::string>& prompts,
                                              const SamplingParams& params,
                                              const OutputCallback& on_output = nullptr);
  Result<std::vector<RequestOutput>> generate(const std::vector<std::vector<int32_t>>& prompts,
                                              const SamplingParams& params,
                                              const OutputCallback& on_output = nullptr);
  EngineStats stats() const;

 private:
  Status status_;
  std::unique_ptr<EngineCore> core_;
  friend EngineCore* engine::CoreOf(LLM& llm);
};

}  // namespace kvforge
