// kvforge bench latency — llama-bench's pp/tg tests: pp<P> processes a P-token prompt as one batch,
// tg<N> generates N tokens one at a time, both after `--depth` tokens already in the cache;
// mean +- stddev over repetitions; plus a STREAM-style triad for the machine's memory bandwidth
// and the roofline fraction of tg (bytes of weights + KV read per token x tokens/s / bandwidth).
// With --compare-kv-policy (quest | nsa) the depth is filled once and tg runs alternate between
// dense and sparse decode over that same cache, so the ratio is measured in one run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "assets/default_model.h"
#include "base/strings.h"
#include "bench_common.h"
#include "engine/kv_options.h"
#include "engine_flags.h"
#include "flags.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "kvforge/config_names.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"

namespace kvforge::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The model a bench runs on: `path`, or the embedded default model when empty.
Result<std::unique_ptr<model::Model>> LoadBenchModel(const std::string& path) {
  if (!path.empty()) return model::Model::Load(path);
  return model::Model::LoadFromMemory(assets::DefaultModelData(), assets::DefaultModelSize(),
                                      assets::kDefaultModelName);
}

double TriadGBps(kernels::ThreadPool& pool) {
  const size_t n = size_t{1} << 24;  // 16M doubles: 128 MiB per array, far beyond the caches
  std::vector<double> a(n), b(n, 1.0), c(n, 2.0);
  pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t s, int64_t e, int) {
    for (int64_t i = s; i < e; ++i) a[static_cast<size_t>(i)] = 0;
  });
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t s, int64_t e, int) {
      for (int64_t i = s; i < e; ++i)
        a[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] + 3.0 * c[static_cast<size_t>(i)];
    });
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    best =
        std::max(best, 3.0 * 8.0 * static_cast<double>(n) / sec / 1e9);  // STREAM counts 24 bytes
  }
  return best;
}

// The machine's FMA peak in GFLOP/s: every pool thread runs the kernel table's register-only
// multiply-add loop at once; best of 3 (the loop needs no memory, so only clocks move it).
double FmaPeakGflops(kernels::ThreadPool& pool) {
  const kernels::KernelTable& kt = kernels::Active();
  constexpr int64_t kIterations = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<int64_t> flops(static_cast<size_t>(pool.num_threads()), 0);
    const auto t0 = Clock::now();
    pool.ParallelFor(pool.num_threads(), [&](int64_t b, int64_t e, int thread) {
      for (int64_t i = b; i < e; ++i)
        flops[static_cast<size_t>(thread)] += kt.fma_loop(kIterations);
    });
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    double total = 0;
    for (int64_t f : flops) total += static_cast<double>(f);
    best = std::max(best, total / sec / 1e9);
  }
  return best;
}

// A paged cache for `seqs` sequences of `tokens` tokens with the engine flags' KV dtype choice.
Result<std::unique_ptr<kvstore::PagedKvCache>> MakeBenchCache(const model::ModelConfig& c,
                                                              const EngineConfig& choice,
                                                              int64_t tokens, int64_t seqs) {
  KVF_ASSIGN_OR_RETURN(kvstore::PagedKvCacheConfig kc, engine::MakeKvCacheConfig(c, choice));
  const int64_t bt = kc.store.block_tokens;
  kc.store.num_blocks = seqs * ((tokens + bt - 1) / bt);
  return kvstore::PagedKvCache::Create(kc);
}

// The engine fields the forward-pass benchmarks use (they run the model and a paged cache
// directly, with no scheduler, prefix cache or tiers).
const std::vector<std::string_view> kForwardBenchFields = {"model",
                                                           "threads",
                                                           "mlock",
                                                           "block_size",
                                                           "kv_cache_dtype",
                                                           "kv_cache_dtype_k",
                                                           "kv_cache_dtype_v",
                                                           "kv_f16",
                                                           "kv_scales_per_head",
                                                           "kivi_residual_tokens",
                                                           "kivi_eager",
                                                           "kvquant_post_rope_keys",
                                                           "kv_turbo_qjl",
                                                           "mla_attention"};

