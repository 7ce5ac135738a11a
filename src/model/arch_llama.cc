// arch_llama.cc — llama (Llama 1-3, Mistral): the reference block; Llama 3.1+ files may carry
// rope_freqs.weight.
#include "model/arch_families.h"

namespace kvforge::model {

ArchTraits LlamaTraits() {
  ArchTraits t{Arch::kLlama, "llama"};
  t.rope_factors = true;
  return t;
}

}  // namespace kvforge::model
