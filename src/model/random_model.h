// random_model.h — writes random-weight GGUF models (llama, qwen2, qwen3, gemma, phi3, falcon,
// deepseek2)
// with a real vocabulary, for
// tests and benchmarks at realistic shapes. Matrices are N(0, 1/fan_in) (output projections
// further scaled by 1/sqrt(2 * layers)) so activations keep a sane scale through the stack.
#pragma once

#include <cstdint>
#include <string>

#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::gguf {
class GgufFile;
}

namespace kvforge::model {

struct RandomModelSpec {
  std::string arch = "llama";  // llama | qwen2 | qwen3 | gemma | phi3 | falcon
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 4;
  int64_t ffn = 0;  // 0: 8/3 x dim rounded up to 32
  int64_t ctx = 2048;
  float rope_base = 10000.0f;
  tensor::DType dtype = tensor::DType::kF16;
  uint64_t seed = 1;
  // deepseek2 (MLA, MoE when experts > 0); 0 picks the default in brackets.
  int64_t kv_lora_rank = 0;  // [dim / 4]
  int64_t q_lora_rank = 0;   // 0: a plain attn_q (V2-Lite); > 0: q_a / q_a_norm / q_b (V2/V3)
  int64_t qk_nope_dim = 0;   // [dim / heads]
  int64_t qk_rope_dim = 0;   // [qk_nope_dim / 2]
  int64_t v_head_dim = 0;    // [qk_nope_dim]
  int64_t experts = 0;       // routed experts (0: dense)
  int64_t experts_used = 0;  // [min(6, experts)]
  int64_t shared_experts = 0;
  int64_t expert_ffn = 0;       // [ffn / 4 rounded up to 32]
  int64_t leading_dense = 1;    // dense layers before the MoE ones
  bool sigmoid_gating = false;  // V3: sigmoid with the exp_probs_b bias; else softmax (V2)
};

// Validates the spec (clear InvalidArgument on bad shapes) and writes the model to `path`,
// copying every tokenizer.* key from `vocab`.
Status WriteRandomModel(const RandomModelSpec& spec, const gguf::GgufFile& vocab,
                        const std::string& path);
// The deepseek2 part of it (random_model_deepseek2.cc).
Status WriteRandomDeepseek2(const RandomModelSpec& spec, const gguf::GgufFile& vocab,
                            const std::string& path);

}  // namespace kvforge::model
