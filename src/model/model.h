// model.h — a loaded decoder-only transformer (llama family, qwen2) and its batched forward pass.
//
// Forward() runs one step over tokens from one or more sequences at arbitrary positions (prefill
// chunks and single decode tokens mixed): every matrix product covers all tokens of the step, so
// weights are read once per step; attention runs per sequence over its KV pages.
// Thread-safety: a Model is immutable after Load(); Forward() uses the caller's Workspace and
// ThreadPool, so two threads may run forwards concurrently with separate workspaces/pools.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "kvstore/kv_access.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace kvforge::gguf {
class GgufFile;
}
namespace kvforge::kernels {
class ThreadPool;
}

namespace kvforge::model {

// One sequence's part of a step: tokens [token_begin, token_begin + n_tokens) of the batch, at
// RoPE positions pos0 .. pos0 + n_tokens - 1, in KV sequence `kv_seq`, written at KV slots
// slot0 .. slot0 + n_tokens - 1 (slots are not positions once a policy evicted tokens,
// docs/adr/0005).
struct SeqChunk {
  int64_t kv_seq = 0;
  int64_t pos0 = 0;
  int64_t token_begin = 0;
  int64_t n_tokens = 0;
  bool logits_all = false;  // logits for every token (perplexity) instead of only the last
  bool logits_last = true;  // logits for the last token of the chunk
  int64_t slot0 = -1;       // -1: slot0 == pos0 (nothing evicted)
  // The observer a KV policy asked for (nullptr: none, and no cost): the attention weights of the
  // chunk's queries observe_from .. n_tokens - 1, summed over queries and heads, are added per
  // slot into observed[lane * observed_stride + slot] (observed_stride >= slot0 + n_tokens),
  // lane = layer * observed_lanes + kv head when observed_lanes == n_kv_head (per-head
  // selection), else lane = layer with all heads summed.
  float* observed = nullptr;
  int64_t observed_stride = 0;
  int32_t observed_lanes = 1;
  int64_t observe_from = 0;

  // Sparse decode (Quest, NSA): a one-token chunk reads only the KV blocks the plan selects
  // from the cache's block key summaries (nullptr: dense).
  const kvpolicy::SparseDecode* sparse = nullptr;

  int64_t first_slot() const { return slot0 < 0 ? pos0 : slot0; }
};

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<SeqChunk> seqs;
};

// Scratch buffers reused across steps; grows to the largest batch seen.
class Workspace {
 public:
  Workspace() = default;
  void Ensure(const ModelConfig& c, int64_t n_tokens, int64_t max_kv_len, int n_threads);

  // [tokens][width] each: x residual, xn normed input, y a sublayer's output, fused a fused
  // projection (qkv or gate+up) before it is split.
  std::vector<float> x, xn, y, q, k, v, attn, gate, up, ffn, fused;
  std::vector<uint8_t> act;                 // prepared activations
  std::vector<std::vector<float>> scratch;  // per-thread attention scores
  std::vector<float> observed;              // [tasks][slots] observer rows of one layer
  int64_t tokens_capacity = 0;
  int64_t kv_capacity = 0;
};

class Model {
 public:
  // Opens the GGUF (mmap), reads the config, binds the weights.
  // Maps the file and binds the weights in place (no copy, no repacking: every supported weight
  // layout is consumed as stored); logs the mapped bytes and the time taken.
  static Result<std::unique_ptr<Model>> Load(const std::string& path);
  // mlock()s the weights (llama.cpp's --mlock); a refusal is an error the caller may downgrade.
  Status LockWeights() const;
  // Same from caller-owned GGUF bytes that outlive the Model (the embedded default model).
  static Result<std::unique_ptr<Model>> LoadFromMemory(const uint8_t* data, size_t size,
                                                       std::string name);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return *file_; }

  // Runs one step. `logits` receives one row of n_vocab floats per requested logit row, in
  // batch order (per chunk: all tokens if logits_all, else the last if logits_last).
  // The KV slots must already have capacity for every position written.
  Status Forward(const Batch& batch, kvstore::KvAccess& kv, Workspace& ws,
                 kernels::ThreadPool& pool, std::vector<float>* logits) const;

  // Number of logit rows Forward() will produce for `batch`.
  static int64_t NumLogitRows(const Batch& batch);

 private:
  Model() = default;
  Status Init();
  void MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y, Workspace& ws,
              kernels::ThreadPool& pool) const;
  // The block's parts that differ by family (arch.h).
  void ProjectQkv(const LayerWeights& L, int64_t n, Workspace& ws, kernels::ThreadPool& pool) const;
  void FeedForward(const LayerWeights& L, int64_t n, Workspace& ws,
                   kernels::ThreadPool& pool) const;

  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace kvforge::model
