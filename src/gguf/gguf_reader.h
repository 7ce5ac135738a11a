// gguf_reader.h — reads GGUF v2/v3 files through mmap and validates every byte it trusts.
//
// A GgufFile owns the mapping; metadata strings and tensor data are views into it, valid for the
// GgufFile's lifetime. Open() checks: magic, version (2 or 3), every length and count against the
// bytes remaining, overflowing sizes, unknown value/tensor types, duplicate keys and tensor names,
// dims and block alignment, alignment key, each tensor's offset alignment and extent. Any failure
// is a DataLoss/Unimplemented/InvalidArgument Status naming the file and the problem.
// Thread-safety: immutable after Open(); const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::gguf {

enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view ValueTypeName(ValueType t);

// One metadata value. Scalars are widened (ints into i64/u64, floats into f64). Arrays keep a
// pointer to their packed little-endian elements in the mapping (strings are pre-split).
struct Value {
  ValueType type = ValueType::kU8;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double f64 = 0;
  bool b = false;
  std::string_view str;
  // Arrays only.
  ValueType elem_type = ValueType::kU8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;         // packed elements (numeric arrays)
  std::vector<std::string_view> strings;  // string arrays

  bool IsInteger() const;
  bool IsFloat() const { return type == ValueType::kF32 || type == ValueType::kF64; }
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the contiguous (row) dimension
  tensor::DType dtype = tensor::DType::kF32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;

  int64_t NumElements() const;
  int64_t Rows() const;  // product of dims[1..]
};

class GgufFile {
 public:
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses a caller-owned buffer (fuzzing, tests). The buffer must outlive the GgufFile.
  static Result<std::unique_ptr<GgufFile>> FromMemory(const uint8_t* data, size_t size,
                                                      std::string name);
  ~GgufFile();
  // Pins the mapped file in RAM (mlock), so the weights are never paged out under memory
  // pressure. ResourceExhausted with the RLIMIT_MEMLOCK hint when the OS refuses.
  Status LockInMemory() const;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }
  // The file's bytes before the tensor data: header, metadata and tensor infos.
  std::span<const uint8_t> header_bytes() const {
    return {base_, static_cast<size_t>(data_offset_)};
  }

  const std::vector<std::string>& keys() const { return key_order_; }
  const Value* Find(std::string_view key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

  // Typed getters: NotFound when absent, InvalidArgument (naming key and types) when mistyped.
  Result<std::string> GetString(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;   // any integer type, range-checked
  Result<double> GetFloat(std::string_view key) const;  // f32/f64 (integers accepted)
  Result<bool> GetBool(std::string_view key) const;
  Result<const Value*> GetArray(std::string_view key, ValueType elem) const;
  // Defaults for optional keys (a present but mistyped key is still an error).
  Result<int64_t> GetIntOr(std::string_view key, int64_t fallback) const;
  Result<double> GetFloatOr(std::string_view key, double fallback) const;
  Result<bool> GetBoolOr(std::string_view key, bool fallback) const;

  // Reads element i of a numeric array as double / int64 (caller checks bounds and type).
  static double ArrayFloat(const Value& v, uint64_t i);
  static int64_t ArrayInt(const Value& v, uint64_t i);

 private:
  GgufFile() = default;
  Status Parse();
  Status Error(std::string msg) const;

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool owns_mapping_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::string> key_order_;
  std::unordered_map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace kvforge::gguf
