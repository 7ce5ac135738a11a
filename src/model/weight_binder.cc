#include "model/weight_binder.h"

#include "base/strings.h"
#include "gguf/gguf_reader.h"
#include "tensor/dequant.h"

namespace kvforge::model {
namespace {

using base::StrFormat;

Status ShapeError(const gguf::GgufFile& f, const gguf::TensorInfo& t,
                  const std::vector<int64_t>& want) {
  std::string have, expected;
  for (size_t i = 0; i < t.dims.size(); ++i) have += (i ? " x " : "") + std::to_string(t.dims[i]);
  for (size_t i = 0; i < want.size(); ++i) expected += (i ? " x " : "") + std::to_string(want[i]);
  return Status::InvalidArgument(StrFormat("%s: tensor '%s' has shape [%s], expected [%s]",
                                           f.path().c_str(), t.name.c_str(), have.c_str(),
                                           expected.c_str()));
}

Result<const gguf::TensorInfo*> Need(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  if (!t) return Status::NotFound(f.path() + ": required tensor '" + name + "' is missing");
  return t;
}

// dims = {cols (input width), rows (output width)[, n stacked]}.
Result<Matrix> BindMatrix(const gguf::GgufFile& f, const std::string& name,
                          const std::vector<int64_t>& dims) {
  KVF_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Need(f, name));
  if (t->dims.size() != dims.size()) return ShapeError(f, *t, dims);
  for (size_t i = 0; i < dims.size(); ++i)
    if (t->dims[i] != dims[i]) return ShapeError(f, *t, dims);
  if (!tensor::IsComputeSupported(t->dtype))
    return Status::Unimplemented(
        StrFormat("%s: tensor '%s' has weight type %s, which this build cannot "
                  "compute with yet (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                  "q4_k, q5_k, q6_k)",
                  f.path().c_str(), name.c_str(), tensor::DTypeName(t->dtype).data()));
  Matrix m;
  m.type = static_cast<kernels::WType>(t->dtype);
  m.data = t->data;
  m.cols = dims[0];
  m.rows = dims[1] * (dims.size() > 2 ? dims[2] : 1);
  m.row_bytes = *tensor::RowBytes(t->dtype, static_cast<uint64_t>(m.cols));
  return m;
}

}  // namespace

Result<Matrix> Binder::M(const std::string& name, int64_t cols, int64_t rows) {
  used_.insert(name);
  return BindMatrix(f_, name, {cols, rows});
}

Result<Matrix> Binder::Stacked(const std::string& name, int64_t cols, int64_t rows, int64_t n) {
  used_.insert(name);
  return BindMatrix(f_, name, {cols, rows, n});
}

Result<std::vector<float>> Binder::V(const std::string& name, int64_t n) {
  used_.insert(name);
  KVF_ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Need(f_, name));
  if (t->dims.size() != 1 || t->dims[0] != n)
    return Status::InvalidArgument(StrFormat("%s: tensor '%s' should be a vector of %lld values",
                                             f_.path().c_str(), name.c_str(), (long long)n));
  std::vector<float> v(static_cast<size_t>(n));
  KVF_RETURN_IF_ERROR(
      tensor::DequantizeRow(t->dtype, t->data, v.data(), n).WithContext(f_.path() + ": " + name));
  return v;
}

bool Binder::Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

Status Binder::CheckNothingLeft(const std::string& arch) const {
  for (const auto& t : f_.tensors())
    if (used_.count(t.name) == 0)
      return Status::Unimplemented(f_.path() + ": tensor '" + t.name + "' is not used by the " +
                                   arch +
                                   " forward pass; refusing to load a model that would "
                                   "run without it");
  return Status::Ok();
}

}  // namespace kvforge::model
