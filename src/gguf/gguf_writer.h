// gguf_writer.h — writes GGUF v3 files (used by `kvforge make-model`, tests and the quantizer).
// Metadata keeps insertion order; tensors are laid out in insertion order at the alignment.
// Thread-safety: none; build one file per writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::gguf {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  void SetU32(const std::string& key, uint32_t v);
  void SetF32(const std::string& key, float v);
  void SetBool(const std::string& key, bool v);
  void SetString(const std::string& key, const std::string& v);
  void SetStringArray(const std::string& key, const std::vector<std::string>& v);
  void SetF32Array(const std::string& key, const std::vector<float>& v);
  void SetI32Array(const std::string& key, const std::vector<int32_t>& v);
  // Copies one metadata value (any type) from an open file.
  void CopyValue(const std::string& key, const Value& v);

  // dims in ggml order (dims[0] = row length). `data` must hold exactly the tensor's bytes.
  Status AddTensor(const std::string& name, tensor::DType dtype, std::vector<int64_t> dims,
                   std::vector<uint8_t> data);

  // Serialises everything into bytes / a file (written to PATH.tmp then renamed).
  std::vector<uint8_t> Serialize() const;
  Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    tensor::DType dtype;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  uint64_t alignment_;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> kv_bytes_;  // already-serialised metadata entries
  std::vector<Tensor> tensors_;
};

}  // namespace kvforge::gguf
