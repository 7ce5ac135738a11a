#include "assets/default_model.h"

extern "C" const uint8_t kvf_default_model_begin[];
extern "C" const uint8_t kvf_default_model_end[];

namespace kvforge::assets {

const uint8_t* DefaultModelData() { return kvf_default_model_begin; }
size_t DefaultModelSize() {
  return static_cast<size_t>(kvf_default_model_end - kvf_default_model_begin);
}

}  // namespace kvforge::assets
