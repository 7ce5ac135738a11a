// sampler.h — turns a logits row into the next token: logit bias, penalties, top-k, top-p, min-p,
// temperature, then a seeded draw (or argmax when temperature <= 0).
//
// Order follows llama.cpp's default chain: penalties -> top-k -> top-p -> min-p -> temperature
// -> sample. Same seed and same logits give the same tokens. One Sampler per sequence.
// Thread-safety: not thread-safe (it owns an RNG and the penalty history).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kvforge/sampling_params.h"
#include "kvforge/status.h"

namespace kvforge::sampling {

using ::kvforge::SamplingParams;

struct TokenLogprob {
  int32_t id;
  float logprob;
};

// What Sample draws from after every transform of a logits row: candidate ids with unnormalized
// weights (their sum `total`), best first. Greedy: one candidate, drawn without the RNG. Empty:
// nothing may be sampled.
struct TokenDistribution {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  double total = 0;
  bool greedy = false;
  bool empty() const { return ids.empty(); }
  // Normalized probability of `token` (0 when it is not a candidate).
  double Prob(int32_t token) const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // OpenAI's logit_bias on `logits` (n_vocab values): adds each bias; -100 bans the token
  // outright (its logit becomes -inf), as OpenAI documents it. Sample applies it first.
  static void ApplyLogitBias(const SamplingParams& params, float* logits, int64_t n_vocab);
  // Picks a token from `logits` (n_vocab values; modified in place). `history` is every token of
  // the sequence so far (prompt + generated), for the penalties. Returns -1 when every logit
  // is -inf (nothing may be sampled: a grammar's dead end, or logit_bias banning all it allows).
  int32_t Sample(float* logits, int64_t n_vocab, const std::vector<int32_t>& history);
  // Sample's two halves: the distribution of a row (logits modified in place) and one draw from
  // it (-1 when empty). Sample == Draw(Distribution(...)), draw for draw.
  TokenDistribution Distribution(float* logits, int64_t n_vocab,
                                 const std::vector<int32_t>& history);
  int32_t Draw(const TokenDistribution& d);
  // A uniform draw in [0, 1) from the same stream (speculative decoding's acceptance test).
  double Uniform();

  // Log-softmax of the raw logits for `token` and the top `n` alternatives.
  static float LogProb(const float* logits, int64_t n_vocab, int32_t token,
                       std::vector<TokenLogprob>* top, int32_t n);
  static int32_t Argmax(const float* logits, int64_t n_vocab);

  uint64_t seed() const { return seed_; }
  // The random stream's state, so that a caller can undo draws (the engine's step when it fails
  // before its commit).
  const std::mt19937_64& rng() const { return rng_; }
  void set_rng(const std::mt19937_64& rng) { rng_ = rng; }

 private:
  SamplingParams p_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;  // (logit, id)
};

}  // namespace kvforge::sampling
