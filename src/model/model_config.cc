#include "model/model_config.h"

#include <cmath>

#include "base/strings.h"
#include "gguf/gguf_reader.h"
#include "model/model_config_mla.h"
#include "tensor/dequant.h"

namespace kvforge::model {

using base::StrFormat;

namespace {

// Metadata that changes the math and that no supported family computes yet: refusing it is
// better than running a model silently wrong.
Status RefuseUnsupportedKeys(const gguf::GgufFile& f, const std::string& a, bool mla) {
  static const char* const kUnsupported[] = {
      "attn_logit_softcapping",   "final_logit_softcapping",          "attention.sliding_window",
      "rope.scaling.attn_factor", "rope.scaling.yarn_log_multiplier", "expert_count",
      "attention.kv_lora_rank",
  };
  for (const char* key : kUnsupported) {
    const std::string k = key;
    if (mla && (k == "rope.scaling.yarn_log_multiplier" || k == "expert_count" ||
                k == "attention.kv_lora_rank"))
      continue;  // read by ReadMlaConfig
    if (const gguf::Value* v = f.Find(a + key)) {
      // A zero soft-cap / window / expert count means "off".
      auto num = f.GetFloatOr(a + key, 0.0);
      if (v->type == gguf::ValueType::kArray || !num.ok() || *num != 0)
        return Status::Unimplemented(f.path() + ": metadata key '" + a + key +
                                     "' changes the model's math and is not supported yet");
    }
  }
  return Status::Ok();
}

// Llama 3.1+ rope_freqs.weight: one divisor per rotated pair.
Status ReadRopeFactors(const gguf::GgufFile& f, ModelConfig* c) {
  const gguf::TensorInfo* t = f.FindTensor("rope_freqs.weight");
  if (t == nullptr) return Status::Ok();
  if (!c->traits->rope_factors)
    return Status::Unimplemented(f.path() + ": tensor 'rope_freqs.weight' is not supported for " +
                                 c->arch_name);
  const int64_t pairs = c->rope_dim / 2;
  if (t->dims.size() != 1 || t->dims[0] != pairs)
    return Status::InvalidArgument(StrFormat("%s: rope_freqs.weight must hold %lld values",
                                             f.path().c_str(), (long long)pairs));
  c->rope_freq_factors.resize(static_cast<size_t>(pairs));
  KVF_RETURN_IF_ERROR(tensor::DequantizeRow(t->dtype, t->data, c->rope_freq_factors.data(), pairs)
                          .WithContext(f.path() + ": rope_freqs.weight"));
  for (float x : c->rope_freq_factors)
    if (!(x > 0) || !std::isfinite(x))
      return Status::InvalidArgument(f.path() + ": rope_freqs.weight values must be positive");
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ModelConfig::FromGguf(const gguf::GgufFile& f) {
  ModelConfig c;
  KVF_ASSIGN_OR_RETURN(c.arch_name, f.GetString("general.architecture"));
  c.traits = FindArch(c.arch_name);
  if (c.traits == nullptr)
    return Status::Unimplemented(f.path() + ": architecture '" + c.arch_name +
                                 "' is not supported (supported: " + SupportedArchNames() + ")");
  c.rope_neox = c.traits->rope_neox;
  if (const auto* v = f.Find("general.name"); v && v->type == gguf::ValueType::kString)
    c.name = std::string(v->str);
  const std::string a = c.arch_name + ".";
  KVF_ASSIGN_OR_RETURN(c.n_embd, f.GetInt(a + "embedding_length"));
  KVF_ASSIGN_OR_RETURN(c.n_layer, f.GetInt(a + "block_count"));
  KVF_ASSIGN_OR_RETURN(c.n_ff, f.GetInt(a + "feed_forward_length"));
  KVF_ASSIGN_OR_RETURN(c.n_head, f.GetInt(a + "attention.head_count"));
  KVF_ASSIGN_OR_RETURN(c.n_ctx_train, f.GetIntOr(a + "context_length", 2048));
  if (const auto* v = f.Find(a + "attention.head_count_kv");
      v && v->type == gguf::ValueType::kArray)
    return Status::Unimplemented(f.path() + ": per-layer head_count_kv arrays are not supported");
  KVF_ASSIGN_OR_RETURN(c.n_head_kv, f.GetIntOr(a + "attention.head_count_kv", c.n_head));
  double eps = 0;
  KVF_ASSIGN_OR_RETURN(eps, f.GetFloatOr(a + c.traits->eps_key, 1e-5));
  c.rms_eps = static_cast<float>(eps);

  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(f.path() + ": invalid model hyper-parameters: " + what);
  };
  if (c.n_embd <= 0 || c.n_embd > (1 << 20)) return bad("embedding_length out of range");
  if (c.n_layer <= 0 || c.n_layer > 4096) return bad("block_count out of range");
  if (c.n_ff <= 0 || c.n_ff > (1 << 22)) return bad("feed_forward_length out of range");
  if (c.n_head <= 0 || c.n_head > 4096) return bad("head_count out of range");
  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0)
    return bad(StrFormat("head_count %lld is not a multiple of head_count_kv %lld",
                         (long long)c.n_head, (long long)c.n_head_kv));
  if (c.n_ctx_train <= 0 || c.n_ctx_train > (1LL << 26)) return bad("context_length out of range");
  if (!(eps > 0 && eps < 1)) return bad("layer_norm_rms_epsilon out of range");

