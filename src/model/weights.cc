#include "model/weights.h"

#include <set>
#include <string>

#include "base/strings.h"
#include "gguf/gguf_reader.h"
#include "tensor/dequant.h"

namespace kvforge::model {
namespace {

using base::StrFormat;

Status ShapeError(const gguf::GgufFile& f, const gguf::TensorInfo& t, int64_t d0, int64_t d1) {
  std::string have;
  for (size_t i = 0; i < t.dims.size(); ++i) have += (i ? " x " : "") + std::to_string(t.dims[i]);
  return Status::InvalidArgument(StrFormat("%s: tensor '%s' has shape [%s], expected [%lld x %lld]",
                                           f.path().c_str(), t.name.c_str(), have.c_str(),
                                           (long long)d0, (long long)d1));
}

Result<const gguf::TensorInfo*> Need(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  if (!t) return Status::NotFound(f.path() + ": required tensor '" + name + "' is missing");
  return t;
}

// cols = dims[0] (input width), rows = dims[1] (output width).
Result<Matrix> BindMatrix(const gguf::GgufFile& f, const std::string& name, int64_t cols,
                          int64_t rows) {
  KVF_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Need(f, name));
  if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows)
    return ShapeError(f, *t, cols, rows);
  if (!tensor::IsComputeSupported(t->dtype))
    return Status::Unimplemented(
        StrFormat("%s: tensor '%s' has weight type %s, which this build cannot "
                  "compute with yet (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                  "q4_k, q5_k, q6_k)",
                  f.path().c_str(), name.c_str(), tensor::DTypeName(t->dtype).data()));
  Matrix m;
  m.type = static_cast<kernels::WType>(t->dtype);
  m.data = t->data;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = *tensor::RowBytes(t->dtype, static_cast<uint64_t>(cols));
  return m;
}

Result<std::vector<float>> BindVector(const gguf::GgufFile& f, const std::string& name, int64_t n) {
  KVF_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Need(f, name));
  if (t->dims.size() != 1 || t->dims[0] != n)
    return Status::InvalidArgument(StrFormat("%s: tensor '%s' should be a vector of %lld values",
                                             f.path().c_str(), name.c_str(), (long long)n));
  std::vector<float> v(static_cast<size_t>(n));
  KVF_RETURN_IF_ERROR(
      tensor::DequantizeRow(t->dtype, t->data, v.data(), n).WithContext(f.path() + ": " + name));
  return v;
}

}  // namespace

namespace {

// Binds by name and remembers what was bound, for the final every-tensor-accounted-for check.
class Binder {
 public:
  explicit Binder(const gguf::GgufFile& f) : f_(f) {}
  Result<Matrix> M(const std::string& name, int64_t cols, int64_t rows) {
    used_.insert(name);
    return BindMatrix(f_, name, cols, rows);
  }
  Result<std::vector<float>> V(const std::string& name, int64_t n) {
    used_.insert(name);
    return BindVector(f_, name, n);
  }
  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }
  void Consumed(const std::string& name) { used_.insert(name); }
  Status CheckNothingLeft(const std::string& arch) const {
    for (const auto& t : f_.tensors())
      if (used_.count(t.name) == 0)
        return Status::Unimplemented(f_.path() + ": tensor '" + t.name + "' is not used by the " +
                                     arch +
                                     " forward pass; refusing to load a model that would "
                                     "run without it");
    return Status::Ok();
  }

 private:
  const gguf::GgufFile& f_;
  std::set<std::string> used_;
};

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
  if (t.mla)  // ModelConfig reads the MLA / MoE / YaRN hyper-parameters; the forward is #18's
    return Status::Unimplemented(
        f.path() + ": " + c.arch_name +
        " (multi-head latent attention, Mixture-of-Experts) is recognised and its "
        "hyper-parameters are read, but its forward pass is not built yet");
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
    KVF_RETURN_IF_ERROR(BindAttention(b, c, p, &L));
    KVF_RETURN_IF_ERROR(BindFeedForward(b, c, p, &L));
    w.matrix_bytes += LayerBytes(L);
    w.layers.push_back(std::move(L));
  }
  KVF_RETURN_IF_ERROR(b.CheckNothingLeft(c.arch_name));
  return w;
}

}  // namespace kvforge::model
