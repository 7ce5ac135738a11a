// kvforge bench memory — what paging and block sharing buy in KV memory:
//  (1) utilization: the fraction of reserved KV slots that hold live tokens, on a workload with
//      varied prompt/output lengths, paged vs a contiguous max-length reservation per sequence
//      (the SOSP'23 PagedAttention paper measured 20.4-38.2% for such systems, ~96% paged);
//  (2) parallel sampling (n) and (3) beam search: blocks used with shared prompt blocks
//      (fork + copy-on-write) against every sequence holding a private copy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/strings.h"
#include "bench_common.h"
#include "engine/llm_internal.h"
#include "engine_flags.h"
#include "kvforge/llm.h"

namespace kvforge::cli {
namespace {

struct MemResult {
  double utilization = 0;
  double sharing_saving = 0;
  int64_t peak_blocks = 0, peak_unshared = 0;
  int64_t preemptions = 0;
};

Result<MemResult> Run(const EngineConfig& cfg, const std::vector<std::vector<int32_t>>& prompts,
                      const std::vector<int32_t>& out_lens, SamplingParams sp) {
  LLM llm(cfg);
  if (!llm.ok()) return llm.status();
  EngineCore* core = engine::CoreOf(llm);
  MemResult r;
  for (size_t i = 0; i < prompts.size(); ++i) {
    sp.max_tokens = out_lens[i];
    auto id = core->AddRequest(
        prompts[i], sp,
        [&](const RequestOutput& o) {
          if (o.finished) r.preemptions += o.metrics.num_preemptions;
        },
        0);
    if (!id.ok()) return id.error();
  }
  while (core->HasWork()) KVF_RETURN_IF_ERROR(core->Step());
  r.utilization = core->MeanKvUtilization();
  r.sharing_saving = core->MeanSharingSaving();
  r.peak_blocks = core->PeakUsedBlocks();
  r.peak_unshared = core->PeakUnsharedBlocks();
  return r;
}

}  // namespace

int MemoryMain(const Args& args) {
  int64_t num_prompts = 32, n = 4, beam = 4, seed = 1;
  bool json = false;
  EngineConfig cfg;
  cfg.max_model_len = 1024;  // the contiguous baseline reserves this per sequence
  FlagParser p("bench memory",
               "KV memory utilization (paged vs contiguous) and savings from block sharing\n"
               "(parallel sampling, beam search). Greedy/seeded, deterministic workloads.");
  p.AddInt("num-prompts", &num_prompts, "requests per experiment");
  p.AddInt("n", &n, "parallel samples per prompt for the sharing experiment");
  p.AddInt("beam-width", &beam, "beams for the beam-search experiment");
  p.AddInt("seed", &seed, "workload seed");
  p.AddBool("json", &json, "print a JSON object");
  AddEngineFlags(p, &cfg);
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  const int64_t max_len = cfg.max_model_len;
  const uint64_t budget = cfg.kv_cache_memory_bytes;  // 0: 16 full contexts
  if (num_prompts <= 0 || n <= 0 || beam <= 1 || max_len <= 32) {
    std::fprintf(stderr, "kvforge: bad value (see --help)\n");
    return 2;
  }
  LLM probe(cfg);
  if (!probe.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", probe.status().message().c_str());
    return 1;
  }
  const int64_t vocab = engine::CoreOf(probe)->model_config().n_vocab;
  const uint64_t per_token = engine::CoreOf(probe)->cache().store().bytes_per_token();
  cfg.kv_cache_memory_bytes = budget ? budget : per_token * static_cast<uint64_t>(max_len) * 16;
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::lognormal_distribution<double> in_d(std::log(96.0), 0.8), out_d(std::log(96.0), 0.7);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> outs;
  for (int64_t i = 0; i < num_prompts; ++i) {
    const int64_t il = std::clamp<int64_t>(static_cast<int64_t>(in_d(rng)), 8, max_len / 2);
    const int64_t ol = std::clamp<int64_t>(static_cast<int64_t>(out_d(rng)), 8, max_len / 2 - 8);
    std::vector<int32_t> pr(static_cast<size_t>(il));
    pr[0] = 1;
    for (size_t k = 1; k < pr.size(); ++k)
      pr[k] = static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3));
    prompts.push_back(std::move(pr));
    outs.push_back(static_cast<int32_t>(ol));
  }
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.ignore_eos = true;
  auto paged = Run(cfg, prompts, outs, greedy);
  EngineConfig contiguous_cfg = cfg;
  contiguous_cfg.contiguous_kv = true;
  auto contiguous = Run(contiguous_cfg, prompts, outs, greedy);
  SamplingParams par = greedy;
  par.temperature = 0.8f;
  par.seed = 7;
  par.n = static_cast<int32_t>(n);
  auto sharing = Run(cfg, prompts, outs, par);
  SamplingParams bs = greedy;
  bs.beam_width = static_cast<int32_t>(beam);
  bs.n = 1;
  auto beams = Run(cfg, prompts, outs, bs);
  for (auto* r : {&paged, &contiguous, &sharing, &beams}) {
    if (!r->ok()) {
      std::fprintf(stderr, "kvforge: %s\n", r->error().message().c_str());
      return 1;
    }
  }
  if (json) {
    std::printf(
        "{\"utilization_paged\":%.4f,\"utilization_contiguous\":%.4f,\"parallel_sampling_n\":%lld,"
        "\"parallel_sampling_saving\":%.4f,\"beam_width\":%lld,\"beam_search_saving\":%.4f,"
        "\"peak_blocks_parallel\":%lld,\"peak_unshared_blocks_parallel\":%lld,\"peak_blocks_beam\":"
        "%lld,"
        "\"peak_unshared_blocks_beam\":%lld,\"preemptions_contiguous\":%lld}\n",
        paged->utilization, contiguous->utilization, (long long)n, sharing->sharing_saving,
        (long long)beam, beams->sharing_saving, (long long)sharing->peak_blocks,
        (long long)sharing->peak_unshared, (long long)beams->peak_blocks,
        (long long)beams->peak_unshared, (long long)contiguous->preemptions);
  } else {
    std::printf(
        "KV slots holding live tokens: paged %.1f%%, contiguous (max-length reservation) %.1f%%\n",
        100 * paged->utilization, 100 * contiguous->utilization);
    std::printf(
        "parallel sampling n=%lld: blocks shared save %.1f%% vs private copies (peak %lld vs %lld "
        "blocks)\n",
        (long long)n, 100 * sharing->sharing_saving, (long long)sharing->peak_blocks,
        (long long)sharing->peak_unshared);
    std::printf(
        "beam search width %lld: blocks shared save %.1f%% vs private copies (peak %lld vs %lld "
        "blocks)\n",
        (long long)beam, 100 * beams->sharing_saving, (long long)beams->peak_blocks,
        (long long)beams->peak_unshared);
  }
  return 0;
}

}  // namespace kvforge::cli
