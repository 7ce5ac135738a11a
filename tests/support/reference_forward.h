// reference_forward.h — the test oracle: a plain, double-precision, one-token-at-a-time
// forward pass written as directly from the math as possible (llama2.c style), for every
// supported family: llama (with Llama 3's rope_freqs), qwen2, qwen3 (q/k norms), gemma (scaled
// embeddings, GeGLU), phi3 (fused qkv and gate+up) and falcon (LayerNorm, parallel block, GELU).
// It shares only the GGUF reader and the reference dequantizers with the engine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::testing {

class ReferenceModel {
 public:
  static Result<std::unique_ptr<ReferenceModel>> Load(const std::string& path);
  ~ReferenceModel();
  // Logits after feeding `tokens` from position 0, for every position (row i = after token i).
  std::vector<std::vector<double>> Logits(const std::vector<int32_t>& tokens);
  int64_t n_vocab() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvforge::testing