  int64_t default_hd = c.n_embd / c.n_head;
  KVF_ASSIGN_OR_RETURN(c.head_dim, f.GetIntOr(a + "attention.key_length", default_hd));
  int64_t v_len = 0;
  KVF_ASSIGN_OR_RETURN(v_len, f.GetIntOr(a + "attention.value_length", c.head_dim));
  if (v_len != c.head_dim && !c.traits->mla)  // MLA: the value is the latent part of the row
    return Status::Unimplemented(f.path() + ": key_length != value_length");
  if (c.head_dim <= 0 || c.head_dim > 1024 || (c.head_dim % 2) != 0)
    return bad("head dimension must be even and in 2..1024");
  KVF_ASSIGN_OR_RETURN(c.rope_dim, f.GetIntOr(a + "rope.dimension_count", c.head_dim));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    return bad("rope.dimension_count must be even and at most the head dimension");
  double base = 0;
  KVF_ASSIGN_OR_RETURN(base, f.GetFloatOr(a + "rope.freq_base", 10000.0));
  if (!(base > 1)) return bad("rope.freq_base must be > 1");
  c.rope_freq_base = static_cast<float>(base);
  // Linear RoPE scaling: rope.scaling.type == "linear" with rope.scaling.factor, or the older
  // rope.scale_linear key.
  double factor = 1.0;
  if (const auto* t = f.Find(a + "rope.scaling.type")) {
    if (t->type != gguf::ValueType::kString) return bad("rope.scaling.type must be a string");
    const std::string type(t->str);
    if (type == "linear") {
      KVF_ASSIGN_OR_RETURN(factor, f.GetFloatOr(a + "rope.scaling.factor", 1.0));
    } else if (type == "yarn" && c.traits->mla) {
      // ReadMlaConfig turns YaRN into per-pair frequency factors.
    } else if (type != "none") {
      return Status::Unimplemented(f.path() + ": rope scaling type '" + type +
                                   "' is not supported");
    }
  } else {
    KVF_ASSIGN_OR_RETURN(factor, f.GetFloatOr(a + "rope.scale_linear", 1.0));
  }
  if (!(factor > 0)) return bad("rope scaling factor must be > 0");
  c.rope_freq_scale = static_cast<float>(1.0 / factor);

  KVF_RETURN_IF_ERROR(RefuseUnsupportedKeys(f, a, c.traits->mla));
  KVF_RETURN_IF_ERROR(ReadRopeFactors(f, &c));
  if (c.traits->mla) KVF_RETURN_IF_ERROR(ReadMlaConfig(f, a, &c));

  const gguf::Value* tokens = f.Find("tokenizer.ggml.tokens");
  const gguf::TensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb && emb->dims.size() == 2)
    c.n_vocab = emb->dims[1];
  else if (tokens)
    c.n_vocab = static_cast<int64_t>(tokens->count);
  if (c.n_vocab <= 0) return bad("cannot determine the vocabulary size");
  return c;
}

}  // namespace kvforge::model
