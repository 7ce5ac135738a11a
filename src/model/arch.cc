#include "model/arch.h"

#include "model/arch_families.h"

namespace kvforge::model {
namespace {

const ArchTraits kArchs[] = {LlamaTraits(), Qwen2Traits(),  Qwen3Traits(),    GemmaTraits(),
                             Phi3Traits(),  FalconTraits(), Deepseek2Traits()};

}  // namespace

const ArchTraits* FindArch(std::string_view name) {
  for (const ArchTraits& t : kArchs)
    if (name == t.name) return &t;
  return nullptr;
}

std::string DescribeBlock(const ArchTraits& t) {
  std::string s = t.norm == NormKind::kLayer ? "LayerNorm with bias" : "RMSNorm";
  s += t.parallel_block ? ", parallel attention + MLP" : ", sequential attention then MLP";
  s += t.ffn == FfnKind::kSwiGlu ? ", SwiGLU" : (t.ffn == FfnKind::kGeGlu ? ", GeGLU" : ", GELU");
  if (t.fused_qkv) s += ", fused qkv";
  if (t.fused_gate_up) s += ", fused gate+up";
  if (t.qkv_bias) s += ", qkv bias";
  if (t.qk_norm) s += ", q/k RMSNorm";
  if (t.scale_embeddings) s += ", embeddings x sqrt(n_embd)";
  if (t.mla)
    s += ", multi-head latent attention (absorbed or naive per step), MoE after the leading dense "
         "layers when the file has experts";
  return s;
}

std::string SupportedArchNames() {
  std::string s;
  for (const ArchTraits& t : kArchs) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

}  // namespace kvforge::model
