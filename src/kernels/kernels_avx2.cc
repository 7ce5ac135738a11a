// AVX2 + FMA + F16C kernels. This translation unit alone is compiled with -mavx2 -mfma -mf16c;
// it is only called after dispatch.cc has checked the CPU supports those features.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx2_util.h"
#include "kernels/kernels.h"
#include "kernels/kernels_common.h"
#include "tensor/dequant.h"
#include "tensor/quant_blocks.h"

namespace kvforge::kernels::internal {
namespace {

// Scalar float load that tolerates unaligned pointers (activation rows may be unaligned).
inline float LoadF(const float* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

inline float LoadScalarW(WType w, const uint8_t* row, int64_t i) {
  switch (w) {
    case WType::kF32: {
      float f;
      std::memcpy(&f, row + 4 * i, 4);
      return f;
    }
    case WType::kF16: {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      return _cvtsh_ss(h);
    }
    default: {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      return Bf16ToFp32(h);
    }
  }
}

template <WType W>
inline __m256 LoadW8(const uint8_t* row, int64_t i) {
  if constexpr (W == WType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (W == WType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// NT token dot products of one float-format weight row.
template <WType W, int NT>
inline void DotFloatTile(const uint8_t* row, const float* const* xs, int64_t cols, float* out) {
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= cols; i += 16) {
    const __m256 w0 = LoadW8<W>(row, i);
    const __m256 w1 = LoadW8<W>(row, i + 8);
    for (int t = 0; t < NT; ++t) {
      acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xs[t] + i), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xs[t] + i + 8), acc1[t]);
    }
  }
  for (; i + 8 <= cols; i += 8) {
    const __m256 w0 = LoadW8<W>(row, i);
    for (int t = 0; t < NT; ++t) acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xs[t] + i), acc0[t]);
  }
  for (int t = 0; t < NT; ++t) out[t] = HSum(_mm256_add_ps(acc0[t], acc1[t]));
  for (; i < cols; ++i) {
    const float wv = LoadScalarW(W, row, i);
    for (int t = 0; t < NT; ++t) out[t] += wv * LoadF(xs[t] + i);
  }
}

// 3 weight rows x 4 tokens: 12 accumulators, each 8-wide weight load (and f16/bf16 conversion)
// feeds 4 FMAs and each activation load 3, so the loop is FMA-bound rather than load-bound.
template <WType W>
inline void DotFloatTile3x4(const uint8_t* r0, size_t row_bytes, const float* const* xs,
                            int64_t cols, float* out /* [3][4] */) {
  const uint8_t* r1 = r0 + row_bytes;
  const uint8_t* r2 = r1 + row_bytes;
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
  __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
  __m256 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
  int64_t i = 0;
  for (; i + 8 <= cols; i += 8) {
    const __m256 w0 = LoadW8<W>(r0, i), w1 = LoadW8<W>(r1, i), w2 = LoadW8<W>(r2, i);
    __m256 x = _mm256_loadu_ps(xs[0] + i);
    a00 = _mm256_fmadd_ps(w0, x, a00);
    a10 = _mm256_fmadd_ps(w1, x, a10);
    a20 = _mm256_fmadd_ps(w2, x, a20);
    x = _mm256_loadu_ps(xs[1] + i);
    a01 = _mm256_fmadd_ps(w0, x, a01);
    a11 = _mm256_fmadd_ps(w1, x, a11);
    a21 = _mm256_fmadd_ps(w2, x, a21);
    x = _mm256_loadu_ps(xs[2] + i);
    a02 = _mm256_fmadd_ps(w0, x, a02);
    a12 = _mm256_fmadd_ps(w1, x, a12);
    a22 = _mm256_fmadd_ps(w2, x, a22);
    x = _mm256_loadu_ps(xs[3] + i);
    a03 = _mm256_fmadd_ps(w0, x, a03);
    a13 = _mm256_fmadd_ps(w1, x, a13);
    a23 = _mm256_fmadd_ps(w2, x, a23);
  }
  out[0] = HSum(a00);
  out[1] = HSum(a01);
  out[2] = HSum(a02);
  out[3] = HSum(a03);
  out[4] = HSum(a10);
  out[5] = HSum(a11);
  out[6] = HSum(a12);
  out[7] = HSum(a13);
  out[8] = HSum(a20);
  out[9] = HSum(a21);
  out[10] = HSum(a22);
  out[11] = HSum(a23);
  for (; i < cols; ++i) {
    const float w[3] = {LoadScalarW(W, r0, i), LoadScalarW(W, r1, i), LoadScalarW(W, r2, i)};
    for (int r = 0; r < 3; ++r)
      for (int t = 0; t < 4; ++t) out[r * 4 + t] += w[r] * LoadF(xs[t] + i);
  }
}

