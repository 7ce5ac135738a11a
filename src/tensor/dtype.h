// dtype.h — the ggml/GGUF tensor element types: ids as stored in GGUF, block geometry, names.
// Geometry is what the GGUF reader needs to validate sizes; which types the kernels can compute
// with is a separate question (IsComputeSupported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvforge::tensor {

// Values are the GGUF on-disk ids (ggml_type); never renumber.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
};

struct DTypeTraits {
  std::string_view name;  // "f32", "q8_0", ...
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
};

// Traits for a raw GGUF type id; nullopt for ids this build does not know.
std::optional<DTypeTraits> GetDTypeTraits(uint32_t raw_type);
DTypeTraits Traits(DType t);  // t must be a known type
std::string_view DTypeName(DType t);
std::optional<DType> DTypeFromName(std::string_view name);

// Bytes for a row of `n` elements, or nullopt if n is not a multiple of the block size.
std::optional<uint64_t> RowBytes(DType t, uint64_t n);

// Whether the matmul kernels can use weights of this type.
bool IsComputeSupported(DType t);

}  // namespace kvforge::tensor
