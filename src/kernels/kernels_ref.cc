// Scalar reference kernels: the oracle every SIMD variant is tested against. Float sums use
// plain left-to-right accumulation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/kernels_common.h"
#include "kvquant/kivi.h"
#include "kvquant/nuq.h"
#include "kvquant/row_codec.h"
#include "kvquant/turbo.h"
#include "tensor/dequant.h"
#include "tensor/quant_blocks.h"

namespace kvforge::kernels {
namespace internal {

namespace {

// One 32-value block: returns the scale, writes the codes.
float QuantizeBlock32Ref(const float* xb, int8_t* qs) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) qs[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
  return d;
}

}  // namespace

void QuantizeQ8_0Ref(const float* x, uint8_t* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    tensor::BlockQ8_0 blk;
    blk.d = Fp32ToFp16(QuantizeBlock32Ref(x + b * 32, blk.qs));
    std::memcpy(dst + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeQ8_1Ref(const float* x, uint8_t* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    ActBlockQ8_1 blk;
    blk.d = Fp32ToFp16(QuantizeBlock32Ref(x + b * 32, blk.qs));
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += blk.qs[j];
    blk.sum = static_cast<int16_t>(sum);
    std::memcpy(dst + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void QuantizeQ8_KRef(const float* x, uint8_t* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / tensor::kQK_K; ++b) {
    const float* xb = x + b * tensor::kQK_K;
    float amax = 0;
    for (int j = 0; j < tensor::kQK_K; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    tensor::BlockQ8_K blk;
    blk.d = amax / 127.0f;
    const float id = blk.d != 0 ? 1.0f / blk.d : 0.0f;
    for (int j = 0; j < tensor::kQK_K; ++j)
      blk.qs[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
    for (int g = 0; g < tensor::kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += blk.qs[16 * g + j];
      blk.bsums[g] = static_cast<int16_t>(sum);
    }
    std::memcpy(dst + b * sizeof(blk), &blk, sizeof(blk));
  }
}

void DecodeKvHeadRef(const KvPageView& v, int64_t p, int32_t kvh, float* out) {
  const int64_t begin = static_cast<int64_t>(kvh) * v.head_dim;
  if (p >= v.recent_begin) {
    const uint8_t* row = v.recent + static_cast<size_t>(p - v.recent_begin) * v.recent_stride;
    for (int32_t d = 0; d < v.head_dim; ++d) out[d] = LoadF16(row + 2 * (begin + d));
    return;
  }
  const uint8_t* row = v.Token(p);
  if (v.row_tokens > 1) {  // KIVI key group row
    kvquant::KiviDecodeKeyToken(row, (p % v.block_tokens) % v.row_tokens, v.row_values,
                                kvquant::KiviBits(v.dtype), begin, v.head_dim, out);
    return;
  }
  if (kvquant::IsNuq(v.dtype)) {
    kvquant::NuqDecode(row, v.row_values, v.nuq_key, *v.nuq, begin, v.head_dim, out, v.rope,
                       v.PositionOf(p));
    return;
  }
  if (v.turbo != nullptr) {  // turbo3 / turbo4: the spec (QJL or not) travels with the view
    kvquant::TurboDecodeHead(*v.turbo, row, v.row_values / v.head_dim, kvh, out);
    return;
  }
  // fp8 scales are per head; DecodeRowValues indexes them by element / head_dim.
  kvquant::DecodeRowValues(v.dtype, v.head_dim, v.row_values, row, begin, v.head_dim, out,
                           v.scales);
}

}  // namespace internal

namespace {

void PrepareActRef(WType w, const float* x, void* dst, int64_t cols) {
  auto* out = static_cast<uint8_t*>(dst);
  switch (ActFormatFor(w)) {
    case ActFormat::kF32:
      std::memcpy(dst, x, static_cast<size_t>(cols) * 4);
      return;
    case ActFormat::kQ8_0:
      return internal::QuantizeQ8_0Ref(x, out, cols);
    case ActFormat::kQ8_1:
      return internal::QuantizeQ8_1Ref(x, out, cols);
    case ActFormat::kQ8_K:
      return internal::QuantizeQ8_KRef(x, out, cols);
  }
}

template <typename Block>
Block LoadBlock(const uint8_t* p, int64_t b) {
  Block blk;
  std::memcpy(&blk, p + b * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return blk;
}

// 5-bit code j of a q5_0 / q5_1 block.
int Code5(const uint8_t* qs, const uint8_t* qh_bytes, int j) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return lo | static_cast<int>(((qh >> j) & 1u) << 4);
}

// sum over the 8 sub-blocks of sc * dot(codes, x) and of mn * sum(x) for q4_k / q5_k, where
// code(j, i) returns the code of value i of sub-block j.
template <typename CodeFn>
void KQuantSums(const uint8_t* scales, const tensor::BlockQ8_K& xb, CodeFn code, int32_t* sumi,
                int32_t* summ) {
  *sumi = 0;
  *summ = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    tensor::UnpackScaleMinK4(j, scales, &sc, &mn);
    int32_t dot = 0;
    for (int i = 0; i < 32; ++i) dot += code(j, i) * static_cast<int32_t>(xb.qs[32 * j + i]);
    *sumi += sc * dot;
    *summ += mn * (xb.bsums[2 * j] + xb.bsums[2 * j + 1]);
  }
}

float DotRowRef(WType w, const uint8_t* row, int64_t cols, const uint8_t* x) {
  float sum = 0;
  switch (w) {
    case WType::kF32: {
      for (int64_t i = 0; i < cols; ++i) {
        float a, b;
        std::memcpy(&a, row + 4 * i, 4);
        std::memcpy(&b, x + 4 * i, 4);
        sum += a * b;
      }
      return sum;
    }
    case WType::kF16:
    case WType::kBF16: {
      for (int64_t i = 0; i < cols; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        const float a = w == WType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
        float b;
        std::memcpy(&b, x + 4 * i, 4);
        sum += a * b;
      }
      return sum;
    }
    case WType::kQ8_0: {
      for (int64_t blk = 0; blk < cols / 32; ++blk) {
        tensor::BlockQ8_0 wb, xb;
        std::memcpy(&wb, row + blk * 34, 34);
        std::memcpy(&xb, x + blk * 34, 34);
        int32_t acc = 0;
        for (int j = 0; j < 32; ++j) acc += static_cast<int32_t>(wb.qs[j]) * xb.qs[j];
        sum += Fp16ToFp32(wb.d) * Fp16ToFp32(xb.d) * static_cast<float>(acc);
      }
      return sum;
    }
    case WType::kQ4_0: {
      for (int64_t blk = 0; blk < cols / 32; ++blk) {
        tensor::BlockQ4_0 wb;
        tensor::BlockQ8_0 xb;
        std::memcpy(&wb, row + blk * 18, 18);
        std::memcpy(&xb, x + blk * 34, 34);
        int32_t acc = 0;
        for (int j = 0; j < 16; ++j) {
          acc += ((wb.qs[j] & 0x0F) - 8) * static_cast<int32_t>(xb.qs[j]);
          acc += ((wb.qs[j] >> 4) - 8) * static_cast<int32_t>(xb.qs[j + 16]);
        }
        sum += Fp16ToFp32(wb.d) * Fp16ToFp32(xb.d) * static_cast<float>(acc);
      }
      return sum;
    }
    case WType::kQ4_1:
    case WType::kQ5_1: {
      const bool q5 = w == WType::kQ5_1;
      for (int64_t blk = 0; blk < cols / 32; ++blk) {
        const auto xb = LoadBlock<internal::ActBlockQ8_1>(x, blk);
        int32_t acc = 0;
        float d, m;
        if (q5) {
          const auto wb = LoadBlock<tensor::BlockQ5_1>(row, blk);
          for (int j = 0; j < 32; ++j) acc += Code5(wb.qs, wb.qh, j) * xb.qs[j];
          d = Fp16ToFp32(wb.d);
          m = Fp16ToFp32(wb.m);
        } else {
          const auto wb = LoadBlock<tensor::BlockQ4_1>(row, blk);
          for (int j = 0; j < 16; ++j)
            acc += (wb.qs[j] & 0x0F) * xb.qs[j] + (wb.qs[j] >> 4) * xb.qs[j + 16];
          d = Fp16ToFp32(wb.d);
          m = Fp16ToFp32(wb.m);
        }
        const float dx = Fp16ToFp32(xb.d);
        sum += d * dx * static_cast<float>(acc) + m * dx * static_cast<float>(xb.sum);
      }
      return sum;
    }
    case WType::kQ5_0: {
      for (int64_t blk = 0; blk < cols / 32; ++blk) {
        const auto wb = LoadBlock<tensor::BlockQ5_0>(row, blk);
        const auto xb = LoadBlock<tensor::BlockQ8_0>(x, blk);
        int32_t acc = 0;
        for (int j = 0; j < 32; ++j) acc += (Code5(wb.qs, wb.qh, j) - 16) * xb.qs[j];
        sum += Fp16ToFp32(wb.d) * Fp16ToFp32(xb.d) * static_cast<float>(acc);
      }
      return sum;
    }
    case WType::kQ4_K: {
      for (int64_t blk = 0; blk < cols / tensor::kQK_K; ++blk) {
        const auto wb = LoadBlock<tensor::BlockQ4_K>(row, blk);
        const auto xb = LoadBlock<tensor::BlockQ8_K>(x, blk);
        int32_t sumi, summ;
        KQuantSums(
            wb.scales, xb,
            [&](int j, int i) {
              const uint8_t q = wb.qs[32 * (j / 2) + i];
              return j % 2 == 0 ? (q & 0x0F) : (q >> 4);
            },
            &sumi, &summ);
        sum += Fp16ToFp32(wb.d) * xb.d * static_cast<float>(sumi) -
               Fp16ToFp32(wb.dmin) * xb.d * static_cast<float>(summ);
      }
      return sum;
    }
    case WType::kQ5_K: {
      for (int64_t blk = 0; blk < cols / tensor::kQK_K; ++blk) {
        const auto wb = LoadBlock<tensor::BlockQ5_K>(row, blk);
        const auto xb = LoadBlock<tensor::BlockQ8_K>(x, blk);
        int32_t sumi, summ;
        KQuantSums(
            wb.scales, xb,
            [&](int j, int i) {
              const uint8_t q = wb.qs[32 * (j / 2) + i];
              const int lo = j % 2 == 0 ? (q & 0x0F) : (q >> 4);
              return lo | (((wb.qh[i] >> j) & 1) << 4);
            },
            &sumi, &summ);
        sum += Fp16ToFp32(wb.d) * xb.d * static_cast<float>(sumi) -
               Fp16ToFp32(wb.dmin) * xb.d * static_cast<float>(summ);
      }
      return sum;
    }
    case WType::kQ6_K: {
      for (int64_t blk = 0; blk < cols / tensor::kQK_K; ++blk) {
        const auto wb = LoadBlock<tensor::BlockQ6_K>(row, blk);
        const auto xb = LoadBlock<tensor::BlockQ8_K>(x, blk);
        int32_t sumi = 0;
        for (int g = 0; g < 16; ++g) {
          int32_t dot = 0;
          for (int p = 16 * g; p < 16 * g + 16; ++p) {
            const int h = p / 128, k = (p % 128) / 32, i = p % 32;
            const uint8_t l = wb.ql[64 * h + 32 * (k & 1) + i];
            const int code =
                (k < 2 ? (l & 0x0F) : (l >> 4)) | (((wb.qh[32 * h + i] >> (2 * k)) & 3) << 4);
            dot += (code - 32) * static_cast<int32_t>(xb.qs[p]);
          }
          sumi += wb.scales[g] * dot;
        }
        sum += Fp16ToFp32(wb.d) * xb.d * static_cast<float>(sumi);
      }
      return sum;
    }
  }
  return sum;
}

void MatMulRowsRef(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                   const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                   int64_t r1) {
  const size_t x_row = PreparedRowBytes(w, cols, n_tok);
  if (ActFormatFor(w, n_tok) == ActFormat::kF32 && ActFormatFor(w) != ActFormat::kF32) {
    // Large batch on quantized weights: dequantize each row, then a float dot product.
    // Activations may be unaligned: copy each token's floats out once.
    std::vector<float> row(static_cast<size_t>(cols)), xs(static_cast<size_t>(n_tok * cols));
    std::memcpy(xs.data(), x, static_cast<size_t>(n_tok) * x_row);
    for (int64_t r = r0; r < r1; ++r) {
      (void)tensor::DequantizeRow(static_cast<tensor::DType>(w),
                                  weights + static_cast<size_t>(r) * row_bytes, row.data(), cols);
      for (int64_t t = 0; t < n_tok; ++t) {
        const float* xt = xs.data() + t * cols;
        float sum = 0;
        for (int64_t i = 0; i < cols; ++i) sum += row[static_cast<size_t>(i)] * xt[i];
        y[t * y_stride + r] = sum;
      }
    }
    return;
  }
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = r0; r < r1; ++r)
      y[t * y_stride + r] =
          DotRowRef(w, weights + static_cast<size_t>(r) * row_bytes, cols, x + t * x_row);
}

void RmsNormRef(const float* x, const float* weight, float* out, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void SwigluRef(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void GeluRef(const float* x, const float* up, float* out, int64_t n) {
  constexpr double kSqrt2OverPi = 0.7978845608028654;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double g = 0.5 * v * (1 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v)));
    out[i] = static_cast<float>(up ? g * up[i] : g);
  }
}

void AttentionRef(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch) {
  const int32_t group = a.n_head / a.n_kv_head;
  const int32_t vd = a.VDim();
  std::vector<float> kv(static_cast<size_t>(std::max(a.head_dim, a.v.head_dim)));
  for (int64_t i = 0; i < a.n_q; ++i) {
    const int64_t n_kv = a.slot0 + i + 1;
    for (int32_t kvh = kvh_begin; kvh < kvh_end; ++kvh) {
      for (int32_t g = 0; g < group; ++g) {
        const int32_t h = kvh * group + g;
        const float* q = a.q + i * a.q_stride + static_cast<int64_t>(h) * a.head_dim;
        float* s = scratch;
        for (int64_t p = 0; p < n_kv; ++p) {
          internal::DecodeKvHeadRef(a.k, p, kvh, kv.data());
          float dot = 0;
          for (int32_t d = 0; d < a.head_dim; ++d) dot += q[d] * kv[d];
          s[p] = dot * a.scale;
        }
        internal::MaskDeadSlots(a, s, n_kv);
        Softmax(s, n_kv);
        internal::ObserveWeights(a, i, s, n_kv);
        float* o = a.out + i * a.out_stride + static_cast<int64_t>(h) * vd;
        for (int32_t d = 0; d < vd; ++d) o[d] = 0;
        for (int64_t p = 0; p < n_kv; ++p) {
          internal::DecodeKvHeadRef(a.v, p, kvh, kv.data());
          for (int32_t d = 0; d < vd; ++d) o[d] += s[p] * kv[d];
        }
      }
    }
  }
}

// Two passes per query head over the range: the scores, then their exponentials.
void AttentionDecodePartRef(const AttentionArgs& a, int64_t slot_begin, int64_t slot_end, float* o,
                            float* m, float* l) {
  const int32_t group = a.n_head / a.n_kv_head;
  const int32_t vd = a.VDim();
  std::vector<float> kv(static_cast<size_t>(std::max(a.head_dim, a.v.head_dim)));
  std::vector<float> s(static_cast<size_t>(std::max<int64_t>(slot_end - slot_begin, 0)));
  for (int32_t h = 0; h < a.n_head; ++h) {
    const int32_t kvh = h / group;
    const float* q = a.q + static_cast<int64_t>(h) * a.head_dim;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t p = slot_begin; p < slot_end; ++p) {
      internal::DecodeKvHeadRef(a.k, p, kvh, kv.data());
      float dot = 0;
      for (int32_t d = 0; d < a.head_dim; ++d) dot += q[d] * kv[d];
      s[static_cast<size_t>(p - slot_begin)] = dot * a.scale;
      mx = std::max(mx, dot * a.scale);
    }
    float* oh = o + static_cast<int64_t>(h) * vd;
    for (int32_t d = 0; d < vd; ++d) oh[d] = 0;
    double sum = 0;
    for (int64_t p = slot_begin; p < slot_end; ++p) {
      const float w = std::exp(s[static_cast<size_t>(p - slot_begin)] - mx);
      sum += w;
      internal::DecodeKvHeadRef(a.v, p, kvh, kv.data());
      for (int32_t d = 0; d < vd; ++d) oh[d] += w * kv[d];
    }
    m[h] = mx;
    l[h] = static_cast<float>(sum);
  }
}

// Eight scalar chains (enough to cover a scalar FMA's latency on current cores).
int64_t FmaLoopRef(int64_t iterations) {
  float a[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  const float m = 0.9999f, b = 1e-4f;
  for (int64_t it = 0; it < iterations; ++it)
    for (float& v : a) v = std::fma(v, m, b);
  volatile float sink = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
  (void)sink;
  return iterations * 8 * 2;
}

const KernelTable kRefTable = {
    "ref",   PrepareActRef, MatMulRowsRef, RmsNormRef,    SwigluRef,
    GeluRef, AttentionRef,  FmaLoopRef,    MatMulRowsRef, AttentionDecodePartRef};

}  // namespace

void DecodeKvRow(const KvPageView& v, int64_t p, float* out) {
  for (int32_t h = 0; h * v.head_dim < v.row_values; ++h)
    internal::DecodeKvHeadRef(v, p, h, out + static_cast<int64_t>(h) * v.head_dim);
}

ActFormat ActFormatFor(WType w) {
  switch (w) {
    case WType::kF32:
    case WType::kF16:
    case WType::kBF16:
      return ActFormat::kF32;
    case WType::kQ8_0:
    case WType::kQ4_0:
    case WType::kQ5_0:
      return ActFormat::kQ8_0;
    case WType::kQ4_1:
    case WType::kQ5_1:
      return ActFormat::kQ8_1;
    case WType::kQ4_K:
    case WType::kQ5_K:
    case WType::kQ6_K:
      return ActFormat::kQ8_K;
  }
  return ActFormat::kF32;
}

ActFormat ActFormatFor(WType w, int64_t n_tok) {
  // Every quantized format: from this batch size the packed GEMM dequantizes each weight panel
  // once for all tokens (measured with bench/kernels_bench.cc).
  const bool dequant_gemm = ActFormatFor(w) != ActFormat::kF32;
  return dequant_gemm && n_tok >= kDequantGemmMinTokens ? ActFormat::kF32 : ActFormatFor(w);
}

size_t PreparedRowBytes(WType w, int64_t cols, int64_t n_tok) {
  return ActFormatFor(w, n_tok) == ActFormat::kF32 ? static_cast<size_t>(cols) * 4
                                                   : PreparedRowBytes(w, cols);
}

size_t PreparedRowBytes(WType w, int64_t cols) {
  const auto n = static_cast<size_t>(cols);
  switch (ActFormatFor(w)) {
    case ActFormat::kF32:
      return n * 4;
    case ActFormat::kQ8_0:
      return n / 32 * sizeof(tensor::BlockQ8_0);
    case ActFormat::kQ8_1:
      return n / 32 * sizeof(internal::ActBlockQ8_1);
    case ActFormat::kQ8_K:
      return n / tensor::kQK_K * sizeof(tensor::BlockQ8_K);
  }
  return n * 4;
}

const KernelTable& ReferenceTable() { return kRefTable; }

void Rope(float* x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, int64_t pos,
          float freq_base, float freq_scale, bool neox, const float* freq_factors) {
  // Angles follow ggml: theta_0 = pos * freq_scale, theta_{k+1} = theta_k * base^(-2/rot_dim),
  // accumulated in float, so our rotations match llama.cpp's to the last bit where possible.
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dim));
  float cos_sin[2 * 512];
  std::vector<float> big;
  float* cs = cos_sin;
  if (rot_dim > 512) {
    big.resize(static_cast<size_t>(rot_dim));
    cs = big.data();
  }
  float theta = static_cast<float>(pos) * freq_scale;
  for (int32_t k = 0; k < rot_dim / 2; ++k) {
    const float t = freq_factors ? theta / freq_factors[k] : theta;
    cs[2 * k] = std::cos(t);
    cs[2 * k + 1] = std::sin(t);
    theta *= theta_scale;
  }
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t k = 0; k < rot_dim / 2; ++k) {
      const int32_t i0 = neox ? k : 2 * k;
      const int32_t i1 = neox ? k + rot_dim / 2 : 2 * k + 1;
      const float c = cs[2 * k], s = cs[2 * k + 1];
      const float a = v[i0], b = v[i1];
      v[i0] = a * c - b * s;
      v[i1] = a * s + b * c;
    }
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::fmax(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace kvforge::kernels
