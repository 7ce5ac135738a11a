#include "model/weights_mla.h"

#include "base/strings.h"
#include "gguf/gguf_reader.h"
#include "tensor/dequant.h"

namespace kvforge::model {
namespace {

using base::StrFormat;

// The legacy fused attn_kv_b ([H (N + Vh) x R]: per head N key rows, then Vh value rows) in the
// split form the forward reads: wk_b per head [R x N] (the key rows transposed) and wv_b per head
// [Vh x R], as f32 copies owned by the weights.
Status SplitLegacyKvB(Binder& b, const ModelConfig& c, const std::string& name, MlaWeights* m,
                      std::vector<std::vector<float>>* owned) {
  const MlaConfig& a = c.mla;
  const int64_t H = c.n_head, R = a.kv_lora_rank, N = a.nope_dim, Vh = a.v_head_dim;
  KVF_ASSIGN_OR_RETURN(Matrix kv_b, b.M(name, R, H * (N + Vh)));
  std::vector<float> k_b(static_cast<size_t>(H * R * N)), v_b(static_cast<size_t>(H * Vh * R));
  std::vector<float> row(static_cast<size_t>(R));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < N + Vh; ++r) {
      const uint8_t* src = kv_b.data + static_cast<size_t>(h * (N + Vh) + r) * kv_b.row_bytes;
      KVF_RETURN_IF_ERROR(
          tensor::DequantizeRow(static_cast<tensor::DType>(kv_b.type), src, row.data(), R)
              .WithContext(b.file().path() + ": " + name));
      for (int64_t j = 0; j < R; ++j) {
        if (r < N) {
          k_b[static_cast<size_t>((h * R + j) * N + r)] = row[static_cast<size_t>(j)];
        } else {
          v_b[static_cast<size_t>((h * Vh + r - N) * R + j)] = row[static_cast<size_t>(j)];
        }
      }
    }
  auto f32 = [&](std::vector<float> data, int64_t rows, int64_t cols) {
    owned->push_back(std::move(data));
    Matrix mat;
    mat.type = kernels::WType::kF32;
    mat.data = reinterpret_cast<const uint8_t*>(owned->back().data());
    mat.rows = rows;
    mat.cols = cols;
    mat.row_bytes = static_cast<size_t>(cols) * 4;
    return mat;
  };
  m->wk_b = f32(std::move(k_b), H * R, N);
  m->wv_b = f32(std::move(v_b), H * Vh, R);
  return Status::Ok();
}

}  // namespace

Status BindMlaAttention(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* L,
                        std::vector<std::vector<float>>* owned) {
  const MlaConfig& a = c.mla;
  const int64_t H = c.n_head, E = c.n_embd, R = a.kv_lora_rank, P = a.rope_dim, N = a.nope_dim,
                Vh = a.v_head_dim, QK = H * a.qk_head_dim();
  MlaWeights& m = L->mla;
  if (a.q_lora_rank > 0) {
    KVF_ASSIGN_OR_RETURN(m.wq_a, b.M(p + "attn_q_a.weight", E, a.q_lora_rank));
    KVF_ASSIGN_OR_RETURN(m.q_a_norm, b.V(p + "attn_q_a_norm.weight", a.q_lora_rank));
    KVF_ASSIGN_OR_RETURN(m.wq_b, b.M(p + "attn_q_b.weight", a.q_lora_rank, QK));
  } else {
    KVF_ASSIGN_OR_RETURN(m.wq, b.M(p + "attn_q.weight", E, QK));
  }
  KVF_ASSIGN_OR_RETURN(m.wkv_a, b.M(p + "attn_kv_a_mqa.weight", E, R + P));
  KVF_ASSIGN_OR_RETURN(m.kv_a_norm, b.V(p + "attn_kv_a_norm.weight", R));
  if (b.Has(p + "attn_k_b.weight") || !b.Has(p + "attn_kv_b.weight")) {
    KVF_ASSIGN_OR_RETURN(m.wk_b, b.Stacked(p + "attn_k_b.weight", N, R, H));
    KVF_ASSIGN_OR_RETURN(m.wv_b, b.Stacked(p + "attn_v_b.weight", R, Vh, H));
  } else {
    KVF_RETURN_IF_ERROR(SplitLegacyKvB(b, c, p + "attn_kv_b.weight", &m, owned));
  }
  KVF_ASSIGN_OR_RETURN(L->wo, b.M(p + "attn_output.weight", H * Vh, E));
  return Status::Ok();
}

Status BindMoe(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* L) {
  const MoeConfig& e = c.moe;
  const int64_t E = c.n_embd, F = e.n_ff_expert, X = e.n_expert, S = e.n_shared * F;
  MoeWeights& m = L->moe;
  KVF_ASSIGN_OR_RETURN(m.gate_inp, b.M(p + "ffn_gate_inp.weight", E, X));
  if (b.Has(p + "exp_probs_b.bias")) {
    KVF_ASSIGN_OR_RETURN(m.exp_probs_b, b.V(p + "exp_probs_b.bias", X));
  }
  KVF_ASSIGN_OR_RETURN(m.gate_exps, b.Stacked(p + "ffn_gate_exps.weight", E, F, X));
  KVF_ASSIGN_OR_RETURN(m.up_exps, b.Stacked(p + "ffn_up_exps.weight", E, F, X));
  KVF_ASSIGN_OR_RETURN(m.down_exps, b.Stacked(p + "ffn_down_exps.weight", F, E, X));
  if (S > 0) {
    KVF_ASSIGN_OR_RETURN(m.gate_shexp, b.M(p + "ffn_gate_shexp.weight", E, S));
    KVF_ASSIGN_OR_RETURN(m.up_shexp, b.M(p + "ffn_up_shexp.weight", E, S));
    KVF_ASSIGN_OR_RETURN(m.down_shexp, b.M(p + "ffn_down_shexp.weight", S, E));
  }
  return Status::Ok();
}

uint64_t MlaMoeBytes(const LayerWeights& L, const MoeConfig& moe) {
  const MlaWeights& a = L.mla;
  uint64_t n = a.wq_a.Bytes() + a.wq_b.Bytes() + a.wq.Bytes() + a.wkv_a.Bytes() + a.wk_b.Bytes() +
               a.wv_b.Bytes();
  const MoeWeights& m = L.moe;
  // A decode step reads the experts its tokens chose: count the used ones of one token.
  const uint64_t per_expert =
      moe.n_expert > 0 ? (m.gate_exps.Bytes() + m.up_exps.Bytes() + m.down_exps.Bytes()) /
                             static_cast<uint64_t>(moe.n_expert)
                       : 0;
  n += m.gate_inp.Bytes() + per_expert * static_cast<uint64_t>(moe.n_expert_used) +
       m.gate_shexp.Bytes() + m.up_shexp.Bytes() + m.down_shexp.Bytes();
  return n;
}

}  // namespace kvforge::model
