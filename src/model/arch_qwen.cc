// arch_qwen.cc — qwen2 (q/k/v biases, NeoX RoPE) and qwen3 (per-head q/k RMSNorm before RoPE, no
// biases, head width from attention.key_length).
#include "model/arch_families.h"

namespace kvforge::model {

ArchTraits Qwen2Traits() {
  ArchTraits t{Arch::kQwen2, "qwen2"};
  t.rope_neox = true;
  t.qkv_bias = true;
  return t;
}

ArchTraits Qwen3Traits() {
  ArchTraits t{Arch::kQwen3, "qwen3"};
  t.rope_neox = true;
  t.qk_norm = true;
  return t;
}

}  // namespace kvforge::model