// ---- Quantized weights -------------------------------------------------------------------------

// Formats with 32-value blocks: weight block bytes, activation block bytes, and whether the
// codes are unsigned with a per-block minimum (q4_1 / q5_1, activations with sums).
template <WType W>
struct Q32Traits;
template <>
struct Q32Traits<WType::kQ8_0> {
  static constexpr int kW = 34, kX = 34;
  static constexpr bool kMin = false;
};
template <>
struct Q32Traits<WType::kQ4_0> {
  static constexpr int kW = 18, kX = 34;
  static constexpr bool kMin = false;
};
template <>
struct Q32Traits<WType::kQ5_0> {
  static constexpr int kW = 22, kX = 34;
  static constexpr bool kMin = false;
};
template <>
struct Q32Traits<WType::kQ4_1> {
  static constexpr int kW = 20, kX = 36;
  static constexpr bool kMin = true;
};
template <>
struct Q32Traits<WType::kQ5_1> {
  static constexpr int kW = 24, kX = 36;
  static constexpr bool kMin = true;
};

// The 32 weight codes of a block: signed (centred) for q8_0/q4_0/q5_0, unsigned for q4_1/q5_1.
template <WType W>
inline __m256i LoadQ32(const uint8_t* blk) {
  if constexpr (W == WType::kQ8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  } else if constexpr (W == WType::kQ4_0) {
    return _mm256_sub_epi8(Nibbles32(blk + 2), _mm256_set1_epi8(8));
  } else if constexpr (W == WType::kQ5_0) {
    const __m256i codes = _mm256_or_si256(Nibbles32(blk + 6), HighBitBytes(blk + 2));
    return _mm256_sub_epi8(codes, _mm256_set1_epi8(16));
  } else if constexpr (W == WType::kQ4_1) {
    return Nibbles32(blk + 4);
  } else {
    return _mm256_or_si256(Nibbles32(blk + 8), HighBitBytes(blk + 4));
  }
}

template <WType W, int NT>
inline void DotQ32Tile(const uint8_t* row, const uint8_t* const* xs, int64_t nb, float* out) {
  using T = Q32Traits<W>;
  const __m256i ones = _mm256_set1_epi16(1);
  // Two accumulators per token, for even and odd blocks: a block is ~10 instructions, so with
  // one chain the FMA latency, not the weight bytes, bounded decode (one token).
  __m256 even[NT], odd[NT];
  float min_acc[NT];
  for (int t = 0; t < NT; ++t) {
    even[t] = odd[t] = _mm256_setzero_ps();
    min_acc[t] = 0;
  }
  auto block = [&](int64_t b, __m256* acc) {
    const uint8_t* wb = row + b * T::kW;
    const float wd = LoadHalf(wb);
    const __m256i qw = LoadQ32<W>(wb);
    if constexpr (T::kMin) {
      // Unsigned codes go straight into maddubs; the minimum multiplies the activation sum.
      const float wm = LoadHalf(wb + 2);
      for (int t = 0; t < NT; ++t) {
        const uint8_t* xb = xs[t] + b * T::kX;
        const float xd = LoadHalf(xb);
        int16_t xsum;
        std::memcpy(&xsum, xb + 2, 2);
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4));
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(qw, qx), ones);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(wd * xd), _mm256_cvtepi32_ps(dot), acc[t]);
        min_acc[t] += wm * xd * static_cast<float>(xsum);
      }
    } else {
      // maddubs needs one unsigned operand: |w| times x with w's sign moved onto x.
      const __m256i aw = _mm256_sign_epi8(qw, qw);
      for (int t = 0; t < NT; ++t) {
        const uint8_t* xb = xs[t] + b * T::kX;
        const float xd = LoadHalf(xb);
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2));
        const __m256i sx = _mm256_sign_epi8(qx, qw);
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(wd * xd), _mm256_cvtepi32_ps(dot), acc[t]);
      }
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    block(b, even);
    block(b + 1, odd);
  }
  if (b < nb) block(b, even);
  for (int t = 0; t < NT; ++t) out[t] = HSum(_mm256_add_ps(even[t], odd[t])) + min_acc[t];
}

