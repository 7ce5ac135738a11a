#include "model/model_config_mla.h"

#include <algorithm>
#include <cmath>

#include "base/strings.h"
#include "gguf/gguf_reader.h"

namespace kvforge::model {

using base::StrFormat;

namespace {

// llama.cpp's ggml_rope_yarn_corr_dim: the dim whose wavelength spans n_ctx_orig / n_rot turns.
double CorrDim(int64_t n_dims, int64_t n_ctx_orig, double n_rot, double base) {
  return static_cast<double>(n_dims) *
         std::log(static_cast<double>(n_ctx_orig) / (n_rot * 2 * 3.14159265358979323846)) /
         (2 * std::log(base));
}

Status ReadYarn(const gguf::GgufFile& f, const std::string& a, ModelConfig* c, double* mscale) {
  *mscale = 1.0;
  const gguf::Value* type = f.Find(a + "rope.scaling.type");
  if (type == nullptr || type->type != gguf::ValueType::kString || std::string(type->str) != "yarn")
    return Status::Ok();
  double factor = 1, log_mul = 0;
  int64_t orig = 0;
  KVF_ASSIGN_OR_RETURN(factor, f.GetFloatOr(a + "rope.scaling.factor", 1.0));
  KVF_ASSIGN_OR_RETURN(orig, f.GetIntOr(a + "rope.scaling.original_context_length", 0));
  KVF_ASSIGN_OR_RETURN(log_mul, f.GetFloatOr(a + "rope.scaling.yarn_log_multiplier", 0.0));
  if (!(factor >= 1) || !std::isfinite(factor) || factor > 1e6)
    return Status::InvalidArgument(f.path() + ": rope.scaling.factor must be >= 1 for yarn");
  if (orig <= 0 || orig > (1LL << 26))
    return Status::InvalidArgument(f.path() +
                                   ": yarn needs rope.scaling.original_context_length > 0");
  if (!(log_mul >= 0) || log_mul > 100)
    return Status::InvalidArgument(f.path() + ": rope.scaling.yarn_log_multiplier out of range");
  // llama.cpp b10573 reads neither yarn_beta_fast nor yarn_beta_slow for deepseek2 and uses 32
  // and 1; kvforge does the same so that its RoPE is the reference's.
  c->rope_freq_factors = YarnFreqFactors(c->rope_dim, c->rope_freq_base, factor, orig);
  c->rope_freq_scale = 1.0f;
  *mscale = 1.0 + log_mul * std::log(factor);
  return Status::Ok();
}

Status ReadMoe(const gguf::GgufFile& f, const std::string& a, ModelConfig* c) {
  MoeConfig& m = c->moe;
  KVF_ASSIGN_OR_RETURN(m.n_expert, f.GetIntOr(a + "expert_count", 0));
  if (m.n_expert == 0) return Status::Ok();
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(f.path() + ": invalid MoE hyper-parameters: " + what);
  };
  KVF_ASSIGN_OR_RETURN(m.n_expert_used, f.GetIntOr(a + "expert_used_count", 0));
  KVF_ASSIGN_OR_RETURN(m.n_shared, f.GetIntOr(a + "expert_shared_count", 0));
  KVF_ASSIGN_OR_RETURN(m.n_ff_expert, f.GetIntOr(a + "expert_feed_forward_length", 0));
  KVF_ASSIGN_OR_RETURN(m.leading_dense, f.GetIntOr(a + "leading_dense_block_count", 0));
  KVF_ASSIGN_OR_RETURN(m.n_group, f.GetIntOr(a + "expert_group_count", 0));
  KVF_ASSIGN_OR_RETURN(m.n_group_used, f.GetIntOr(a + "expert_group_used_count", 0));
  KVF_ASSIGN_OR_RETURN(m.weights_norm, f.GetBoolOr(a + "expert_weights_norm", false));
  double scale = 1.0;
  KVF_ASSIGN_OR_RETURN(scale, f.GetFloatOr(a + "expert_weights_scale", 1.0));
  m.weights_scale = static_cast<float>(scale);
  int64_t gating = 1;
  KVF_ASSIGN_OR_RETURN(gating, f.GetIntOr(a + "expert_gating_func", 1));
  if (gating != 1 && gating != 2)
    return bad(
        StrFormat("expert_gating_func %lld (known: 1 softmax, 2 sigmoid)", (long long)gating));
  m.gating = gating == 2 ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
  if (m.n_expert < 1 || m.n_expert > 4096) return bad("expert_count out of range");
  if (m.n_expert_used < 1 || m.n_expert_used > m.n_expert)
    return bad("expert_used_count must be in 1..expert_count");
  if (m.n_shared < 0 || m.n_shared > 64) return bad("expert_shared_count out of range");
  if (m.n_ff_expert < 1 || m.n_ff_expert > (1 << 20))
    return bad("expert_feed_forward_length out of range");
  if (m.leading_dense < 0 || m.leading_dense > c->n_layer)
    return bad("leading_dense_block_count exceeds block_count");
  if (!(scale > 0) || !std::isfinite(scale)) return bad("expert_weights_scale must be > 0");
  if (m.n_group != 0 || m.n_group_used != 0) {
    if (m.n_group < 1 || m.n_expert % m.n_group != 0)
      return bad("expert_count must be a multiple of expert_group_count");
    if (m.n_group_used < 1 || m.n_group_used > m.n_group)
      return bad("expert_group_used_count must be in 1..expert_group_count");
    if (m.n_expert_used > m.n_group_used * (m.n_expert / m.n_group))
      return bad("the used groups hold fewer experts than expert_used_count");
  }
  return Status::Ok();
}

}  // namespace

