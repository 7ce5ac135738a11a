// kvstore/kv_layout.h — how many bytes the KV cache of one model takes, and where they go.
//
// A KvLayout describes, for one model and one KV dtype, the bytes each token adds per layer to
// each stored stream: K and V for multi-head / grouped-query / multi-query attention (n_kv_heads
// x head_dim values each), or one shared latent for multi-head latent attention (MLA:
// kv_lora_rank + rope_dim values per token per layer, standing for both K and V). Quantized
// dtypes count their codes and their scales / zero-points honestly:
//   f32 4 B/value; f16, bf16 2 B/value;
//   fp8_e4m3, fp8_e5m2: 1 B/value plus f32 scales per layer for K and V (per tensor by default,
//     or per KV head), stored once per cache: FixedBytes(), not per token;
//   int8: 1 B/value plus one f16 (or f32) scale per token per KV head;
//   q8_0: blocks of 32 values = 32 int8 + f16 scale = 34 B; q4_0: 16 B of nibbles + f16 = 18 B;
//   kivi2 / kivi4 (KIVI, arXiv 2402.02750): 2- or 4-bit codes plus an f16 scale and f16 zero
//     point per group of G = 32 (keys grouped per channel over G tokens, values per token over G
//     channels), and a residual window of the most recent R = 128 tokens kept in f16.
//   kvquant3 (KVQuant nuq3-1%, kvquant/nuq.h): 3-bit codes plus fixed outlier slots of 4 B (u16
//     channel, f16 value; 2% of a key row, 1% of a value row), a value row's f16 center and
//     radius; per layer (FixedBytes) an f32 8-entry table per stream and the keys' f32
//     per-channel center and radius.
//   turbo3 / turbo4 (TurboQuant-mse, kvquant/turbo.h): b-bit codes per value plus an f16 norm per
//     token per head (b + 16/d bits/value); turbo keys with turbo_qjl: (b-1)-bit codes, 1 sign bit
//     per value and two f16 norms per head (b + 32/d). Codes and signs are bit streams over the
//     row, each padded to a whole byte. Needs head_dim >= 2.
//
// Rows (see docs/kv_cache.md and docs/adr/0002-kv-block-layout.md):
//   row    = the smallest unit a codec writes on its own: one token (all KV heads, scales inline)
//            for every dtype except KIVI keys, whose row is one group of G tokens.
//   row_stride_bytes = row_bytes rounded up to row_align_bytes (64 by default, one cache line and
//   one AVX-512 register), so every row and every block piece starts aligned.
// Placement. The resident cache (kvstore::KvStore) is per layer: each (stream, layer) owns a
// region [num_blocks][rows_per_block][row_stride_bytes], and a block's piece of it is
// RowsPerBlock(s) x row_stride_bytes contiguous bytes. The block-level helpers below
// (OffsetInBlock, LayerSliceBytes, BlockBytes) describe the SERIALIZED block, the form a block
// takes when it is gathered into one buffer for swap / offload tiers:
//   serialized block = [num_layers][num_streams][rows_per_block][row_stride_bytes]
// BlockBytes() is also the sum of a block's resident pieces, so capacity figures hold for both.
// The KIVI residual window is per sequence and lives outside the blocks (ResidualBytesPerSequence).
//
// Exactness: BytesPerToken() is the asymptotic rate (no residual, no padding, no fixed bytes) and
// is an integer because Create() rejects shapes whose quantization groups would straddle a head.
// BytesForTokens(T) is the exact unpadded byte count of one sequence of T tokens, residual
// window included. All arithmetic is overflow-checked. Thread-safety: immutable after Create;
// const methods may be called from any thread. Complexity: every method is O(1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "kvquant/kv_dtype.h"

namespace kvforge::kvstore {

// The dtype enum and its names live in kvquant (shared with the codecs and kernels).
using kvquant::IsFp8;
using kvquant::IsKivi;
using kvquant::KvDtype;
using kvquant::KvDtypeChoices;
using kvquant::KvDtypeName;
using kvquant::ParseKvDtype;

enum class Fp8ScaleGranularity : uint8_t { kPerTensor, kPerHead };

struct KvLayoutConfig {
  int64_t num_layers = 0;
  // Head-based attention (MHA / GQA / MQA): K stores num_kv_heads x head_dim values per token,
  // V num_kv_heads x v_head_dim (v_head_dim 0 means head_dim).
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t v_head_dim = 0;
  // MLA: when mla_kv_lora_rank > 0, one latent of (mla_kv_lora_rank + mla_rope_dim) values per
  // token per layer replaces K and V, and the head fields above are ignored.
  int64_t mla_kv_lora_rank = 0;
  int64_t mla_rope_dim = 0;

