// kernels_common.h — helpers shared by the kernel translation units (not a public header).
#pragma once

#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "kernels/kernels.h"

namespace kvforge::kernels::internal {

static inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

// Reads element i of a K/V row as float.
static inline float KvAt(const uint8_t* row, int64_t i, bool is_f16) {
  if (is_f16) return LoadF16(row + 2 * i);
  float f;
  std::memcpy(&f, row + 4 * i, 4);
  return f;
}

// Quantizes x into q8_0 blocks (34 bytes per 32 values), the activation format for q8_0/q4_0.
void QuantizeQ8_0Ref(const float* x, uint8_t* dst, int64_t cols);

extern const KernelTable kAvx2Table;

}  // namespace kvforge::kernels::internal
