// arch_phi3.cc — phi3: fused attn_qkv (q rows, then k, then v) and fused ffn_up (gate rows, then
// up), NeoX RoPE; long-rope factor tensors are refused by the loader.
#include "model/arch_families.h"

namespace kvforge::model {

ArchTraits Phi3Traits() {
  ArchTraits t{Arch::kPhi3, "phi3"};
  t.rope_neox = true;
  t.fused_qkv = true;
  t.fused_gate_up = true;
  return t;
}

}  // namespace kvforge::model