  KvDtype dtype = KvDtype::kF16;
  // V's dtype when it differs from K's (llama.cpp -ctk / -ctv); unset: `dtype` for both.
  std::optional<KvDtype> value_dtype;
  // Quantization blocks / groups of 32 values run along the whole token row (all KV heads), as
  // in llama.cpp, instead of inside each head: shapes with head_dim < 32 (head_dim 8 x 4 heads)
  // become valid as long as the row width is a multiple of 32.
  bool groups_along_row = false;
  int64_t block_tokens = 16;     // tokens per physical block (a multiple of kivi_group for KIVI)
  int64_t row_align_bytes = 64;  // power of two; 1 disables padding
  int64_t int8_scale_bytes = 2;  // 2 (f16) or 4 (f32) per token per KV head
  Fp8ScaleGranularity fp8_scales = Fp8ScaleGranularity::kPerTensor;  // f32 scales
  int64_t kivi_group = 32;                                           // G
  int64_t kivi_residual_tokens = 128;                                // R, a multiple of G
  // turbo KEYS: TurboQuant-prod format (QJL sketch of the residual); values never use it.
  bool turbo_qjl = false;
};

enum class KvStreamKind : uint8_t { kKey, kValue, kLatent };

// One stored stream of one layer. A row covers row_tokens tokens (1, or G for KIVI keys).
struct KvStream {
  KvStreamKind kind = KvStreamKind::kKey;
  KvDtype dtype = KvDtype::kF16;
  int64_t values_per_token = 0;  // heads x dim, or the latent width
  int64_t heads = 0;             // scale groups for int8 / per-head fp8 (1 for a latent)
  int64_t row_tokens = 1;
  int64_t row_code_bytes = 0;            // quantized codes (or plain values) in one row
  int64_t row_scale_bytes = 0;           // scales and zero points in one row
  int64_t row_bytes = 0;                 // row_code_bytes + row_scale_bytes
  int64_t row_stride_bytes = 0;          // row_bytes rounded up to row_align_bytes
  int64_t fixed_bytes = 0;               // per layer, independent of tokens (fp8 scales)
  int64_t residual_bytes_per_token = 0;  // KIVI: f16 bytes of a token in the residual window
  int64_t BytesPerToken() const { return row_bytes / row_tokens; }
};

// Exact bytes of one sequence, split by what they hold. total = codes + scales + residual.
struct KvBytes {
  int64_t code_bytes = 0;
  int64_t scale_bytes = 0;
  int64_t residual_bytes = 0;
  int64_t total() const { return code_bytes + scale_bytes + residual_bytes; }
};

class KvLayout {
 public:
  // Validates the shape (positive sizes, whole quantization groups per head, block size a
  // multiple of the KIVI group, no int64 overflow in a block). KIVI on an MLA latent is
  // kUnimplemented.
  static Result<KvLayout> Create(const KvLayoutConfig& config);

  const KvLayoutConfig& config() const { return config_; }
  KvDtype dtype() const { return config_.dtype; }
  KvDtype value_dtype() const { return config_.value_dtype.value_or(config_.dtype); }
  bool is_mla() const { return config_.mla_kv_lora_rank > 0; }
  int64_t num_layers() const { return config_.num_layers; }
  int64_t block_tokens() const { return config_.block_tokens; }
  // The streams of one layer: {K, V} or {latent}.
  const std::vector<KvStream>& streams() const { return streams_; }

  // Values stored per token per layer over all streams (K + V, or the latent).
  int64_t ValuesPerTokenPerLayer() const;
  // Asymptotic bytes per token per layer, all streams, scales included.
  int64_t BytesPerTokenPerLayer() const;
  // Asymptotic bytes per token over all layers (no residual window, padding or fixed bytes).
  int64_t BytesPerToken() const;
  // Asymptotic storage cost per stored value, scales included (16 for f16, 8.5 for q8_0).
  double BitsPerValue() const;
  // Bytes stored once per cache whatever the token count (per-tensor / per-head fp8 scales).
  int64_t FixedBytes() const;

  // Exact bytes for one sequence of `tokens` tokens (>= 0), residual window included, without
  // row padding and without FixedBytes(). InvalidArgument on a negative count or overflow.
  Result<int64_t> BytesForTokens(int64_t tokens) const;
  Result<KvBytes> BytesForTokensSplit(int64_t tokens) const;
  // Largest residual window of one sequence (KIVI), which lives outside the blocks.
  int64_t ResidualBytesPerSequence() const;

  // Bytes of one physical block over all layers and streams, row padding included (the size of
  // a serialized block, and the sum of its resident per-layer pieces).
  int64_t BlockBytes() const { return block_bytes_; }
  // The part of BlockBytes() that is alignment padding.
  int64_t BlockPaddingBytes() const;
  // Bytes of one layer's slice of a serialized block (all streams).
  int64_t LayerSliceBytes() const { return layer_slice_bytes_; }
  // Byte offset, inside a SERIALIZED block ([layer][stream][row]), of row `row` of stream
  // `stream` of layer `layer`. Not an address in the resident per-layer regions.
  int64_t OffsetInBlock(int64_t layer, int64_t stream, int64_t row) const;
  // Rows of a stream in one block: block_tokens / row_tokens. A block's resident piece of one
  // (stream, layer) region is RowsPerBlock(s) x row_stride_bytes bytes.
  int64_t RowsPerBlock(int64_t stream) const;
  // Whole blocks that fit in budget_bytes after FixedBytes(); 0 if none (budget may be < 0).
  int64_t BlocksForBudget(int64_t budget_bytes) const;

  // "f16 K/V: 8 heads x 128" style one-liner for logs.
  std::string Describe() const;

 private:
  KvLayout() = default;

  KvLayoutConfig config_;
  std::vector<KvStream> streams_;
  std::vector<int64_t> stream_offsets_;  // offset of each stream inside a layer slice
  int64_t layer_slice_bytes_ = 0;
  int64_t block_bytes_ = 0;
};

}  // namespace kvforge::kvstore
