// The server's series under both names: vLLM's carry model_name, and the per-request histograms
// follow vLLM's phases (queue, prefill = first token - scheduled, decode = last - first token).
#include "server/server_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace kvforge::server {
namespace {

ServedModelInfo Info() {
  ServedModelInfo info;
  info.model_name = "tiny";
  info.max_model_len = 100;
  info.block_tokens = 16;
  info.num_blocks = 64;
  info.cache_dtype = "f16";
  return info;
}

RequestOutput Finished(const std::string& reason, int generated) {
  RequestOutput o;
  o.finished = true;
  o.prompt_token_ids = {1, 2, 3};
  CompletionOutput c;
  c.finish_reason = reason;
  c.token_ids.assign(static_cast<size_t>(generated), 7);
  o.outputs.push_back(c);
  o.metrics.queue_ms = 250;  // binary fractions: the sums below compare exactly
  o.metrics.ttft_ms = 750;
  o.metrics.e2e_ms = 1750;
  o.metrics.generated_tokens = generated;
  o.metrics.itl_ms.assign(static_cast<size_t>(generated - 1), 100.0);
  return o;
}

bool Has(const std::string& page, const std::string& line) {
  return page.find(line + "\n") != std::string::npos;
}

TEST(ServerMetricsTest, VllmNamesCarryModelName) {
  ServerMetrics m(Info());
  m.OnPromptScheduled(3);
  m.OnGenerated(11);
  m.OnFinished(Finished("stop", 11), {1, 20});
  m.OnFinished(Finished("abort", 1), {2, 5});
  EngineStats st;
  st.num_running = 2;
  st.kv_usage = 0.5;
  st.prefix_cache_query_tokens = 40;
  st.prefix_cache_hit_tokens = 16;
  st.num_preemptions = 3;
  st.spec_draft_tokens = 8;
  st.spec_accepted_tokens = 5;
  st.kv_shared_blocks = 4;
  st.spec_accepted_per_pos = {3, 2};
  st.kv_policies.push_back({"h2o", 30, 2});
  const std::string page = m.Render(st);
  const std::string l = "{model_name=\"tiny\"}";
  EXPECT_TRUE(Has(page, "# TYPE vllm:num_requests_running gauge"));
  EXPECT_TRUE(Has(page, "vllm:num_requests_running" + l + " 2"));
  EXPECT_TRUE(Has(page, "vllm:kv_cache_usage_perc" + l + " 0.5"));
  EXPECT_TRUE(Has(page, "# TYPE vllm:prompt_tokens_total counter"));
  EXPECT_TRUE(Has(page, "vllm:prompt_tokens_total" + l + " 3"));
  EXPECT_TRUE(Has(page, "vllm:generation_tokens_total" + l + " 11"));
  EXPECT_TRUE(Has(page, "vllm:prefix_cache_queries_total" + l + " 40"));
  EXPECT_TRUE(Has(page, "vllm:prefix_cache_hits_total" + l + " 16"));
  EXPECT_TRUE(Has(page, "vllm:num_preemptions_total" + l + " 3"));
  EXPECT_TRUE(Has(page, "vllm:spec_decode_num_accepted_tokens_total" + l + " 5"));
  EXPECT_TRUE(
      Has(page, "vllm:request_success_total{finished_reason=\"stop\",model_name=\"tiny\"} 1"));
  EXPECT_TRUE(
      Has(page, "vllm:request_success_total{finished_reason=\"abort\",model_name=\"tiny\"} 1"));
  EXPECT_TRUE(Has(page,
                  "vllm:cache_config_info{model_name=\"tiny\",block_size=\"16\","
                  "num_gpu_blocks=\"64\",cache_dtype=\"f16\"} 1"));
  EXPECT_TRUE(Has(page,
                  "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\","
                  "model_name=\"tiny\"} 2"));
  // The aborted request is counted by reason only, not in the latency histograms.
  EXPECT_TRUE(Has(page, "vllm:e2e_request_latency_seconds_count" + l + " 1"));
  EXPECT_TRUE(Has(page, "vllm:e2e_request_latency_seconds_sum" + l + " 1.75"));
  EXPECT_TRUE(Has(page, "vllm:request_queue_time_seconds_sum" + l + " 0.25"));
  EXPECT_TRUE(Has(page, "vllm:request_prefill_time_seconds_sum" + l + " 0.5"));
  EXPECT_TRUE(Has(page, "vllm:request_decode_time_seconds_sum" + l + " 1"));
  EXPECT_TRUE(Has(page, "vllm:request_inference_time_seconds_sum" + l + " 1.5"));
  EXPECT_TRUE(Has(page, "vllm:request_time_per_output_token_seconds_sum" + l + " 0.1"));
  EXPECT_TRUE(Has(page, "vllm:inter_token_latency_seconds_count" + l + " 10"));
  EXPECT_TRUE(Has(page, "vllm:request_generation_tokens_sum" + l + " 11"));
  EXPECT_TRUE(Has(page, "vllm:request_prompt_tokens_bucket{le=\"5\",model_name=\"tiny\"} 1"));
  EXPECT_TRUE(Has(page, "vllm:request_params_max_tokens_sum" + l + " 20"));
  EXPECT_TRUE(Has(page, "vllm:request_max_num_generation_tokens_sum" + l + " 20"));
  // Token-count buckets stop at max_model_len.
  EXPECT_TRUE(Has(page, "vllm:request_prompt_tokens_bucket{le=\"100\",model_name=\"tiny\"} 1"));
  EXPECT_EQ(page.find("vllm:request_prompt_tokens_bucket{le=\"200\""), std::string::npos);
  // kvforge's own names, unlabelled, alongside.
  EXPECT_TRUE(Has(page, "kvforge_requests_running 2"));
  EXPECT_TRUE(Has(page, "kvforge_requests_aborted_total 1"));
  EXPECT_TRUE(Has(page, "kvforge_kv_cache_shared_blocks 4"));
  EXPECT_TRUE(Has(page, "kvforge_kv_evicted_tokens_total{policy=\"h2o\"} 30"));
  EXPECT_TRUE(Has(page, "kvforge_kv_compactions_total{policy=\"h2o\"} 2"));
}

}  // namespace
}  // namespace kvforge::server
