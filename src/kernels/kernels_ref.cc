// Scalar reference kernels: the oracle every SIMD variant is tested against. Float sums use
// plain left-to-right accumulation.
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/kernels_common.h"
#include "kvquant/kivi.h"
#include "kvquant/row_codec.h"
#include "tensor/quant_blocks.h"

namespace kvforge::kernels {
namespace internal {

void QuantizeQ8_0Ref(const float* x, uint8_t* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    tensor::BlockQ8_0 blk;
    blk.d = Fp32ToFp16(d);
    for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
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
  // fp8 scales are per head; DecodeRowValues indexes them by element / head_dim.
  kvquant::DecodeRowValues(v.dtype, v.head_dim, v.row_values, row, begin, v.head_dim, out,
                           v.scales);
}

}  // namespace internal

namespace {

void PrepareActRef(WType w, const float* x, void* dst, int64_t cols) {
  if (ActFormatFor(w) == ActFormat::kF32) {
    std::memcpy(dst, x, static_cast<size_t>(cols) * 4);
  } else {
    internal::QuantizeQ8_0Ref(x, static_cast<uint8_t*>(dst), cols);
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
  }
  return sum;
}

void MatMulRowsRef(WType w, const uint8_t* weights, size_t row_bytes, int64_t cols,
                   const uint8_t* x, int64_t n_tok, float* y, int64_t y_stride, int64_t r0,
                   int64_t r1) {
  const size_t x_row = PreparedRowBytes(w, cols);
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

void AttentionRef(const AttentionArgs& a, int32_t kvh_begin, int32_t kvh_end, float* scratch) {
  const int32_t group = a.n_head / a.n_kv_head;
  std::vector<float> kv(static_cast<size_t>(a.head_dim));
  for (int64_t i = 0; i < a.n_q; ++i) {
    const int64_t n_kv = a.pos0 + i + 1;
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
        Softmax(s, n_kv);
        float* o = a.out + i * a.out_stride + static_cast<int64_t>(h) * a.head_dim;
        for (int32_t d = 0; d < a.head_dim; ++d) o[d] = 0;
        for (int64_t p = 0; p < n_kv; ++p) {
          internal::DecodeKvHeadRef(a.v, p, kvh, kv.data());
          for (int32_t d = 0; d < a.head_dim; ++d) o[d] += s[p] * kv[d];
        }
      }
    }
  }
}

const KernelTable kRefTable = {"ref",      PrepareActRef, MatMulRowsRef,
                               RmsNormRef, SwigluRef,     AttentionRef};

}  // namespace

ActFormat ActFormatFor(WType w) {
  return (w == WType::kQ8_0 || w == WType::kQ4_0) ? ActFormat::kQ8_0 : ActFormat::kF32;
}

size_t PreparedRowBytes(WType w, int64_t cols) {
  return ActFormatFor(w) == ActFormat::kF32 ? static_cast<size_t>(cols) * 4
                                            : static_cast<size_t>(cols / 32) * 34;
}

const KernelTable& ReferenceTable() { return kRefTable; }

void Rope(float* x, int32_t n_heads, int32_t head_dim, int32_t rot_dim, int64_t pos,
          float freq_base, float freq_scale, bool neox) {
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
    cs[2 * k] = std::cos(theta);
    cs[2 * k + 1] = std::sin(theta);
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