std::vector<float> YarnFreqFactors(int64_t rope_dim, float freq_base, double factor,
                                   int64_t n_ctx_orig, double beta_fast, double beta_slow) {
  const double low = std::max(0.0, std::floor(CorrDim(rope_dim, n_ctx_orig, beta_fast, freq_base)));
  const double high = std::min(static_cast<double>(rope_dim - 1),
                               std::ceil(CorrDim(rope_dim, n_ctx_orig, beta_slow, freq_base)));
  std::vector<float> out(static_cast<size_t>(rope_dim / 2));
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    // rope_yarn_ramp at i0 = 2i: 1 below `low` (extrapolate), 0 above `high` (interpolate).
    const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
    const double ramp = 1 - std::clamp(y, 0.0, 1.0);
    out[static_cast<size_t>(i)] = static_cast<float>(1.0 / (ramp + (1 - ramp) / factor));
  }
  return out;
}

Status ReadMlaConfig(const gguf::GgufFile& f, const std::string& a, ModelConfig* c) {
  MlaConfig& m = c->mla;
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(f.path() + ": invalid MLA hyper-parameters: " + what);
  };
  KVF_ASSIGN_OR_RETURN(m.kv_lora_rank, f.GetIntOr(a + "attention.kv_lora_rank", 0));
  KVF_ASSIGN_OR_RETURN(m.q_lora_rank, f.GetIntOr(a + "attention.q_lora_rank", 0));
  int64_t k_mla = 0, v_mla = 0, v_len = 0;
  KVF_ASSIGN_OR_RETURN(k_mla, f.GetIntOr(a + "attention.key_length_mla", 0));
  KVF_ASSIGN_OR_RETURN(v_mla, f.GetIntOr(a + "attention.value_length_mla", 0));
  KVF_ASSIGN_OR_RETURN(v_len, f.GetIntOr(a + "attention.value_length", 0));
  if (k_mla == 0 || v_mla == 0)
    return Status::Unimplemented(
        f.path() +
        ": this deepseek2 GGUF predates the MLA form (no attention.key_length_mla / "
        "value_length_mla); convert it again with a current llama.cpp");
  if (m.kv_lora_rank < 1 || m.kv_lora_rank > 8192) return bad("kv_lora_rank out of range");
  if (m.q_lora_rank < 0 || m.q_lora_rank > 65536) return bad("q_lora_rank out of range");
  m.rope_dim = c->rope_dim;
  m.nope_dim = k_mla - m.rope_dim;
  m.v_head_dim = v_mla;
  if (m.nope_dim < 1 || m.nope_dim > 4096) return bad("key_length_mla must exceed the RoPE dims");
  if (m.v_head_dim < 1 || m.v_head_dim > 4096) return bad("value_length_mla out of range");
  if (c->n_head_kv != 1) return bad("the latent cache has one KV head (head_count_kv 1)");
  if (c->head_dim != m.latent_dim())
    return bad(StrFormat("key_length %lld must be kv_lora_rank + rope dims (%lld)",
                         (long long)c->head_dim, (long long)m.latent_dim()));
  if (v_len != m.kv_lora_rank)
    return bad(StrFormat("value_length %lld must be kv_lora_rank %lld", (long long)v_len,
                         (long long)m.kv_lora_rank));
  if (!c->rope_freq_factors.empty()) return bad("rope_freqs.weight is not used with MLA");
  double mscale = 1.0;
  KVF_RETURN_IF_ERROR(ReadYarn(f, a, c, &mscale));
  m.attn_scale =
      static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(m.qk_head_dim())));
  return ReadMoe(f, a, c);
}

}  // namespace kvforge::model
