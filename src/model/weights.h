// weights.h — binds GGUF tensors to the model's named weights, checking shapes and types.
// Matrices are used in place from the mmap (no copy); small vectors (norms, biases) are
// converted to f32 once at load.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kvforge/status.h"
#include "model/model_config.h"

namespace kvforge::gguf {
class GgufFile;
}

namespace kvforge::model {

// A [rows x cols] weight matrix in a kernel-supported format, row-major (cols contiguous).
struct Matrix {
  kernels::WType type = kernels::WType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  uint64_t Bytes() const { return static_cast<uint64_t>(rows) * row_bytes; }
};

struct LayerWeights {
  std::vector<float> attn_norm;    // [n_embd]
  std::vector<float> attn_norm_b;  // [n_embd] LayerNorm bias (falcon)
  Matrix wq, wk, wv, wo;
  Matrix wqkv;  // fused [q_dim + 2 kv_dim x n_embd] (phi3, falcon); wq/wk/wv unset
  std::vector<float> bq, bk, bv;      // qwen2 only
  std::vector<float> q_norm, k_norm;  // [head_dim] per-head RMSNorm weights (qwen3)
  std::vector<float> ffn_norm;        // [n_embd]; empty for a parallel block (falcon)
  Matrix w_gate, w_up, w_down;
  Matrix w_gate_up;  // fused [2 n_ff x n_embd]: gate rows, then up rows (phi3)
};

struct ModelWeights {
  Matrix token_embd;  // [n_vocab x n_embd]; rows dequantized on lookup
  std::vector<float> output_norm;
  std::vector<float> output_norm_b;  // LayerNorm bias (falcon)
  Matrix output;                     // [n_vocab x n_embd]; token_embd when tied
  bool tied_output = false;
  std::vector<LayerWeights> layers;
  uint64_t matrix_bytes = 0;  // bytes of all matrices (what a decode step streams)

  // Binds every tensor the family reads; a tensor of the file that is neither bound nor known
  // to the family fails the load, naming it (no tensor is ever silently ignored).
  static Result<ModelWeights> Bind(const gguf::GgufFile& file, const ModelConfig& cfg);
};

}  // namespace kvforge::model
