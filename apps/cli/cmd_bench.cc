// kvforge bench — throughput (offline, synthetic workloads) and latency benchmarks.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/strings.h"
#include "bench_common.h"
#include "commands.h"
#include "engine/engine_core.h"
#include "flags.h"
#include "kvforge/llm.h"

namespace kvforge::cli {
namespace {

using base::StrFormat;

struct Workload {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> output_lens;
};

// Seeded synthetic requests. "sharegpt": log-normal prompt and output lengths resembling the
// ShareGPT conversations vLLM benchmarks with (median prompt ~ input_len, long tail), clipped to
// the context; "fixed": every prompt input_len tokens, every output output_len.
Workload MakeWorkload(const std::string& kind, int64_t n, int64_t input_len, int64_t output_len,
                      int64_t max_len, int64_t vocab, uint64_t seed) {
  Workload w;
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> in_d(std::log(static_cast<double>(input_len)), 0.8);
  std::lognormal_distribution<double> out_d(std::log(static_cast<double>(output_len)), 0.7);
  std::uniform_int_distribution<int32_t> tok(3, static_cast<int32_t>(vocab - 1));
  for (int64_t i = 0; i < n; ++i) {
    int64_t il = input_len, ol = output_len;
    if (kind == "sharegpt") {
      il = std::clamp<int64_t>(static_cast<int64_t>(in_d(rng)), 4, max_len / 2);
      ol = std::clamp<int64_t>(static_cast<int64_t>(out_d(rng)), 4, max_len / 2);
    }
    std::vector<int32_t> p(static_cast<size_t>(il));
    p[0] = 1;
    for (size_t k = 1; k < p.size(); ++k) p[k] = tok(rng);
    w.prompts.push_back(std::move(p));
    w.output_lens.push_back(static_cast<int32_t>(ol));
  }
  return w;
}

struct ThroughputResult {
  std::string mode;
  int64_t requests = 0;
  double duration_s = 0;
  int64_t prompt_tokens = 0, output_tokens = 0;
  Percentiles ttft, itl, e2e;
  int64_t preemptions = 0;
  double kv_utilization = 0;
  std::string ToJson() const {
    return StrFormat(
        "{\"requests\":%lld,\"duration_s\":%.3f,\"requests_per_s\":%.3f,\"output_tokens_per_s\":%."
        "2f,"
        "\"total_tokens_per_s\":%.2f,\"prompt_tokens\":%lld,\"output_tokens\":%lld,"
        "\"ttft_ms\":%s,\"itl_ms\":%s,\"e2e_ms\":%s,\"preemptions\":%lld,\"kv_utilization\":%.4f}",
        (long long)requests, duration_s, requests / duration_s, output_tokens / duration_s,
        (prompt_tokens + output_tokens) / duration_s, (long long)prompt_tokens,
        (long long)output_tokens, ttft.ToJson().c_str(), itl.ToJson().c_str(), e2e.ToJson().c_str(),
        (long long)preemptions, kv_utilization);
  }
};

Result<ThroughputResult> RunThroughput(const LLMConfig& base_cfg, const std::string& mode,
                                       const Workload& w, bool progress) {
  LLMConfig cfg = base_cfg;
  cfg.batching = mode;
  LLM llm(cfg);
  if (!llm.ok()) return llm.status();
  // One request per prompt, each with its own output length: submit through the core directly.
  EngineCore* core = llm.core();
  ThroughputResult r;
  r.mode = mode;
  r.requests = static_cast<int64_t>(w.prompts.size());
  std::vector<double> ttft, itl, e2e;
  int64_t done = 0;
  ProgressBar bar(progress, "bench " + mode, r.requests);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = w.output_lens[i];
    auto id = core->AddRequest(
        w.prompts[i], sp,
        [&](const RequestOutput& out) {
          if (!out.finished) return;
          ++done;
          bar.Update(done);
          ttft.push_back(out.metrics.ttft_ms);
          e2e.push_back(out.metrics.e2e_ms);
          itl.insert(itl.end(), out.metrics.itl_ms.begin(), out.metrics.itl_ms.end());
          r.prompt_tokens += out.metrics.prompt_tokens;
          r.output_tokens += out.metrics.generated_tokens;
          r.preemptions += out.metrics.num_preemptions;
        },
        0);
    if (!id.ok()) return id.error();
  }
  while (core->HasWork()) KVF_RETURN_IF_ERROR(core->Step());
  r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bar.Finish();
  r.ttft = Percentiles::Of(ttft);
  r.itl = Percentiles::Of(itl);
  r.e2e = Percentiles::Of(e2e);
  r.kv_utilization = core->MeanKvUtilization();
  return r;
}

int ThroughputMain(const Args& args) {
  std::string model, workload = "sharegpt", batching = "continuous", plot, kv_mem,
                     preempt = "recompute";
  int64_t num_prompts = 64, input_len = 128, output_len = 128, seed = 1, threads = 0,
          max_num_seqs = 64, max_batched = 2048, block_size = 16, max_len = 0;
  bool json = false, compare = false, no_progress = false, contiguous = false;
  FlagParser p(
      "bench throughput",
      "Offline throughput on a seeded synthetic workload: every request is submitted at t=0 and\n"
      "the engine runs until all finish (greedy, ignore_eos, each request's own output length).\n"
      "--compare runs static and continuous batching on the same workload in one process.");
  p.AddString("model", &model, "GGUF model (default: the embedded model)");
  p.AddString("workload", &workload, "sharegpt (log-normal lengths) | fixed");
  p.AddInt("num-prompts", &num_prompts, "requests");
  p.AddInt("input-len", &input_len, "prompt tokens (median for sharegpt)");
  p.AddInt("output-len", &output_len, "generated tokens (median for sharegpt)");
  p.AddInt("seed", &seed, "workload seed");
  p.AddString("batching", &batching, "continuous | static");
  p.AddBool("compare", &compare, "run static and continuous, print both and the ratio");
  p.AddInt("threads", &threads, "compute threads (0 = cores)");
  p.AddInt("max-num-seqs", &max_num_seqs, "running sequences per step");
  p.AddInt("max-num-batched-tokens", &max_batched, "tokens per step");
  p.AddInt("block-size", &block_size, "KV block tokens");
  p.AddInt("max-model-len", &max_len, "context length (0 = model's, capped at 8192)");
  p.AddString("kv-cache-memory", &kv_mem,
              "KV pool budget, e.g. 512MiB (default: max-num-seqs/4 contexts)");
  p.AddString("preemption", &preempt, "recompute | swap");
  p.AddBool("contiguous-kv", &contiguous, "baseline: reserve max-model-len slots per sequence");
  p.AddBool("json", &json, "print a JSON summary");
  p.AddString("plot", &plot, "draw the results to FILE.png or FILE.svg with gnuplot");
  p.AddBool("no-progress", &no_progress, "no progress bar");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (num_prompts <= 0 || input_len <= 0 || output_len <= 0 || threads < 0 || max_num_seqs <= 0 ||
      max_batched <= 0 || block_size <= 0 || max_len < 0 ||
      (workload != "sharegpt" && workload != "fixed") ||
      (batching != "static" && batching != "continuous")) {
    std::fprintf(stderr, "kvforge: bad value (see --help)\n");
    return 2;
  }
  LLMConfig cfg;
  cfg.model = model;
  cfg.threads = static_cast<int>(threads);
  cfg.max_num_seqs = max_num_seqs;
  cfg.max_num_batched_tokens = max_batched;
  cfg.block_size = static_cast<int32_t>(block_size);
  cfg.max_model_len = max_len;
  cfg.preemption_mode = preempt;
  cfg.contiguous_kv = contiguous;
  if (!kv_mem.empty() && !base::ParseByteSize(kv_mem, &cfg.kv_cache_memory_bytes)) {
    std::fprintf(stderr, "kvforge: --kv-cache-memory: not a byte size: '%s'\n", kv_mem.c_str());
    return 2;
  }
  // Model facts for the workload (vocabulary, context) come from a throwaway core.
  LLM probe(cfg);
  if (!probe.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", probe.status().message().c_str());
    return 1;
  }
  const int64_t ctx = probe.core()->max_model_len();
  const int64_t vocab = probe.core()->model_config().n_vocab;
  if (input_len + output_len > ctx) {
    std::fprintf(stderr, "kvforge: input-len + output-len exceeds the context (%lld)\n",
                 (long long)ctx);
    return 2;
  }
  const Workload w = MakeWorkload(workload, num_prompts, input_len, output_len, ctx, vocab,
                                  static_cast<uint64_t>(seed));
  std::vector<std::string> modes = compare ? std::vector<std::string>{"static", "continuous"}
                                           : std::vector<std::string>{batching};
  std::vector<ThroughputResult> results;
  for (const auto& m : modes) {
    auto r = RunThroughput(cfg, m, w, !no_progress);
    if (!r.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", r.error().message().c_str());
      return 1;
    }
    results.push_back(*r);
  }
  if (json) {
    if (compare) {
      std::printf("{\"static\":%s,\"continuous\":%s,\"ratio_output_tokens_per_s\":%.3f}\n",
                  results[0].ToJson().c_str(), results[1].ToJson().c_str(),
                  (results[1].output_tokens / results[1].duration_s) /
                      (results[0].output_tokens / results[0].duration_s));
    } else {
      std::printf("%s\n", results[0].ToJson().c_str());
    }
  } else {
    for (const auto& r : results)
      std::printf(
          "%-10s %lld requests in %.2f s: %.2f req/s, %.1f output tok/s, %.1f total tok/s; TTFT "
          "p50/p90/p99 "
          "%.0f/%.0f/%.0f ms; ITL p50/p90/p99 %.1f/%.1f/%.1f ms; preemptions %lld; KV utilization "
          "%.1f%%\n",
          r.mode.c_str(), (long long)r.requests, r.duration_s, r.requests / r.duration_s,
          r.output_tokens / r.duration_s, (r.prompt_tokens + r.output_tokens) / r.duration_s,
          r.ttft.p50, r.ttft.p90, r.ttft.p99, r.itl.p50, r.itl.p90, r.itl.p99,
          (long long)r.preemptions, 100 * r.kv_utilization);
    if (compare)
      std::printf("continuous / static output tokens/s: %.2fx\n",
                  (results[1].output_tokens / results[1].duration_s) /
                      (results[0].output_tokens / results[0].duration_s));
  }
  if (!plot.empty()) {
    std::vector<PlotRow> rows;
    for (const auto& r : results)
      rows.push_back(
          {r.mode, r.output_tokens / r.duration_s, r.ttft.p50, r.ttft.p99, r.itl.p50, r.itl.p99});
    if (Status s = PlotBars(plot, "kvforge bench throughput", rows); !s.ok()) {
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
#ifdef KVF_HAVE_SERVER
  if (args[0] == "serve") return BenchServeMain(rest);
#endif
  std::fprintf(stderr, "kvforge: unknown bench '%s' (throughput, latency, batched, memory, serve)\n",
               args[0].c_str());
  return 2;
}

}  // namespace kvforge::cli
