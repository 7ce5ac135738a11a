// kv_eval.h — KV-cache quantization quality against an f32-KV baseline (kv-methods.md Part E),
// over the public Engine API. Three regimes per text chunk:
//   teacher_forced     one forward over the chunk; every prediction attends to quantized K/V
//                      (for KIVI: an engine that quantizes before attention, residual 0)
//   streaming          one token per forward step: the cache policy runs after every token
//   compress_continue  the first ctx - M tokens as one prefill, then M tokens as one step;
//                      only predictions inside the continuation are scored
// Metrics per regime: perplexity of both engines on the scored tokens, KL(P_f32 || P_test)
// per position (mean, 99th percentile) and top-1 agreement. Greedy agreement compares greedy
// continuations of short prompts token by token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvforge/engine.h"
#include "kvforge/status.h"

namespace kvforge::cli {

struct RegimeStats {
  std::string name;
  int64_t tokens = 0;
  double nll = 0, base_nll = 0;  // sums
  std::vector<double> kl;        // one per scored position
  int64_t top1_same = 0;
  double Ppl() const;
  double BasePpl() const;
  double KlMean() const;
  double KlP99() const;
  double Top1() const;
};

// Accumulates the scored rows [from, to) of two all-position logit matrices (row j predicts
// tokens[j + 1]) into `st`.
void ScoreRows(const std::vector<float>& base, const std::vector<float>& test,
               const std::vector<int32_t>& tokens, int64_t n_vocab, int64_t from, int64_t to,
               RegimeStats* st);

struct GreedyStats {
  int64_t prompts = 0, tokens = 0, same = 0, identical = 0;
  double prefix_sum = 0;
  double Agreement() const { return tokens ? static_cast<double>(same) / tokens : 0; }
  double PrefixMean() const { return prompts ? prefix_sum / prompts : 0; }
  double IdenticalFraction() const {
    return prompts ? static_cast<double>(identical) / prompts : 0;
  }
};

void CompareGreedy(const std::vector<int32_t>& base, const std::vector<int32_t>& test,
                   GreedyStats* st);

}  // namespace kvforge::cli
