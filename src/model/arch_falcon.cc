// arch_falcon.cc — falcon (7B layout): LayerNorm with bias, one norm feeding attention and a GELU
// MLP in parallel, fused attn_qkv, multi-query attention, NeoX RoPE. The 40B layout (attn_norm_2)
// is refused by the loader.
#include "model/arch_families.h"

namespace kvforge::model {

ArchTraits FalconTraits() {
  ArchTraits t{Arch::kFalcon, "falcon"};
  t.norm = NormKind::kLayer;
  t.ffn = FfnKind::kGelu;
  t.rope_neox = true;
  t.fused_qkv = true;
  t.parallel_block = true;
  t.eps_key = "attention.layer_norm_epsilon";
  return t;
}

}  // namespace kvforge::model
