// random_model.h — writes random-weight GGUF models (llama, qwen2, qwen3, gemma, phi3, falcon)
// with a real vocabulary, for
// tests and benchmarks at realistic shapes. Matrices are N(0, 1/fan_in) (output projections
// further scaled by 1/sqrt(2 * layers)) so activations keep a sane scale through the stack.
#pragma once

#include <cstdint>
#include <string>

#include "kvforge/status.h"
#include "tensor/dtype.h"

namespace kvforge::gguf {
class GgufFile;
}

namespace kvforge::model {

struct RandomModelSpec {
  std::string arch = "llama";  // llama | qwen2 | qwen3 | gemma | phi3 | falcon
  int64_t dim = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 4;
  int64_t ffn = 0;  // 0: 8/3 x dim rounded up to 32
  int64_t ctx = 2048;
  float rope_base = 10000.0f;
  tensor::DType dtype = tensor::DType::kF16;
  uint64_t seed = 1;
};

// Validates the spec (clear InvalidArgument on bad shapes) and writes the model to `path`,
// copying every tokenizer.* key from `vocab`.
Status WriteRandomModel(const RandomModelSpec& spec, const gguf::GgufFile& vocab,
                        const std::string& path);

}  // namespace kvforge::model
