#include "eval_common.h"

#include <cstdio>

#include "read_file.h"

namespace kvforge::cli {

bool ReadEvalText(const std::string& path, std::string* text) {
  if (ReadFile(path, text)) return true;
  std::fprintf(stderr, "kvforge: cannot read %s\n", path.c_str());
  return false;
}

std::unique_ptr<Engine> CreateEvalEngine(const EngineConfig& config) {
  auto engine = Engine::Create(config);
  if (engine.ok()) return std::move(*engine);
  std::fprintf(stderr, "kvforge: %s\n", engine.error().message().c_str());
  return nullptr;
}

}  // namespace kvforge::cli
