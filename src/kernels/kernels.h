// kernels.h — compute kernels behind a per-ISA function table.
//
// Kernels take raw pointers, sizes and strides only: they know nothing of models, requests or
// scheduling (docs/architecture.md, rule 2). Each ISA variant (scalar reference, AVX2/FMA/F16C,
// AVX-512F for float-weight matmuls) fills a KernelTable; Active() returns the best one this CPU
// supports, and AvailableTables() lists every variant the CPU can run so tests compare each
// against the reference.
// Thread-safety: all kernels are pure functions of their arguments; tables are immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvquant/kv_dtype.h"

namespace kvforge::kvquant {
struct NuqLayer;
class RopeTable;
struct TurboSpec;
}  // namespace kvforge::kvquant

namespace kvforge::kernels {

// Weight formats the matmul kernels accept (a subset of tensor::DType, same numeric ids).
enum class WType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// Activations prepared for a weight format, so that the inner loop of quantized formats is an
// integer dot product (as in ggml):
//   kF32  floats, for f32/f16/bf16 weights;
//   kQ8_0 q8_0 blocks (34 bytes per 32 values), for q8_0, q4_0, q5_0;
//   kQ8_1 q8_0 blocks plus the exact int16 sum of each block's codes (36 bytes per 32), for
//         q4_1, q5_1, whose per-block minimum m contributes m * d_x * sum(q_x);
//   kQ8_K ggml's block_q8_K (292 bytes per 256: f32 scale, 256 codes, int16 sums of each 16),
//         for q4_k, q5_k, q6_k, whose mins / the q6_k offset of 32 are applied per 16 or 32
//         values through those sums.
// Why q8_K for k-quants rather than dequantizing weight rows to floats for the float FMA
// kernel: the integer path does 32 multiply-adds per maddubs instead of 8 per FMA. Measured
// on the dev machine (bench/kernels_bench.cc, 768x768, AVX2): q4_k 37.7 GFLOP/s at 1 token
// vs 23.3 for f32 weights, whose kernel bounds any dequantize-then-FMA scheme from above; at
// 32 tokens q4_k reaches 62 GFLOP/s vs 68 (f32) / 77 (f16), so dequantizing could win at most
// ~1.25x on prefill, and decode (memory- and GEMV-bound) is where quantized weights matter.
//
// Large batches (prefill, big decode batches) are the exception: with at least
// kDequantGemmMinTokens tokens in one call, every quantized format runs a cache-blocked GEMM on
// float activations (kernels/gemm_avx2.cc): weight panels are dequantized once into f32 and
// shared by every token, and the inner loop is a 6x16 FMA register tile. One thread, 512 tokens,
// three shapes (bench/kernels_bench.cc BM_Gemm, dev machine, two runs): q8_0 101-110 and q4_k
// 101-110 GFLOP/s, against 86-106 and 85-105 for the row-panel dequantize-then-dot scheme it
// replaced. ActFormatFor(w, n_tok)
// says which activation format a call with n_tok tokens expects.
enum class ActFormat { kF32, kQ8_0, kQ8_1, kQ8_K };
inline constexpr int64_t kDequantGemmMinTokens = 32;
ActFormat ActFormatFor(WType w);                 // the small-batch format (prepare_act's)
ActFormat ActFormatFor(WType w, int64_t n_tok);  // what matmul_rows expects for n_tok tokens
// Bytes needed to hold one prepared activation row of `cols` values (cols must be a multiple
// of the weight format's block size), in ActFormatFor(w) / ActFormatFor(w, n_tok).
size_t PreparedRowBytes(WType w, int64_t cols);
size_t PreparedRowBytes(WType w, int64_t cols, int64_t n_tok);

// A paged view of one layer's K or V cache for one sequence. Row r of a block is at
//   base + block_table[p / block_tokens] * block_stride + r * token_stride
// and token p lives in row (p % block_tokens) / row_tokens of its block. Rows hold one token
// (row_tokens 1) encoded as `dtype` (kvquant/row_codec.h: all KV heads, codes then inline
// scales), except KIVI keys, whose rows hold kvquant::kKiviGroup tokens (kvquant/kivi.h).
// Kernels dequantize on the fly; for f32/f16/bf16/fp8 head h of a row starts at h * head_stride.
// KIVI's residual window: positions >= recent_begin are read instead from f16 rows of
// row_values values at recent + (p - recent_begin) * recent_stride.
struct KvPageView {
  const uint8_t* base = nullptr;
  const int32_t* block_table = nullptr;
  int32_t block_tokens = 0;
  size_t block_stride = 0;
  size_t token_stride = 0;  // bytes between rows
  size_t head_stride = 0;   // bytes between heads inside a row (float and fp8 dtypes)
  kvquant::KvDtype dtype = kvquant::KvDtype::kF32;
  int32_t head_dim = 0;           // values per KV head
  int32_t row_values = 0;         // values per token row: n_kv_head x head_dim
  int32_t row_tokens = 1;         // tokens per row (kKiviGroup for KIVI keys)
  const float* scales = nullptr;  // fp8: one scale per KV head (nullptr: 1.0)
  const uint8_t* recent = nullptr;
  size_t recent_stride = 0;
  int64_t recent_begin = INT64_MAX;
  // kvquant3: the layer's calibration, whether rows are K rows (pre-RoPE, rotated to their
  // position with `rope` after decoding) or V rows.
  const kvquant::NuqLayer* nuq = nullptr;
  const kvquant::RopeTable* rope = nullptr;
  bool nuq_key = false;
  // turbo3 / turbo4: rotation, codebook and (keys with QJL) sketch; never null for those dtypes.
  const kvquant::TurboSpec* turbo = nullptr;
  // The RoPE position of each slot when slots are not positions (a compacted sequence whose keys
  // are rotated at read time, i.e. kvquant3 pre-RoPE keys): [slots] (nullptr: slot p is position
  // p). Only the kvquant3 key decoder reads it.
  const int32_t* positions = nullptr;

