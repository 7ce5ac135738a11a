// kvstore/kv_calc.h — the arithmetic behind `kvforge calc`, the KV-cache memory calculator.
//
// Given a model's attention shape (from a preset, a GGUF file or flags), a KV dtype, a sequence
// length T and a batch B, computes the bytes per token and the KV cache size
//   2 x L x B x T x H_kv x d_h x bytes_per_value          (head-based attention)
//   L x B x T x (kv_lora_rank + rope_dim) x bytes_per_value (MLA)
// with per-token quantization scales and the KIVI residual window counted exactly (via
// KvLayout); fp8 per-tensor scales are reported apart, to the byte (see KvCalcVariant). It
// compares the same model laid out as MHA (H_kv = n_heads), GQA (the
// model's own H_kv, when 1 < H_kv < n_heads), MQA (H_kv = 1) and MLA (when the model has it).
// Pure functions over plain structs, so tests check every figure without running the CLI.
// Thread-safety: stateless; the preset table is immutable. Complexity: O(1) per request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "kvstore/kv_layout.h"

namespace kvforge::kvstore {

// The attention shape of a model, as far as the KV cache cares.
struct KvModelSpec {
  std::string name;
  int64_t n_layers = 0;
  int64_t n_heads = 0;           // query heads; 0 = unknown (assumed equal to n_kv_heads)
  int64_t n_kv_heads = 0;        // K/V heads (for an MLA model: its MHA-equivalent head count)
  int64_t head_dim = 0;          // per-head width (for an MLA model: the MHA-equivalent width)
  int64_t mla_kv_lora_rank = 0;  // > 0: the model caches an MLA latent
  int64_t mla_rope_dim = 0;
  int64_t context_length = 0;  // trained context, 0 = unknown (informational only)
};

// Built-in shapes from the models' published configs, by name ("llama-3-70b", ...).
const std::vector<KvModelSpec>& KvPresets();
// nullptr if there is no preset of that name (case-insensitive).
const KvModelSpec* FindKvPreset(std::string_view name);
// "llama-2-7b, llama-2-13b, ..." for usage and error messages.
std::string KvPresetNames();

// Checks a shape for calc: positive sizes, n_heads a multiple of n_kv_heads, MLA fields paired.
Status ValidateKvModelSpec(const KvModelSpec& spec);

struct KvCalcRequest {
  KvModelSpec model;
  int64_t seq_len = 0;  // tokens per sequence, >= 1
  int64_t batch = 1;    // sequences, >= 1
  KvDtype dtype = KvDtype::kF16;
  int64_t block_tokens = 0;  // 0: 16, or the KIVI group (32) for KIVI dtypes
};

enum class KvAttention : uint8_t { kMha, kGqa, kMqa, kMla };
std::string_view KvAttentionName(KvAttention attention);  // "MHA", "GQA", "MQA", "MLA"

struct KvCalcVariant {
  KvAttention attention = KvAttention::kMha;
  int64_t kv_heads = 0;   // 0 for MLA
  bool is_model = false;  // the model's own layout
  int64_t values_per_token_per_layer = 0;
  int64_t bytes_per_token_per_layer = 0;  // asymptotic, scales included
  int64_t bytes_per_token = 0;            // all layers
  KvBytes sequence_bytes;                 // exact, one sequence of seq_len tokens
  int64_t kv_cache_bytes = 0;             // batch x sequence_bytes.total()
  // Per-layer constants that do not grow with tokens or sequences (fp8 per-tensor / per-head
  // scales). They live with the attention layer, not in the blocks, so kv_cache_bytes leaves
  // them out; total_bytes adds them back.
  int64_t fixed_bytes = 0;
  int64_t total_bytes = 0;           // kv_cache_bytes + fixed_bytes
  int64_t block_bytes = 0;           // one physical block, padding included
  int64_t block_padding_bytes = 0;   // of which padding
  int64_t blocks_per_sequence = 0;   // blocks a paged cache holds for one sequence
  int64_t paged_kv_cache_bytes = 0;  // batch x (blocks x block_bytes + residual)
  double ratio_vs_mha = 0.0;         // MHA bytes_per_token / this one's (0 if no MHA row)
};

struct KvCalcReport {
  KvCalcRequest request;                // with defaults resolved (block_tokens, n_heads)
  std::vector<KvCalcVariant> variants;  // in order MHA, GQA, MQA, MLA; absent ones skipped
  size_t model_index = 0;               // index of the model's own variant
  std::vector<std::string> notes;       // caveats worth printing
  const KvCalcVariant& model() const { return variants[model_index]; }
};

// InvalidArgument for bad shapes, counts or int64 overflow; Unimplemented for KIVI on MLA.
Result<KvCalcReport> ComputeKvCalc(const KvCalcRequest& request);

// Human-readable report (several lines, ends with '\n').
std::string FormatKvCalcText(const KvCalcReport& report);
// One JSON object on one line (ends with '\n'): integer `bytes_per_token`, `kv_cache_bytes`,
// the shape, dtype and per-variant figures.
std::string FormatKvCalcJson(const KvCalcReport& report);
// "0.3125 GiB = 320 MiB (335544320 bytes)".
std::string FormatGiB(int64_t bytes);

}  // namespace kvforge::kvstore