// q4_k / q5_k: 8 sub-blocks of 32 unsigned codes with 6-bit scales and mins. Per token and
// super-block: sum_j sc_j * dot(codes_j, x_j) in int32 lanes, and sum_j mn_j * sum(x_j) from
// the activation's 16-value sums (madd against the mins, each repeated twice).
template <WType W, int NT>
inline void DotQ45KTile(const uint8_t* row, const uint8_t* const* xs, int64_t nsb, float* out) {
  constexpr bool kQ5 = W == WType::kQ5_K;
  constexpr int kWBlock = kQ5 ? 176 : 144;
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* wb = row + sb * kWBlock;
    const float d = LoadHalf(wb), dmin = LoadHalf(wb + 2);
    const ScaleMinK4 k4 = UnpackScaleMinK4Words(wb + 4);
    // Mins as int16, each twice, to madd against the activation's 16-value sums.
    const __m128i mn8 =
        _mm_setr_epi32(static_cast<int>(k4.mn[0]), static_cast<int>(k4.mn[1]), 0, 0);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
    // Scales as int16 in both lanes; sub-block j's is broadcast by a byte shuffle.
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(
        _mm_setr_epi32(static_cast<int>(k4.sc[0]), static_cast<int>(k4.sc[1]), 0, 0)));
    __m256i scale[8];
    for (int j = 0; j < 8; ++j)
      scale[j] =
          _mm256_shuffle_epi8(sc16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
    __m256i q[8];
    Q45KCodes<kQ5>(wb, q);
    for (int t = 0; t < NT; ++t) {
      const uint8_t* xb = xs[t] + sb * 292;
      float xd;
      std::memcpy(&xd, xb, 4);
      __m256i sumi = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + 32 * j));
        const __m256i p16 = _mm256_maddubs_epi16(q[j], qx);
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scale[j]));
      }
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + 256));
      const __m256i summ = _mm256_madd_epi16(bsums, mins16);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xd), _mm256_cvtepi32_ps(sumi), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * xd), _mm256_cvtepi32_ps(summ), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = HSum(acc[t]);
}

// q6_k: unsigned 6-bit codes c (value c - 32) with an int8 scale per 16 values. The dot is
// sum_g sc_g * dot(c_g, x_g) - 32 * sum_g sc_g * sum(x_g); the second term comes from the
// activation's 16-value sums. maddubs cannot saturate: 2 * 63 * 127 < 32767.
template <int NT>
inline void DotQ6KTile(const uint8_t* row, const uint8_t* const* xs, int64_t nsb, float* out) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* wb = row + sb * 210;
    const float d = LoadHalf(wb + 208);
    const int8_t* scales = reinterpret_cast<const int8_t*>(wb + 192);
    // Chunk c (32 values) covers groups 2c (low 128-bit lane) and 2c+1 (high lane).
    __m256i q[8], sc[8];
    Q6KCodes(wb, q);
    for (int c = 0; c < 8; ++c)
      sc[c] = _mm256_setr_m128i(_mm_set1_epi16(scales[2 * c]), _mm_set1_epi16(scales[2 * c + 1]));
    const __m256i sc_all =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    for (int t = 0; t < NT; ++t) {
      const uint8_t* xb = xs[t] + sb * 292;
      float xd;
      std::memcpy(&xd, xb, 4);
      __m256i sumi = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + 32 * c));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], qx), sc[c]));
      }
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + 256));
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc_all), 5);
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xd),
                               _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, offset)), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = HSum(acc[t]);
}

