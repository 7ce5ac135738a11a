// weight_binder.h — binds GGUF tensors by name with shape checks, and remembers which were bound
// so that a tensor no forward reads fails the load (internal to the model module).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "model/weights.h"

namespace kvforge::gguf {
class GgufFile;
struct TensorInfo;
}  // namespace kvforge::gguf

namespace kvforge::model {

class Binder {
 public:
  explicit Binder(const gguf::GgufFile& f) : f_(f) {}
  // A 2-D [rows x cols] matrix (GGUF dims {cols, rows}).
  Result<Matrix> M(const std::string& name, int64_t cols, int64_t rows);
  // A 3-D stack of n [rows x cols] matrices (GGUF dims {cols, rows, n}: experts or heads) as one
  // matrix of n x rows rows; Matrix::Rows picks one.
  Result<Matrix> Stacked(const std::string& name, int64_t cols, int64_t rows, int64_t n);
  Result<std::vector<float>> V(const std::string& name, int64_t n);
  bool Has(const std::string& name) const;
  void Consumed(const std::string& name) { used_.insert(name); }
  Status CheckNothingLeft(const std::string& arch) const;
  const gguf::GgufFile& file() const { return f_; }

 private:
  const gguf::GgufFile& f_;
  std::set<std::string> used_;
};

}  // namespace kvforge::model
