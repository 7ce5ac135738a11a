// arch_gemma.cc — gemma (Gemma 1): input embeddings x sqrt(n_embd), GeGLU with tanh GELU, NeoX
// RoPE, output tied to token_embd; the GGUF stores RMSNorm weights as 1 + w, so they are used as
// stored. Gemma 2 (soft-capping, sliding windows) is a different architecture name and is refused.
#include "model/arch_families.h"

namespace kvforge::model {

ArchTraits GemmaTraits() {
  ArchTraits t{Arch::kGemma, "gemma"};
  t.ffn = FfnKind::kGeGlu;
  t.rope_neox = true;
  t.scale_embeddings = true;
  t.always_tied = true;
  return t;
}

}  // namespace kvforge::model
