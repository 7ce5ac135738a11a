// kvforge eval kv — KV-cache quantization quality (kv-methods.md Part E); see kv_eval.h.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "base/strings.h"
#include "bench_common.h"
#include "commands.h"
#include "engine_flags.h"
#include "eval_common.h"
#include "flags.h"
#include "kv_eval.h"
#include "kvforge/config_names.h"
#include "kvforge/engine.h"

namespace kvforge::cli {
namespace {

double KeptFraction(const Engine::EvictionSummary& e, int64_t tokens) {
  // Without a policy every token's KV stays.
  if (e.evicted_tokens == 0 && e.final_tokens == 0) return 1.0;
  return static_cast<double>(e.final_tokens) / static_cast<double>(tokens);
}

}  // namespace
namespace {

std::string RegimeJson(const RegimeStats& r) {
  return base::StrFormat(
      "\"%s\":{\"ppl\":%.6f,\"baseline_ppl\":%.6f,\"kl_mean\":%.6g,\"kl_p99\":%.6g,"
      "\"top1_agreement\":%.6f,\"tokens\":%lld}",
      r.name.c_str(), r.Ppl(), r.BasePpl(), r.KlMean(), r.KlP99(), r.Top1(), (long long)r.tokens);
}

bool AnyKivi(const EngineConfig& c) {
  for (KvCacheDtype d : {c.kv_cache_dtype, c.kv_cache_dtype_k, c.kv_cache_dtype_v})
    if (d == KvCacheDtype::kKivi2 || d == KvCacheDtype::kKivi4) return true;
  return false;
}

// The reference engine: the tested one's settings with every KV-dtype and eviction field at its
// default (the option table's groups say which), then the baseline dtype.
Result<EngineConfig> BaselineConfig(const EngineConfig& test, const std::string& dtype) {
  EngineConfig base = test;
  const EngineConfig defaults;
  for (const ConfigField& f : EngineConfigFields())
    if (f.group == "KV dtype" || f.per_request) KVF_RETURN_IF_ERROR(f.set(base, f.get(defaults)));
  KVF_RETURN_IF_ERROR(
      SetConfigField(&base, "kv_cache_dtype", dtype).WithContext("--baseline-dtype"));
  base.kivi_residual_tokens = test.kivi_residual_tokens;
  base.mla_attention = test.mla_attention;
  return base;
}

}  // namespace

int EvalKvMain(const Args& args) {
  std::string text_path, baseline = "f32", save_scales;
  int64_t ctx = 256, chunks = 4, cont = 0;
  int64_t prompts = 8, prompt_tokens = 16, gen_tokens = 32;
  bool json = false;
  EngineConfig test_o;
  FlagParser p(
      "eval kv",
      "KV-cache quantization quality against an f32 KV cache (kv-methods.md Part E): perplexity,\n"
      "KL divergence of the next-token distribution (mean, p99) and top-1 agreement in three\n"
      "regimes (teacher_forced, streaming, compress_continue), plus greedy-continuation\n"
      "agreement on prompts cut from the text and the cache's bytes per token.");
  p.AddString("text", &text_path, "UTF-8 text file");
  p.AddString("baseline-dtype", &baseline, "KV dtype of the reference engine");
  p.AddString("save-kv-scales", &save_scales,
              "after the run, write the tested cache's FP8 scales or kvquant3 calibration to "
              "FILE (with --kv-scales calibrate: fitted on the first chunk), for --kv-scales FILE");
  p.AddInt("ctx", &ctx, "tokens per chunk");
  p.AddInt("chunks", &chunks, "chunks of the text to score");
  p.AddInt("continue-tokens", &cont, "compress_continue: continuation tokens M (0 = ctx/4)");
  p.AddInt("prompts", &prompts, "greedy agreement: prompts");
  p.AddInt("prompt-tokens", &prompt_tokens, "greedy agreement: tokens per prompt");
  p.AddInt("gen-tokens", &gen_tokens, "greedy agreement: tokens generated per prompt");
  p.AddBool("json", &json, "print a JSON object");
  AddEngineFlags(p, &test_o);
  p.Require("text");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (cont == 0) cont = ctx / 4;
  if (ctx < 16 || ctx > (1 << 20) || chunks < 1 || cont < 2 || cont >= ctx - 1 || prompts < 0 ||
      prompt_tokens < 1 || gen_tokens < 1 || prompt_tokens + gen_tokens > ctx) {
    std::fprintf(stderr,
                 "kvforge: need --ctx >= 16, --chunks >= 1, 2 <= --continue-tokens < ctx - 1, "
                 "--prompt-tokens + --gen-tokens <= ctx\n");
    return 2;
  }
  std::string text;
  if (!ReadEvalText(text_path, &text)) return 1;

  test_o.max_model_len = ctx;
  // FP8 calibration must see the chunk, not a greedy prompt: each engine calibrates on its own
  // first forward, which is the first chunk.
  Result<EngineConfig> base_o = BaselineConfig(test_o, baseline);
  if (!base_o.ok()) return BadFlagValue(base_o.error());
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "kvforge: %s\n", s.message().c_str());
    return 1;
  };
  auto base = Engine::Create(*base_o);
  if (!base.ok()) return fail(base.error());
  auto test = Engine::Create(test_o);
  if (!test.ok()) return fail(test.error());
  // Teacher forcing exercises KIVI only if it quantizes before attending: a simulated engine
  // (residual 0, quantize on write). Other dtypes quantize on write anyway.
  std::unique_ptr<Engine> sim;
  if (AnyKivi(test_o)) {
    EngineConfig sim_o = test_o;
    sim_o.kivi_eager = true;
    sim_o.kivi_residual_tokens = 0;
    auto s = Engine::Create(sim_o);
    if (!s.ok()) return fail(s.error());
    sim = std::move(*s);
  }
  Engine& tf_engine = sim ? *sim : **test;

  auto ids = (*base)->Tokenize(text, true, false);
  if (!ids.ok()) return fail(ids.error());
  const std::vector<int32_t>& tokens = *ids;
  const int64_t n_chunks = std::min<int64_t>(chunks, static_cast<int64_t>(tokens.size()) / ctx);
  if (n_chunks < 1) {
    std::fprintf(stderr, "kvforge: the text has %zu tokens, fewer than --ctx %lld\n", tokens.size(),
                 (long long)ctx);
    return 1;
  }
  const ModelInfo& info = (*test)->info();
  const int64_t n_vocab = info.n_vocab;
  const int32_t bos = info.bos;
  RegimeStats tf{"teacher_forced"}, st{"streaming"}, cc{"compress_continue"};
  GreedyStats greedy;
  ProgressBar bar(true, "eval kv " + info.kv_cache_dtype, n_chunks * 3 + prompts);
  int64_t done = 0;
  const std::vector<int64_t> one_step{ctx};
  const std::vector<int64_t> per_token(static_cast<size_t>(ctx), 1);
  const std::vector<int64_t> two_steps{ctx - cont, cont};
  // KV eviction: the share of the chunk's tokens whose KV the cache held at its end.
  double kept_streaming = 0, kept_continue = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    if (bos >= 0) chunk[0] = bos;
    auto ref = (*base)->LogitsAll(chunk, one_step);
    if (!ref.ok()) return fail(ref.error());
    auto a = tf_engine.LogitsAll(chunk, one_step);
    if (!a.ok()) return fail(a.error());
    ScoreRows(*ref, *a, chunk, n_vocab, 0, ctx - 1, &tf);
    bar.Update(++done);
    auto b = (*test)->LogitsAll(chunk, per_token);
    if (!b.ok()) return fail(b.error());
    ScoreRows(*ref, *b, chunk, n_vocab, 0, ctx - 1, &st);
    kept_streaming += KeptFraction((*test)->last_eviction(), ctx) / static_cast<double>(n_chunks);
    bar.Update(++done);
    auto d = (*test)->LogitsAll(chunk, two_steps);
    if (!d.ok()) return fail(d.error());
    ScoreRows(*ref, *d, chunk, n_vocab, ctx - cont, ctx - 1, &cc);
    kept_continue += KeptFraction((*test)->last_eviction(), ctx) / static_cast<double>(n_chunks);
    bar.Update(++done);
  }
  // Greedy continuations of prompts taken at evenly spaced places in the text.
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = static_cast<int32_t>(gen_tokens);
  sp.ignore_eos = true;
  const int64_t stride = std::max<int64_t>(
      1, (static_cast<int64_t>(tokens.size()) - prompt_tokens) / std::max<int64_t>(1, prompts));
  for (int64_t i = 0; i < prompts; ++i) {
    const int64_t at = i * stride;
    if (at + prompt_tokens > static_cast<int64_t>(tokens.size())) break;
    std::vector<int32_t> prompt(tokens.begin() + at, tokens.begin() + at + prompt_tokens);
    if (bos >= 0) prompt[0] = bos;
    auto gb = (*base)->Generate(prompt, sp);
    if (!gb.ok()) return fail(gb.error());
    auto gt = (*test)->Generate(prompt, sp);
    if (!gt.ok()) return fail(gt.error());
    CompareGreedy(gb->tokens, gt->tokens, &greedy);
    bar.Update(++done);
  }
  bar.Finish();
  if (!save_scales.empty()) {
    if (Status sv = (*test)->SaveKvScales(save_scales); !sv.ok()) return fail(sv);
  }

  const uint64_t bpt = info.kv_bytes_per_token, base_bpt = (*base)->info().kv_bytes_per_token;
  const double bits = 8.0 * static_cast<double>(bpt) /
                      static_cast<double>(2 * info.n_layer * info.n_head_kv * info.head_dim);
  if (json) {
    std::printf(
        "{\"kv_dtype\":\"%s\",\"baseline_dtype\":\"%s\",\"bytes_per_token\":%llu,"
        "\"baseline_bytes_per_token\":%llu,\"bits_per_value\":%.4f,\"tokens\":%lld,\"ctx\":%lld,"
        "\"chunks\":%lld,\"regimes\":{%s,%s,%s},\"greedy_agreement\":%.6f,"
        "\"greedy_prefix_mean\":%.3f,\"greedy_identical\":%.6f,\"greedy_prompts\":%lld,"
        "\"kv_policy\":\"%s\",\"kv_budget\":%g,\"kept_fraction\":{\"streaming\":%.6f,"
        "\"compress_continue\":%.6f},\"kept_bytes_per_token\":{\"streaming\":%.2f,"
        "\"compress_continue\":%.2f}}\n",
        info.kv_cache_dtype.c_str(), (*base)->info().kv_cache_dtype.c_str(),
        (unsigned long long)bpt, (unsigned long long)base_bpt, bits, (long long)(n_chunks * ctx),
        (long long)ctx, (long long)n_chunks, RegimeJson(tf).c_str(), RegimeJson(st).c_str(),
        RegimeJson(cc).c_str(), greedy.Agreement(), greedy.PrefixMean(), greedy.IdenticalFraction(),
        (long long)greedy.prompts, KvPolicyName(test_o.kv_policy.kind).data(),
        test_o.kv_policy.budget, kept_streaming, kept_continue,
        kept_streaming * static_cast<double>(bpt), kept_continue * static_cast<double>(bpt));
    return 0;
  }
  std::printf(
      "KV dtype %s: %llu B/token incl. scales (%.3f bits/value), baseline %s %llu B/token\n",
      info.kv_cache_dtype.c_str(), (unsigned long long)bpt, bits,
      (*base)->info().kv_cache_dtype.c_str(), (unsigned long long)base_bpt);
  if (test_o.kv_policy.enabled())
    std::printf(
        "KV policy %s, budget %g: KV kept at the end of a chunk %.1f%% (streaming), "
        "%.1f%% (compress_continue)\n",
        KvPolicyName(test_o.kv_policy.kind).data(), test_o.kv_policy.budget, 100 * kept_streaming,
        100 * kept_continue);
  std::printf("%-18s %10s %10s %12s %12s %8s %7s\n", "regime", "ppl", "base ppl", "KL mean",
              "KL p99", "top-1", "tokens");
  for (const RegimeStats* r : {&tf, &st, &cc})
    std::printf("%-18s %10.4f %10.4f %12.4g %12.4g %8.4f %7lld\n", r->name.c_str(), r->Ppl(),
                r->BasePpl(), r->KlMean(), r->KlP99(), r->Top1(), (long long)r->tokens);
  std::printf(
      "greedy: token agreement %.4f, identical prefix %.1f tokens, %.0f%% identical (%lld "
      "prompts x %lld tokens)\n",
      greedy.Agreement(), greedy.PrefixMean(), 100 * greedy.IdenticalFraction(),
      (long long)greedy.prompts, (long long)gen_tokens);
  return 0;
}

}  // namespace kvforge::cli
