#include "model/weights.h"

#include <string>

#include "gguf/gguf_reader.h"
#include "model/weight_binder.h"
#include "model/weights_mla.h"

namespace kvforge::model {
namespace {

Status BindAttention(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* L) {
  const ArchTraits& t = *c.traits;
  if (t.fused_qkv) {
    KVF_ASSIGN_OR_RETURN(L->wqkv, b.M(p + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim()));
  } else {
    KVF_ASSIGN_OR_RETURN(L->wq, b.M(p + "attn_q.weight", c.n_embd, c.q_dim()));
    KVF_ASSIGN_OR_RETURN(L->wk, b.M(p + "attn_k.weight", c.n_embd, c.kv_dim()));
    KVF_ASSIGN_OR_RETURN(L->wv, b.M(p + "attn_v.weight", c.n_embd, c.kv_dim()));
  }
  KVF_ASSIGN_OR_RETURN(L->wo, b.M(p + "attn_output.weight", c.q_dim(), c.n_embd));
  if (t.qkv_bias) {
    KVF_ASSIGN_OR_RETURN(L->bq, b.V(p + "attn_q.bias", c.q_dim()));
    KVF_ASSIGN_OR_RETURN(L->bk, b.V(p + "attn_k.bias", c.kv_dim()));
    KVF_ASSIGN_OR_RETURN(L->bv, b.V(p + "attn_v.bias", c.kv_dim()));
  }
  if (t.qk_norm) {
    KVF_ASSIGN_OR_RETURN(L->q_norm, b.V(p + "attn_q_norm.weight", c.head_dim));
    KVF_ASSIGN_OR_RETURN(L->k_norm, b.V(p + "attn_k_norm.weight", c.head_dim));
  }
  return Status::Ok();
}

Status BindFeedForward(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* L) {
  const ArchTraits& t = *c.traits;
  if (!t.parallel_block) {
    KVF_ASSIGN_OR_RETURN(L->ffn_norm, b.V(p + "ffn_norm.weight", c.n_embd));
  }
  if (t.fused_gate_up) {
    KVF_ASSIGN_OR_RETURN(L->w_gate_up, b.M(p + "ffn_up.weight", c.n_embd, 2 * c.n_ff));
  } else {
    if (t.ffn != FfnKind::kGelu) {
      KVF_ASSIGN_OR_RETURN(L->w_gate, b.M(p + "ffn_gate.weight", c.n_embd, c.n_ff));
    }
    KVF_ASSIGN_OR_RETURN(L->w_up, b.M(p + "ffn_up.weight", c.n_embd, c.n_ff));
  }
  KVF_ASSIGN_OR_RETURN(L->w_down, b.M(p + "ffn_down.weight", c.n_ff, c.n_embd));
  return Status::Ok();
}

uint64_t LayerBytes(const LayerWeights& L) {
  return L.wq.Bytes() + L.wk.Bytes() + L.wv.Bytes() + L.wqkv.Bytes() + L.wo.Bytes() +
         L.w_gate.Bytes() + L.w_up.Bytes() + L.w_gate_up.Bytes() + L.w_down.Bytes();
}

}  // namespace

Result<ModelWeights> ModelWeights::Bind(const gguf::GgufFile& f, const ModelConfig& c) {
  const ArchTraits& t = *c.traits;
  Binder b(f);
  ModelWeights w;
  KVF_ASSIGN_OR_RETURN(w.token_embd, b.M("token_embd.weight", c.n_embd, c.n_vocab));
  KVF_ASSIGN_OR_RETURN(w.output_norm, b.V("output_norm.weight", c.n_embd));
  if (t.norm == NormKind::kLayer) {
    KVF_ASSIGN_OR_RETURN(w.output_norm_b, b.V("output_norm.bias", c.n_embd));
  }
  if (!t.always_tied && b.Has("output.weight")) {
    KVF_ASSIGN_OR_RETURN(w.output, b.M("output.weight", c.n_embd, c.n_vocab));
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  if (!c.rope_freq_factors.empty()) b.Consumed("rope_freqs.weight");  // read by ModelConfig
  w.matrix_bytes = w.output.Bytes();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights L;
    KVF_ASSIGN_OR_RETURN(L.attn_norm, b.V(p + "attn_norm.weight", c.n_embd));
    if (t.norm == NormKind::kLayer) {
      KVF_ASSIGN_OR_RETURN(L.attn_norm_b, b.V(p + "attn_norm.bias", c.n_embd));
    }
    if (t.mla) {
      KVF_RETURN_IF_ERROR(BindMlaAttention(b, c, p, &L, &w.owned));
    } else {
      KVF_RETURN_IF_ERROR(BindAttention(b, c, p, &L));
    }
    if (c.moe.IsMoeLayer(l)) {
      KVF_ASSIGN_OR_RETURN(L.ffn_norm, b.V(p + "ffn_norm.weight", c.n_embd));
      KVF_RETURN_IF_ERROR(BindMoe(b, c, p, &L));
    } else {
      KVF_RETURN_IF_ERROR(BindFeedForward(b, c, p, &L));
    }
    w.matrix_bytes += LayerBytes(L) + MlaMoeBytes(L, c.moe);
    w.layers.push_back(std::move(L));
  }
  KVF_RETURN_IF_ERROR(b.CheckNothingLeft(c.arch_name));
  return w;
}

}  // namespace kvforge::model
