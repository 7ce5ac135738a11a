// gemm_avx2.cc — the large-batch matmul (prefill, big decode batches): a cache-blocked GEMM with
// packed weight panels, as in GotoBLAS/BLIS.
//
//   y[t][r] = sum_k x[t][k] * W[r][k]    t in [0, n_tok) tokens, r in [r0, r1) weight rows
//
// Loop nest (per call; each thread of the pool owns its own row range):
//   rows jc (kNC at a time) x depth pc (kKC at a time): pack W[jc.., pc..] once into f32 panels
//   [kNC/16][kc][16] (quantized formats dequantized here, so the cost is shared by every token),
//   then for each block of kMC tokens, each 16-row micro-panel (16 KiB, stays in L1) and each 6
//   tokens: the 6x16 register tile, 12 ymm accumulators fed by two panel loads and six broadcasts
//   of x per depth step. On the dev machine that tile runs at ~105-114 GFLOP/s per core, the
//   AVX2 FMA peak (two 8-wide FMAs a cycle; ADR 0016 corrected ADR 0011's peak).
// Working set: the panel (128 KiB) and one token block of x (72 KiB) in L2.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/avx2_util.h"
#include "kernels/kernels_common.h"
#include "kernels/register_tile_avx2.h"

namespace kvforge::kernels::internal {
namespace {

constexpr int64_t kKC = kPackedDepth;  // depth per panel: a multiple of every weight block size
constexpr int64_t kNC = kPackedRows;   // weight rows per panel: kNC * kKC * 4 B = 128 KiB
static_assert(kNR == kPackedPanelRows);
constexpr int64_t kMC = 72;  // tokens per block of x (multiple of kMR): 72 * kKC * 4 B = 72 KiB

// ---- Row segments to floats ----------------------------------------------------------------

// 8 codes (bytes, signed or not) -> d * code + bias, stored at out[8].
template <bool kSigned>
inline void Store8(__m128i codes8, __m256 d, __m256 bias, float* out) {
  const __m256i v = kSigned ? _mm256_cvtepi8_epi32(codes8) : _mm256_cvtepu8_epi32(codes8);
  _mm256_storeu_ps(out, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(v), bias));
}

// 16 code bytes (the low or high half of a 32-byte group) -> out[16].
template <bool kSigned>
inline void Store16(__m128i codes16, __m256 d, __m256 bias, float* out) {
  Store8<kSigned>(codes16, d, bias, out);
  Store8<kSigned>(_mm_srli_si128(codes16, 8), d, bias, out + 8);
}

template <bool kSigned>
inline void Store32(__m256i codes, __m256 d, __m256 bias, float* out) {
  Store16<kSigned>(_mm256_castsi256_si128(codes), d, bias, out);
  Store16<kSigned>(_mm256_extracti128_si256(codes, 1), d, bias, out + 16);
}

// One 32-value block of a 32-block format -> out[32].
template <WType W>
inline void DequantBlock32(const uint8_t* blk, float* out) {
  const __m256 d = _mm256_set1_ps(LoadHalf(blk));
  const __m256 zero = _mm256_setzero_ps();
  if constexpr (W == WType::kQ8_0) {
    Store32<true>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), d, zero, out);
  } else if constexpr (W == WType::kQ4_0) {
    Store32<true>(_mm256_sub_epi8(Nibbles32(blk + 2), _mm256_set1_epi8(8)), d, zero, out);
  } else if constexpr (W == WType::kQ5_0) {
    const __m256i codes = _mm256_or_si256(Nibbles32(blk + 6), HighBitBytes(blk + 2));
    Store32<true>(_mm256_sub_epi8(codes, _mm256_set1_epi8(16)), d, zero, out);
  } else if constexpr (W == WType::kQ4_1) {
    Store32<false>(Nibbles32(blk + 4), d, _mm256_set1_ps(LoadHalf(blk + 2)), out);
  } else {
    static_assert(W == WType::kQ5_1);
    const __m256i codes = _mm256_or_si256(Nibbles32(blk + 8), HighBitBytes(blk + 4));
    Store32<false>(codes, d, _mm256_set1_ps(LoadHalf(blk + 2)), out);
  }
}

