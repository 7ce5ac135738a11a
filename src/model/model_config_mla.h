// model_config_mla.h — reads the deepseek2 hyper-parameters (MLA, MoE, YaRN) into ModelConfig.
// Internal to the model module (model_config.cc calls it).
#pragma once

#include "kvforge/status.h"
#include "model/model_config.h"

namespace kvforge::gguf {
class GgufFile;
}

namespace kvforge::model {

// For an MLA family: the latent attention dims (the cache row is key_length = kv_lora_rank +
// rope_dim wide, one KV head, value_length = kv_lora_rank), the MoE keys, and YaRN RoPE scaling
// as llama.cpp applies it to deepseek2 (per-pair frequency factors, attention scale mscale^2).
Status ReadMlaConfig(const gguf::GgufFile& f, const std::string& prefix, ModelConfig* c);

// YaRN's per-pair divisors of the RoPE angle for `rope_dim` rotated dims: pair i turns at
// theta_i * (r_i + (1 - r_i) / factor), r_i falling from 1 to 0 between llama.cpp's correction
// dims for beta_fast 32 and beta_slow 1 at the original context `n_ctx_orig`.
std::vector<float> YarnFreqFactors(int64_t rope_dim, float freq_base, double factor,
                                   int64_t n_ctx_orig, double beta_fast = 32.0,
                                   double beta_slow = 1.0);

}  // namespace kvforge::model
