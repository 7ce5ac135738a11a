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

// DeepSeek-V2/V3 multi-head latent attention (kv-methods.md Part C). Per token and layer the cache
// holds one latent row [c (kv_lora_rank) ; k_pe (rope_dim)]; the query is absorbed into that
// space, so attention is MQA over latent rows of head_dim = kv_lora_rank + rope_dim values whose
// first kv_lora_rank values are also the value.
struct MlaConfig {
  int64_t kv_lora_rank = 0;  // latent width (512 in V2/V3)
  int64_t q_lora_rank = 0;   // query compression width; 0: a plain attn_q (V2-Lite)
  int64_t nope_dim = 0;      // per-head query/key dims without RoPE (128)
  int64_t rope_dim = 0;      // decoupled RoPE dims, one key shared by all heads (64)
  int64_t v_head_dim = 0;    // per-head value width after the up-projection (128)
  float attn_scale = 0;      // mscale^2 / sqrt(nope_dim + rope_dim)
  int64_t qk_head_dim() const { return nope_dim + rope_dim; }
  int64_t latent_dim() const { return kv_lora_rank + rope_dim; }
};

// Mixture-of-Experts feed-forward (DeepSeek-V2/V3): the first `leading_dense` layers are dense.
enum class ExpertGating { kSoftmax, kSigmoid };
struct MoeConfig {
  int64_t n_expert = 0;       // routed experts (0: no MoE)
  int64_t n_expert_used = 0;  // chosen per token
  int64_t n_shared = 0;       // shared experts, one SwiGLU of n_shared x n_ff_expert
  int64_t n_ff_expert = 0;    // width of one routed expert
  int64_t leading_dense = 0;  // layers 0 .. leading_dense - 1 use the dense FFN
  ExpertGating gating = ExpertGating::kSoftmax;
  bool weights_norm = false;  // chosen weights divided by their sum
  float weights_scale = 1.0f;
  int64_t n_group = 0, n_group_used = 0;  // group-limited routing (0: off)
  bool IsMoeLayer(int64_t l) const { return n_expert > 0 && l >= leading_dense; }
};

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
  MlaConfig mla;          // kv_lora_rank > 0 for deepseek2
  MoeConfig moe;

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
  // Bytes of K+V per token for all layers with `elem_bytes` per value.

  static Result<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace kvforge::model
