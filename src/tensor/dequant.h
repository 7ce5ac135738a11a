// dequant.h — plain reference (de)quantization for weight types. These are the oracles that the
// SIMD kernels are tested against; they favour clarity over speed.
#pragma once

#include <cstdint>

#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::tensor {

// Converts `n` elements of type `t` at `src` into floats. n must be a multiple of the block size.
// Returns kUnimplemented for types without a reference dequantizer.
Status DequantizeRow(DType t, const void* src, float* dst, int64_t n);

// Quantizes `n` floats into type `t` (f32, f16, bf16, q8_0, q4_0). n must be a block multiple.
Status QuantizeRow(DType t, const float* src, void* dst, int64_t n);

}  // namespace kvforge::tensor
