#include "server/server_metrics.h"

#include <algorithm>
#include <string>
#include <vector>

#include "server/call.h"
#include "server/tier_metrics.h"

namespace kvforge::server {

namespace {

// Finer at the low end than vLLM's (a CPU step on a tiny model takes about a millisecond).
std::vector<double> LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,   0.25, 0.5,
          0.75,   1.0,   2.5,    5.0,   7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0};
}

// 1, 2, 5, 10, 20, 50, ... up to `max` (vLLM's token-count buckets).
std::vector<double> OneTwoFiveBuckets(int64_t max) {
  std::vector<double> out;
  for (double decade = 1;; decade *= 10)
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * decade > static_cast<double>(std::max<int64_t>(max, 1))) return out;
      out.push_back(m * decade);
    }
}

}  // namespace

struct ServerMetrics::Series {
  // kvforge_*: engine-kept values copied at Render.
  Gauge* running = nullptr;
  Gauge* waiting = nullptr;
  Gauge* swapped = nullptr;
  Gauge* kv_usage = nullptr;
  Gauge* shared_blocks = nullptr;
  Gauge* preemptions = nullptr;
  Gauge* itl_limited_steps = nullptr;
  Gauge* prefix_queries = nullptr;
  Gauge* prefix_hits = nullptr;
  Gauge* prefix_evictions = nullptr;
  Gauge* prefix_blocks = nullptr;
  Gauge* spec_drafts = nullptr;
  Gauge* spec_draft_tokens = nullptr;
  Gauge* spec_accepted_tokens = nullptr;
  // kvforge_*: counted here.
  Counter* prompt_tokens = nullptr;
  Counter* generation_tokens = nullptr;
  Counter* aborted = nullptr;
  Counter* rejected = nullptr;
  LabeledCounter* http_requests = nullptr;
  Histogram* ttft = nullptr;
  Histogram* itl = nullptr;
  Histogram* e2e = nullptr;
  Histogram* queue_time = nullptr;

  // vllm:*, all labelled model_name.
  Gauge* v_running = nullptr;
  Gauge* v_waiting = nullptr;
  Gauge* v_swapped = nullptr;
  Gauge* v_kv_usage = nullptr;
  Gauge* v_cache_info = nullptr;
  Gauge* v_preemptions = nullptr;
  Gauge* v_prefix_queries = nullptr;
  Gauge* v_prefix_hits = nullptr;
  Gauge* v_spec_drafts = nullptr;
  Gauge* v_spec_draft_tokens = nullptr;
  Gauge* v_spec_accepted_tokens = nullptr;
  Counter* v_prompt_tokens = nullptr;
  Counter* v_generation_tokens = nullptr;
  LabeledCounter* v_success = nullptr;
  Histogram* v_ttft = nullptr;
  Histogram* v_itl = nullptr;
  Histogram* v_tpot = nullptr;
  Histogram* v_e2e = nullptr;
  Histogram* v_queue = nullptr;
  Histogram* v_inference = nullptr;
  Histogram* v_prefill = nullptr;
  Histogram* v_decode = nullptr;
  Histogram* v_prompt_len = nullptr;
  Histogram* v_generation_len = nullptr;
  Histogram* v_max_generation_len = nullptr;
  Histogram* v_params_n = nullptr;
  Histogram* v_params_max_tokens = nullptr;
};

