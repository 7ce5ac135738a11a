#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/strings.h"

namespace kvforge::gguf {
namespace {

// Appends raw bytes (resize + memcpy rather than insert: g++ 12 -O3 warns falsely on insert).
void PutBytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out->size();
  out->resize(at + n);
  std::memcpy(out->data() + at, p, n);
}

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  PutBytes(out, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  PutBytes(out, s.data(), s.size());
}

void PutKey(std::vector<uint8_t>* out, const std::string& key, ValueType t) {
  PutString(out, key);
  Put<uint32_t>(out, static_cast<uint32_t>(t));
}

}  // namespace

void GgufWriter::SetU32(const std::string& key, uint32_t v) {
  PutKey(&kv_bytes_, key, ValueType::kU32);
  Put(&kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetF32(const std::string& key, float v) {
  PutKey(&kv_bytes_, key, ValueType::kF32);
  Put(&kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetBool(const std::string& key, bool v) {
  PutKey(&kv_bytes_, key, ValueType::kBool);
  Put<uint8_t>(&kv_bytes_, v ? 1 : 0);
  ++n_kv_;
}
void GgufWriter::SetString(const std::string& key, const std::string& v) {
  PutKey(&kv_bytes_, key, ValueType::kString);
  PutString(&kv_bytes_, v);
  ++n_kv_;
}
void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& v) {
  PutKey(&kv_bytes_, key, ValueType::kArray);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kString));
  Put<uint64_t>(&kv_bytes_, v.size());
  for (const auto& s : v) PutString(&kv_bytes_, s);
  ++n_kv_;
}
void GgufWriter::SetF32Array(const std::string& key, const std::vector<float>& v) {
  PutKey(&kv_bytes_, key, ValueType::kArray);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kF32));
  Put<uint64_t>(&kv_bytes_, v.size());
  for (float x : v) Put(&kv_bytes_, x);
  ++n_kv_;
}
void GgufWriter::SetI32Array(const std::string& key, const std::vector<int32_t>& v) {
  PutKey(&kv_bytes_, key, ValueType::kArray);
  Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(ValueType::kI32));
  Put<uint64_t>(&kv_bytes_, v.size());
  for (int32_t x : v) Put(&kv_bytes_, x);
  ++n_kv_;
}

void GgufWriter::CopyValue(const std::string& key, const Value& v) {
  PutKey(&kv_bytes_, key, v.type);
  auto put_scalar = [&](ValueType t, const Value& x) {
    switch (t) {
      case ValueType::kU8:
        Put<uint8_t>(&kv_bytes_, static_cast<uint8_t>(x.u64));
        break;
      case ValueType::kI8:
        Put<int8_t>(&kv_bytes_, static_cast<int8_t>(x.i64));
        break;
      case ValueType::kU16:
        Put<uint16_t>(&kv_bytes_, static_cast<uint16_t>(x.u64));
        break;
      case ValueType::kI16:
        Put<int16_t>(&kv_bytes_, static_cast<int16_t>(x.i64));
        break;
      case ValueType::kU32:
        Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(x.u64));
        break;
      case ValueType::kI32:
        Put<int32_t>(&kv_bytes_, static_cast<int32_t>(x.i64));
        break;
      case ValueType::kU64:
        Put<uint64_t>(&kv_bytes_, x.u64);
        break;
      case ValueType::kI64:
        Put<int64_t>(&kv_bytes_, x.i64);
        break;
      case ValueType::kF32:
        Put<float>(&kv_bytes_, static_cast<float>(x.f64));
        break;
      case ValueType::kF64:
        Put<double>(&kv_bytes_, x.f64);
        break;
      case ValueType::kBool:
        Put<uint8_t>(&kv_bytes_, x.b ? 1 : 0);
        break;
      case ValueType::kString:
        PutString(&kv_bytes_, x.str);
        break;
      default:
        break;
    }
  };
  if (v.type == ValueType::kArray) {
    Put<uint32_t>(&kv_bytes_, static_cast<uint32_t>(v.elem_type));
    Put<uint64_t>(&kv_bytes_, v.count);
    if (v.elem_type == ValueType::kString) {
      for (auto s : v.strings) PutString(&kv_bytes_, s);
    } else {
      size_t es = 0;
      switch (v.elem_type) {
        case ValueType::kU8:
        case ValueType::kI8:
        case ValueType::kBool:
          es = 1;
          break;
        case ValueType::kU16:
        case ValueType::kI16:
          es = 2;
          break;
        case ValueType::kU32:
        case ValueType::kI32:
        case ValueType::kF32:
          es = 4;
          break;
        default:
          es = 8;
          break;
      }
      PutBytes(&kv_bytes_, v.elems, v.count * es);
    }
  } else {
    put_scalar(v.type, v);
  }
  ++n_kv_;
}

Status GgufWriter::AddTensor(const std::string& name, tensor::DType dtype,
                             std::vector<int64_t> dims, std::vector<uint8_t> data) {
  if (dims.empty() || dims.size() > 4) return Status::InvalidArgument("tensor needs 1..4 dims");
  uint64_t n = 1;
  for (auto d : dims) n *= static_cast<uint64_t>(d);
  auto row = tensor::RowBytes(dtype, static_cast<uint64_t>(dims[0]));
  if (!row) return Status::InvalidArgument("tensor '" + name + "': row not a block multiple");
  const uint64_t expect = *row * (n / static_cast<uint64_t>(dims[0] == 0 ? 1 : dims[0]));
  if (data.size() != expect)
    return Status::InvalidArgument(base::StrFormat("tensor '%s': %zu bytes given, %llu expected",
                                                   name.c_str(), data.size(),
                                                   (unsigned long long)expect));
  tensors_.push_back({name, dtype, std::move(dims), std::move(data)});
  return Status::Ok();
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  Put<uint32_t>(&out, 0x46554747);
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, tensors_.size());
  // general.alignment is written only when it differs from the default.
  const bool write_alignment = alignment_ != 32;
  Put<uint64_t>(&out, n_kv_ + (write_alignment ? 1 : 0));
  PutBytes(&out, kv_bytes_.data(), kv_bytes_.size());
  if (write_alignment) {
    PutKey(&out, "general.alignment", ValueType::kU32);
    Put<uint32_t>(&out, static_cast<uint32_t>(alignment_));
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (auto d : t.dims) Put<uint64_t>(&out, static_cast<uint64_t>(d));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dtype));
    Put<uint64_t>(&out, offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  for (const auto& t : tensors_) {
    PutBytes(&out, t.data.data(), t.data.size());
    out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  }
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  const std::vector<uint8_t> bytes = Serialize();
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::IoError("cannot create " + tmp + ": " + std::strerror(errno));
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool ok = n == bytes.size() && std::fflush(f) == 0;
  std::fclose(f);
  if (!ok) {
    std::remove(tmp.c_str());
    return Status::IoError("short write to " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IoError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace kvforge::gguf
