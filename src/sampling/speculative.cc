#include "sampling/speculative.h"

#include <algorithm>

namespace kvforge::sampling {

namespace {

// (p - q)+ over p's candidates (outside them p is 0, so the residual is too).
TokenDistribution Residual(const TokenDistribution& p, int32_t x, const TokenDistribution* q) {
  TokenDistribution r;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const double pi = p.weights[i] / p.total;
    const double qi = q ? q->Prob(p.ids[i]) : (p.ids[i] == x ? 1.0 : 0.0);
    const double w = std::max(0.0, pi - qi);
    if (w <= 0) continue;
    r.ids.push_back(p.ids[i]);
    r.weights.push_back(w);
    r.total += w;
  }
  return r;
}

}  // namespace

DraftVerdict VerifyDraft(Sampler& sampler, const TokenDistribution& p, int32_t x,
                         const TokenDistribution* q) {
  DraftVerdict v;
  if (p.empty()) return v;
  if (p.greedy) {
    v.accepted = x == p.ids[0];
    v.token = p.ids[0];
    return v;
  }
  const double px = p.Prob(x);
  const double qx = q ? q->Prob(x) : 1.0;
  // u < px / qx, without dividing by a q that gave x no mass (then any px > 0 keeps it).
  if (px > 0 && sampler.Uniform() * qx < px) {
    v.accepted = true;
    v.token = x;
    return v;
  }
  const TokenDistribution r = Residual(p, x, q);
  // p <= q everywhere only when p == q, where x would have been kept; rounding aside, draw p.
  v.token = sampler.Draw(r.empty() ? p : r);
  return v;
}

}  // namespace kvforge::sampling
