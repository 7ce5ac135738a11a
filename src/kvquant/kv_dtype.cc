#include "kvquant/kv_dtype.h"

#include <algorithm>
#include <cctype>

namespace kvforge::kvquant {
namespace {

struct DtypeName {
  std::string_view name;
  KvDtype dtype;
};

constexpr DtypeName kDtypeNames[] = {
    {"f32", KvDtype::kF32},          {"f16", KvDtype::kF16},          {"bf16", KvDtype::kBf16},
    {"fp8_e4m3", KvDtype::kFp8E4M3}, {"fp8_e5m2", KvDtype::kFp8E5M2}, {"int8", KvDtype::kInt8},
    {"q8_0", KvDtype::kQ8_0},        {"q4_0", KvDtype::kQ4_0},        {"kivi2", KvDtype::kKivi2},
    {"kivi4", KvDtype::kKivi4},      {"turbo3", KvDtype::kTurbo3},    {"turbo4", KvDtype::kTurbo4},
    {"kvquant3", KvDtype::kKvQuant3},
};

constexpr DtypeName kDtypeAliases[] = {
    {"fp32", KvDtype::kF32},    {"float32", KvDtype::kF32},  {"fp16", KvDtype::kF16},
    {"half", KvDtype::kF16},    {"float16", KvDtype::kF16},  {"bfloat16", KvDtype::kBf16},
    {"fp8", KvDtype::kFp8E4M3}, {"e4m3", KvDtype::kFp8E4M3}, {"e5m2", KvDtype::kFp8E5M2},
};

}  // namespace

std::string_view KvDtypeName(KvDtype dtype) {
  for (const auto& entry : kDtypeNames) {
    if (entry.dtype == dtype) return entry.name;
  }
  return "unknown";
}

Result<KvDtype> ParseKvDtype(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  for (const auto& entry : kDtypeNames) {
    if (entry.name == lower) return entry.dtype;
  }
  for (const auto& entry : kDtypeAliases) {
    if (entry.name == lower) return entry.dtype;
  }
  return Status::InvalidArgument("unknown KV dtype '" + std::string(text) + "' (choose from " +
                                 KvDtypeChoices() + ")");
}

std::string KvDtypeChoices() {
  std::string out;
  for (const auto& entry : kDtypeNames) {
    if (!out.empty()) out += "|";
    out += entry.name;
  }
  return out + " (fp8 = fp8_e4m3)";
}

bool IsKivi(KvDtype dtype) { return dtype == KvDtype::kKivi2 || dtype == KvDtype::kKivi4; }
bool IsFp8(KvDtype dtype) { return dtype == KvDtype::kFp8E4M3 || dtype == KvDtype::kFp8E5M2; }
bool IsNuq(KvDtype dtype) { return dtype == KvDtype::kKvQuant3; }
bool IsFloat(KvDtype dtype) {
  return dtype == KvDtype::kF32 || dtype == KvDtype::kF16 || dtype == KvDtype::kBf16;
}
bool IsTurbo(KvDtype dtype) { return dtype == KvDtype::kTurbo3 || dtype == KvDtype::kTurbo4; }
int TurboBits(KvDtype dtype) {
  if (dtype == KvDtype::kTurbo3) return 3;
  if (dtype == KvDtype::kTurbo4) return 4;
  return 0;
}
int KiviBits(KvDtype dtype) {
  if (dtype == KvDtype::kKivi2) return 2;
  if (dtype == KvDtype::kKivi4) return 4;
  return 0;
}

}  // namespace kvforge::kvquant
