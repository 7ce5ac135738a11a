// quantize.h — reference quantizers (float -> GGUF blocks) for the weight types kvforge writes.
// They produce ggml-compatible blocks; the k-quant scale search follows the idea of ggml's
// reference quantizers (weighted least-squares refits over a small grid of candidate scales) but
// is a separate implementation, so outputs are close to, not bit-identical with, llama.cpp's.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::tensor {

// Whether QuantizeRow can produce type t: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k,
// q5_k, q6_k.
bool CanQuantize(DType t);

// Quantizes `n` floats into type `t`. n must be a multiple of the block size (32 or 256).
Status QuantizeRow(DType t, const float* src, void* dst, int64_t n);

// The `general.file_type` value (llama.cpp's llama_ftype) for a model whose matrices are mostly
// of type t (k-quants map to the "_S" variants); nullopt for types without one.
std::optional<uint32_t> LlamaFileType(DType t);

}  // namespace kvforge::tensor