ServerMetrics::ServerMetrics(const ServedModelInfo& info)
    : info_(info), model_label_(EscapeLabelValue(info.model_name)), s_(std::make_unique<Series>()) {
  MetricsRegistry& r = reg_;
  Series& s = *s_;
  s.running = r.AddGauge("kvforge_requests_running", "Sequences in the running batch.");
  s.waiting = r.AddGauge("kvforge_requests_waiting", "Requests waiting to be scheduled.");
  s.swapped = r.AddGauge("kvforge_requests_swapped", "Sequences swapped out to host memory.");
  s.kv_usage = r.AddGauge("kvforge_kv_cache_usage", "Fraction of KV cache blocks in use (0-1).");
  s.shared_blocks =
      r.AddGauge("kvforge_kv_cache_shared_blocks",
                 "KV blocks in use by more than one sequence (prefix sharing, n > 1).");
  s.prefix_queries = r.AddGauge("kvforge_prefix_cache_queries_total",
                                "Prompt tokens looked up in the prefix cache.", true);
  s.prefix_hits = r.AddGauge("kvforge_prefix_cache_hits_total",
                             "Prompt tokens found in the prefix cache.", true);
  s.prefix_evictions = r.AddGauge("kvforge_prefix_cache_evicted_blocks_total",
                                  "Cached KV blocks whose content was dropped to make room.", true);
  s.prefix_blocks =
      r.AddGauge("kvforge_prefix_cache_blocks", "KV blocks holding cached prefix content.");
  s.spec_drafts = r.AddGauge("kvforge_spec_decode_num_drafts_total",
                             "Speculative decoding: verify chunks run (one per sequence and "
                             "step that drafted).",
                             true);
  s.spec_draft_tokens = r.AddGauge("kvforge_spec_decode_num_draft_tokens_total",
                                   "Speculative decoding: drafted tokens verified.", true);
  s.spec_accepted_tokens = r.AddGauge("kvforge_spec_decode_num_accepted_tokens_total",
                                      "Speculative decoding: drafted tokens kept.", true);
  s.preemptions =
      r.AddGauge("kvforge_preemptions_total", "Sequences preempted by the scheduler.", true);
  s.itl_limited_steps =
      r.AddGauge("kvforge_itl_limited_steps_total",
                 "Steps whose prefill decode-priority chunking (--max-itl-ms) cut.", true);
  s.prompt_tokens =
      r.AddCounter("kvforge_prompt_tokens_total", "Prompt tokens of requests that were scheduled.");
  s.generation_tokens = r.AddCounter("kvforge_generation_tokens_total", "Tokens generated.");
  s.aborted =
      r.AddCounter("kvforge_requests_aborted_total",
                   "Engine requests aborted (client disconnect, shutdown, engine rejection).");
  s.rejected =
      r.AddCounter("kvforge_requests_rejected_total", "Requests refused with 429 (queue full).");
  s.http_requests =
      r.AddLabeledCounter("kvforge_http_requests_total", "HTTP responses by status code.", "code");
  s.ttft = r.AddHistogram("kvforge_time_to_first_token_seconds",
                          "Arrival to first generated token.", LatencyBuckets());
  s.itl = r.AddHistogram("kvforge_inter_token_latency_seconds",
                         "Time between consecutive tokens of a sequence.", LatencyBuckets());
  s.e2e = r.AddHistogram("kvforge_e2e_request_latency_seconds", "Arrival to the last token.",
                         LatencyBuckets());
  s.queue_time = r.AddHistogram("kvforge_request_queue_time_seconds", "Arrival to first scheduled.",
                                LatencyBuckets());

  const MetricLabels model = {{"model_name", info.model_name}};
  s.v_running = r.AddGauge("vllm:num_requests_running",
                           "Number of requests in model execution "
                           "batches.",
                           false, model);
  s.v_waiting = r.AddGauge("vllm:num_requests_waiting",
                           "Number of requests waiting to be processed.", false, model);
  s.v_swapped = r.AddGauge("vllm:num_requests_swapped",
                           "Number of sequences swapped out to host memory.", false, model);
  s.v_kv_usage = r.AddGauge("vllm:kv_cache_usage_perc",
                            "KV-cache usage. 1 means 100 percent usage.", false, model);
  MetricLabels cache = model;
  cache.emplace_back("block_size", std::to_string(info.block_tokens));
  cache.emplace_back("num_gpu_blocks", std::to_string(info.num_blocks));
  cache.emplace_back("cache_dtype", info.cache_dtype);
  s.v_cache_info = r.AddGauge("vllm:cache_config_info",
                              "Information of the KV cache configuration (value 1).", false, cache);
  s.v_cache_info->Set(1);
  s.v_preemptions = r.AddGauge("vllm:num_preemptions_total",
                               "Cumulative number of preemptions from the engine.", true, model);
  s.v_prompt_tokens =
      r.AddCounter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", model);
  s.v_generation_tokens =
      r.AddCounter("vllm:generation_tokens_total", "Number of generation tokens processed.", model);
  s.v_success =
      r.AddLabeledCounter("vllm:request_success_total", "Count of successfully processed requests.",
                          "finished_reason", model);
  s.v_prefix_queries =
      r.AddGauge("vllm:prefix_cache_queries_total",
                 "Prefix cache queries, in terms of number of queried tokens.", true, model);
  s.v_prefix_hits =
      r.AddGauge("vllm:prefix_cache_hits_total",
                 "Prefix cache hits, in terms of number of cached tokens.", true, model);
  s.v_spec_drafts = r.AddGauge("vllm:spec_decode_num_drafts_total",
                               "Number of spec decoding "
                               "drafts.",
                               true, model);
  s.v_spec_draft_tokens =
      r.AddGauge("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", true, model);
  s.v_spec_accepted_tokens = r.AddGauge("vllm:spec_decode_num_accepted_tokens_total",
                                        "Number of accepted tokens.", true, model);
  s.v_ttft =
      r.AddHistogram("vllm:time_to_first_token_seconds",
                     "Histogram of time to first token in seconds.", LatencyBuckets(), model);
  s.v_itl = r.AddHistogram("vllm:inter_token_latency_seconds",
                           "Histogram of inter-token latency in seconds.", LatencyBuckets(), model);
  s.v_tpot = r.AddHistogram("vllm:request_time_per_output_token_seconds",
                            "Histogram of time_per_output_token_seconds per request.",
                            LatencyBuckets(), model);
  s.v_e2e = r.AddHistogram("vllm:e2e_request_latency_seconds",
                           "Histogram of e2e request latency in seconds.", LatencyBuckets(), model);
  s.v_queue = r.AddHistogram("vllm:request_queue_time_seconds",
                             "Histogram of time spent in WAITING phase for request.",
                             LatencyBuckets(), model);
  s.v_inference = r.AddHistogram("vllm:request_inference_time_seconds",
                                 "Histogram of time spent in RUNNING phase for request.",
                                 LatencyBuckets(), model);
  s.v_prefill = r.AddHistogram("vllm:request_prefill_time_seconds",
                               "Histogram of time spent in PREFILL phase for request.",
                               LatencyBuckets(), model);
  s.v_decode = r.AddHistogram("vllm:request_decode_time_seconds",
                              "Histogram of time spent in DECODE phase for request.",
                              LatencyBuckets(), model);
  const std::vector<double> lengths = OneTwoFiveBuckets(info.max_model_len);
  s.v_prompt_len = r.AddHistogram("vllm:request_prompt_tokens",
                                  "Number of prefill tokens processed.", lengths, model);
  s.v_generation_len = r.AddHistogram("vllm:request_generation_tokens",
                                      "Number of generation tokens processed.", lengths, model);
  s.v_max_generation_len =
      r.AddHistogram("vllm:request_max_num_generation_tokens",
                     "Histogram of maximum number of requested generation tokens.", lengths, model);
  s.v_params_n = r.AddHistogram("vllm:request_params_n", "Histogram of the n request parameter.",
                                {1, 2, 5, 10, 20}, model);
  s.v_params_max_tokens =
      r.AddHistogram("vllm:request_params_max_tokens",
                     "Histogram of the max_tokens request parameter.", lengths, model);
}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::OnGenerated(int64_t tokens) {
  s_->generation_tokens->Inc(static_cast<double>(tokens));
  s_->v_generation_tokens->Inc(static_cast<double>(tokens));
}

