// weights_mla.h — binds the deepseek2 attention (MLA, both the split attn_k_b / attn_v_b form and
// the legacy fused attn_kv_b) and Mixture-of-Experts tensors of one layer (internal).
#pragma once

#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/weight_binder.h"
#include "model/weights.h"

namespace kvforge::model {

Status BindMlaAttention(Binder& b, const ModelConfig& c, const std::string& prefix, LayerWeights* L,
                        std::vector<std::vector<float>>* owned);
Status BindMoe(Binder& b, const ModelConfig& c, const std::string& prefix, LayerWeights* L);
// Matrix bytes one token's decode step reads in a layer's MLA and MoE weights.
uint64_t MlaMoeBytes(const LayerWeights& L, const MoeConfig& moe);

}  // namespace kvforge::model
