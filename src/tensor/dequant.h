// dequant.h — plain reference dequantization for weight types. These are the oracles that the
// SIMD kernels are tested against; they favour clarity over speed. Quantizers (float -> blocks)
// are in tensor/quantize.h.
#pragma once

#include <cstdint>

#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::tensor {

// Converts `n` elements of type `t` at `src` into floats. n must be a multiple of the block size.
// Supports f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k; returns
// kUnimplemented for other types.
Status DequantizeRow(DType t, const void* src, float* dst, int64_t n);

}  // namespace kvforge::tensor