void ServerMetrics::OnPromptScheduled(int64_t tokens) {
  s_->prompt_tokens->Inc(static_cast<double>(tokens));
  s_->v_prompt_tokens->Inc(static_cast<double>(tokens));
}

void ServerMetrics::OnFinished(const RequestOutput& o, const RequestShape& shape) {
  Series& s = *s_;
  for (const CompletionOutput& c : o.outputs) s.v_success->Inc(c.finish_reason);
  if (o.outputs.empty()) s.v_success->Inc("abort");  // aborted before any sequence existed
  if (AnyAborted(o)) {
    s.aborted->Inc();
    return;
  }
  const RequestMetrics& m = o.metrics;
  const double queue = m.queue_ms / 1000.0, ttft = m.ttft_ms / 1000.0, e2e = m.e2e_ms / 1000.0;
  s.ttft->Observe(ttft);
  s.e2e->Observe(e2e);
  s.queue_time->Observe(queue);
  for (double v : m.itl_ms) {
    s.itl->Observe(v / 1000.0);
    s.v_itl->Observe(v / 1000.0);
  }
  s.v_ttft->Observe(ttft);
  s.v_e2e->Observe(e2e);
  s.v_queue->Observe(queue);
  // vLLM's phases: queued, then running = prefill (to the first token) + decode (the rest).
  s.v_inference->Observe(std::max(0.0, e2e - queue));
  s.v_prefill->Observe(std::max(0.0, ttft - queue));
  s.v_decode->Observe(std::max(0.0, e2e - ttft));
  int64_t longest = 0;
  for (const CompletionOutput& c : o.outputs)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(c.token_ids.size()));
  if (longest > 1) s.v_tpot->Observe(std::max(0.0, e2e - ttft) / static_cast<double>(longest - 1));
  s.v_prompt_len->Observe(static_cast<double>(o.prompt_token_ids.size()));
  s.v_generation_len->Observe(static_cast<double>(m.generated_tokens));
  s.v_max_generation_len->Observe(static_cast<double>(shape.max_tokens));
  s.v_params_n->Observe(shape.n);
  s.v_params_max_tokens->Observe(shape.max_tokens);
}

