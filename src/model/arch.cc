#include "model/arch.h"

namespace kvforge::model {
namespace {

ArchTraits Llama() {
  ArchTraits t{Arch::kLlama, "llama"};
  t.rope_factors = true;
  return t;
}
ArchTraits Qwen2() {
  ArchTraits t{Arch::kQwen2, "qwen2"};
  t.rope_neox = true;
  t.qkv_bias = true;
  return t;
}
ArchTraits Qwen3() {
  ArchTraits t{Arch::kQwen3, "qwen3"};
  t.rope_neox = true;
  t.qk_norm = true;
  return t;
}
ArchTraits Gemma() {
  ArchTraits t{Arch::kGemma, "gemma"};
  t.ffn = FfnKind::kGeGlu;
  t.rope_neox = true;
  t.scale_embeddings = true;
  t.always_tied = true;
  return t;
}
ArchTraits Phi3() {
  ArchTraits t{Arch::kPhi3, "phi3"};
  t.rope_neox = true;
  t.fused_qkv = true;
  t.fused_gate_up = true;
  return t;
}
ArchTraits Falcon() {
  ArchTraits t{Arch::kFalcon, "falcon"};
  t.norm = NormKind::kLayer;
  t.ffn = FfnKind::kGelu;
  t.rope_neox = true;
  t.fused_qkv = true;
  t.parallel_block = true;
  t.eps_key = "attention.layer_norm_epsilon";
  return t;
}

const ArchTraits kArchs[] = {Llama(), Qwen2(), Qwen3(), Gemma(), Phi3(), Falcon()};

}  // namespace

const ArchTraits* FindArch(std::string_view name) {
  for (const ArchTraits& t : kArchs)
    if (name == t.name) return &t;
  return nullptr;
}

std::string SupportedArchNames() {
  std::string s;
  for (const ArchTraits& t : kArchs) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

}  // namespace kvforge::model
