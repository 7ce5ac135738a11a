// model_shape.h — the attention shape of a GGUF model, as `kvforge calc` needs it.
//
// ReadKvModelShape opens a GGUF file's metadata (the embedded model for an empty path) (no weights
// are loaded) and returns its layer count, query / KV head counts, head width, MLA latent sizes
// (DeepSeek-2/3 style models; 0 otherwise) and trained context length. Errors: kNotFound / kIoError
// when the file cannot be read, kDataLoss when it is not valid GGUF, kInvalidArgument /
// kUnimplemented when a key that calc needs is missing or the architecture is unknown. Implemented
// in model_shape.cc with the GGUF reader. Thread-safety: reentrant (no shared state). Cost: one
// metadata read.
#pragma once

#include <cstdint>
#include <string>

#include "kvforge/status.h"

namespace kvforge::cli {

struct KvModelShape {
  std::string name;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t mla_kv_lora_rank = 0, mla_rope_dim = 0;
  int64_t context_length = 0;
};

kvforge::Result<KvModelShape> ReadKvModelShape(const std::string& gguf_path);

}  // namespace kvforge::cli