constexpr bool IsQuant(WType w) {
  return w != WType::kF32 && w != WType::kF16 && w != WType::kBF16;
}

// NT token dot products of one quantized weight row.
template <WType W, int NT>
inline void DotQuantTile(const uint8_t* row, const uint8_t* const* xs, int64_t cols, float* out) {
  if constexpr (W == WType::kQ4_K || W == WType::kQ5_K) {
    DotQ45KTile<W, NT>(row, xs, cols / 256, out);
  } else if constexpr (W == WType::kQ6_K) {
    DotQ6KTile<NT>(row, xs, cols / 256, out);
  } else {
    DotQ32Tile<W, NT>(row, xs, cols / 32, out);
  }
}

template <WType W>
void MatMulTyped(const uint8_t* weights, size_t row_bytes, int64_t cols, const uint8_t* x,
                 int64_t n_tok, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  constexpr bool kQuant = IsQuant(W);
  const size_t x_row = PreparedRowBytes(W, cols);
  constexpr int64_t kRowBlock = 48;  // multiple of 3 for the 3x4 tile
  for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
    const int64_t re = rb + kRowBlock < r1 ? rb + kRowBlock : r1;
    int64_t t = 0;
    auto run = [&](auto nt_tag) {
      constexpr int NT = decltype(nt_tag)::value;
      float out[NT];
      if constexpr (kQuant) {
        const uint8_t* xs[NT];
        for (int k = 0; k < NT; ++k) xs[k] = x + (t + k) * x_row;
        for (int64_t r = rb; r < re; ++r) {
          DotQuantTile<W, NT>(weights + static_cast<size_t>(r) * row_bytes, xs, cols, out);
          for (int k = 0; k < NT; ++k) y[(t + k) * y_stride + r] = out[k];
        }
      } else {
        const float* xs[NT];
        for (int k = 0; k < NT; ++k) xs[k] = reinterpret_cast<const float*>(x + (t + k) * x_row);
        int64_t r = rb;
        if constexpr (NT == 4) {
          float o12[12];
          for (; r + 3 <= re; r += 3) {
            DotFloatTile3x4<W>(weights + static_cast<size_t>(r) * row_bytes, row_bytes, xs, cols,
                               o12);
            for (int q = 0; q < 3; ++q)
              for (int k = 0; k < 4; ++k) y[(t + k) * y_stride + r + q] = o12[q * 4 + k];
          }
        }
        for (; r < re; ++r) {
          DotFloatTile<W, NT>(weights + static_cast<size_t>(r) * row_bytes, xs, cols, out);
          for (int k = 0; k < NT; ++k) y[(t + k) * y_stride + r] = out[k];
        }
      }
      t += NT;
    };
    while (n_tok - t >= 4) run(std::integral_constant<int, 4>());
    if (n_tok - t == 3) run(std::integral_constant<int, 3>());
    if (n_tok - t == 2) run(std::integral_constant<int, 2>());
    if (n_tok - t == 1) run(std::integral_constant<int, 1>());
  }
}

