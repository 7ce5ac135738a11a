// sched/step_cost_model.cc — the non-negative least-squares fit behind StepCostModel.
#include "sched/step_cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"

namespace kvforge::sched {
namespace {

// Feature scales keep the normal equations well conditioned (tokens ~1-1000, pairs ~1e3-1e7).
constexpr double kTokenScale = 64.0;
constexpr double kPairScale = 65536.0;

// Solves the m x m system a x = b in place (Gaussian elimination, partial pivoting). False when
// the system is singular to working precision.
template <size_t M>
bool Solve(std::array<std::array<double, M>, M> a, std::array<double, M> b, int m,
           std::array<double, M>* x) {
  for (int col = 0; col < m; ++col) {
    int piv = col;
    for (int r = col + 1; r < m; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[piv][col])) piv = r;
    if (std::fabs(a[piv][col]) < 1e-300) return false;
    std::swap(a[piv], a[col]);
    std::swap(b[piv], b[col]);
    for (int r = col + 1; r < m; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int c = col; c < m; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  for (int r = m - 1; r >= 0; --r) {
    double s = b[r];
    for (int c = r + 1; c < m; ++c) s -= a[r][c] * (*x)[c];
    (*x)[r] = s / a[r][r];
  }
  return true;
}

}  // namespace

int64_t ChunkAttentionPairs(int64_t pos0, int64_t n) {
  if (n <= 0) return 0;
  return pos0 * n + n * (n + 1) / 2;
}

StepCostModel::StepCostModel(double forgetting) : forgetting_(forgetting) {
  KVF_CHECK_MSG(forgetting > 0 && forgetting <= 1, "StepCostModel: forgetting must be in (0, 1]");
}

StepCostModel::Vec StepCostModel::Features(const StepShape& s) {
  return {1.0, static_cast<double>(s.decode_tokens) / kTokenScale,
          static_cast<double>(s.prefill_tokens) / kTokenScale,
          static_cast<double>(s.attention_pairs) / kPairScale};
}

void StepCostModel::Observe(const StepShape& shape, double ms) {
  if (!std::isfinite(ms) || ms < 0) return;
  if (shape.decode_tokens <= 0 && shape.prefill_tokens <= 0) return;
  if (shape.decode_tokens < 0 || shape.prefill_tokens < 0 || shape.attention_pairs < 0) return;
  if (shape.decode_tokens > 0 && ready()) TrackTail(ms, PredictMs(shape));
  const Vec x = Features(shape);
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kN; ++j) xtx_[i][j] = forgetting_ * xtx_[i][j] + x[i] * x[j];
    xty_[i] = forgetting_ * xty_[i] + x[i] * ms;
  }
  yty_ = forgetting_ * yty_ + ms * ms;
  ++num_observed_;
  if (shape.prefill_tokens > 0) ++prefill_steps_;
  if (shape.decode_tokens > 0) ++decode_steps_;
  Refit();
}

// Stochastic quantile tracking: moving up by rate * q when a ratio lands above the estimate and
// down by rate * (1 - q) otherwise settles where a fraction 1 - q of the ratios lands above.
void StepCostModel::TrackTail(double measured_ms, double predicted_ms) {
  if (!(predicted_ms > 0)) return;
  constexpr double kRate = 0.02;
  const double ratio = measured_ms / predicted_ms;
  tail_factor_ += ratio > tail_factor_ ? kRate * kTailQuantile : -kRate * (1 - kTailQuantile);
  tail_factor_ = std::clamp(tail_factor_, 0.5, 4.0);
}

bool StepCostModel::ready() const {
  return prefill_steps_ >= kMinSteps && decode_steps_ >= kMinSteps;
}

// Non-negative least squares by enumeration: the constrained optimum is the unconstrained
// solution on its own support, so the best of the 2^4 - 1 subset solutions that are all
// non-negative is it. A tiny ridge keeps subsets with too little data solvable.
void StepCostModel::Refit() {
  double trace = 0;
  for (int i = 0; i < kN; ++i) trace += xtx_[i][i];
  const double ridge = 1e-9 * trace / kN + 1e-12;
  Vec best{};
  double best_sse = yty_;  // all coefficients zero
  for (int mask = 1; mask < (1 << kN); ++mask) {
    int idx[kN];
    int m = 0;
    for (int i = 0; i < kN; ++i)
      if (mask & (1 << i)) idx[m++] = i;
    std::array<Vec, kN> a{};
    Vec b{}, sol{};
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < m; ++c) a[r][c] = xtx_[idx[r]][idx[c]];
      a[r][r] += ridge;
      b[r] = xty_[idx[r]];
    }
    if (!Solve(a, b, m, &sol)) continue;
    Vec beta{};
    bool feasible = true;
    for (int r = 0; r < m; ++r) {
      if (!(sol[r] >= 0)) feasible = false;
      beta[idx[r]] = sol[r];
    }
    if (!feasible) continue;
    // SSE = y'y - 2 beta' X'y + beta' X'X beta.
    double sse = yty_;
    for (int i = 0; i < kN; ++i) {
      sse -= 2 * beta[i] * xty_[i];
      for (int j = 0; j < kN; ++j) sse += beta[i] * xtx_[i][j] * beta[j];
    }
    if (sse < best_sse) {
      best_sse = sse;
      best = beta;
    }
  }
  coef_.fixed_ms = best[0];
  coef_.decode_ms = best[1] / kTokenScale;
  coef_.prefill_ms = best[2] / kTokenScale;
  coef_.pair_ms = best[3] / kPairScale;
}

double StepCostModel::PredictMs(const StepShape& s) const {
  if (num_observed_ == 0) return 0;
  return coef_.fixed_ms + coef_.decode_ms * static_cast<double>(s.decode_tokens) +
         coef_.prefill_ms * static_cast<double>(s.prefill_tokens) +
         coef_.pair_ms * static_cast<double>(s.attention_pairs);
}

double StepCostModel::ChunkMs(int64_t pos0, int64_t n, bool prefill) const {
  if (n <= 0) return 0;
  return (prefill ? coef_.prefill_ms : coef_.decode_ms) * static_cast<double>(n) +
         coef_.pair_ms * static_cast<double>(ChunkAttentionPairs(pos0, n));
}

int64_t StepCostModel::MaxChunkTokens(double budget_ms, int64_t pos0, int64_t max_tokens) const {
  if (max_tokens <= 0 || !(budget_ms >= 0)) return 0;
  if (ChunkMs(pos0, max_tokens) <= budget_ms) return max_tokens;
  // ChunkMs grows with n: the largest n within the budget, by bisection on [lo, hi).
  int64_t lo = 0, hi = max_tokens;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (ChunkMs(pos0, mid) <= budget_ms)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

}  // namespace kvforge::sched
