// kvforge bench — throughput (offline, synthetic workloads) and latency benchmarks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/strings.h"
#include "bench_common.h"
#include "bench_workload.h"
#include "commands.h"
#include "engine/llm_internal.h"
#include "engine_flags.h"
#include "flags.h"
#include "kvforge/config_names.h"
#include "kvforge/llm.h"

namespace kvforge::cli {
namespace {

using base::StrFormat;

struct ThroughputResult {
  std::string mode;
  int64_t requests = 0;
  double duration_s = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
  Percentiles ttft, itl, e2e;
  int64_t preemptions = 0;
  double kv_utilization = 0;
  bool prefix_caching = false;
  double prefix_hit_rate = 0;  // prompt tokens found in the prefix cache / prompt tokens asked
  int64_t prefix_evicted_blocks = 0;
  int64_t steps = 0, prefix_deferrals = 0, itl_limited_steps = 0;
  int64_t max_running = 0;  // most sequences in one step
  int64_t kv_evicted_tokens = 0;
  // KV offload (all zero without tiers): prompt tokens loaded from a tier instead of computed,
  // and each tier's counters.
  int64_t offload_loaded_tokens = 0, offload_rejected_chunks = 0, offload_dropped_writes = 0;
  std::vector<KvTierStats> tiers;
  // Speculative decoding (zeros when off): verify chunks, tokens drafted, drafts kept.
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
  double output_tps() const { return output_tokens / duration_s; }
  std::string TiersJson() const {
    std::string out = "[";
    for (size_t i = 0; i < tiers.size(); ++i) {
      const KvTierStats& t = tiers[i];
      const int64_t asked = t.hits + t.misses;
      out += StrFormat(
          "%s{\"name\":\"%s\",\"hits\":%lld,\"misses\":%lld,\"hit_rate\":%.4f,\"puts\":%lld,"
          "\"evictions\":%lld,\"errors\":%lld,\"used_bytes\":%llu,\"bytes_in\":%llu,"
          "\"bytes_out\":%llu,\"get_mean_ms\":%.3f}",
          i ? "," : "", t.name.c_str(), (long long)t.hits, (long long)t.misses,
          asked ? static_cast<double>(t.hits) / static_cast<double>(asked) : 0.0, (long long)t.puts,
          (long long)t.evictions, (long long)t.errors, (unsigned long long)t.used_bytes,
          (unsigned long long)t.bytes_in, (unsigned long long)t.bytes_out,
          t.get_latency.count ? 1e3 * t.get_latency.sum_seconds / t.get_latency.count : 0.0);
    }
    return out + "]";
  }
  // One line per engine with tiers: where the prompt tokens came from.
  std::string TiersText() const {
    if (tiers.empty()) return "";
    std::string out = StrFormat(
        "%-10s kv offload: %lld prompt tokens loaded (%.1f%% of prompt tokens), %lld refused "
        "chunks, %lld dropped writes;",
        mode.c_str(), (long long)offload_loaded_tokens,
        prompt_tokens ? 100.0 * static_cast<double>(offload_loaded_tokens) /
                            static_cast<double>(prompt_tokens)
                      : 0.0,
        (long long)offload_rejected_chunks, (long long)offload_dropped_writes);
    for (const KvTierStats& t : tiers) {
      const int64_t asked = t.hits + t.misses;
      out += StrFormat(
          " %s %lld/%lld hits (%.1f%%)", t.name.c_str(), (long long)t.hits, (long long)asked,
          asked ? 100.0 * static_cast<double>(t.hits) / static_cast<double>(asked) : 0.0);
    }
    return out + "\n";
  }
  std::string ToJson() const {
    return StrFormat(
        "{\"requests\":%lld,\"duration_s\":%.3f,\"requests_per_s\":%.3f,\"output_tokens_per_s\":%."
        "2f,"
        "\"total_tokens_per_s\":%.2f,\"prompt_tokens\":%lld,\"output_tokens\":%lld,"
        "\"ttft_ms\":%s,\"itl_ms\":%s,\"e2e_ms\":%s,\"preemptions\":%lld,\"kv_utilization\":%.4f,"
        "\"prefix_cache\":\"%s\",\"prefix_hit_rate\":%.4f,\"cached_tokens\":%lld,"
        "\"prefix_evicted_blocks\":%lld,\"steps\":%lld,\"prefix_deferrals\":%lld,"
        "\"itl_limited_steps\":%lld,\"max_running\":%lld,\"kv_evicted_tokens\":%lld,\"kv_offload_"
        "loaded_tokens\":%lld,"
        "\"kv_offload_rejected_chunks\":%lld,\"kv_offload_dropped_writes\":%lld,"
        "\"kv_tiers\":%s,\"spec_num_drafts\":%lld,\"spec_draft_tokens\":%lld,"
        "\"spec_accepted_tokens\":%lld,\"spec_acceptance_rate\":%.4f,"
        "\"spec_mean_accepted_per_draft\":%.3f}",
        (long long)requests, duration_s, requests / duration_s, output_tokens / duration_s,
        (prompt_tokens + output_tokens) / duration_s, (long long)prompt_tokens,
        (long long)output_tokens, ttft.ToJson().c_str(), itl.ToJson().c_str(), e2e.ToJson().c_str(),
        (long long)preemptions, kv_utilization, prefix_caching ? "on" : "off", prefix_hit_rate,
        (long long)cached_tokens, (long long)prefix_evicted_blocks, (long long)steps,
        (long long)prefix_deferrals, (long long)itl_limited_steps, (long long)max_running,
        (long long)kv_evicted_tokens, (long long)offload_loaded_tokens,
        (long long)offload_rejected_chunks, (long long)offload_dropped_writes, TiersJson().c_str(),
        (long long)spec_drafts, (long long)spec_draft_tokens, (long long)spec_accepted_tokens,
        spec_draft_tokens ? static_cast<double>(spec_accepted_tokens) / spec_draft_tokens : 0.0,
        spec_drafts ? static_cast<double>(spec_accepted_tokens) / spec_drafts : 0.0);
  }
};

// How a run splits prompts across steps (--compare-chunking); kConfig keeps the flags' setting.
enum class Chunking { kConfig, kOff, kTokenBudget, kDecodePriority };

struct RunSpec {
  std::string label;     // printed / JSON key
  std::string batching;  // static | continuous ("": as the engine flags say)
  std::string prefix;    // off | hash | radix ("": as the engine flags say)
  bool full_kv = false;  // ignore the configured KV policy (the baseline of --compare-kv-policy)
  Chunking chunking = Chunking::kConfig;
};

void ApplyChunking(Chunking c, double itl_target_ms, EngineConfig* cfg) {
  if (c == Chunking::kConfig) return;
  cfg->chunked_prefill = c != Chunking::kOff;
  cfg->max_itl_ms = c == Chunking::kDecodePriority ? itl_target_ms : 0;
}

Result<ThroughputResult> RunThroughput(const EngineConfig& base_cfg, const RunSpec& spec,
                                       const Workload& w, bool progress) {
  EngineConfig cfg = base_cfg;
  if (!spec.batching.empty()) KVF_RETURN_IF_ERROR(SetConfigField(&cfg, "batching", spec.batching));
  if (!spec.prefix.empty()) {
    cfg.enable_prefix_caching = spec.prefix != "off";
    if (cfg.enable_prefix_caching)
      KVF_RETURN_IF_ERROR(SetConfigField(&cfg, "prefix_cache_mode", spec.prefix));
  }
  if (spec.full_kv) cfg.kv_policy = KvPolicy{};
  ApplyChunking(spec.chunking, base_cfg.max_itl_ms, &cfg);
  LLM llm(cfg);
  if (!llm.ok()) return llm.status();
  // One request per turn, each with its own output length, submitted through the core directly;
  // a conversation's next turn is queued when its previous turn finishes.
  EngineCore* core = engine::CoreOf(llm);
  ThroughputResult r;
  r.mode = spec.label;
  r.requests = w.num_requests();
  std::vector<double> ttft, itl, e2e;
  int64_t done = 0;
  ProgressBar bar(progress, "bench " + spec.label, r.requests);
  struct Next {
    size_t conv;
    size_t turn;
    std::vector<int32_t> prompt;
  };
  std::vector<Next> queued;
  Status cb_status = Status::Ok();
  std::function<Status(Next)> submit = [&](Next n) -> Status {
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = w.conversations[n.conv][n.turn].output_len;
    std::vector<int32_t> prompt = n.prompt;
    auto id = core->AddRequest(
        std::move(prompt), sp,
        [&, n](const RequestOutput& out) {
          if (!out.finished) return;
          ++done;
          bar.Update(done);
          ttft.push_back(out.metrics.ttft_ms);
          e2e.push_back(out.metrics.e2e_ms);
          itl.insert(itl.end(), out.metrics.itl_ms.begin(), out.metrics.itl_ms.end());
          r.prompt_tokens += out.metrics.prompt_tokens;
          r.output_tokens += out.metrics.generated_tokens;
          r.cached_tokens += out.metrics.cached_tokens;
          r.preemptions += out.metrics.num_preemptions;
          r.kv_evicted_tokens += out.metrics.kv_evicted_tokens;
          if (n.turn + 1 < w.conversations[n.conv].size()) {
            Next next{n.conv, n.turn + 1, n.prompt};
            const auto& gen = out.outputs.at(0).token_ids;
            next.prompt.insert(next.prompt.end(), gen.begin(), gen.end());
            const auto& user = w.conversations[n.conv][n.turn + 1].user;
            next.prompt.insert(next.prompt.end(), user.begin(), user.end());
            queued.push_back(std::move(next));
          }
        },
        0);
    return id.ok() ? Status::Ok() : id.error();
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t c = 0; c < w.conversations.size(); ++c)
    KVF_RETURN_IF_ERROR(submit({c, 0, w.conversations[c][0].user}));
  while (core->HasWork() || !queued.empty()) {
    if (core->HasWork()) {
      KVF_RETURN_IF_ERROR(core->Step());
      r.max_running = std::max(r.max_running, core->Stats().num_running);
    }
    std::vector<Next> now;
    now.swap(queued);
    for (auto& n : now) KVF_RETURN_IF_ERROR(submit(std::move(n)));
  }
  r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bar.Finish();
  r.ttft = Percentiles::Of(ttft);
  r.itl = Percentiles::Of(itl);
  r.e2e = Percentiles::Of(e2e);
  r.kv_utilization = core->MeanKvUtilization();
  const EngineStats st = core->Stats();
  r.prefix_caching = st.prefix_caching;
  r.prefix_hit_rate = st.prefix_cache_query_tokens > 0
                          ? static_cast<double>(st.prefix_cache_hit_tokens) /
                                static_cast<double>(st.prefix_cache_query_tokens)
                          : 0.0;
  r.prefix_evicted_blocks = st.prefix_cache_evicted_blocks;
  r.steps = st.steps;
  r.prefix_deferrals = st.prefix_deferrals;
  r.itl_limited_steps = st.itl_limited_steps;
  r.offload_loaded_tokens = st.kv_offload_loaded_tokens;
  r.offload_rejected_chunks = st.kv_offload_rejected_chunks;
  r.offload_dropped_writes = st.kv_offload_dropped_writes;
  r.tiers = st.kv_tiers;
  r.spec_drafts = st.spec_num_drafts;
  r.spec_draft_tokens = st.spec_draft_tokens;
  r.spec_accepted_tokens = st.spec_accepted_tokens;
  return r;
}

// --compare-chunking: runs are {unchunked, chunked, decode-priority} twice, mirrored; each mode
// is summarized by the mean of its two runs, and compared with the token-budget chunking of today.
void PrintChunkingComparison(const std::vector<ThroughputResult>& runs, double max_itl_ms,
                             bool json) {
  struct Summary {
    std::string mode;
    double tps = 0, ttft_mean = 0, ttft_p90 = 0, itl_p50 = 0, itl_p90 = 0, itl_p99 = 0;
    int64_t itl_limited_steps = 0;
  };
  std::vector<Summary> modes;
  for (size_t i = 0; i < 3; ++i) {
    const ThroughputResult& a = runs[i];
    const ThroughputResult& b = runs[5 - i];
    modes.push_back({a.mode, (a.output_tps() + b.output_tps()) / 2, (a.ttft.mean + b.ttft.mean) / 2,
                     (a.ttft.p90 + b.ttft.p90) / 2, (a.itl.p50 + b.itl.p50) / 2,
                     (a.itl.p90 + b.itl.p90) / 2, (a.itl.p99 + b.itl.p99) / 2,
                     a.itl_limited_steps + b.itl_limited_steps});
  }
  const Summary& base = modes[1];  // chunked by the token budget alone: today's default
  if (json) {
    std::string out = StrFormat("{\"max_itl_ms\":%g,\"runs\":[", max_itl_ms);
    for (size_t i = 0; i < runs.size(); ++i)
      out += StrFormat("%s{\"mode\":\"%s\",\"result\":%s}", i ? "," : "", runs[i].mode.c_str(),
                       runs[i].ToJson().c_str());
    out += "],\"modes\":{";
    for (size_t i = 0; i < modes.size(); ++i) {
      const Summary& m = modes[i];
      out += StrFormat(
          "%s\"%s\":{\"output_tokens_per_s\":%.2f,\"ttft_mean_ms\":%.1f,\"ttft_p90_ms\":%.1f,"
          "\"itl_p50_ms\":%.2f,\"itl_p90_ms\":%.2f,\"itl_p99_ms\":%.2f,\"itl_limited_steps\":%lld,"
          "\"ratio_output_tokens_per_s\":%.3f,\"ratio_itl_p99\":%.3f}",
          i ? "," : "", m.mode.c_str(), m.tps, m.ttft_mean, m.ttft_p90, m.itl_p50, m.itl_p90,
          m.itl_p99, (long long)m.itl_limited_steps, m.tps / base.tps, m.itl_p99 / base.itl_p99);
    }
    std::printf("%s}}\n", out.c_str());
    return;
  }
  for (const ThroughputResult& r : runs)
    std::printf("%-16s %.1f output tok/s; TTFT mean %.0f ms; ITL p50/p90/p99 %.1f/%.1f/%.1f ms\n",
                r.mode.c_str(), r.output_tps(), r.ttft.mean, r.itl.p50, r.itl.p90, r.itl.p99);
  std::printf("mean of two runs (decode-priority target %g ms):\n", max_itl_ms);
  for (const Summary& m : modes)
    std::printf(
        "%-16s %.1f output tok/s (%.2fx chunked); TTFT mean %.0f ms, p90 %.0f ms; ITL "
        "p50/p90/p99 %.1f/%.1f/%.1f ms (p99 %.2fx chunked); %lld steps cut\n",
        m.mode.c_str(), m.tps, m.tps / base.tps, m.ttft_mean, m.ttft_p90, m.itl_p50, m.itl_p90,
        m.itl_p99, m.itl_p99 / base.itl_p99, (long long)m.itl_limited_steps);
}

int ThroughputMain(const Args& args) {
  std::string workload = "sharegpt", plot;
  int64_t num_prompts = 64, input_len = 128, output_len = 128, seed = 1, prefix_len = 400,
          turns = 4;
  bool json = false, compare = false, no_progress = false, compare_kv = false,
       compare_chunking = false, prefix_all = false;
  EngineConfig cfg;
  FlagParser p(
      "bench throughput",
      "Offline throughput on a seeded synthetic workload: every conversation's first request is\n"
      "submitted at t=0, later turns when the previous one finishes; the engine runs until all\n"
      "finish (greedy, ignore_eos, each request's own output length). --compare runs static and\n"
      "continuous batching on the same workload in one process; --prefix-cache all runs caching\n"
      "off, hash and radix and prints the ratios.");
  p.Section("workload");
  p.AddString("workload", &workload,
              "sharegpt (log-normal lengths) | fixed | shared-prefix | multi-turn | few-shot");
  p.AddInt("num-prompts", &num_prompts, "requests (conversations for multi-turn)");
  p.AddInt("input-len", &input_len,
           "prompt tokens (median for sharegpt; the distinct suffix / question for shared-prefix "
           "and few-shot; the first message for multi-turn)");
  p.AddInt("output-len", &output_len, "generated tokens (median for sharegpt)");
  p.AddInt("prefix-len", &prefix_len, "shared-prefix: tokens of the common prefix");
  p.AddInt("turns", &turns, "multi-turn: turns per conversation");
  p.AddInt("seed", &seed, "workload seed");
  p.AddBool("compare", &compare, "run static and continuous, print both and the ratio");
  p.AddCustom({"prefix-cache", "off|hash|radix|all",
               "prefix caching off, hash or radix; all: run the three, print the ratios", "hash",
               "", false},
              [&](const std::string& v) -> Status {
                prefix_all = v == "all";
                if (prefix_all) return Status::Ok();
                cfg.enable_prefix_caching = v != "off";
                if (!cfg.enable_prefix_caching) return Status::Ok();
                return SetConfigField(&cfg, "prefix_cache_mode", v).WithContext("--prefix-cache");
              });
  p.AddBool("compare-chunking", &compare_chunking,
            "run prefill unchunked, chunked by the token budget, and decode-priority chunked "
            "(--max-itl-ms), alternated twice; print each mode's mean and the ratios");
  p.AddBool("compare-kv-policy", &compare_kv,
            "run full KV and --kv-policy on the same workload (full, policy, full, policy), print "
            "the ratio of each mode's mean throughput and the most running sequences");
  p.AddBool("json", &json, "print a JSON summary");
  p.AddString("plot", &plot, "draw the results to FILE.png or FILE.svg with gnuplot");
  p.AddBool("no-progress", &no_progress, "no progress bar");
  AddEngineFlags(p, &cfg);
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  const double max_itl_ms = cfg.max_itl_ms;
  if (num_prompts <= 0 || input_len <= 0 || output_len <= 0 || prefix_len <= 0 || turns <= 0 ||
      (compare_chunking && (compare || compare_kv || prefix_all || max_itl_ms <= 0)) ||
      !IsWorkloadKind(workload) || (compare && prefix_all)) {
    std::fprintf(stderr, "kvforge: bad value (see --help)\n");
    return 2;
  }
  if (compare_kv && (!cfg.kv_policy.enabled() || compare || prefix_all)) {
    std::fprintf(stderr,
                 "kvforge: --compare-kv-policy needs --kv-policy, without --compare or "
                 "--prefix-cache all\n");
    return 2;
  }
  const std::string batching = ConfigName(cfg.batching);
  const std::string prefix = prefix_all ? "all" : "";
  // Model facts for the workload (vocabulary, context) come from a throwaway core.
  int64_t ctx = 0, vocab = 0;
  {
    LLM probe(cfg);
    if (!probe.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", probe.status().message().c_str());
      return 1;
    }
    ctx = engine::CoreOf(probe)->max_model_len();
    vocab = engine::CoreOf(probe)->model_config().n_vocab;
  }
  WorkloadSpec ws;
  ws.kind = workload;
  ws.num_prompts = num_prompts;
  ws.input_len = input_len;
  ws.output_len = output_len;
  ws.prefix_len = prefix_len;
  ws.turns = turns;
  ws.max_len = ctx;
  ws.vocab = vocab;
  ws.seed = static_cast<uint64_t>(seed);
  const Workload w = MakeWorkload(ws);
  for (const auto& conv : w.conversations) {
    int64_t total = 0;
    for (const Turn& t : conv) total += static_cast<int64_t>(t.user.size()) + t.output_len;
    if (total > ctx) {
      std::fprintf(stderr,
                   "kvforge: a request of this workload needs %lld tokens, more than the context "
                   "(%lld): lower the lengths\n",
                   (long long)total, (long long)ctx);
      return 2;
    }
  }
  std::vector<RunSpec> runs;
  if (compare_kv) {
    // Alternated, twice: these machines drift; the ratio of the per-mode medians is reported.
    const std::string policy(KvPolicyName(cfg.kv_policy.kind));
    runs = {{"full", batching, prefix, true},
            {policy, batching, prefix, false},
            {"full", batching, prefix, true},
            {policy, batching, prefix, false}};
  } else if (compare_chunking) {
    // Alternated, the order mirrored in the second half: the machine's drift hits each mode alike.
    const RunSpec off{"unchunked", batching, prefix, false, Chunking::kOff};
    const RunSpec budget{"chunked", batching, prefix, false, Chunking::kTokenBudget};
    const RunSpec dp{"decode-priority", batching, prefix, false, Chunking::kDecodePriority};
    runs = {off, budget, dp, dp, budget, off};
  } else if (compare) {
    runs = {{"static", "static", prefix}, {"continuous", "continuous", prefix}};
  } else if (prefix == "all") {
    runs = {{"off", batching, "off"}, {"hash", batching, "hash"}, {"radix", batching, "radix"}};
  } else {
    runs = {{batching, batching, prefix}};
  }
  std::vector<ThroughputResult> results;
  for (const auto& rs : runs) {
    auto r = RunThroughput(cfg, rs, w, !no_progress);
    if (!r.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", r.error().message().c_str());
      return 1;
    }
    results.push_back(*r);
  }
  if (compare_chunking) {
    PrintChunkingComparison(results, max_itl_ms, json);
    return 0;
  }
  if (compare_kv) {
    // Per mode the faster of its two runs' throughput would flatter; use the mean of the two.
    const double full_tps = (results[0].output_tps() + results[2].output_tps()) / 2;
    const double pol_tps = (results[1].output_tps() + results[3].output_tps()) / 2;
    const int64_t full_run = std::max(results[0].max_running, results[2].max_running);
    const int64_t pol_run = std::max(results[1].max_running, results[3].max_running);
    if (json) {
      std::printf(
          "{\"full\":%s,\"policy\":%s,\"kv_policy\":\"%s\",\"kv_budget\":%g,"
          "\"ratio_output_tokens_per_s\":%.3f,\"max_running\":{\"full\":%lld,\"policy\":%lld}}\n",
          results[2].ToJson().c_str(), results[3].ToJson().c_str(),
          KvPolicyName(cfg.kv_policy.kind).data(), cfg.kv_policy.budget, pol_tps / full_tps,
          (long long)full_run, (long long)pol_run);
    } else {
      for (const auto& r : results)
        std::printf(
            "%-10s %.1f output tok/s, at most %lld sequences running, %lld preemptions, "
            "%lld tokens evicted\n",
            r.mode.c_str(), r.output_tps(), (long long)r.max_running, (long long)r.preemptions,
            (long long)r.kv_evicted_tokens);
      std::printf("%s / full KV: output tokens/s %.2fx, most running sequences %lld vs %lld\n",
                  KvPolicyName(cfg.kv_policy.kind).data(), pol_tps / full_tps, (long long)pol_run,
                  (long long)full_run);
    }
    return 0;
  }
  if (json) {
    if (compare) {
      std::printf("{\"static\":%s,\"continuous\":%s,\"ratio_output_tokens_per_s\":%.3f}\n",
                  results[0].ToJson().c_str(), results[1].ToJson().c_str(),
                  results[1].output_tps() / results[0].output_tps());
    } else if (prefix == "all") {
      std::printf(
          "{\"workload\":\"%s\",\"off\":%s,\"hash\":%s,\"radix\":%s,"
          "\"ratio_output_tokens_per_s\":{\"hash\":%.3f,\"radix\":%.3f},"
          "\"ratio_mean_ttft\":{\"hash\":%.3f,\"radix\":%.3f}}\n",
          workload.c_str(), results[0].ToJson().c_str(), results[1].ToJson().c_str(),
          results[2].ToJson().c_str(), results[1].output_tps() / results[0].output_tps(),
          results[2].output_tps() / results[0].output_tps(),
          results[1].ttft.mean / results[0].ttft.mean, results[2].ttft.mean / results[0].ttft.mean);
    } else {
      std::printf("%s\n", results[0].ToJson().c_str());
    }
  } else {
    for (const auto& r : results)
      std::printf(
          "%-10s %lld requests in %.2f s: %.2f req/s, %.1f output tok/s, %.1f total tok/s; TTFT "
          "mean %.0f ms, p50/p90/p99 %.0f/%.0f/%.0f ms; ITL p50/p90/p99 %.1f/%.1f/%.1f ms; "
          "preemptions %lld; KV utilization %.1f%%; prefix hit rate %.1f%%\n",
          r.mode.c_str(), (long long)r.requests, r.duration_s, r.requests / r.duration_s,
          r.output_tps(), (r.prompt_tokens + r.output_tokens) / r.duration_s, r.ttft.mean,
          r.ttft.p50, r.ttft.p90, r.ttft.p99, r.itl.p50, r.itl.p90, r.itl.p99,
          (long long)r.preemptions, 100 * r.kv_utilization, 100 * r.prefix_hit_rate);
    for (const auto& r : results) std::printf("%s", r.TiersText().c_str());
    for (const auto& r : results)
      if (r.spec_drafts > 0)
        std::printf("%-10s speculative: %lld drafted, %lld kept (%.1f%%), %.2f kept per verify\n",
                    r.mode.c_str(), (long long)r.spec_draft_tokens,
                    (long long)r.spec_accepted_tokens,
                    100.0 * static_cast<double>(r.spec_accepted_tokens) /
                        static_cast<double>(r.spec_draft_tokens),
                    static_cast<double>(r.spec_accepted_tokens) /
                        static_cast<double>(r.spec_drafts));
    if (compare)
      std::printf("continuous / static output tokens/s: %.2fx\n",
                  results[1].output_tps() / results[0].output_tps());
    if (prefix == "all")
      std::printf(
          "vs off: output tokens/s hash %.2fx, radix %.2fx; mean TTFT hash %.2fx, radix %.2fx\n",
          results[1].output_tps() / results[0].output_tps(),
          results[2].output_tps() / results[0].output_tps(),
          results[1].ttft.mean / results[0].ttft.mean, results[2].ttft.mean / results[0].ttft.mean);
  }
  if (!plot.empty()) {
    std::vector<PlotRow> rows;
    for (const auto& r : results)
      rows.push_back({r.mode, r.output_tps(), r.ttft.p50, r.ttft.p99, r.itl.p50, r.itl.p99});
    if (Status s = PlotBars(plot, "kvforge bench throughput (" + workload + ")", rows); !s.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", s.message().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int BenchMain(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(
        "usage: kvforge bench (throughput|latency|batched|memory|serve) [flags]   (add --help for "
        "each)\n",
        args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "throughput") return ThroughputMain(rest);
  if (args[0] == "latency") return LatencyMain(rest);
  if (args[0] == "memory") return MemoryMain(rest);
  if (args[0] == "batched") return BatchedMain(rest);
  if (args[0] == "serve") return BenchServeMain(rest);
  std::fprintf(stderr,
               "kvforge: unknown bench '%s' (throughput, latency, batched, memory, serve)\n",
               args[0].c_str());
  return 2;
}

}  // namespace kvforge::cli