void MatMulRowsAvx2(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                    const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                    int64_t r1) {
  // Large batches: the packed GEMM (gemm_avx2.cc), on float activations (ActFormatFor).
  if (UsesPackedGemm(w, n_tok))
    return PackedGemmAvx2(w, weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
  switch (w) {
    case WType::kF32:
      return MatMulTyped<WType::kF32>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kF16:
      return MatMulTyped<WType::kF16>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kBF16:
      return MatMulTyped<WType::kBF16>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ8_0:
      return MatMulTyped<WType::kQ8_0>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ4_0:
      return MatMulTyped<WType::kQ4_0>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ4_1:
      return MatMulTyped<WType::kQ4_1>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ5_0:
      return MatMulTyped<WType::kQ5_0>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ5_1:
      return MatMulTyped<WType::kQ5_1>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ4_K:
      return MatMulTyped<WType::kQ4_K>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ5_K:
      return MatMulTyped<WType::kQ5_K>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
    case WType::kQ6_K:
      return MatMulTyped<WType::kQ6_K>(weights, row_bytes, cols, x, n_tok, y, y_stride, r0, r1);
  }
}

// Max |x| over 32 floats.
inline float AbsMax32(const float* xb) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k)
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 8 * k)));
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Codes nearbyint(x * id) of 32 floats, stored as 32 int8 at dst (same rounding as the
// reference: round to nearest even of the same float product).
inline void Quantize32(const float* xb, float id, uint8_t* dst) {
  const __m256 mul = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k)
    q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * k), mul),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  // Pack 32 int32 -> 32 int8 and undo the lane interleaving of the pack instructions.
  __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
  __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
  __m256i p = _mm256_packs_epi16(p01, p23);
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), p);
}

// Sum of 32 int8 codes.
inline int Sum32(const uint8_t* qs) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), v);
  const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// q8_0 blocks (with_sum false, 34 bytes) or ActBlockQ8_1 blocks (with_sum true, 36 bytes).
void QuantizeQ8_32Avx2(const float* x, uint8_t* dst, int64_t cols, bool with_sum) {
  const int64_t stride = with_sum ? 36 : 34;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    uint8_t* out = dst + b * stride;
    const float d = AbsMax32(xb) / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t dh = Fp32ToFp16(d);
    std::memcpy(out, &dh, 2);
    uint8_t* qs = out + (with_sum ? 4 : 2);
    Quantize32(xb, id, qs);
    if (with_sum) {
      const auto sum = static_cast<int16_t>(Sum32(qs));
      std::memcpy(out + 2, &sum, 2);
    }
  }
}

void QuantizeQ8_KAvx2(const float* x, uint8_t* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + b * 256;
    uint8_t* out = dst + b * 292;
    float amax = 0;
    for (int k = 0; k < 8; ++k) amax = std::fmax(amax, AbsMax32(xb + 32 * k));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    std::memcpy(out, &d, 4);
    for (int k = 0; k < 8; ++k) Quantize32(xb + 32 * k, id, out + 4 + 32 * k);
    // 16-value sums, scalar: O(cols) per token, negligible next to the matmul.
    int16_t bsums[16];
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += static_cast<int8_t>(out[4 + 16 * g + j]);
      bsums[g] = static_cast<int16_t>(sum);
    }
    std::memcpy(out + 260, bsums, sizeof(bsums));
  }
}

void PrepareActAvx2(WType w, const float* x, void* dst, int64_t cols) {
  auto* out = static_cast<uint8_t*>(dst);
  switch (ActFormatFor(w)) {
    case ActFormat::kF32:
      std::memcpy(dst, x, static_cast<size_t>(cols) * 4);
      return;
    case ActFormat::kQ8_0:
      return QuantizeQ8_32Avx2(x, out, cols, false);
    case ActFormat::kQ8_1:
      return QuantizeQ8_32Avx2(x, out, cols, true);
    case ActFormat::kQ8_K:
      return QuantizeQ8_KAvx2(x, out, cols);
  }
}

