// moe_routing.h — which experts a token goes to, and with what weights (DeepSeek-V2/V3 routing as
// llama.cpp computes it; internal to the model module, public to its tests).
#pragma once

#include <cstdint>

#include "model/model_config.h"

namespace kvforge::model {

// From the router's logits [n_expert] of one token: gating probabilities (softmax, or sigmoid per
// expert); a selection score = probability + bias[e] (V3's exp_probs_b; bias may be null), used
// only to choose; with group-limited routing a group's score is the sum of its two best selection
// scores and only the n_group_used best groups stay eligible; the n_expert_used best eligible
// experts are chosen (ties: the lower index). Their weights are the unbiased probabilities,
// divided by their sum when weights_norm, times weights_scale. experts / weights:
// [n_expert_used], best first.
void RouteToken(const MoeConfig& m, const float* logits, const float* bias, int32_t* experts,
                float* weights);

}  // namespace kvforge::model
