// moe.cc — the Mixture-of-Experts feed-forward of deepseek2 layers past the leading dense ones:
// every token is routed (moe_routing.h), then the step's tokens are grouped by expert so each
// chosen expert's three matrices are read once per step whatever the batch, and the shared
// experts (one SwiGLU of n_shared x n_ff_expert) run over all tokens.
#include <algorithm>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "model/model.h"
#include "model/moe_routing.h"

namespace kvforge::model {

void Model::MoeFeedForward(const LayerWeights& L, int64_t n, Workspace& ws,
                           kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const MoeConfig& m = c.moe;
  const MoeWeights& W = L.moe;
  const kernels::KernelTable& kt = kernels::Active();
  const int64_t E = c.n_embd, F = m.n_ff_expert, K = m.n_expert_used;
  // Routing: [n][K] experts and weights.
  MatMul(W.gate_inp, ws.xn.data(), n, ws.moe_logits.data(), ws, pool);
  std::vector<int32_t> chosen(static_cast<size_t>(n * K));
  std::vector<float> weight(static_cast<size_t>(n * K));
  const float* bias = W.exp_probs_b.empty() ? nullptr : W.exp_probs_b.data();
  for (int64_t i = 0; i < n; ++i)
    RouteToken(m, ws.moe_logits.data() + i * m.n_expert, bias, chosen.data() + i * K,
               weight.data() + i * K);
  // Tokens per expert, in token order.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(m.n_expert));
  for (int64_t i = 0; i < n * K; ++i)
    by_expert[static_cast<size_t>(chosen[static_cast<size_t>(i)])].push_back(
        {i / K, weight[static_cast<size_t>(i)]});
  std::fill(ws.y.begin(), ws.y.begin() + n * E, 0.0f);
  for (int64_t e = 0; e < m.n_expert; ++e) {
    const auto& tokens = by_expert[static_cast<size_t>(e)];
    if (tokens.empty()) continue;
    const auto cnt = static_cast<int64_t>(tokens.size());
    for (int64_t j = 0; j < cnt; ++j)
      std::copy(ws.xn.data() + tokens[static_cast<size_t>(j)].first * E,
                ws.xn.data() + (tokens[static_cast<size_t>(j)].first + 1) * E,
                ws.moe_x.data() + j * E);
    MatMul(W.gate_exps.Rows(e * F, F), ws.moe_x.data(), cnt, ws.moe_gate.data(), ws, pool);
    MatMul(W.up_exps.Rows(e * F, F), ws.moe_x.data(), cnt, ws.moe_up.data(), ws, pool);
    kt.swiglu(ws.moe_gate.data(), ws.moe_up.data(), ws.moe_act.data(), cnt * F);
    MatMul(W.down_exps.Rows(e * E, E), ws.moe_act.data(), cnt, ws.moe_y.data(), ws, pool);
    for (int64_t j = 0; j < cnt; ++j) {
      const auto& [tok, w] = tokens[static_cast<size_t>(j)];
      float* y = ws.y.data() + tok * E;
      const float* ye = ws.moe_y.data() + j * E;
      for (int64_t d = 0; d < E; ++d) y[d] += w * ye[d];
    }
  }
  if (W.gate_shexp.rows == 0) return;
  const int64_t S = W.gate_shexp.rows;
  MatMul(W.gate_shexp, ws.xn.data(), n, ws.moe_gate.data(), ws, pool);
  MatMul(W.up_shexp, ws.xn.data(), n, ws.moe_up.data(), ws, pool);
  kt.swiglu(ws.moe_gate.data(), ws.moe_up.data(), ws.moe_act.data(), n * S);
  MatMul(W.down_shexp, ws.moe_act.data(), n, ws.moe_y.data(), ws, pool);
  for (int64_t i = 0; i < n * E; ++i) ws.y[i] += ws.moe_y[i];
}

}  // namespace kvforge::model