// Loads the model for a forward-pass benchmark with the engine flags' MLA form and mlock.
Result<std::unique_ptr<model::Model>> LoadForwardBenchModel(const EngineConfig& cfg) {
  KVF_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, LoadBenchModel(cfg.model));
  m->SetMlaAttention(static_cast<model::MlaAttention>(cfg.mla_attention));
  if (cfg.mlock)
    if (Status s = m->LockWeights(); !s.ok())
      std::fprintf(stderr, "kvforge: warning: %s\n", s.message().c_str());
  return m;
}

// Writes `depth` rows of N(0, 1) keys and values into every layer of sequence 0 (the --fill
// random shortcut; the key summaries follow the writes as in a forward pass).
void WriteRandomKv(kvstore::PagedKvCache& cache, int32_t n_layer, int64_t row, int64_t depth,
                   uint32_t seed) {
  constexpr int64_t kChunk = 256;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(kChunk * row)), v(k.size());  // [kChunk][row]
  for (int32_t l = 0; l < n_layer; ++l)
    for (int64_t p0 = 0; p0 < depth; p0 += kChunk) {
      const int64_t n = std::min(kChunk, depth - p0);
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      cache.WriteAt(l, 0, p0, p0, n, k.data(), v.data(), row);
    }
}

// One tg<n> run: `n` single-token steps from position `pos0`; tokens/s. `mode` 0 is dense, k > 0
// the k-th sparse policy.
using DecodeStep = std::function<Status(int64_t pos, size_t mode)>;
Result<double> TimedDecode(const DecodeStep& step, int64_t pos0, int64_t n, size_t mode) {
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) KVF_RETURN_IF_ERROR(step(pos0 + i, mode));
  return static_cast<double>(n) / std::chrono::duration<double>(Clock::now() - t0).count();
}

// Rounds of tg runs over one filled cache, dense and each sparse policy once per round (the
// order rotates every round); each run decodes fresh positions after the previous one, so no
// slot is written twice. Prints each round and each policy's mean ratio to dense in its rounds.
int CompareSparseDecode(const DecodeStep& step, int64_t depth, int64_t n_gen, int64_t rounds,
                        const std::vector<std::string>& names, bool json) {
  const size_t modes = names.size() + 1;
  std::vector<std::vector<double>> tps(modes);  // [mode][round]
  int64_t pos = depth;
  for (int64_t r = 0; r < rounds; ++r)
    for (size_t k = 0; k < modes; ++k) {
      const size_t mode = (k + static_cast<size_t>(r)) % modes;
      auto t = TimedDecode(step, pos, n_gen, mode);
      if (!t.ok()) {
        std::fprintf(stderr, "kvforge: %s\n", t.error().message().c_str());
        return 1;
      }
      pos += n_gen;
      tps[mode].push_back(*t);
    }
  std::string rows, means;
  for (int64_t r = 0; r < rounds; ++r) {
    std::string row = base::StrFormat("{\"dense\":%.3f", tps[0][r]);
    if (!json) std::printf("round %lld  dense %.2f", (long long)r + 1, tps[0][r]);
    for (size_t k = 1; k < modes; ++k) {
      row += base::StrFormat(",\"%s\":%.3f", names[k - 1].c_str(), tps[k][r]);
      if (!json)
        std::printf("  %s %.2f (%.2fx)", names[k - 1].c_str(), tps[k][r], tps[k][r] / tps[0][r]);
    }
    if (!json) std::printf("  tokens/s\n");
    rows += (r ? "," : "") + row + "}";
  }
  for (size_t k = 1; k < modes; ++k) {
    double sum = 0;
    for (int64_t r = 0; r < rounds; ++r) sum += tps[k][r] / tps[0][r];
    const double mean = sum / static_cast<double>(rounds);
    means += base::StrFormat("%s\"%s\":%.4f", k > 1 ? "," : "", names[k - 1].c_str(), mean);
    if (!json)
      std::printf("tg%lld at depth %lld: %s / dense = %.2fx (mean of %lld rounds)\n",
                  (long long)n_gen, (long long)depth, names[k - 1].c_str(), mean,
                  (long long)rounds);
  }
  if (json)
    std::printf("{\"depth\":%lld,\"n_gen\":%lld,\"rounds\":[%s],\"mean_ratio\":{%s}}\n",
                (long long)depth, (long long)n_gen, rows.c_str(), means.c_str());
  return 0;
}

}  // namespace

