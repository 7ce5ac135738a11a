// model_config.h — architecture hyper-parameters read from GGUF metadata, validated once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "model/arch.h"

namespace kvforge::gguf {
class GgufFile;
}

namespace kvforge::model {

struct ModelConfig {
  const ArchTraits* traits = nullptr;  // the family's block variant (arch.h); never null once read
  std::string arch_name;               // general.architecture
  std::string name;                    // general.name (may be empty)
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // per-head width of Q/K/V
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  int64_t rope_dim = 0;  // leading dims of each head that are rotated
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
  bool rope_neox = false;        // qwen2: rotate (i, i + d/2) pairs
  // Llama 3.1+: rope_freqs.weight, rope_dim / 2 divisors of the pairs' angles (empty: none).
  std::vector<float> rope_freq_factors;
  float rms_eps = 1e-5f;  // the norm's epsilon (RMSNorm or LayerNorm, as the family uses)

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  // Bytes of K+V per token for all layers with `elem_bytes` per value.

  static Result<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace kvforge::model
