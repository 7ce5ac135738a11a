#include "model_file.h"

#include "assets/default_model.h"

namespace kvforge::cli {

Result<std::unique_ptr<gguf::GgufFile>> OpenModelFile(const std::string& path) {
  if (path.empty()) {
    return gguf::GgufFile::FromMemory(assets::DefaultModelData(), assets::DefaultModelSize(),
                                      assets::kDefaultModelName);
  }
  return gguf::GgufFile::Open(path);
}

}  // namespace kvforge::cli
