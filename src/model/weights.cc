#include "model/weights.h"

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

Result<ModelWeights> ModelWeights::Bind(const gguf::GgufFile& f, const ModelConfig& c) {
  ModelWeights w;
  KVF_ASSIGN_OR_RETURN(w.token_embd, BindMatrix(f, "token_embd.weight", c.n_embd, c.n_vocab));
  KVF_ASSIGN_OR_RETURN(w.output_norm, BindVector(f, "output_norm.weight", c.n_embd));
  if (f.FindTensor("output.weight")) {
    KVF_ASSIGN_OR_RETURN(w.output, BindMatrix(f, "output.weight", c.n_embd, c.n_vocab));
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  w.matrix_bytes = w.output.Bytes();
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights L;
    KVF_ASSIGN_OR_RETURN(L.attn_norm, BindVector(f, p + "attn_norm.weight", c.n_embd));
    KVF_ASSIGN_OR_RETURN(L.wq, BindMatrix(f, p + "attn_q.weight", c.n_embd, c.q_dim()));
    KVF_ASSIGN_OR_RETURN(L.wk, BindMatrix(f, p + "attn_k.weight", c.n_embd, c.kv_dim()));
    KVF_ASSIGN_OR_RETURN(L.wv, BindMatrix(f, p + "attn_v.weight", c.n_embd, c.kv_dim()));
    KVF_ASSIGN_OR_RETURN(L.wo, BindMatrix(f, p + "attn_output.weight", c.q_dim(), c.n_embd));
    if (c.has_qkv_bias) {
      KVF_ASSIGN_OR_RETURN(L.bq, BindVector(f, p + "attn_q.bias", c.q_dim()));
      KVF_ASSIGN_OR_RETURN(L.bk, BindVector(f, p + "attn_k.bias", c.kv_dim()));
      KVF_ASSIGN_OR_RETURN(L.bv, BindVector(f, p + "attn_v.bias", c.kv_dim()));
    }
    KVF_ASSIGN_OR_RETURN(L.ffn_norm, BindVector(f, p + "ffn_norm.weight", c.n_embd));
    KVF_ASSIGN_OR_RETURN(L.w_gate, BindMatrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff));
    KVF_ASSIGN_OR_RETURN(L.w_up, BindMatrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff));
    KVF_ASSIGN_OR_RETURN(L.w_down, BindMatrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd));
    w.matrix_bytes += L.wq.Bytes() + L.wk.Bytes() + L.wv.Bytes() + L.wo.Bytes() + L.w_gate.Bytes() +
                      L.w_up.Bytes() + L.w_down.Bytes();
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace kvforge::model