int LatencyMain(const Args& args) {
  int64_t n_prompt = 512, n_gen = 128, depth = 0, reps = 3, seed = 1;
  bool json = false, no_bandwidth = false, compare = false;
  EngineConfig cfg;
  FlagParser p("bench latency",
               "llama-bench style prompt processing (pp) and generation (tg) speed.");
  p.AddInt("n-prompt", &n_prompt, "pp test prompt tokens (0 = skip), llama-bench -p");
  p.AddInt("n-gen", &n_gen, "tg test generated tokens (0 = skip), llama-bench -n");
  p.AddInt("depth", &depth, "tokens already in the cache before each test, llama-bench -d");
  p.AddInt("repetitions", &reps, "repetitions, llama-bench -r");
  p.AddInt("seed", &seed, "token seed");
  std::string also, fill = "prefill";
  p.AddString("fill", &fill,
              "how the depth is filled: prefill (forward passes, as llama-bench -d) | random "
              "(random K/V rows written directly: seconds instead of minutes at 32K; a decode "
              "step reads the same bytes whatever the values)");
  p.AddBool("compare-kv-policy", &compare,
            "fill --depth once, then alternate dense and --kv-policy (quest | nsa) tg runs over "
            "that cache, --repetitions rounds (no pp test)");
  p.AddString("also-kv-policy", &also,
              "with --compare-kv-policy: more sparse policies in the same rounds (e.g. nsa), "
              "comma-separated, same budget");
  p.AddBool("no-bandwidth", &no_bandwidth, "skip the STREAM triad");
  bool no_peak = false;
  p.AddBool("no-peak", &no_peak, "skip the FMA peak measurement (pp's fraction of it)");
  p.AddBool("json", &json, "print a JSON object");
  AddEngineFlags(p, &cfg);
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  std::vector<std::string_view> used = kForwardBenchFields;
  for (const ConfigField& f : EngineConfigFields())
    if (f.per_request) used.push_back(f.name);  // --kv-policy quest|nsa: sparse decode
  if (Status s = RefuseUnusedEngineFields(cfg, used, "bench latency"); !s.ok())
    return BadFlagValue(s);
  if (fill != "prefill" && fill != "random") {
    std::fprintf(stderr, "kvforge: --fill must be prefill or random\n");
    return 2;
  }
  if (n_prompt < 0 || n_gen < 0 || depth < 0 || reps <= 0) {
    std::fprintf(stderr, "kvforge: bad value (see --help)\n");
    return 2;
  }
  auto m = LoadForwardBenchModel(cfg);
  if (!m.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", m.error().message().c_str());
    return 1;
  }
  const model::ModelConfig& c = (*m)->config();
  if (compare && (n_gen == 0 || n_prompt != 0)) {
    std::fprintf(stderr,
                 "kvforge: --compare-kv-policy measures tg only: give --n-prompt 0 and "
                 "--n-gen N\n");
    return 2;
  }
  // --also-kv-policy: more sparse policies for the same rounds (validated before any work).
  std::vector<KvPolicyKind> also_kinds;
  for (const auto& name : base::StrSplit(also, ',')) {
    if (name.empty()) continue;
    auto kind = ParseKvPolicyKind(name);
    if (!kind.ok() || !kvpolicy::IsSparse(*kind)) {
      std::fprintf(stderr, "kvforge: --also-kv-policy: '%s' is not quest or nsa\n", name.c_str());
      return 2;
    }
    also_kinds.push_back(*kind);
  }
  if (!also_kinds.empty() && !compare) {
    std::fprintf(stderr, "kvforge: --also-kv-policy needs --compare-kv-policy\n");
    return 2;
  }
  // Compare mode: every mode (dense + each policy) decodes n_gen fresh positions per round.
  const int64_t modes = 2 + static_cast<int64_t>(also_kinds.size());
  const int64_t total = compare ? depth + modes * reps * n_gen : depth + std::max(n_prompt, n_gen);
  auto cache = MakeBenchCache(c, cfg, total, 1);
  if (!cache.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", cache.error().message().c_str());
    return 1;
  }
  kernels::ThreadPool pool(cfg.threads);
  model::Workspace ws;
  std::vector<float> logits;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  auto tok = [&] { return static_cast<int32_t>(rng() % static_cast<uint32_t>(c.n_vocab)); };
  // Sparse decode (--kv-policy quest|nsa): generated tokens read the blocks the policy selects.
  const KvPolicy& policy = cfg.kv_policy;
  const int64_t budget_tokens =
      policy.budget >= 1 ? static_cast<int64_t>(policy.budget)
                         : static_cast<int64_t>(policy.budget * static_cast<double>(total));
  const kvpolicy::SparseDecode sparse =
      kvpolicy::SparseDecodeFor(policy, budget_tokens, (*cache)->block_tokens());
  if (policy.enabled() && sparse.kind == KvPolicyKind::kNone) {
    std::fprintf(stderr,
                 "kvforge: bench latency measures the sparse-decode policies (quest, nsa) "
                 "only\n");
    return 2;
  }
  if (compare && sparse.kind == KvPolicyKind::kNone) {
    std::fprintf(stderr, "kvforge: --compare-kv-policy needs --kv-policy quest|nsa\n");
    return 2;
  }
  // The sparse plans compared: --kv-policy first, then --also-kv-policy (one cache serves all:
  // every sparse policy reads the same block key summaries).
  std::vector<kvpolicy::SparseDecode> plans{sparse};
  std::vector<std::string> plan_names{std::string(KvPolicyName(sparse.kind))};
  for (const KvPolicyKind kind : also_kinds) {
    KvPolicy extra = policy;
    extra.kind = kind;
    extra.window = -1;  // the method's own default
    plans.push_back(kvpolicy::SparseDecodeFor(extra, budget_tokens, (*cache)->block_tokens()));
    plan_names.push_back(std::string(KvPolicyName(kind)));
  }
  // mode 0: dense; k > 0: plans[k - 1] on single-token steps.
  auto forward_mode = [&](int64_t pos0, int64_t n, size_t mode) -> Status {
    model::Batch b;
    for (int64_t i = 0; i < n; ++i) b.tokens.push_back(tok());
    b.seqs.push_back({0, pos0, 0, n, false, true});
    if (n == 1 && mode > 0 && plans[mode - 1].kind != KvPolicyKind::kNone)
      b.seqs.back().sparse = &plans[mode - 1];
    return (*m)->Forward(b, **cache, ws, pool, &logits);
  };
  auto forward = [&](int64_t pos0, int64_t n) { return forward_mode(pos0, n, 1); };
  auto fill_depth = [&]() -> Status {
    (*cache)->Free(0);
    if (!(*cache)->AddSequence(0, total)) return Status::ResourceExhausted("cache");
    if (fill == "random") {
      WriteRandomKv(**cache, static_cast<int32_t>(c.n_layer), c.n_head_kv * c.head_dim, depth,
                    static_cast<uint32_t>(seed));
      return Status::Ok();
    }
    for (int64_t b = 0; b < depth; b += 512)
      KVF_RETURN_IF_ERROR(forward(b, std::min<int64_t>(512, depth - b)));
    return Status::Ok();
  };
  if (compare) {
    if (Status fs = fill_depth(); !fs.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", fs.message().c_str());
      return 1;
    }
    return CompareSparseDecode([&](int64_t pos, size_t mode) { return forward_mode(pos, 1, mode); },
                               depth, n_gen, reps, plan_names, json);
  }
  struct Test {
    std::string name;
    std::vector<double> tps;
    double matmul_gflop_per_token = 0;  // pp tests: GFLOP of matmuls per prompt token
  };
  std::vector<Test> tests;
  Status st;
  if (n_prompt > 0) {
    Test t{"pp" + std::to_string(n_prompt), {}};
    (void)fill_depth();
    // Warm-up: one whole prompt, as llama-bench's (the first prompt of a size faults in the
    // workspace and the cache blocks it touches; a 32-token warm-up left that in repetition 1).
    (void)forward(depth, n_prompt);
    for (int64_t r = 0; r < reps && st.ok(); ++r) {
      st = fill_depth();
      const int64_t flops0 = ws.matmul_flops;
      const auto t0 = Clock::now();
      if (st.ok()) st = forward(depth, n_prompt);
      t.tps.push_back(static_cast<double>(n_prompt) /
                      std::chrono::duration<double>(Clock::now() - t0).count());
      t.matmul_gflop_per_token =
          static_cast<double>(ws.matmul_flops - flops0) / 1e9 / static_cast<double>(n_prompt);
    }
    tests.push_back(t);
  }
  if (n_gen > 0 && st.ok()) {
    Test t{"tg" + std::to_string(n_gen), {}};
    (void)fill_depth();
    (void)forward(depth, 1);  // warm-up: one decode step, as llama-bench's
    for (int64_t r = 0; r < reps && st.ok(); ++r) {
      st = fill_depth();
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < n_gen && st.ok(); ++i) st = forward(depth + i, 1);
      t.tps.push_back(static_cast<double>(n_gen) /
                      std::chrono::duration<double>(Clock::now() - t0).count());
    }
    tests.push_back(t);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", st.message().c_str());
    return 1;
  }
  const double bw = no_bandwidth ? 0 : TriadGBps(pool);
  const double peak = no_peak ? 0 : FmaPeakGflops(pool);
  // Bytes per generated token: every weight matrix once, plus the KV read at the mean depth.
  const double kv_per_token = static_cast<double>((*cache)->store().bytes_per_token());
  double roofline = 0;
  std::string out = "{\"tests\":[";
  for (size_t i = 0; i < tests.size(); ++i) {
    double mean = 0, var = 0;
    for (double v : tests[i].tps) mean += v;
    mean /= static_cast<double>(tests[i].tps.size());
    for (double v : tests[i].tps) var += (v - mean) * (v - mean);
    const double sd =
        tests[i].tps.size() > 1 ? std::sqrt(var / static_cast<double>(tests[i].tps.size() - 1)) : 0;
    // pp: matmul GFLOP/s (0 for tg) and its fraction of the FMA peak.
    const double matmul_rate = tests[i].matmul_gflop_per_token * mean;
    const double peak_fraction = peak > 0 ? matmul_rate / peak : 0;
    out += base::StrFormat(
        "%s{\"name\":\"%s\",\"depth\":%lld,\"tokens_per_s\":%.3f,\"stddev\":%.3f,"
        "\"matmul_gflop_per_s\":%.2f,\"peak_fraction\":%.4f}",
        i ? "," : "", tests[i].name.c_str(), (long long)depth, mean, sd, matmul_rate,
        peak_fraction);
    if (tests[i].name[0] == 't' && bw > 0) {
      const double bytes =
          static_cast<double>((*m)->weights().matrix_bytes) +
          kv_per_token * (static_cast<double>(depth) + static_cast<double>(n_gen) / 2);
      roofline = bytes * mean / (bw * 1e9);
    }
    if (!json) {
      std::printf("%-8s depth %-6lld %10.2f +- %.2f tokens/s", tests[i].name.c_str(),
                  (long long)depth, mean, sd);
      if (matmul_rate > 0 && peak > 0)
        std::printf("   matmuls %.1f GFLOP/s = %.2f of the FMA peak", matmul_rate, peak_fraction);
      std::printf("\n");
    }
  }
  out += base::StrFormat(
      "],\"fma_peak_gflop_per_s\":%.2f,\"bandwidth_gb_per_s\":%.3f,\"roofline_fraction\":%.4f,"
      "\"threads\":%d,\"kernels\":\"%s\","
      "\"kv_dtype\":\"%s\",\"kv_bytes_per_token\":%.0f}",
      peak, bw, roofline, pool.num_threads(), kernels::Active().name,
      engine::KvDtypeLabel((*cache)->store().config()).c_str(), kv_per_token);
  if (!json && peak > 0)
    std::printf("FMA peak (register-only multiply-adds, %d threads, %s kernels) %.1f GFLOP/s\n",
                pool.num_threads(), kernels::Active().name, peak);
  if (json)
    std::printf("%s\n", out.c_str());
  else if (bw > 0)
    std::printf(
        "memory bandwidth (STREAM triad) %.2f GB/s; tg reads %.1f MB/token -> roofline fraction "
        "%.2f\n",
        bw,
        (static_cast<double>((*m)->weights().matrix_bytes) + kv_per_token * (depth + n_gen / 2.0)) /
            1e6,
        roofline);
  return 0;
}

}  // namespace kvforge::cli

