// forward_llama.cc — the attention and feed-forward of the llama-shaped families (llama, qwen2,
// qwen3, gemma, phi3, falcon; their differences are ArchTraits rows, arch.h): q/k/v projections,
// per-head norms, RoPE, the cache write, attention over K/V heads and the dense MLP.
#include <cmath>

#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "model/attention_tasks.h"
#include "model/model.h"
#include "model/token_parallel.h"

namespace kvforge::model {
namespace {

// In place: each of `heads` heads of `hd` floats RMS-normalised with weight w[hd] (qwen3 q/k).
void NormalizeHeads(const kernels::KernelTable& kt, float* x, int64_t heads, int64_t hd,
                    const std::vector<float>& w, float eps) {
  thread_local std::vector<float> tmp;
  tmp.resize(static_cast<size_t>(hd));
  for (int64_t h = 0; h < heads; ++h) {
    kt.rms_norm(x + h * hd, w.data(), tmp.data(), hd, eps);
    std::copy(tmp.begin(), tmp.end(), x + h * hd);
  }
}

// Splits rows of a fused projection: src [n][sum(widths)] -> dst[j] [n][widths[j]].
void SplitRows(const float* src, int64_t n, std::initializer_list<std::pair<float*, int64_t>> dst) {
  int64_t total = 0;
  for (const auto& d : dst) total += d.second;
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (const auto& d : dst) {
      std::copy(src + i * total + off, src + i * total + off + d.second, d.first + i * d.second);
      off += d.second;
    }
  }
}

}  // namespace

// q [n][q_dim], k and v [n][kv_dim] from xn, biases added (qwen2).
void Model::ProjectQkv(const LayerWeights& L, int64_t n, Workspace& ws,
                       kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t QD = c.q_dim(), KD = c.kv_dim();
  if (c.traits->fused_qkv) {
    MatMul(L.wqkv, ws.xn.data(), n, ws.fused.data(), ws, pool);
    SplitRows(ws.fused.data(), n, {{ws.q.data(), QD}, {ws.k.data(), KD}, {ws.v.data(), KD}});
  } else {
    MatMul(L.wq, ws.xn.data(), n, ws.q.data(), ws, pool);
    MatMul(L.wk, ws.xn.data(), n, ws.k.data(), ws, pool);
    MatMul(L.wv, ws.xn.data(), n, ws.v.data(), ws, pool);
  }
  if (!c.traits->qkv_bias) return;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < QD; ++j) ws.q[i * QD + j] += L.bq[j];
    for (int64_t j = 0; j < KD; ++j) {
      ws.k[i * KD + j] += L.bk[j];
      ws.v[i * KD + j] += L.bv[j];
    }
  }
}

// y [n][n_embd] = the family's MLP of xn: SwiGLU, GeGLU (gemma) or GELU (falcon).
void Model::FeedForward(const LayerWeights& L, int64_t n, Workspace& ws,
                        kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t F = c.n_ff;
  const kernels::KernelTable& kt = kernels::Active();
  if (c.traits->fused_gate_up) {
    MatMul(L.w_gate_up, ws.xn.data(), n, ws.fused.data(), ws, pool);
    SplitRows(ws.fused.data(), n, {{ws.gate.data(), F}, {ws.up.data(), F}});
  } else {
    if (c.traits->ffn != FfnKind::kGelu)
      MatMul(L.w_gate, ws.xn.data(), n, ws.gate.data(), ws, pool);
    MatMul(L.w_up, ws.xn.data(), n, ws.up.data(), ws, pool);
  }
  const FfnKind kind = c.traits->ffn;
  ForEachToken(pool, n, [&](int64_t i) {
    const int64_t o = i * F;
    switch (kind) {
      case FfnKind::kSwiGlu:
        return kt.swiglu(ws.gate.data() + o, ws.up.data() + o, ws.ffn.data() + o, F);
      case FfnKind::kGeGlu:
        return kt.gelu(ws.gate.data() + o, ws.up.data() + o, ws.ffn.data() + o, F);
      case FfnKind::kGelu:
        return kt.gelu(ws.up.data() + o, nullptr, ws.ffn.data() + o, F);
    }
  });
  MatMul(L.w_down, ws.ffn.data(), n, ws.y.data(), ws, pool);
}

// ws.y [n][n_embd] = wo . attention(q, k, v) of xn, this step's K/V rows written to the cache.
void Model::AttendLlama(int64_t l, const LayerWeights& L, const Batch& batch,
                        const std::vector<int64_t>& pos, kvstore::KvAccess& kv, Workspace& ws,
                        kernels::ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const kernels::KernelTable& kt = kernels::Active();
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t QD = c.q_dim(), KD = c.kv_dim(), HD = c.head_dim;
  const float* rope_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
  ProjectQkv(L, n, ws, pool);
  if (c.traits->qk_norm)
    ForEachToken(pool, n, [&](int64_t i) {
      NormalizeHeads(kt, ws.q.data() + i * QD, c.n_head, HD, L.q_norm, c.rms_eps);
      NormalizeHeads(kt, ws.k.data() + i * KD, c.n_head_kv, HD, L.k_norm, c.rms_eps);
    });
  ForEachToken(pool, n, [&](int64_t i) {
    kernels::Rope(ws.q.data() + i * QD, static_cast<int32_t>(c.n_head), static_cast<int32_t>(HD),
                  static_cast<int32_t>(c.rope_dim), pos[static_cast<size_t>(i)], c.rope_freq_base,
                  c.rope_freq_scale, c.rope_neox, rope_factors);
    kernels::Rope(ws.k.data() + i * KD, static_cast<int32_t>(c.n_head_kv), static_cast<int32_t>(HD),
                  static_cast<int32_t>(c.rope_dim), pos[static_cast<size_t>(i)], c.rope_freq_base,
                  c.rope_freq_scale, c.rope_neox, rope_factors);
  });
  // Hand this step's K/V rows to the cache, which encodes them with its dtype's codec.
  for (const auto& s : batch.seqs)
    kv.WriteAt(static_cast<int32_t>(l), s.kv_seq, s.first_slot(), s.pos0, s.n_tokens,
               ws.k.data() + s.token_begin * KD, ws.v.data() + s.token_begin * KD, KD);
  AttentionJob job;
  job.layer = static_cast<int32_t>(l);
  job.q = ws.q.data();
  job.q_stride = QD;
  job.out = ws.attn.data();
  job.out_stride = QD;
  job.n_head = static_cast<int32_t>(c.n_head);
  job.n_kv_head = static_cast<int32_t>(c.n_head_kv);
  job.head_dim = static_cast<int32_t>(HD);
  job.scale = 1.0f / std::sqrt(static_cast<float>(HD));
  RunAttentionTasks(batch, job, kv, ws, pool);
  MatMul(L.wo, ws.attn.data(), n, ws.y.data(), ws, pool);
}

}  // namespace kvforge::model
