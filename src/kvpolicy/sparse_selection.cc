#include "kvpolicy/sparse_selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvforge::kvpolicy {

bool IsSparse(KvPolicyKind kind) {
  return kind == KvPolicyKind::kQuest || kind == KvPolicyKind::kNsa;
}

SparseDecode SparseDecodeFor(const KvPolicy& p, int64_t budget_tokens, int32_t block_tokens) {
  SparseDecode s;
  if (!IsSparse(p.kind)) return s;
  s.kind = p.kind;
  const int64_t bt = std::max<int32_t>(block_tokens, 1);
  if (p.kind == KvPolicyKind::kQuest) {
    s.pick_blocks = std::max<int64_t>(3, budget_tokens / bt);  // Quest's max(3, B / P)
    s.dense_layers = 2;
  } else {
    s.unit_blocks = static_cast<int32_t>(std::max<int64_t>(1, 64 / bt));
    s.pick_units = std::max<int64_t>(3, budget_tokens / (s.unit_blocks * bt));
    const int64_t window = p.window >= 0 ? p.window : 512;
    s.window_blocks = (window + bt - 1) / bt;
  }
  return s;
}

float QuestBound(const float* q, int32_t group, int32_t head_dim, const float* summary) {
  const float* mn = summary;
  const float* mx = summary + head_dim;
  float u = 0;
  for (int32_t g = 0; g < group; ++g) {
    const float* qg = q + static_cast<int64_t>(g) * head_dim;
    for (int32_t i = 0; i < head_dim; ++i) u += std::max(qg[i] * mn[i], qg[i] * mx[i]);
  }
  return u;
}

namespace {

// The `want` highest-scoring of `n` candidates not already chosen (ties: the later one), added
// to `chosen`.
void TakeTop(const std::vector<float>& score, int64_t want, std::vector<char>* chosen) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < static_cast<int64_t>(score.size()); ++i)
    if (!(*chosen)[static_cast<size_t>(i)]) idx.push_back(i);
  want = std::min<int64_t>(want, static_cast<int64_t>(idx.size()));
  if (want <= 0) return;
  std::partial_sort(idx.begin(), idx.begin() + want, idx.end(), [&](int64_t a, int64_t b) {
    const float sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
    return sa != sb ? sa > sb : a > b;
  });
  for (int64_t i = 0; i < want; ++i)
    (*chosen)[static_cast<size_t>(idx[static_cast<size_t>(i)])] = 1;
}

}  // namespace

std::vector<int32_t> SelectDecodeBlocks(const SparseDecode& plan, const float* q, int32_t group,
                                        int32_t head_dim, float scale,
                                        const BlockKeySummaries& sums, int32_t kvh,
                                        const int32_t* table, int64_t n_logical,
                                        int64_t tokens_in_last, int32_t block_tokens) {
  std::vector<char> chosen(static_cast<size_t>(n_logical), 0);
  chosen.back() = 1;  // the newest block holds the query itself
  if (plan.kind == KvPolicyKind::kQuest) {
    std::vector<float> bound(static_cast<size_t>(n_logical), 0.0f);
    for (int64_t b = 0; b + 1 < n_logical; ++b)
      bound[static_cast<size_t>(b)] = QuestBound(q, group, head_dim, sums.Of(table[b], kvh));
    TakeTop(bound, plan.pick_blocks - 1, &chosen);
  } else {
    // NSA: 64-token units scored by softmax(q . mean key) summed over the group's heads.
    const int64_t ub = plan.unit_blocks;
    const int64_t n_units = (n_logical + ub - 1) / ub;
    std::vector<float> mean(static_cast<size_t>(head_dim));
    std::vector<std::vector<float>> logits(static_cast<size_t>(group),
                                           std::vector<float>(static_cast<size_t>(n_units)));
    for (int64_t u = 0; u < n_units; ++u) {
      std::fill(mean.begin(), mean.end(), 0.0f);
      int64_t count = 0;
      for (int64_t b = u * ub; b < std::min(n_logical, (u + 1) * ub); ++b) {
        const float* sum = sums.Of(table[b], kvh) + 2 * head_dim;
        for (int32_t i = 0; i < head_dim; ++i) mean[static_cast<size_t>(i)] += sum[i];
        count += b + 1 == n_logical ? tokens_in_last : block_tokens;
      }
      for (float& m : mean) m /= static_cast<float>(std::max<int64_t>(count, 1));
      for (int32_t g = 0; g < group; ++g) {
        const float* qg = q + static_cast<int64_t>(g) * head_dim;
        float dot = 0;
        for (int32_t i = 0; i < head_dim; ++i) dot += qg[i] * mean[static_cast<size_t>(i)];
        logits[static_cast<size_t>(g)][static_cast<size_t>(u)] = dot * scale;
      }
    }
    std::vector<float> score(static_cast<size_t>(n_units), 0.0f);
    for (const auto& l : logits) {
      const float mx = *std::max_element(l.begin(), l.end());
      double z = 0;
      for (float x : l) z += std::exp(static_cast<double>(x - mx));
      for (int64_t u = 0; u < n_units; ++u)
        score[static_cast<size_t>(u)] +=
            static_cast<float>(std::exp(static_cast<double>(l[static_cast<size_t>(u)] - mx)) / z);
    }
    std::vector<char> unit_on(static_cast<size_t>(n_units), 0);
    unit_on[0] = 1;                                                                        // sinks
    for (int64_t u = std::max<int64_t>(0, n_units - 2); u < n_units; ++u) unit_on[u] = 1;  // local
    int64_t forced = 0;
    for (char c : unit_on) forced += c;
    TakeTop(score, plan.pick_units - forced, &unit_on);
    for (int64_t u = 0; u < n_units; ++u)
      if (unit_on[static_cast<size_t>(u)])
        for (int64_t b = u * ub; b < std::min(n_logical, (u + 1) * ub); ++b)
          chosen[static_cast<size_t>(b)] = 1;
    for (int64_t b = std::max<int64_t>(0, n_logical - plan.window_blocks); b < n_logical; ++b)
      chosen[static_cast<size_t>(b)] = 1;  // the sliding window
  }
  std::vector<int32_t> out;
  for (int64_t b = 0; b < n_logical; ++b)
    if (chosen[static_cast<size_t>(b)]) out.push_back(static_cast<int32_t>(b));
  return out;
}

}  // namespace kvforge::kvpolicy
