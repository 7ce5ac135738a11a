#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "base/strings.h"

namespace kvforge {

Status SamplingParams::Validate() const {
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  if (!std::isfinite(temperature) || temperature < 0 || temperature > 100)
    return bad("temperature must be between 0 and 100");
  if (!std::isfinite(top_p) || top_p <= 0 || top_p > 1) return bad("top_p must be in (0, 1]");
  if (!std::isfinite(min_p) || min_p < 0 || min_p > 1) return bad("min_p must be in [0, 1]");
  if (top_k < -1) return bad("top_k must be -1, 0 or positive");
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0 || repetition_penalty > 10)
    return bad("repetition_penalty must be in (0, 10]");
  if (!std::isfinite(presence_penalty) || std::fabs(presence_penalty) > 2)
    return bad("presence_penalty must be in [-2, 2]");
  if (!std::isfinite(frequency_penalty) || std::fabs(frequency_penalty) > 2)
    return bad("frequency_penalty must be in [-2, 2]");
  if (penalty_last_n < -1) return bad("penalty_last_n must be >= -1");
  if (max_tokens < 0) return bad("max_tokens must be >= 0");
  if (logprobs < 0 || logprobs > 20) return bad("logprobs must be between 0 and 20");
  for (const auto& s : stop)
    if (s.empty()) return bad("stop strings must not be empty");
  if (n < 1 || n > 128) return bad("n must be between 1 and 128");
  if (beam_width < 0 || beam_width > 64) return bad("beam_width must be between 0 and 64");
  if (beam_width > 1 && n > beam_width) return bad("n must not exceed beam_width");
  if (!std::isfinite(length_penalty) || length_penalty < 0 || length_penalty > 10)
    return bad("length_penalty must be in [0, 10]");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return bad("logit_bias token ids must be >= 0");
    if (!std::isfinite(bias) || bias < -100 || bias > 100)
      return bad("logit_bias values must be between -100 and 100");
  }
  if (structured_outputs.NumSet() > 1)
    return bad("structured_outputs: set only one of json, json_object, regex, choice, grammar");
  const StructuredOutputs& so = structured_outputs;
  if (so.reasoning_end.empty() && !so.reasoning_start.empty())
    return bad("structured_outputs: reasoning_start needs reasoning_end");
  if (so.reasoning_end.size() > 64 || so.reasoning_start.size() > 64)
    return bad("structured_outputs: reasoning markers are at most 64 bytes");
  if (kv_policy) KVF_RETURN_IF_ERROR(ValidateKvPolicy(*kv_policy).WithContext("kv_policy"));
  return Status::Ok();
}

}  // namespace kvforge