namespace kvforge::cli {

// kvforge bench batched — llama-batched-bench's measurement: B sequences each prefill a P-token
// prompt, then all decode G tokens together (one token per sequence per forward step).
// Reports S_PP (prompt tokens/s) and S_TG (aggregate generated tokens/s) per B.
int BatchedMain(const Args& args) {
  std::string batches = "1,4,16,64";
  int64_t n_prompt = 128, n_gen = 64, seed = 1;
  bool json = false;
  EngineConfig cfg;
  FlagParser p("bench batched", "Batched decode throughput as llama-batched-bench measures it.");
  p.AddInt("n-prompt", &n_prompt, "prompt tokens per sequence");
  p.AddInt("n-gen", &n_gen, "generated tokens per sequence");
  p.AddString("batches", &batches, "comma-separated numbers of concurrent sequences");
  p.AddInt("seed", &seed, "token seed");
  p.AddBool("json", &json, "print a JSON object");
  AddEngineFlags(p, &cfg);
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (Status s = RefuseUnusedEngineFields(cfg, kForwardBenchFields, "bench batched"); !s.ok())
    return BadFlagValue(s);
  std::vector<int64_t> bs;
  for (const auto& s : base::StrSplit(batches, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v <= 0 || v > 4096) {
      std::fprintf(stderr, "kvforge: --batches: bad value '%s'\n", s.c_str());
      return 2;
    }
    bs.push_back(v);
  }
  if (n_prompt <= 0 || n_gen <= 0) {
    std::fprintf(stderr, "kvforge: bad value (see --help)\n");
    return 2;
  }
  auto m = LoadForwardBenchModel(cfg);
  if (!m.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", m.error().message().c_str());
    return 1;
  }
  const model::ModelConfig& c = (*m)->config();
  kernels::ThreadPool pool(cfg.threads);
  model::Workspace ws;
  std::vector<float> logits;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::string out = "{\"results\":[";
  if (!json) std::printf("%6s %8s %8s %12s %12s\n", "B", "PP", "TG", "S_PP t/s", "S_TG t/s");
  for (size_t bi = 0; bi < bs.size(); ++bi) {
    const int64_t B = bs[bi];
    auto cache = MakeBenchCache(c, cfg, n_prompt + n_gen, B);
    if (!cache.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", cache.error().message().c_str());
      return 1;
    }
    Status st;
    const auto t0 = Clock::now();
    for (int64_t s = 0; s < B && st.ok(); ++s) {
      (void)(*cache)->AddSequence(s, n_prompt + n_gen);
      model::Batch b;
      for (int64_t i = 0; i < n_prompt; ++i)
        b.tokens.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(c.n_vocab)));
      b.seqs.push_back({s, 0, 0, n_prompt, false, true});
      st = (*m)->Forward(b, **cache, ws, pool, &logits);
    }
    const double pp_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto t1 = Clock::now();
    for (int64_t g = 0; g < n_gen && st.ok(); ++g) {
      model::Batch b;
      for (int64_t s = 0; s < B; ++s) {
        b.tokens.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(c.n_vocab)));
        b.seqs.push_back({s, n_prompt + g, s, 1, false, true});
      }
      st = (*m)->Forward(b, **cache, ws, pool, &logits);
    }
    const double tg_s = std::chrono::duration<double>(Clock::now() - t1).count();
    if (!st.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", st.message().c_str());
      return 1;
    }
    const double s_pp = static_cast<double>(B * n_prompt) / pp_s,
                 s_tg = static_cast<double>(B * n_gen) / tg_s;
    out += base::StrFormat(
        "%s{\"batch\":%lld,\"n_prompt\":%lld,\"n_gen\":%lld,\"s_pp\":%.2f,\"s_tg\":%.2f}",
        bi ? "," : "", (long long)B, (long long)n_prompt, (long long)n_gen, s_pp, s_tg);
    if (!json)
      std::printf("%6lld %8lld %8lld %12.2f %12.2f\n", (long long)B, (long long)n_prompt,
                  (long long)n_gen, s_pp, s_tg);
  }
  out += base::StrFormat("],\"threads\":%d}", pool.num_threads());
  if (json) std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace kvforge::cli
