#include "kv_eval.h"

#include <algorithm>
#include <cmath>

namespace kvforge::cli {
namespace {

// log-softmax of one logit row into out (double: KL of near-identical rows needs the digits).
void LogSoftmax(const float* x, int64_t n, std::vector<double>* out) {
  out->resize(static_cast<size_t>(n));
  double mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) (*out)[static_cast<size_t>(i)] = x[i] - lse;
}

int64_t ArgMax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

}  // namespace

double RegimeStats::Ppl() const { return tokens ? std::exp(nll / static_cast<double>(tokens)) : 0; }
double RegimeStats::BasePpl() const {
  return tokens ? std::exp(base_nll / static_cast<double>(tokens)) : 0;
}
double RegimeStats::KlMean() const {
  double s = 0;
  for (double v : kl) s += v;
  return kl.empty() ? 0 : s / static_cast<double>(kl.size());
}
double RegimeStats::KlP99() const {
  if (kl.empty()) return 0;
  std::vector<double> v = kl;
  std::sort(v.begin(), v.end());
  const double idx = 0.99 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}
double RegimeStats::Top1() const {
  return tokens ? static_cast<double>(top1_same) / static_cast<double>(tokens) : 0;
}

void ScoreRows(const std::vector<float>& base, const std::vector<float>& test,
               const std::vector<int32_t>& tokens, int64_t n_vocab, int64_t from, int64_t to,
               RegimeStats* st) {
  std::vector<double> lb, lt;
  for (int64_t j = from; j < to; ++j) {
    const float* b = base.data() + j * n_vocab;
    const float* t = test.data() + j * n_vocab;
    LogSoftmax(b, n_vocab, &lb);
    LogSoftmax(t, n_vocab, &lt);
    const auto target = static_cast<size_t>(tokens[static_cast<size_t>(j + 1)]);
    st->nll -= lt[target];
    st->base_nll -= lb[target];
    double kl = 0;
    for (size_t i = 0; i < lb.size(); ++i) kl += std::exp(lb[i]) * (lb[i] - lt[i]);
    st->kl.push_back(std::max(0.0, kl));  // tiny negative values are rounding
    st->top1_same += ArgMax(b, n_vocab) == ArgMax(t, n_vocab) ? 1 : 0;
    ++st->tokens;
  }
}

void CompareGreedy(const std::vector<int32_t>& base, const std::vector<int32_t>& test,
                   GreedyStats* st) {
  const size_t n = std::max(base.size(), test.size());
  size_t same = 0, prefix = 0;
  bool diverged = false;
  for (size_t i = 0; i < n; ++i) {
    const bool eq = i < base.size() && i < test.size() && base[i] == test[i];
    same += eq ? 1 : 0;
    if (!eq) diverged = true;
    if (!diverged) ++prefix;
  }
  ++st->prompts;
  st->tokens += static_cast<int64_t>(n);
  st->same += static_cast<int64_t>(same);
  st->prefix_sum += static_cast<double>(prefix);
  st->identical += diverged ? 0 : 1;
}

}  // namespace kvforge::cli
