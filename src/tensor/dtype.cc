#include "tensor/dtype.h"

namespace kvforge::tensor {
namespace {

struct Entry {
  uint32_t id;
  DTypeTraits traits;
};

constexpr Entry kTable[] = {
    {0, {"f32", 1, 4}},         {1, {"f16", 1, 2}},         {2, {"q4_0", 32, 18}},
    {3, {"q4_1", 32, 20}},      {6, {"q5_0", 32, 22}},      {7, {"q5_1", 32, 24}},
    {8, {"q8_0", 32, 34}},      {9, {"q8_1", 32, 36}},      {10, {"q2_k", 256, 84}},
    {11, {"q3_k", 256, 110}},   {12, {"q4_k", 256, 144}},   {13, {"q5_k", 256, 176}},
    {14, {"q6_k", 256, 210}},   {15, {"q8_k", 256, 292}},   {16, {"iq2_xxs", 256, 66}},
    {17, {"iq2_xs", 256, 74}},  {18, {"iq3_xxs", 256, 98}}, {19, {"iq1_s", 256, 50}},
    {20, {"iq4_nl", 32, 18}},   {21, {"iq3_s", 256, 110}},  {22, {"iq2_s", 256, 82}},
    {23, {"iq4_xs", 256, 136}}, {24, {"i8", 1, 1}},         {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},        {27, {"i64", 1, 8}},        {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, 56}},   {30, {"bf16", 1, 2}},       {34, {"tq1_0", 256, 54}},
    {35, {"tq2_0", 256, 66}},
};

}  // namespace

std::optional<DTypeTraits> GetDTypeTraits(uint32_t raw_type) {
  for (const auto& e : kTable)
    if (e.id == raw_type) return e.traits;
  return std::nullopt;
}

DTypeTraits Traits(DType t) {
  auto tr = GetDTypeTraits(static_cast<uint32_t>(t));
  return tr ? *tr : DTypeTraits{"unknown", 1, 0};
}

std::string_view DTypeName(DType t) { return Traits(t).name; }

std::optional<DType> DTypeFromName(std::string_view name) {
  for (const auto& e : kTable)
    if (e.traits.name == name) return static_cast<DType>(e.id);
  return std::nullopt;
}

std::optional<uint64_t> RowBytes(DType t, uint64_t n) {
  const DTypeTraits tr = Traits(t);
  if (tr.block_bytes == 0 || n % tr.block_elems != 0) return std::nullopt;
  return n / tr.block_elems * tr.block_bytes;
}

bool IsComputeSupported(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace kvforge::tensor
