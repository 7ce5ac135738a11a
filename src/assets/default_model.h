// default_model.h — the TinyStories 260K GGUF embedded in the binary (models/stories260K.gguf).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvforge::assets {

const uint8_t* DefaultModelData();
size_t DefaultModelSize();
inline constexpr const char* kDefaultModelName = "<embedded stories260K.gguf>";

}  // namespace kvforge::assets
