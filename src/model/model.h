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

// How MLA attention runs (forward_mla.cc): absorbed (W_UK folded into the query, MQA over the
// latent rows: decode's path), naive (per-head K/V decompressed from the latents, MHA: long
// prefill chunks), or auto: per sequence chunk, whichever the cost model says does less work.
enum class MlaAttention { kAuto, kAbsorbed, kNaive };

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<SeqChunk> seqs;
  MlaAttention mla = MlaAttention::kAuto;
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
  std::vector<float> decode_parts;          // whole-row decode: partial outputs, maxima, sums
  // MLA (H heads, R latent, P RoPE, N nope, Vh value dims): mla_qf [tokens][H (N + P)] the
  // query; mla_q [tokens][H (R + P)] the absorbed query; mla_out [tokens][H R] attention over
  // latents; gather_in / gather_out [tokens][max width] one head's rows; the naive path's
  // decompressed K [slots][H (N + P)] and V [slots][H Vh] and latents [slots][R + P], [slots][R].
  std::vector<float> mla_qf, mla_q, mla_out, gather_in, gather_out;
  std::vector<float> naive_k, naive_v, naive_lat, naive_c;
  // MoE: router [tokens][experts]; one expert's tokens: moe_x [tokens][n_embd], moe_gate /
  // moe_up / moe_act [tokens][expert or shared width], moe_y [tokens][n_embd].
  std::vector<float> moe_logits, moe_x, moe_gate, moe_up, moe_act, moe_y;
  int64_t tokens_capacity = 0;
  int64_t kv_capacity = 0;
  // Floating-point operations of every matmul run with this workspace (2 x rows x cols per
  // token): what `bench latency` divides by the machine's FMA peak.
  int64_t matmul_flops = 0;
};

// The MLA path with less arithmetic for a chunk of n_q queries over n_kv cached slots: absorbed
// costs n_q H R (N + Vh) for the projections and n_q n_kv H (2R + P) for attention; naive
// decompresses n_kv H R (N + Vh) and attends with n_q n_kv H (N + P + Vh).
MlaAttention ChooseMlaPath(const MlaConfig& m, int64_t n_head, int64_t n_q, int64_t n_kv);

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
  // The MLA form a batch with mla == kAuto runs (set once, before any Forward; an engine
  // setting).
  void SetMlaAttention(MlaAttention m) { mla_default_ = m; }
  const ModelWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return *file_; }

  // Runs one step. `logits` receives one row of n_vocab floats per requested logit row, in
  // batch order (per chunk: all tokens if logits_all, else the last if logits_last).
  // The KV slots must already have capacity for every position written.
  Status Forward(const Batch& batch, kvstore::KvAccess& kv, Workspace& ws,
                 kernels::ThreadPool& pool, std::vector<float>* logits) const;

 private:
  Model() = default;
  Status Init();
  // y[t * y_stride + r] = W row r . x[t * x_stride ..] (strides 0: packed, cols / rows).
  // exact: keep f32 activations where decode kernels would round them to f16 (the output
  // projection: its logits choose tokens, and a 2^-11 rounding flipped greedy picks).
  void MatMul(const Matrix& w, const float* x, int64_t n_tok, float* y, Workspace& ws,
              kernels::ThreadPool& pool, int64_t x_stride = 0, int64_t y_stride = 0,
              bool exact = false) const;
  // The block's parts that differ by family (arch.h).
  void ProjectQkv(const LayerWeights& L, int64_t n, Workspace& ws, kernels::ThreadPool& pool) const;
  void FeedForward(const LayerWeights& L, int64_t n, Workspace& ws,
                   kernels::ThreadPool& pool) const;
  // ws.y = the layer's attention output (projected by wo) for xn; writes the step's KV rows.
  void AttendLlama(int64_t l, const LayerWeights& L, const Batch& batch,
                   const std::vector<int64_t>& pos, kvstore::KvAccess& kv, Workspace& ws,
                   kernels::ThreadPool& pool) const;
  void AttendMla(int64_t l, const LayerWeights& L, const Batch& batch,
                 const std::vector<int64_t>& pos, kvstore::KvAccess& kv, Workspace& ws,
                 kernels::ThreadPool& pool) const;
  // MLA's two paths over the sequences `seqs` of the batch (forward_mla.cc).
  void MlaAbsorbed(int64_t l, const LayerWeights& L, const Batch& batch,
                   const std::vector<size_t>& seqs, kvstore::KvAccess& kv, Workspace& ws,
                   kernels::ThreadPool& pool) const;
  void MlaNaive(int64_t l, const LayerWeights& L, const Batch& batch, size_t seq,
                kvstore::KvAccess& kv, Workspace& ws, kernels::ThreadPool& pool) const;
  // ws.y = routed experts + shared experts of xn (moe.cc).
  void MoeFeedForward(const LayerWeights& L, int64_t n, Workspace& ws,
                      kernels::ThreadPool& pool) const;

  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
  MlaAttention mla_default_ = MlaAttention::kAuto;
};

}  // namespace kvforge::model