// q4_k / q5_k super-block (256 values) -> out[256]: sub-block j is d * sc_j * q - dmin * mn_j.
template <WType W>
inline void DequantSuperQ45K(const uint8_t* wb, float* out) {
  const float d = LoadHalf(wb), dmin = LoadHalf(wb + 2);
  const ScaleMinK4 k4 = UnpackScaleMinK4Words(wb + 4);
  __m256i q[8];
  Q45KCodes<W == WType::kQ5_K>(wb, q);
  for (int j = 0; j < 8; ++j) {
    const float scale = d * static_cast<float>((k4.sc[j / 4] >> (8 * (j % 4))) & 0xFF);
    const float min = dmin * static_cast<float>((k4.mn[j / 4] >> (8 * (j % 4))) & 0xFF);
    Store32<false>(q[j], _mm256_set1_ps(scale), _mm256_set1_ps(-min), out + 32 * j);
  }
}

// q6_k super-block -> out[256]: value i is d * scales[i / 16] * (code_i - 32).
inline void DequantSuperQ6K(const uint8_t* wb, float* out) {
  const float d = LoadHalf(wb + 208);
  const auto* scales = reinterpret_cast<const int8_t*>(wb + 192);
  __m256i q[8];
  Q6KCodes(wb, q);
  for (int c = 0; c < 8; ++c)
    for (int half = 0; half < 2; ++half) {
      const float s = d * static_cast<float>(scales[2 * c + half]);
      const __m128i codes =
          half == 0 ? _mm256_castsi256_si128(q[c]) : _mm256_extracti128_si256(q[c], 1);
      Store16<false>(codes, _mm256_set1_ps(s), _mm256_set1_ps(-32.0f * s),
                     out + 32 * c + 16 * half);
    }
}

// Values [pc, pc + kc) of one quantized weight row as floats into out[kc]. pc is a multiple of
// kKC, so the segment starts on a block boundary; kc is a multiple of the block size.
template <WType W>
void RowSegmentToFloats(const uint8_t* row, int64_t pc, int64_t kc, float* out) {
  if constexpr (W == WType::kQ4_K || W == WType::kQ5_K || W == WType::kQ6_K) {
    constexpr int64_t kBytes = W == WType::kQ4_K ? 144 : W == WType::kQ5_K ? 176 : 210;
    const uint8_t* p = row + pc / 256 * kBytes;
    for (int64_t b = 0; b < kc / 256; ++b) {
      if constexpr (W == WType::kQ6_K)
        DequantSuperQ6K(p + b * kBytes, out + 256 * b);
      else
        DequantSuperQ45K<W>(p + b * kBytes, out + 256 * b);
    }
  } else {
    constexpr int64_t kBytes = W == WType::kQ8_0   ? 34
                               : W == WType::kQ4_0 ? 18
                               : W == WType::kQ4_1 ? 20
                               : W == WType::kQ5_0 ? 22
                                                   : 24;
    const uint8_t* p = row + pc / 32 * kBytes;
    for (int64_t b = 0; b < kc / 32; ++b) DequantBlock32<W>(p + b * kBytes, out + 32 * b);
  }
}

// ---- Packing ---------------------------------------------------------------------------------

// rows: [16][kKC] floats (first kc of each used) -> micro-panel dst: [kc][16] (32-byte aligned).
void TransposeToMicroPanel(const float* rows, int64_t kc, float* dst) {
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8)
    for (int half = 0; half < 2; ++half) {
      __m256 r[8];
      for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(rows + (8 * half + j) * kKC + k);
      Transpose8x8To(r, dst + k * kNR + 8 * half);
    }
  for (; k < kc; ++k)
    for (int j = 0; j < kNR; ++j) dst[k * kNR + j] = rows[j * kKC + k];
}