namespace kvforge::sampling {

Sampler::Sampler(const SamplingParams& params) : p_(params) {
  seed_ = p_.seed;
  if (seed_ == 0xFFFFFFFFull) seed_ = std::random_device{}();
  rng_.seed(seed_);
}

int32_t Sampler::Argmax(const float* logits, int64_t n_vocab) {
  int32_t best = 0;
  for (int64_t i = 1; i < n_vocab; ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

float Sampler::LogProb(const float* logits, int64_t n_vocab, int32_t token,
                       std::vector<TokenLogprob>* top, int32_t n) {
  float mx = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const float lse = mx + static_cast<float>(std::log(sum));
  if (top != nullptr) {
    top->clear();
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int64_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const int32_t k = static_cast<int32_t>(std::min<int64_t>(n, n_vocab));
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int32_t i = 0; i < k; ++i)
      top->push_back({ids[static_cast<size_t>(i)], logits[ids[static_cast<size_t>(i)]] - lse});
  }
  return logits[token] - lse;
}

void Sampler::ApplyLogitBias(const SamplingParams& params, float* logits, int64_t n_vocab) {
  for (const auto& [id, bias] : params.logit_bias) {
    if (id >= n_vocab) continue;
    logits[id] = bias <= -100.0f ? -std::numeric_limits<float>::infinity() : logits[id] + bias;
  }
}

double TokenDistribution::Prob(int32_t token) const {
  if (total <= 0) return 0;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == token) return weights[i] / total;
  return 0;
}

int32_t Sampler::Sample(float* logits, int64_t n_vocab, const std::vector<int32_t>& history) {
  return Draw(Distribution(logits, n_vocab, history));
}

double Sampler::Uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::Draw(const TokenDistribution& d) {
  if (d.empty()) return -1;
  if (d.greedy) return d.ids[0];
  std::uniform_real_distribution<double> uni(0.0, d.total);
  double r = uni(rng_);
  for (size_t i = 0; i < d.ids.size(); ++i) {
    r -= d.weights[i];
    if (r <= 0) return d.ids[i];
  }
  return d.ids.back();
}

TokenDistribution Sampler::Distribution(float* logits, int64_t n_vocab,
                                        const std::vector<int32_t>& history) {
  TokenDistribution d;
  ApplyLogitBias(p_, logits, n_vocab);
  // Penalties over the recent window.
  if (p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f ||
      p_.frequency_penalty != 0.0f) {
    const size_t window = p_.penalty_last_n < 0
                              ? history.size()
                              : std::min(history.size(), static_cast<size_t>(p_.penalty_last_n));
    std::unordered_map<int32_t, int> counts;
    for (size_t i = history.size() - window; i < history.size(); ++i) ++counts[history[i]];
    for (const auto& [id, cnt] : counts) {
      if (id < 0 || id >= n_vocab) continue;
      float& l = logits[id];
      if (p_.repetition_penalty != 1.0f)
        l = l > 0 ? l / p_.repetition_penalty : l * p_.repetition_penalty;
      l -= static_cast<float>(cnt) * p_.frequency_penalty + (cnt > 0 ? p_.presence_penalty : 0.0f);
    }
  }
  const int32_t best = Argmax(logits, n_vocab);
  // Everything masked or banned (a grammar's dead end, logit_bias -100 on all it allows).
  if (!(logits[best] > -std::numeric_limits<float>::infinity())) return d;
  if (p_.temperature <= 0) {
    d.ids = {best};
    d.weights = {1.0};
    d.total = 1.0;
    d.greedy = true;
    return d;
  }

  cand_.clear();
  cand_.reserve(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) cand_.emplace_back(logits[i], static_cast<int32_t>(i));
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < keep) keep = static_cast<size_t>(p_.top_k);
  std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep), cand_.end(),
                    by_logit);
  cand_.resize(keep);
  // Probabilities at temperature 1 for the top-p / min-p cuts (llama.cpp applies them before
  // temperature in its default chain).
  std::vector<double> prob(cand_.size());
  double sum = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    prob[i] = std::exp(static_cast<double>(cand_[i].first - cand_[0].first));
    sum += prob[i];
  }
  for (auto& x : prob) x /= sum;
  if (p_.top_p < 1.0f) {
    double cum = 0;
    size_t i = 0;
    for (; i < prob.size(); ++i) {
      cum += prob[i];
      if (cum >= p_.top_p) {
        ++i;
        break;
      }
    }
    keep = std::max<size_t>(1, std::min(i, prob.size()));
    cand_.resize(keep);
    prob.resize(keep);
  }
  if (p_.min_p > 0.0f) {
    const double cut = prob[0] * p_.min_p;
    size_t i = 1;
    while (i < prob.size() && prob[i] >= cut) ++i;
    cand_.resize(i);
    prob.resize(i);
  }
  // Temperature: the weights the draw uses.
  d.ids.reserve(cand_.size());
  d.weights.reserve(cand_.size());
  for (size_t i = 0; i < cand_.size(); ++i) {
    const double w =
        std::exp(static_cast<double>(cand_[i].first - cand_[0].first) / p_.temperature);
    d.ids.push_back(cand_[i].second);
    d.weights.push_back(w);
    d.total += w;
  }
  return d;
}

}  // namespace kvforge::sampling
