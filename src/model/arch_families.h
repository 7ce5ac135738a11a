// arch_families.h — one function per family returning its traits (arch_<family>.cc); arch.cc
// lists them. Internal to the model module.
#pragma once

#include "model/arch.h"

namespace kvforge::model {

ArchTraits LlamaTraits();
ArchTraits Qwen2Traits();
ArchTraits Qwen3Traits();
ArchTraits GemmaTraits();
ArchTraits Phi3Traits();
ArchTraits FalconTraits();
ArchTraits Deepseek2Traits();

}  // namespace kvforge::model
