#include "run_report.h"

#include "base/strings.h"

namespace kvforge::cli {
namespace {

std::string IdsJson(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

std::string RequestOutputJson(const RequestOutput& o) {
  const CompletionOutput& c = o.outputs[0];
  const RequestMetrics& m = o.metrics;
  const double prefill_s = (m.ttft_ms - m.queue_ms) / 1000.0;
  const double decode_s = (m.e2e_ms - m.ttft_ms) / 1000.0;
  const double gen = static_cast<double>(c.token_ids.size());
  return base::StrFormat(
      "{\"prompt_tokens\":%s,\"tokens\":%s,\"text\":%s,\"finish_reason\":\"%s\",\"ttft_ms\":%.3f,"
      "\"prefill_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.2f,\"queue_ms\":%.3f,"
      "\"cached_tokens\":%lld,\"spec_draft_tokens\":%lld,\"spec_accepted_tokens\":%lld,"
      "\"spec_verify_steps\":%lld}\n",
      IdsJson(o.prompt_token_ids).c_str(), IdsJson(c.token_ids).c_str(),
      base::JsonQuote(c.text).c_str(), c.finish_reason.c_str(), m.ttft_ms,
      prefill_s > 0 ? m.prompt_tokens / prefill_s : 0.0,
      decode_s > 0 && gen > 1 ? (gen - 1) / decode_s : 0.0, m.queue_ms,
      static_cast<long long>(m.cached_tokens), static_cast<long long>(m.spec_draft_tokens),
      static_cast<long long>(m.spec_accepted_tokens), static_cast<long long>(m.spec_verify_steps));
}

std::string GenerationResultJson(const GenerationResult& r) {
  return "{\"prompt_tokens\":" + IdsJson(r.prompt_tokens) + ",\"tokens\":" + IdsJson(r.tokens) +
         ",\"text\":" + base::JsonQuote(r.text) +
         base::StrFormat(
             ",\"finish_reason\":\"%s\",\"ttft_ms\":%.3f,\"prefill_tokens_per_s\":%.2f,"
             "\"decode_tokens_per_s\":%.2f,\"kv_evicted_tokens\":%lld,\"kv_peak_tokens\":%lld,"
             "\"kv_final_tokens\":%lld,\"spec_draft_tokens\":%lld,\"spec_accepted_tokens\":%lld,"
             "\"spec_verify_steps\":%lld}\n",
             FinishReasonName(r.finish), r.ttft_ms, r.prefill_tokens_per_s, r.decode_tokens_per_s,
             (long long)r.kv_evicted_tokens, (long long)r.kv_peak_tokens,
             (long long)r.kv_final_tokens, (long long)r.spec_draft_tokens,
             (long long)r.spec_accepted_tokens, (long long)r.spec_verify_steps);
}

}  // namespace kvforge::cli
