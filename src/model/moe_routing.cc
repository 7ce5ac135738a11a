#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace kvforge::model {
namespace {

// Indices of the k largest scores, best first, the lower index first among equals.
void TopK(const std::vector<float>& score, int64_t k, std::vector<int32_t>* out) {
  out->resize(score.size());
  std::iota(out->begin(), out->end(), 0);
  std::partial_sort(out->begin(), out->begin() + k, out->end(), [&](int32_t a, int32_t b) {
    return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)] ||
           (score[static_cast<size_t>(a)] == score[static_cast<size_t>(b)] && a < b);
  });
  out->resize(static_cast<size_t>(k));
}

}  // namespace

void RouteToken(const MoeConfig& m, const float* logits, const float* bias, int32_t* experts,
                float* weights) {
  const auto X = static_cast<size_t>(m.n_expert);
  thread_local std::vector<float> prob, select, group_score;
  thread_local std::vector<int32_t> order;
  prob.assign(logits, logits + X);
  if (m.gating == ExpertGating::kSigmoid) {
    for (float& p : prob) p = 1.0f / (1.0f + std::exp(-p));
  } else {
    const float mx = *std::max_element(prob.begin(), prob.end());
    float sum = 0;
    for (float& p : prob) sum += (p = std::exp(p - mx));
    for (float& p : prob) p /= sum;
  }
  select = prob;
  if (bias != nullptr)
    for (size_t e = 0; e < X; ++e) select[e] += bias[e];
  if (m.n_group > 1 && m.n_group_used < m.n_group) {
    const auto per_group = X / static_cast<size_t>(m.n_group);
    group_score.assign(static_cast<size_t>(m.n_group), 0.0f);
    for (size_t g = 0; g < group_score.size(); ++g) {
      std::vector<float> members(select.begin() + static_cast<std::ptrdiff_t>(g * per_group),
                                 select.begin() + static_cast<std::ptrdiff_t>((g + 1) * per_group));
      std::sort(members.begin(), members.end(), std::greater<float>());
      group_score[g] = members[0] + (members.size() > 1 ? members[1] : 0.0f);
    }
    TopK(group_score, m.n_group_used, &order);
    std::vector<bool> keep(group_score.size(), false);
    for (int32_t g : order) keep[static_cast<size_t>(g)] = true;
    for (size_t e = 0; e < X; ++e)
      if (!keep[e / per_group]) select[e] = -std::numeric_limits<float>::infinity();
  }
  TopK(select, m.n_expert_used, &order);
  float sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    experts[i] = order[i];
    weights[i] = prob[static_cast<size_t>(order[i])];
    sum += weights[i];
  }
  for (size_t i = 0; i < order.size(); ++i) {
    if (m.weights_norm) weights[i] /= std::max(sum, 6.103515625e-5f);  // llama.cpp clamps too
    weights[i] *= m.weights_scale;
  }
}

}  // namespace kvforge::model
