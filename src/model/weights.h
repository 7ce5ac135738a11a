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
  // Rows [row0, row0 + n) as a matrix of their own (one expert or one head of a stacked tensor).
  Matrix Rows(int64_t row0, int64_t n) const {
    Matrix m = *this;
    m.data = data + static_cast<size_t>(row0) * row_bytes;
    m.rows = n;
    return m;
  }
};

// DeepSeek-V2/V3 attention (forward_mla.cc): H heads, R = kv_lora_rank, P = RoPE dims,
// N = nope dims, Vh = v_head_dim.
struct MlaWeights {
  Matrix wq_a;                   // [q_lora x n_embd] (q-lora form), then q_a_norm, then wq_b
  std::vector<float> q_a_norm;   // [q_lora]
  Matrix wq_b;                   // [H (N + P) x q_lora]
  Matrix wq;                     // [H (N + P) x n_embd] when q_lora_rank is 0 (V2-Lite)
  Matrix wkv_a;                  // [R + P x n_embd]: the latent c, then the shared RoPE key
  std::vector<float> kv_a_norm;  // [R]
  Matrix wk_b;                   // H stacked [R x N]: head h's rows [h R, (h + 1) R)
  Matrix wv_b;                   // H stacked [Vh x R]: head h's rows [h Vh, (h + 1) Vh)
};

// Mixture-of-Experts feed-forward (moe.cc): E experts of width F.
struct MoeWeights {
  Matrix gate_inp;                 // [E x n_embd] router
  std::vector<float> exp_probs_b;  // [E] selection bias (V3), or empty
  Matrix gate_exps, up_exps;       // E stacked [F x n_embd]: expert e's rows [e F, (e + 1) F)
  Matrix down_exps;                // E stacked [n_embd x F]
  Matrix gate_shexp, up_shexp;     // [S F x n_embd] shared experts (S F may be 0: none)
  Matrix down_shexp;               // [n_embd x S F]
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
  MlaWeights mla;    // deepseek2 (wo is attn_output: [n_embd x H Vh])
  MoeWeights moe;    // deepseek2 layers past the leading dense ones (w_gate... unset there)
};

struct ModelWeights {
  Matrix token_embd;  // [n_vocab x n_embd]; rows dequantized on lookup
  std::vector<float> output_norm;
  std::vector<float> output_norm_b;  // LayerNorm bias (falcon)
  Matrix output;                     // [n_vocab x n_embd]; token_embd when tied
  bool tied_output = false;
  std::vector<LayerWeights> layers;
  uint64_t matrix_bytes = 0;  // bytes of all matrices (what a decode step streams)
  // f32 copies made at load when a file's layout is not the one the forward reads (the legacy
  // fused attn_kv_b, split per head and transposed); matrices above may point into them.
  std::vector<std::vector<float>> owned;

  // Binds every tensor the family reads; a tensor of the file that is neither bound nor known
  // to the family fails the load, naming it (no tensor is ever silently ignored).
  static Result<ModelWeights> Bind(const gguf::GgufFile& file, const ModelConfig& cfg);
};

}  // namespace kvforge::model
