// arch_deepseek2.cc — DeepSeek-V2 / V3 (general.architecture deepseek2): RMSNorm, multi-head
// latent attention with adjacent-pair RoPE on the decoupled key, SwiGLU dense layers first, then
// Mixture-of-Experts layers (kv-methods.md Part C; docs/adr/0007-mla-and-moe.md).
#include "model/arch_families.h"

namespace kvforge::model {

ArchTraits Deepseek2Traits() {
  ArchTraits t{Arch::kDeepseek2, "deepseek2"};
  t.mla = true;
  return t;
}

}  // namespace kvforge::model
