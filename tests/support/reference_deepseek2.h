// reference_deepseek2.h — the test oracle for deepseek2: a plain double-precision forward pass,
// one token at a time, in the naive (decompressed, MHA) form of multi-head latent attention, with
// its own Mixture-of-Experts routing written from the description in kv-methods.md / llama.cpp's
// deepseek2 graph. It shares only the GGUF reader, ModelConfig and the dequantizers with the
// engine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::testing {

class ReferenceDeepseek2 {
 public:
  static Result<std::unique_ptr<ReferenceDeepseek2>> Load(const std::string& path);
  ~ReferenceDeepseek2();
  // Logits after feeding `tokens` from position 0, for every position.
  std::vector<std::vector<double>> Logits(const std::vector<int32_t>& tokens);
  // The experts chosen for each token in MoE layer `layer` during the last Logits call
  // ([token][n_expert_used], best first).
  const std::vector<std::vector<int32_t>>& Routes(int64_t layer) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvforge::testing
