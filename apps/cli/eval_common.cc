#include "eval_common.h"

#include <cstdio>

#include "flags.h"
#include "read_file.h"

namespace kvforge::cli {

bool ReadEvalText(const std::string& path, std::string* text) {
  if (ReadFile(path, text)) return true;
  std::fprintf(stderr, "kvforge: cannot read %s\n", path.c_str());
  return false;
}

int EvalEngineConfig(const std::string& model, int64_t threads, int64_t ctx, const KvFlags& kv,
                     EngineConfig* out) {
  out->model = model;
  out->threads = static_cast<int>(threads);
  out->max_model_len = ctx;
  if (Status s = ApplyKvFlags(kv, out); !s.ok()) return BadFlagValue(s);
  return 0;
}

std::unique_ptr<Engine> CreateEvalEngine(const EngineConfig& config) {
  auto engine = Engine::Create(config);
  if (engine.ok()) return std::move(*engine);
  std::fprintf(stderr, "kvforge: %s\n", engine.error().message().c_str());
  return nullptr;
}

}  // namespace kvforge::cli