  int64_t PositionOf(int64_t p) const { return positions != nullptr ? positions[p] : p; }
  // The row holding token p (for row_tokens > 1 the token is p % row_tokens inside it).
  const uint8_t* Token(int64_t p) const {
    return base + static_cast<size_t>(block_table[p / block_tokens]) * block_stride +
           static_cast<size_t>((p % block_tokens) / row_tokens) * token_stride;
  }
};

// Causal attention for `n_q` query tokens of one sequence written at KV slots slot0 .. slot0+n_q-1,
// over the slots 0 .. slot0+i (inclusive) already written into the cache. Slots are not positions
// (docs/adr/0005): after eviction a sequence's live keys are compacted to the front in position
// order, so causality is slot order; a layer kept fewer slots than its sequence's table holds
// (per-layer budgets) marks the unused ones [dead_begin, dead_end) and they get no weight.
//   q:   [n_q][n_head][head_dim] (row stride q_stride floats)
//   out: [n_q][n_head][v_dim] (row stride out_stride floats)
// K and V heads may differ in width: v_dim (0: head_dim) values of each V head are read, e.g. the
// first kv_lora_rank values of an MLA latent row, whose K and V views are the same bytes.
// Heads are grouped: query head h reads kv head h / (n_head / n_kv_head) (GQA/MQA/MHA).
// Work is restricted to kv heads [kvh_begin, kvh_end) so callers can split it across threads.
// `scratch` must hold at least (slot0 + n_q) * (n_head / n_kv_head) floats.
// Observer (for KV eviction policies; nullptr costs nothing): when slot_scores is set, the softmax
// weights of queries observe_from .. n_q-1, summed over the query heads of the kv heads worked
// on, are added to slot_scores[slot] ([slot0 + n_q] floats, owned by the caller, one per task).
struct AttentionArgs {
  const float* q = nullptr;
  int64_t q_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
  int64_t n_q = 0;
  int64_t slot0 = 0;
  int64_t dead_begin = 0;
  int64_t dead_end = 0;
  float* slot_scores = nullptr;
  int64_t observe_from = 0;
  int32_t n_head = 0;
  int32_t n_kv_head = 0;
  int32_t head_dim = 0;
  int32_t v_dim = 0;  // 0: head_dim
  float scale = 1.0f;
  KvPageView k;
  KvPageView v;
  int32_t VDim() const { return v_dim > 0 ? v_dim : head_dim; }
};

struct KernelTable {
  const char* name;
  // Converts one activation row for weight format w (see ActFormatFor) into `dst`.
  void (*prepare_act)(WType w, const float* x, void* dst, int64_t cols);
  // y[t * y_stride + r] = dot(W row r, x_t) for r in [r0, r1), t in [0, n_tok).
  // W rows are row_bytes apart; x rows are PreparedRowBytes(w, cols, n_tok) apart, in
  // ActFormatFor(w, n_tok) (plain floats for a large batch, else prepare_act's format).
  void (*matmul_rows)(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                      const uint8_t* x_prepared, int64_t n_tok, float* y, int64_t y_stride,
                      int64_t r0, int64_t r1);
  // out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]
  void (*rms_norm)(const float* x, const float* weight, float* out, int64_t n, float eps);
  // out[i] = silu(gate[i]) * up[i]
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
  // out[i] = gelu(x[i]) * up[i] (GeGLU), or gelu(x[i]) when up is null; GELU's tanh form:
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as gemma and falcon use.
  void (*gelu)(const float* x, const float* up, float* out, int64_t n);
  // Attention for kv heads [kvh_begin, kvh_end).
  void (*attention)(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch);
  // The machine's arithmetic peak, measured: `iterations` rounds of independent multiply-adds
  // on registers only (no memory traffic), as many chains as the ISA's registers hold; returns
  // the floating-point operations done (a multiply-add counts 2). Timing is the caller's.
  int64_t (*fma_loop)(int64_t iterations);
  // matmul_rows, keeping float activations in f32 where matmul_rows would round them to f16
  // (RoundsDecodeActivationsToHalf): for the output projection, whose logits pick tokens.
  void (*matmul_rows_exact)(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                            const uint8_t* x_prepared, int64_t n_tok, float* y, int64_t y_stride,
                            int64_t r0, int64_t r1);
  // One part of one decode query's attention (a.n_q == 1, DecodePartApplies(a)) over slots
  // [slot_begin, slot_end) of every KV head, each row read once, all heads, in slot order: a
  // sequential stream the hardware prefetchers follow (a walk per KV head reads head_dim values
  // every row and streamed at a third of the bandwidth). Per query head h of a.n_head:
  //   m[h] = max_p s_hp, l[h] = sum_p exp(s_hp - m[h]),
  //   o[h * v_dim + d] = sum_p exp(s_hp - m[h]) V_p[d]   (not normalized; MergeDecodeParts),
  // s_hp = scale * q_h . K_p. An empty range gives m = -inf, l = 0, o = 0. a.out is not written.
  void (*attention_decode_part)(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end,
                                float* o, float* m, float* l);
};

// Whether attention_decode_part computes a's attention: one query, f32 / f16 K and V rows or q8_0
// rows whose heads are whole blocks (no residual window), no dead slots, no observer, head widths
// multiples of 8.
bool DecodePartApplies(const AttentionArgs& a);
// Combines n_parts partial results of attention_decode_part over disjoint slot ranges of one
// query into out[h * v_dim + d] (the normalized attention output, a.out's layout):
//   o: [n_parts][n_head][v_dim], m, l: [n_parts][n_head].
void MergeDecodeParts(int64_t n_parts, int32_t n_head, int32_t v_dim, const float* o,
                      const float* m, const float* l, float* out);

const KernelTable& ReferenceTable();
// Best table for this CPU (AVX-512 when available, else AVX2, else the reference), unless the
// environment variable KVFORGE_KERNELS names another table this CPU runs (read once).
const KernelTable& Active();
// Every table this CPU can run, reference first, best last.
std::vector<const KernelTable*> AvailableTables();
// Whether table t computes a large batch (ActFormatFor(w, n_tok) == kF32) on quantized weights
// by quantizing the float activations to ActFormatFor(w) itself, as a small batch's are, rather
// than on the floats (the avx512vnni table for q4_k / q5_k): its results then match the
// reference run token by token on prepare_act's activations, not the reference's float GEMM.
bool QuantizesLargeBatches(const KernelTable& t, WType w);
// Whether table t rounds the activations of 1- and 2-token calls on w weights to f16 (the AVX-512
// decode kernels for f16 and bf16 weights, as ggml does for f16): each product is then off by
// up to 2^-11 of |w x|, a logit by about 1e-3 of its size rather than f32 rounding.
bool RoundsDecodeActivationsToHalf(const KernelTable& t, WType w);
// Whether table t rounds the float activations of calls of 3 tokens or more on
// bf16 weights to bf16 (the AVX-512 tables on a CPU with AVX512_BF16, vdpbf16ps; ggml does the
// same): each product is then off by up to 2^-8 of |w x|.
bool RoundsBatchActivationsToBf16(const KernelTable& t, WType w);
// Forces a table by name ("ref", "avx2", "avx512"); returns false when unavailable. For
// benchmarks/tests.
bool SetActive(const char* name);

// Decodes every KV head of slot p of a view into out[row_values] (the scalar reference decoder:
// for compaction, statistics and tests, not for attention's inner loops).
void DecodeKvRow(const KvPageView& v, int64_t p, float* out);

// Applies rotary position embedding in place to `n_heads` heads of `head_dim` floats, rotating
// the first `rot_dim` dims at position `pos`. neox=false pairs (2i, 2i+1) (llama); neox=true
// pairs (i, i + rot_dim/2) (qwen2, gpt-neox). freq_scale is 1/linear_scaling_factor.
// freq_factors (rot_dim/2 values, or null) divide each pair's angle (Llama 3's rope_freqs).
void Rope(float* x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, int64_t pos,
          float freq_base, float freq_scale, bool neox, const float* freq_factors = nullptr);

// In-place numerically stable softmax.
void Softmax(float* x, int64_t n);

}  // namespace kvforge::kernels
