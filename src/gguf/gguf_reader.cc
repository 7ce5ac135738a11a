#include "gguf/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "base/strings.h"

namespace kvforge::gguf {
namespace {

using base::StrFormat;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;

size_t ScalarSize(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
      return 8;
    default:
      return 0;
  }
}

bool KnownValueType(uint32_t t) { return t <= 12; }

// Bounds-checked little-endian cursor over the mapping.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  bool Read(void* dst, uint64_t n) {
    if (n > remaining()) return false;
    std::memcpy(dst, base_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool Skip(uint64_t n) {
    if (n > remaining()) return false;
    pos_ += n;
    return true;
  }
  const uint8_t* here() const { return base_ + pos_; }
  template <typename T>
  bool Get(T* v) {
    return Read(v, sizeof(T));
  }
  bool GetString(std::string_view* s) {
    uint64_t len;
    if (!Get(&len) || len > remaining()) return false;
    *s = std::string_view(reinterpret_cast<const char*>(here()), len);
    pos_ += len;
    return true;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace

std::string_view ValueTypeName(ValueType t) {
  static const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                 "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i <= 12 ? kNames[i] : "unknown";
}

bool Value::IsInteger() const {
  switch (type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t TensorInfo::Rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

GgufFile::~GgufFile() {
  if (owns_mapping_ && base_ != nullptr && size_ > 0) munmap(const_cast<uint8_t*>(base_), size_);
}

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::NotFound(StrFormat("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(StrFormat("%s: not a regular file", path.c_str()));
  }
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ == 0) {
    ::close(fd);
    return Status::DataLoss(StrFormat("%s: file is empty", path.c_str()));
  }
  void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return Status::IoError(StrFormat("%s: mmap failed: %s", path.c_str(), std::strerror(errno)));
  f->base_ = static_cast<const uint8_t*>(p);
  f->owns_mapping_ = true;
  KVF_RETURN_IF_ERROR(f->Parse());
  return f;
}

Status GgufFile::LockInMemory() const {
  if (base_ == nullptr || size_ == 0) return Status::Ok();
  if (mlock(base_, size_) != 0)
    return Status::ResourceExhausted(
        StrFormat("%s: mlock of %llu bytes failed: %s (raise the locked-memory limit, ulimit -l)",
                  path_.c_str(), static_cast<unsigned long long>(size_), std::strerror(errno)));
  return Status::Ok();
}

Result<std::unique_ptr<GgufFile>> GgufFile::FromMemory(const uint8_t* data, size_t size,
                                                       std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  f->base_ = data;
  f->size_ = size;
  KVF_RETURN_IF_ERROR(f->Parse());
  return f;
}

Status GgufFile::Error(std::string msg) const { return Status::DataLoss(path_ + ": " + msg); }

Status GgufFile::Parse() {
  Cursor c(base_, size_);
  uint32_t magic = 0;
  if (!c.Get(&magic)) return Error("truncated: file is shorter than the GGUF magic");
  if (magic != kMagic) {
    return Status::InvalidArgument(
        StrFormat("%s: not a GGUF file (bad magic 0x%08x, expected 'GGUF')", path_.c_str(), magic));
  }
  if (!c.Get(&version_)) return Error("truncated in header (version)");
  if (version_ == 1)
    return Status::Unimplemented(path_ + ": GGUF version 1 is not supported (only 2 and 3)");
  if (version_ != 2 && version_ != 3)
    return Status::Unimplemented(
        StrFormat("%s: unsupported GGUF version %u (only 2 and 3)", path_.c_str(), version_));
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Get(&n_tensors) || !c.Get(&n_kv)) return Error("truncated in header (counts)");
  // Each KV needs >= 12 bytes (key length + type), each tensor info >= 24.
  if (n_kv > c.remaining() / 12)
    return Error(StrFormat("metadata count %llu cannot fit in the file",
                           static_cast<unsigned long long>(n_kv)));
  if (n_tensors > c.remaining() / 24)
    return Error(StrFormat("tensor count %llu cannot fit in the file",
                           static_cast<unsigned long long>(n_tensors)));

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string_view key;
    if (!c.GetString(&key))
      return Error(StrFormat("truncated in metadata key %llu", (unsigned long long)i));
    const std::string key_str(key);
    uint32_t raw_type;
    if (!c.Get(&raw_type)) return Error("truncated in metadata '" + key_str + "' (type)");
    if (!KnownValueType(raw_type))
      return Error(StrFormat("metadata '%s' has unknown value type %u", key_str.c_str(), raw_type));
    Value v;
    v.type = static_cast<ValueType>(raw_type);
    auto read_scalar = [&](ValueType t, Value* out) -> bool {
      switch (t) {
        case ValueType::kU8: {
          uint8_t x;
          if (!c.Get(&x)) return false;
          out->u64 = x;
          out->i64 = x;
          return true;
        }
        case ValueType::kI8: {
          int8_t x;
          if (!c.Get(&x)) return false;
          out->i64 = x;
          out->u64 = static_cast<uint64_t>(x);
          return true;
        }
        case ValueType::kU16: {
          uint16_t x;
          if (!c.Get(&x)) return false;
          out->u64 = x;
          out->i64 = x;
          return true;
        }
        case ValueType::kI16: {
          int16_t x;
          if (!c.Get(&x)) return false;
          out->i64 = x;
          out->u64 = static_cast<uint64_t>(x);
          return true;
        }
        case ValueType::kU32: {
          uint32_t x;
          if (!c.Get(&x)) return false;
          out->u64 = x;
          out->i64 = x;
          return true;
        }
        case ValueType::kI32: {
          int32_t x;
          if (!c.Get(&x)) return false;
          out->i64 = x;
          out->u64 = static_cast<uint64_t>(x);
          return true;
        }
        case ValueType::kU64: {
          uint64_t x;
          if (!c.Get(&x)) return false;
          out->u64 = x;
          out->i64 = static_cast<int64_t>(x);
          return true;
        }
        case ValueType::kI64: {
          int64_t x;
          if (!c.Get(&x)) return false;
          out->i64 = x;
          out->u64 = static_cast<uint64_t>(x);
          return true;
        }
        case ValueType::kF32: {
          float x;
          if (!c.Get(&x)) return false;
          out->f64 = x;
          return true;
        }
        case ValueType::kF64: {
          double x;
          if (!c.Get(&x)) return false;
          out->f64 = x;
          return true;
        }
        case ValueType::kBool: {
          uint8_t x;
          if (!c.Get(&x)) return false;
          out->b = x != 0;
          out->u64 = x;
          out->i64 = x;
          return true;
        }
        case ValueType::kString:
          return c.GetString(&out->str);
        default:
          return false;
      }
    };
    if (v.type == ValueType::kArray) {
      uint32_t et;
      if (!c.Get(&et) || !c.Get(&v.count))
        return Error("truncated in metadata '" + key_str + "' (array header)");
      if (!KnownValueType(et))
        return Error(
            StrFormat("metadata '%s' is an array of unknown type %u", key_str.c_str(), et));
      v.elem_type = static_cast<ValueType>(et);
      if (v.elem_type == ValueType::kArray)
        return Status::Unimplemented(path_ + ": metadata '" + key_str +
                                     "' is a nested array (not supported)");
      if (v.elem_type == ValueType::kString) {
        if (v.count > c.remaining() / 8)
          return Error(StrFormat("metadata '%s': array of %llu strings cannot fit in the file",
                                 key_str.c_str(), (unsigned long long)v.count));
        v.strings.reserve(v.count);
        for (uint64_t k = 0; k < v.count; ++k) {
          std::string_view s;
          if (!c.GetString(&s))
            return Error(StrFormat("truncated in metadata '%s' element %llu", key_str.c_str(),
                                   (unsigned long long)k));
          v.strings.push_back(s);
        }
      } else {
        const size_t es = ScalarSize(v.elem_type);
        if (v.count > c.remaining() / es)
          return Error(
              StrFormat("metadata '%s': array of %llu elements runs past the end of the file",
                        key_str.c_str(), (unsigned long long)v.count));
        v.elems = c.here();
        (void)c.Skip(v.count * es);
      }
    } else if (!read_scalar(v.type, &v)) {
      return Error("truncated in metadata '" + key_str + "' (value)");
    }
    if (kv_.count(key_str)) return Error("duplicate metadata key '" + key_str + "'");
    key_order_.push_back(key_str);
    kv_.emplace(key_str, std::move(v));
  }

  if (const Value* a = Find("general.alignment")) {
    if (!a->IsInteger() || a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0 || a->u64 > (1u << 20))
      return Error("general.alignment must be a power of two integer (got an invalid value)");
    alignment_ = a->u64;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    std::string_view name;
    if (!c.GetString(&name))
      return Error(StrFormat("truncated in tensor info %llu (name)", (unsigned long long)i));
    t.name = std::string(name);
    uint32_t n_dims;
    if (!c.Get(&n_dims)) return Error("truncated in tensor info '" + t.name + "'");
    if (n_dims == 0 || n_dims > kMaxDims)
      return Error(
          StrFormat("tensor '%s' has %u dimensions (1..4 allowed)", t.name.c_str(), n_dims));
    uint64_t total = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim;
      if (!c.Get(&dim)) return Error("truncated in tensor info '" + t.name + "' (dims)");
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (dim != 0 && total > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim))
        return Error("tensor '" + t.name + "' has an overflowing element count");
      total *= dim;
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    uint32_t raw_type;
    if (!c.Get(&raw_type) || !c.Get(&t.offset))
      return Error("truncated in tensor info '" + t.name + "'");
    auto traits = tensor::GetDTypeTraits(raw_type);
    if (!traits)
      return Status::Unimplemented(StrFormat("%s: tensor '%s' has unknown type id %u",
                                             path_.c_str(), t.name.c_str(), raw_type));
    t.dtype = static_cast<tensor::DType>(raw_type);
    if (t.dims[0] % traits->block_elems != 0)
      return Error(StrFormat(
          "tensor '%s': row length %lld is not a multiple of the %s block size %u", t.name.c_str(),
          (long long)t.dims[0], traits->name.data(), traits->block_elems));
    const uint64_t blocks = total / traits->block_elems;
    if (traits->block_bytes != 0 &&
        blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes)
      return Error("tensor '" + t.name + "' has an overflowing byte size");
    t.nbytes = blocks * traits->block_bytes;
    if (t.offset % alignment_ != 0)
      return Error(StrFormat("tensor '%s' offset %llu is not a multiple of the alignment %llu",
                             t.name.c_str(), (unsigned long long)t.offset,
                             (unsigned long long)alignment_));
    if (tensor_index_.count(t.name)) return Error("duplicate tensor name '" + t.name + "'");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  uint64_t pos = c.pos();
  data_offset_ = (pos + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_)
    return Error("truncated: the tensor data section is missing");
  const uint64_t data_size = data_offset_ <= size_ ? size_ - data_offset_ : 0;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      return Error(
          StrFormat("tensor '%s' (offset %llu, %llu bytes) extends past the end of the file "
                    "(data section holds %llu bytes)",
                    t.name.c_str(), (unsigned long long)t.offset, (unsigned long long)t.nbytes,
                    (unsigned long long)data_size));
    t.data = base_ + data_offset_ + t.offset;
  }
  return Status::Ok();
}

const Value* GgufFile::Find(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Status Mistyped(const std::string& path, std::string_view key, std::string_view want,
                ValueType got) {
  return Status::InvalidArgument(StrFormat(
      "%s: metadata '%.*s' should be %.*s but is %.*s", path.c_str(), (int)key.size(), key.data(),
      (int)want.size(), want.data(), (int)ValueTypeName(got).size(), ValueTypeName(got).data()));
}
Status Missing(const std::string& path, std::string_view key) {
  return Status::NotFound(StrFormat("%s: required metadata key '%.*s' is missing", path.c_str(),
                                    (int)key.size(), key.data()));
}
}  // namespace

Result<std::string> GgufFile::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kString) return Mistyped(path_, key, "a string", v->type);
  return std::string(v->str);
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(path_, key);
  if (!v->IsInteger()) return Mistyped(path_, key, "an integer", v->type);
  if (v->type == ValueType::kU64 &&
      v->u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return Status::InvalidArgument(path_ + ": metadata '" + std::string(key) + "' is out of range");
  return v->i64;
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->IsFloat()) return v->f64;
  if (v->IsInteger()) return static_cast<double>(v->i64);
  return Mistyped(path_, key, "a float", v->type);
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kBool) return Mistyped(path_, key, "a bool", v->type);
  return v->b;
}