void RmsNormAvx2(const float* x, const float* weight, float* out, int64_t n, float eps) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  double ss = HSum(acc);
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  const __m256 s = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s),
                                            _mm256_loadu_ps(weight + i)));
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void SwigluAvx2(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 neg = _mm256_set1_ps(-0.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = Exp256(_mm256_xor_ps(g, neg));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// gelu(x) = x - x / (exp(2u) + 1) with u = sqrt(2/pi) (x + 0.044715 x^3): the tanh form
// rewritten so one exp serves (0.5 x (1 + tanh u) = x e^{2u} / (e^{2u} + 1)); Exp256 clamps, so
// large |u| gives x or 0 as it should.
void GeluAvx2(const float* x, const float* up, float* out, int64_t n) {
  const __m256 c0 = _mm256_set1_ps(2.0f * 0.7978845608028654f);
  const __m256 c1 = _mm256_set1_ps(0.044715f);
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(c1, v), _mm256_mul_ps(v, v), v);
    const __m256 e = Exp256(_mm256_mul_ps(c0, inner));
    __m256 g = _mm256_sub_ps(v, _mm256_div_ps(v, _mm256_add_ps(e, one)));
    if (up) g = _mm256_mul_ps(g, _mm256_loadu_ps(up + i));
    _mm256_storeu_ps(out + i, g);
  }
  for (; i < n; ++i) {
    const float v = x[i];
    const float g = 0.5f * v * (1 + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    out[i] = up ? g * up[i] : g;
  }
}

// 14 independent 8-lane FMA chains: with the two constants that is all 16 ymm registers, more
// chains than latency x throughput needs on Zen 3 to Zen 5 (4 cycles x 2 pipes = 8).
int64_t FmaLoopAvx2(int64_t iterations) {
  // Fourteen chains with distinct starting values; the empty asm makes each chain's value
  // opaque once per round. Without both, gcc sees fourteen identical chains and folds them into
  // one FMA, which then counts 14x the work it does (the peak this loop reported before
  // 2026-12-05 was such a fold: about 2x the real one).
  __m256 a0 = _mm256_set1_ps(0.10f), a1 = _mm256_set1_ps(0.11f), a2 = _mm256_set1_ps(0.12f);
  __m256 a3 = _mm256_set1_ps(0.13f), a4 = _mm256_set1_ps(0.14f), a5 = _mm256_set1_ps(0.15f);
  __m256 a6 = _mm256_set1_ps(0.16f), a7 = _mm256_set1_ps(0.17f), a8 = _mm256_set1_ps(0.18f);
  __m256 a9 = _mm256_set1_ps(0.19f), a10 = _mm256_set1_ps(0.20f), a11 = _mm256_set1_ps(0.21f);
  __m256 a12 = _mm256_set1_ps(0.22f), a13 = _mm256_set1_ps(0.23f);
  const __m256 m = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t it = 0; it < iterations; ++it) {
    a0 = _mm256_fmadd_ps(a0, m, b);
    a1 = _mm256_fmadd_ps(a1, m, b);
    a2 = _mm256_fmadd_ps(a2, m, b);
    a3 = _mm256_fmadd_ps(a3, m, b);
    a4 = _mm256_fmadd_ps(a4, m, b);
    a5 = _mm256_fmadd_ps(a5, m, b);
    a6 = _mm256_fmadd_ps(a6, m, b);
    a7 = _mm256_fmadd_ps(a7, m, b);
    a8 = _mm256_fmadd_ps(a8, m, b);
    a9 = _mm256_fmadd_ps(a9, m, b);
    a10 = _mm256_fmadd_ps(a10, m, b);
    a11 = _mm256_fmadd_ps(a11, m, b);
    a12 = _mm256_fmadd_ps(a12, m, b);
    a13 = _mm256_fmadd_ps(a13, m, b);
    asm volatile(""
                 : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7),
                   "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11), "+x"(a12), "+x"(a13));
  }
  const __m256 s0 = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  const __m256 s1 = _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7));
  const __m256 s2 = _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11));
  volatile float sink = HSum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, a12)));
  sink = sink + HSum(a13);
  return iterations * 14 * 8 * 2;
}

}  // namespace

const KernelTable kAvx2Table = {
    "avx2",   PrepareActAvx2, MatMulRowsAvx2, RmsNormAvx2,    SwigluAvx2,
    GeluAvx2, AttentionAvx2,  FmaLoopAvx2,    MatMulRowsAvx2, AttentionDecodePartAvx2};

}  // namespace kvforge::kernels::internal