void ServerMetrics::OnRejected() { s_->rejected->Inc(); }

void ServerMetrics::OnHttpStatus(int code) { s_->http_requests->Inc(std::to_string(code)); }

Histogram* ServerMetrics::ttft() const { return s_->ttft; }
Histogram* ServerMetrics::itl() const { return s_->itl; }

namespace {

// kvforge_kv_evicted_tokens_total / kvforge_kv_compactions_total, one sample per policy used.
std::string RenderPolicyMetrics(const EngineStats& st) {
  std::string out =
      "# HELP kvforge_kv_evicted_tokens_total Tokens dropped from sequences' KV by the eviction "
      "policy.\n# TYPE kvforge_kv_evicted_tokens_total counter\n";
  for (const auto& p : st.kv_policies)
    out += "kvforge_kv_evicted_tokens_total{policy=\"" + p.policy + "\"} " +
           std::to_string(p.evicted_tokens) + "\n";
  out +=
      "# HELP kvforge_kv_compactions_total KV compactions applied by the eviction policy.\n"
      "# TYPE kvforge_kv_compactions_total counter\n";
  for (const auto& p : st.kv_policies)
    out += "kvforge_kv_compactions_total{policy=\"" + p.policy + "\"} " +
           std::to_string(p.compactions) + "\n";
  return out;
}

// vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}: drafts kept at draft position
// i.
std::string RenderAcceptedPerPosition(const EngineStats& st, const std::string& model) {
  std::string out =
      "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft's "
      "position.\n"
      "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n";
  for (size_t i = 0; i < st.spec_accepted_per_pos.size(); ++i)
    out += "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(i) +
           "\",model_name=\"" + model + "\"} " + std::to_string(st.spec_accepted_per_pos[i]) + "\n";
  return out;
}

}  // namespace

std::string ServerMetrics::Render(const EngineStats& st) {
  Series& s = *s_;
  auto both = [](Gauge* a, Gauge* b, double v) {
    a->Set(v);
    if (b != nullptr) b->Set(v);
  };
  both(s.running, s.v_running, static_cast<double>(st.num_running));
  both(s.waiting, s.v_waiting, static_cast<double>(st.num_waiting));
  both(s.swapped, s.v_swapped, static_cast<double>(st.num_swapped));
  both(s.kv_usage, s.v_kv_usage, st.kv_usage);
  both(s.shared_blocks, nullptr, static_cast<double>(st.kv_shared_blocks));
  both(s.preemptions, s.v_preemptions, static_cast<double>(st.num_preemptions));
  both(s.itl_limited_steps, nullptr, static_cast<double>(st.itl_limited_steps));
  both(s.prefix_queries, s.v_prefix_queries, static_cast<double>(st.prefix_cache_query_tokens));
  both(s.prefix_hits, s.v_prefix_hits, static_cast<double>(st.prefix_cache_hit_tokens));
  both(s.prefix_evictions, nullptr, static_cast<double>(st.prefix_cache_evicted_blocks));
  both(s.prefix_blocks, nullptr, static_cast<double>(st.prefix_cache_blocks));
  both(s.spec_drafts, s.v_spec_drafts, static_cast<double>(st.spec_num_drafts));
  both(s.spec_draft_tokens, s.v_spec_draft_tokens, static_cast<double>(st.spec_draft_tokens));
  both(s.spec_accepted_tokens, s.v_spec_accepted_tokens,
       static_cast<double>(st.spec_accepted_tokens));
  return reg_.Render() + RenderAcceptedPerPosition(st, model_label_) + RenderPolicyMetrics(st) +
         RenderTierMetrics(st);
}

}  // namespace kvforge::server