// Packs weight rows [0, nc) (starting at w) x depth [pc, pc + kc) into panel
// [ceil(nc / 16)][kc][16]; rows past nc in the last micro-panel are zeros. scratch: [16][kKC].
template <WType W>
void PackPanel(const uint8_t* w, size_t row_bytes, int64_t pc, int64_t kc, int64_t nc, float* panel,
               float* scratch) {
  for (int64_t g = 0; g < nc; g += kNR) {
    const int64_t n = std::min<int64_t>(kNR, nc - g);
    for (int64_t j = 0; j < n; ++j)
      RowSegmentToFloats<W>(w + static_cast<size_t>(g + j) * row_bytes, pc, kc, scratch + j * kKC);
    for (int64_t j = n; j < kNR; ++j)
      std::memset(scratch + j * kKC, 0, static_cast<size_t>(kc) * 4);
    TransposeToMicroPanel(scratch, kc, panel + g * kc);
  }
}

// Calls f(std::integral_constant<WType, W>()) for the quantized format w; float formats are never
// packed (UsesPackedGemm) and call nothing.
template <class F>
void WithQuantFormat(WType w, F&& f) {
  using T = WType;
  switch (w) {
    case T::kQ8_0:
      return f(std::integral_constant<T, T::kQ8_0>());
    case T::kQ4_0:
      return f(std::integral_constant<T, T::kQ4_0>());
    case T::kQ4_1:
      return f(std::integral_constant<T, T::kQ4_1>());
    case T::kQ5_0:
      return f(std::integral_constant<T, T::kQ5_0>());
    case T::kQ5_1:
      return f(std::integral_constant<T, T::kQ5_1>());
    case T::kQ4_K:
      return f(std::integral_constant<T, T::kQ4_K>());
    case T::kQ5_K:
      return f(std::integral_constant<T, T::kQ5_K>());
    case T::kQ6_K:
      return f(std::integral_constant<T, T::kQ6_K>());
    case T::kF32:
    case T::kF16:
    case T::kBF16:
      break;
  }
}

template <WType W>
void PackedGemm(const uint8_t* weights, size_t row_bytes, int64_t cols, const uint8_t* x,
                int64_t n_tok, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  // The panel [kNC][kKC] and the packing scratch [16][kKC], reused across calls.
  float* panel = PackedGemmBuffer();
  float* scratch = panel + kNC * kKC;
  const size_t x_row = static_cast<size_t>(cols) * 4;
  for (int64_t jc = r0; jc < r1; jc += kNC) {
    const int64_t nc = std::min(kNC, r1 - jc);
    for (int64_t pc = 0; pc < cols; pc += kKC) {
      const int64_t kc = std::min(kKC, cols - pc);
      PackPanel<W>(weights + static_cast<size_t>(jc) * row_bytes, row_bytes, pc, kc, nc, panel,
                   scratch);
      for (int64_t ic = 0; ic < n_tok; ic += kMC) {
        const int64_t mc = std::min(kMC, n_tok - ic);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const int64_t nr = std::min<int64_t>(kNR, nc - jr);
          for (int64_t ir = ic; ir < ic + mc; ir += kMR) {
            const int64_t mr = std::min<int64_t>(kMR, ic + mc - ir);
            kTiles[mr](x + static_cast<size_t>(ir) * x_row + 4 * static_cast<size_t>(pc), x_row,
                       panel + jr * kc, kc, y + ir * y_stride + jc + jr, y_stride, nr, pc > 0);
          }
        }
      }
    }
  }
}

}  // namespace

float* PackedGemmBuffer() {
  thread_local AlignedFloats buffer;
  return buffer.Get(static_cast<size_t>((kNC + kNR) * kKC));
}

uint8_t* ThreadScratchBytes(size_t bytes) {
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

void PackQuantPanelAvx2(WType w, const uint8_t* weights, size_t row_bytes, int64_t pc, int64_t kc,
                        int64_t nc, float* panel, float* scratch) {
  WithQuantFormat(w, [&](auto format) {
    PackPanel<decltype(format)::value>(weights, row_bytes, pc, kc, nc, panel, scratch);
  });
}

void PackedGemmAvx2(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                    const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                    int64_t r1) {
  WithQuantFormat(w, [&](auto format) {
    PackedGemm<decltype(format)::value>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
  });
}

}  // namespace kvforge::kernels::internal
