// kernels_common.h — helpers shared by the kernel translation units (not a public header).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "kernels/kernels.h"

namespace kvforge::kernels::internal {

static inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

// Reads element i of a K/V row as float.
static inline float KvAt(const uint8_t* row, int64_t i, bool is_f16) {
  if (is_f16) return LoadF16(row + 2 * i);
  float f;
  std::memcpy(&f, row + 4 * i, 4);
  return f;
}

// ActFormat::kQ8_1 block: a q8_0 block plus the sum of its codes. 36 bytes.
struct ActBlockQ8_1 {
  uint16_t d;   // f16 scale
  int16_t sum;  // sum of qs
  int8_t qs[32];
};
static_assert(sizeof(ActBlockQ8_1) == 36);

// Decodes KV head kvh of token p of a paged view into out[v.head_dim]: the scalar reference for
// every dtype (residual window included), on which the SIMD tile decoders are tested.
void DecodeKvHeadRef(const KvPageView& v, int64_t p, int32_t kvh, float* out);

// Reference activation quantizers (the SIMD ones must produce identical bytes): scale
// d = amax / 127, codes nearbyint(x / d) computed as x * (1 / d).
// q8_0 blocks (34 bytes per 32 values), the activation format for q8_0/q4_0/q5_0.
void QuantizeQ8_0Ref(const float* x, uint8_t* dst, int64_t cols);
// ActBlockQ8_1 blocks, for q4_1/q5_1.
void QuantizeQ8_1Ref(const float* x, uint8_t* dst, int64_t cols);
// tensor::BlockQ8_K super-blocks, for the k-quants.
void QuantizeQ8_KRef(const float* x, uint8_t* dst, int64_t cols);

// Dead slots (a layer that kept fewer slots than its table holds) get no weight: their scores
// become a large negative number before the softmax (finite, so SIMD exp stays well defined).
inline void MaskDeadSlots(const AttentionArgs& a, float* s, int64_t n_kv) {
  const int64_t end = a.dead_end < n_kv ? a.dead_end : n_kv;
  for (int64_t p = a.dead_begin; p < end; ++p) s[p] = -1e30f;
}
// After a SIMD softmax (whose exp clamps at -87, leaving ~1e-38): dead slots weigh exactly 0.
inline void ClearDeadWeights(const AttentionArgs& a, float* w, int64_t n_kv) {
  const int64_t end = a.dead_end < n_kv ? a.dead_end : n_kv;
  for (int64_t p = a.dead_begin; p < end; ++p) w[p] = 0.0f;
}
// The observer: softmax weights w[n_kv] of query i added to a.slot_scores when it is asked for.
inline void ObserveWeights(const AttentionArgs& a, int64_t i, const float* w, int64_t n_kv) {
  if (a.slot_scores == nullptr || i < a.observe_from) return;
  for (int64_t p = 0; p < n_kv; ++p) a.slot_scores[p] += w[p];
}

// Whether a matmul of n_tok tokens on w weights runs the packed GEMM (on float activations):
// quantized formats from kDequantGemmMinTokens tokens, where ActFormatFor switches to floats.
// Float weights (f32/f16/bf16) keep the dot-product tiles at every batch size: measured on the
// dev machine (bench/kernels_bench.cc BM_Gemm, one thread) they beat the packed GEMM by 7-10% at
// 64-128 tokens and tie it at 512 in pp512 of both benchmark shapes, and one kernel for every
// batch size keeps float models' outputs independent of how the scheduler batches tokens.
inline bool UsesPackedGemm(WType w, int64_t n_tok) {
  if (w == WType::kF32 || w == WType::kF16 || w == WType::kBF16) return false;
  return n_tok >= kDequantGemmMinTokens;
}
// The packed GEMM's blocking (gemm_avx2.cc, gemm_avx512.cc): weights are packed kPackedRows rows
// by kPackedDepth values at a time into f32 micro-panels [kc][kPackedPanelRows].
inline constexpr int64_t kPackedDepth = 256;
inline constexpr int64_t kPackedRows = 128;
inline constexpr int64_t kPackedPanelRows = 16;
// Packs quantized weight rows [0, nc) (from `weights`) x depth [pc, pc + kc) into
// panel [ceil(nc / 16)][kc][16] floats (rows past nc zero), dequantizing with AVX2; pc is a
// multiple of kPackedDepth, kc <= kPackedDepth. scratch: [16][kPackedDepth] floats.
void PackQuantPanelAvx2(WType w, const uint8_t* weights, size_t row_bytes, int64_t pc, int64_t kc,
                        int64_t nc, float* panel, float* scratch);
// The calling thread's buffer for a panel and its packing scratch: (kPackedRows +
// kPackedPanelRows) x kPackedDepth floats, 32-byte aligned (gemm_avx2.cc; AVX-512 code gets it
// here rather than from an inline helper compiled with its own flags).
float* PackedGemmBuffer();
// A thread-local byte buffer of at least `bytes` (grows, never shrinks), for AVX-512 units that
// must not instantiate std::vector themselves (gemm_avx2.cc).
uint8_t* ThreadScratchBytes(size_t bytes);
// The same GEMM with an AVX-512 register tile (gemm_avx512.cc).
void PackedGemmAvx512(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                      const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                      int64_t r1);
// The packed GEMM (gemm_avx2.cc): y[t * y_stride + r] = dot(W row r, x_t) for t in [0, n_tok),
// r in [r0, r1); x: [n_tok][cols] floats (possibly unaligned), W rows in a quantized format.
void PackedGemmAvx2(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                    const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                    int64_t r1);

// Prefill attention (attention_prefill_avx2.cc), for plain f32/f16 K/V views (no residual
// window; AttentionAvx2 checks that first): chunks of at least this many queries with head
// widths that are multiples of 16 run as register-tiled GEMMs over f32 panels of each KV head.
inline constexpr int64_t kPrefillAttentionMinQueries = 8;
bool PrefillAttentionFits(const AttentionArgs& a);
void AttentionPrefillAvx2(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end);

// A 32-byte aligned float buffer a thread reuses across calls (kernel scratch); grows, never
// shrinks.
struct AlignedFloats {
  std::vector<float> storage;
  float* Get(size_t n) {
    if (storage.size() < n + 8) storage.resize(n + 8);
    auto p = reinterpret_cast<uintptr_t>(storage.data());
    return reinterpret_cast<float*>((p + 31) & ~uintptr_t{31});
  }
};

// Whether the CPU has AVX512_BF16 (vdpbf16ps) besides AVX-512F/BW (dispatch.cc; read once).
bool CpuHasAvx512Bf16();
// bf16 weights x float activations rounded to bf16, y[t * y_stride + r] for r in [r0, r1):
// vdpbf16ps tiles (gemm_avx512_bf16.cc; only where CpuHasAvx512Bf16()). x: [n_tok][cols] floats.
// Returns false, computing nothing, when its activation buffer cannot be allocated.
bool MatMulBf16Dot(const uint8_t* weights, size_t row_bytes, int64_t cols, const float* x,
                   int64_t n_tok, float* y, int64_t y_stride, int64_t r0, int64_t r1);

extern const KernelTable kAvx2Table;
// AVX-512F matmuls for float weights, the AVX2 kernels for the rest (kernels_avx512.cc).
extern const KernelTable kAvx512Table;
// AVX-512 VNNI integer dot products for q4_k / q5_k in small batches, the AVX-512 table for the
// rest (kernels_avx512_vnni.cc).
extern const KernelTable kAvx512VnniTable;
// AVX2 attention for plain f32/f16 views; hands every other view to AttentionQuantAvx2
// (attention_avx2.cc).
void AttentionAvx2(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch);
// AVX2 attention_decode_part: rows in slot order, all heads per row (attention_decode_avx2.cc).
void AttentionDecodePartAvx2(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end, float* o,
                             float* m, float* l);
// AVX2 attention for views that are not plain f32/f16 (quantized dtypes, a residual window):
// dequantizes tiles of at most 32 tokens of one KV head into a small buffer
// (attention_quant_avx2.cc).
void AttentionQuantAvx2(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch);
// TurboQuant views (attention_turbo_avx2.cc; head_dim a multiple of 8), used by
// AttentionQuantAvx2 for one KV head kvh and its `group` query heads q0[group][head_dim]:
// scores (times a.scale) of positions [0, end) into scratch[g * n_kv + p], and the softmax-weighted
// sum of V rows [0, end) with weights scratch[g * n_kv + p], added to o0[group][head_dim].
void TurboScoresAvx2(const AttentionArgs& a, int32_t kvh, const float* q0, int32_t group,
                     int64_t end, int64_t n_kv, float* scratch);
void TurboValuesAvx2(const AttentionArgs& a, int32_t kvh, int32_t group, int64_t end, int64_t n_kv,
                     const float* scratch, float* o0);
// For prefill blocks (attention_quant_avx2.cc): rows [p0, p0 + cnt) of head kvh of a turbo view
// (without QJL) decoded in the ROTATED domain, ||x|| C[code], into out[cnt][head_dim]; y = Pi x;
// y += Pi^T x.
void TurboDecodeRotatedTile(const KvPageView& v, int64_t p0, int64_t cnt, int32_t kvh, float* out);
void TurboRotate(const KvPageView& v, const float* x, float* y);
void TurboUnrotateAdd(const KvPageView& v, const float* x, float* y);

}  // namespace kvforge::kernels::internal
