// kvquant/kv_dtype.h — the KV-cache element types kvforge can store, and their names.
//
// One enum shared by the layout arithmetic (kvstore), the codecs (kvquant) and the attention
// kernels (kernels), so a dtype means the same bytes everywhere. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvforge/status.h"

namespace kvforge::kvquant {

enum class KvDtype : uint8_t {
  kF32,
  kF16,
  kBf16,
  kFp8E4M3,
  kFp8E5M2,
  kInt8,
  kQ8_0,
  kQ4_0,
  kKivi2,
  kKivi4,
  kKvQuant3,  // KVQuant nuq3 with 1% sparse outliers (nuq.h)
  kTurbo3,
  kTurbo4,
};

// Canonical name: "f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "q8_0", "q4_0",
// "kivi2", "kivi4", "kvquant3", "turbo3", "turbo4".
std::string_view KvDtypeName(KvDtype dtype);
// Accepts the canonical names plus the aliases "fp32", "fp16", "half", "bfloat16", "fp8" (=
// fp8_e4m3), "e4m3", "e5m2"; case-insensitive.
Result<KvDtype> ParseKvDtype(std::string_view text);
// "f32|f16|bf16|fp8|..." for usage strings.
std::string KvDtypeChoices();
bool IsKivi(KvDtype dtype);
bool IsFp8(KvDtype dtype);
// kvquant3: rows need the cache's calibration (nuq_calibration.h), keys also RoPE positions.
bool IsNuq(KvDtype dtype);
// f32 / f16 / bf16: values stored as plain floats, no scales.
bool IsFloat(KvDtype dtype);
// Code bits per value for KIVI (2 or 4); 0 for other dtypes.
int KiviBits(KvDtype dtype);
// TurboQuant rows (kvquant/turbo.h): nominal bits per value (3 or 4); 0 for other dtypes.
bool IsTurbo(KvDtype dtype);
int TurboBits(KvDtype dtype);

}  // namespace kvforge::kvquant