Result<const Value*> GgufFile::GetArray(std::string_view key, ValueType elem) const {
  const Value* v = Find(key);
  if (!v) return Missing(path_, key);
  if (v->type != ValueType::kArray) return Mistyped(path_, key, "an array", v->type);
  bool ok = v->elem_type == elem;
  // Accept any integer width where an integer array is asked for, any float width for floats.
  auto is_int = [](ValueType t) {
    Value x;
    x.type = t;
    return x.IsInteger();
  };
  if (!ok && is_int(elem) && is_int(v->elem_type)) ok = true;
  if (!ok && (elem == ValueType::kF32 || elem == ValueType::kF64) &&
      (v->elem_type == ValueType::kF32 || v->elem_type == ValueType::kF64))
    ok = true;
  if (!ok)
    return Status::InvalidArgument(StrFormat(
        "%s: metadata '%.*s' is an array of %s, expected %s", path_.c_str(), (int)key.size(),
        key.data(), ValueTypeName(v->elem_type).data(), ValueTypeName(elem).data()));
  return v;
}

Result<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t fallback) const {
  if (!Find(key)) return fallback;
  return GetInt(key);
}
Result<double> GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  if (!Find(key)) return fallback;
  return GetFloat(key);
}
Result<bool> GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  if (!Find(key)) return fallback;
  return GetBool(key);
}

double GgufFile::ArrayFloat(const Value& v, uint64_t i) {
  if (v.elem_type == ValueType::kF64) {
    double x;
    std::memcpy(&x, v.elems + i * 8, 8);
    return x;
  }
  if (v.elem_type == ValueType::kF32) {
    float x;
    std::memcpy(&x, v.elems + i * 4, 4);
    return x;
  }
  return static_cast<double>(ArrayInt(v, i));
}

int64_t GgufFile::ArrayInt(const Value& v, uint64_t i) {
  const uint8_t* p = v.elems + i * ScalarSize(v.elem_type);
  switch (v.elem_type) {
    case ValueType::kU8:
    case ValueType::kBool:
      return *p;
    case ValueType::kI8:
      return static_cast<int8_t>(*p);
    case ValueType::kU16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case ValueType::kI16: {
      int16_t x;
      std::memcpy(&x, p, 2);
      return x;
    }
    case ValueType::kU32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ValueType::kI32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case ValueType::kU64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<int64_t>(x);
    }
    case ValueType::kI64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return x;
    }
    default:
      return 0;
  }
}

}  // namespace kvforge::gguf
