#include "tensor/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "base/strings.h"
#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace kvforge::tensor {
namespace {

// Hot loops use std::min/max and ternaries, not fmin/fmax: without -ffinite-math-only those
// are libm calls. Round to nearest, ties to even. Adding 1.5 * 2^23 leaves the rounded integer in
// the low mantissa bits; inline and much faster than lrintf, which is a libm call on baseline
// x86-64. Inputs are clamped to +-2^22 (far outside any code range) where the trick stays exact.
inline int NearestInt(float v) {
  v = v < -4194303.0f ? -4194303.0f : (v > 4194303.0f ? 4194303.0f : v);
  const float f = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &f, 4);
  return (i & 0x007FFFFF) - 0x00400000;
}

inline int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

template <typename Block>
void StoreBlock(const Block& blk, uint8_t* row, int64_t b) {
  std::memcpy(row + b * static_cast<int64_t>(sizeof(Block)), &blk, sizeof(Block));
}

void QuantQ8_0(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK8_0) {
    float amax = 0;
    for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    BlockQ8_0 blk;
    blk.d = Fp32ToFp16(d);
    for (int j = 0; j < kQK8_0; ++j) blk.qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
    StoreBlock(blk, dst, b);
  }
}

// The value with the largest magnitude, sign kept (symmetric formats map it to the most negative
// code, which has one more step of range than the positive side).
float SignedAbsMax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void QuantQ4_0(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK4_0) {
    const float d = SignedAbsMax(x, kQK4_0) / -8.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    BlockQ4_0 blk;
    blk.d = Fp32ToFp16(d);
    auto q = [&](float v) {
      return static_cast<uint8_t>(Clamp(static_cast<int>(v * id + 8.5f), 0, 15));
    };
    for (int j = 0; j < kQK4_0 / 2; ++j)
      blk.qs[j] = static_cast<uint8_t>(q(x[j]) | (q(x[j + kQK4_0 / 2]) << 4));
    StoreBlock(blk, dst, b);
  }
}

void MinMax(const float* x, int n, float* mn, float* mx) {
  *mn = x[0];
  *mx = x[0];
  for (int j = 1; j < n; ++j) {
    *mn = std::min(*mn, x[j]);
    *mx = std::max(*mx, x[j]);
  }
}

// Asymmetric 32-value blocks (q4_1, q5_1): codes span [min, max] in nmax steps. Codes are
// computed against the f16-rounded scale and minimum actually stored.
void AffineCodes(const float* x, int nmax, uint16_t* d_out, uint16_t* m_out, uint8_t* codes) {
  float mn, mx;
  MinMax(x, 32, &mn, &mx);
  *d_out = Fp32ToFp16((mx - mn) / static_cast<float>(nmax));
  *m_out = Fp32ToFp16(mn);
  const float d = Fp16ToFp32(*d_out), m = Fp16ToFp32(*m_out);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j)
    codes[j] = static_cast<uint8_t>(Clamp(NearestInt((x[j] - m) * id), 0, nmax));
}

void PackNibbles(const uint8_t* codes, uint8_t* qs) {
  for (int j = 0; j < 16; ++j)
    qs[j] = static_cast<uint8_t>((codes[j] & 0x0F) | ((codes[j + 16] & 0x0F) << 4));
}

uint32_t HighBits(const uint8_t* codes) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((codes[j] >> 4) & 1) << j;
  return qh;
}

void QuantQ4_1(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK4_1) {
    BlockQ4_1 blk;
    uint8_t codes[32];
    AffineCodes(x, 15, &blk.d, &blk.m, codes);
    PackNibbles(codes, blk.qs);
    StoreBlock(blk, dst, b);
  }
}

void QuantQ5_0(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK5_0) {
    const float d = SignedAbsMax(x, kQK5_0) / -16.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    BlockQ5_0 blk;
    blk.d = Fp32ToFp16(d);
    uint8_t codes[32];
    for (int j = 0; j < 32; ++j)
      codes[j] = static_cast<uint8_t>(Clamp(static_cast<int>(x[j] * id + 16.5f), 0, 31));
    PackNibbles(codes, blk.qs);
    const uint32_t qh = HighBits(codes);
    std::memcpy(blk.qh, &qh, 4);
    StoreBlock(blk, dst, b);
  }
}

void QuantQ5_1(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK5_1) {
    BlockQ5_1 blk;
    uint8_t codes[32];
    AffineCodes(x, 31, &blk.d, &blk.m, codes);
    PackNibbles(codes, blk.qs);
    const uint32_t qh = HighBits(codes);
    std::memcpy(blk.qh, &qh, 4);
    StoreBlock(blk, dst, b);
  }
}

// ---- k-quants ---------------------------------------------------------------------------------

// Fits x[i] ~ scale * L[i] - neg_min with L[i] in [0, nmax], scale >= 0, neg_min >= 0 (the
// offset is never positive, so the zero point stays representable), minimising
// sum w[i] * err[i]^2. Starts from the min/max grid, then tries nstep inverse scales
// (nmax + rmin + rdelta * k) / (max - min); for each code assignment the scale and offset are
// refit in closed form by weighted least squares and kept if the error drops.
float FitScaleMin(const float* x, const float* w, int n, int nmax, float rmin, float rdelta,
                  int nstep, uint8_t* L, float* neg_min) {
  float mn = x[0], mx = x[0], sum_w = 0, sum_x = 0, sum_x2 = 0;
  for (int i = 0; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
    sum_x2 += w[i] * x[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx <= mn) {
    std::fill(L, L + n, 0);
    *neg_min = -mn;
    return 0.0f;
  }
  auto error = [&](const uint8_t* q, float s, float m) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = s * q[i] + m - x[i];
      e += w[i] * diff * diff;
    }
    return e;
  };
  float iscale = static_cast<float>(nmax) / (mx - mn);
  float scale = 1.0f / iscale, offset = mn;
  for (int i = 0; i < n; ++i)
    L[i] = static_cast<uint8_t>(Clamp(NearestInt(iscale * (x[i] - mn)), 0, nmax));
  float best = error(L, scale, offset);
  uint8_t cand[kQK_K];
  for (int k = 0; k <= nstep; ++k) {
    iscale = (rmin + rdelta * static_cast<float>(k) + static_cast<float>(nmax)) / (mx - mn);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - mn)), 0, nmax);
      cand[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * static_cast<float>(l);
      sum_l2 += w[i] * static_cast<float>(l * l);
      sum_xl += w[i] * static_cast<float>(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0) {  // the offset must stay <= 0: refit the scale alone with m = 0
      m = 0;
      s = sum_xl / sum_l2;
    }
    // sum w (s l + m - x)^2 expanded into the sums above: no second pass over the values.
    const float e = s * s * sum_l2 + m * m * sum_w + sum_x2 + 2 * s * m * sum_l - 2 * s * sum_xl -
                    2 * m * sum_x;
    if (e < best) {
      best = e;
      scale = s;
      offset = m;
      std::memcpy(L, cand, static_cast<size_t>(n));
    }
  }
  *neg_min = -offset;
  return scale;
}

// Inverse of UnpackScaleMinK4 for sub-block j (bytes must start zeroed).
void PackScaleMinK4(int j, int sc, int mn, uint8_t* q) {
  if (j < 4) {
    q[j] = static_cast<uint8_t>(q[j] | sc);
    q[j + 4] = static_cast<uint8_t>(q[j + 4] | mn);
  } else {
    q[j + 4] = static_cast<uint8_t>((sc & 0x0F) | ((mn & 0x0F) << 4));
    q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((sc >> 4) << 6));
    q[j] = static_cast<uint8_t>(q[j] | ((mn >> 4) << 6));
  }
}

// Shared by Q4_K and Q5_K: fits 8 sub-block (scale, min) pairs, quantizes them to 6 bits under
// two f16 super-scales, then recomputes the codes against the values actually stored.
// Sub-block weights |x| + rms(x) favour the large values (as ggml does without an imatrix).
void QuantKSuper(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                 uint16_t* dmin_out, uint8_t* scales, uint8_t* L) {
  float sc[8], mn[8], w[32];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float ss = 0;
    for (int i = 0; i < 32; ++i) ss += xs[i] * xs[i];
    const float av = std::sqrt(ss / 32);
    for (int i = 0; i < 32; ++i) w[i] = av + std::fabs(xs[i]);
    sc[j] = FitScaleMin(xs, w, 32, nmax, rmin, 0.1f, nstep, L + 32 * j, &mn[j]);
  }
  float max_sc = 0, max_mn = 0;
  for (int j = 0; j < 8; ++j) {
    max_sc = std::fmax(max_sc, sc[j]);
    max_mn = std::fmax(max_mn, mn[j]);
  }
  const float inv_sc = max_sc > 0 ? 63.0f / max_sc : 0.0f;
  const float inv_mn = max_mn > 0 ? 63.0f / max_mn : 0.0f;
  std::memset(scales, 0, kKScaleSize);
  for (int j = 0; j < 8; ++j)
    PackScaleMinK4(j, Clamp(NearestInt(inv_sc * sc[j]), 0, 63),
                   Clamp(NearestInt(inv_mn * mn[j]), 0, 63), scales);
  *d_out = Fp32ToFp16(max_sc / 63.0f);
  *dmin_out = Fp32ToFp16(max_mn / 63.0f);
  const float d = Fp16ToFp32(*d_out), dmin = Fp16ToFp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t s6, m6;
    UnpackScaleMinK4(j, scales, &s6, &m6);
    const float ds = d * s6, dm = dmin * m6;
    for (int i = 0; i < 32; ++i) {
      const int l = ds != 0 ? NearestInt((x[32 * j + i] + dm) / ds) : 0;
      L[32 * j + i] = static_cast<uint8_t>(Clamp(l, 0, nmax));
    }
  }
}

void QuantQ4_K(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    BlockQ4_K blk;
    uint8_t L[kQK_K];
    QuantKSuper(x, 15, -1.0f, 20, &blk.d, &blk.dmin, blk.scales, L);
    for (int g = 0; g < 4; ++g)
      for (int i = 0; i < 32; ++i)
        blk.qs[32 * g + i] = static_cast<uint8_t>(L[64 * g + i] | (L[64 * g + 32 + i] << 4));
    StoreBlock(blk, dst, b);
  }
}

void QuantQ5_K(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    BlockQ5_K blk;
    uint8_t L[kQK_K];
    QuantKSuper(x, 31, -0.5f, 15, &blk.d, &blk.dmin, blk.scales, L);
    std::memset(blk.qh, 0, sizeof(blk.qh));
    for (int g = 0; g < 4; ++g) {
      for (int i = 0; i < 32; ++i) {
        const int lo = L[64 * g + i], hi = L[64 * g + 32 + i];
        blk.qs[32 * g + i] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
        blk.qh[i] =
            static_cast<uint8_t>(blk.qh[i] | ((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
      }
    }
    StoreBlock(blk, dst, b);
  }
}

// Fits x[i] ~ scale * L[i] with L[i] in [-nmax, nmax-1], weighting errors by x^2 (so large
// values, which dominate dot products, are kept precise). Tries inverse scales
// -(nmax + 0.1k) / max for k in [-9, 9] and keeps the least-squares scale of the best set.
float FitScaleSymmetric(const float* x, int n, int nmax, int8_t* L) {
  const float max = SignedAbsMax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  float best_scale = 0, best = -1;
  int8_t cand[32];
  for (int k = -9; k <= 9; ++k) {
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(k)) / max;
    float sum_lx = 0, sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      cand[i] = static_cast<int8_t>(l);
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l * l);
    }
    // Weighted error is sum(w x^2) - sum_lx^2 / sum_l2 at the optimal scale: maximise the ratio.
    if (sum_l2 > 0 && (best < 0 || sum_lx * sum_lx > best * sum_l2)) {
      best_scale = sum_lx / sum_l2;
      best = best_scale * sum_lx;
      std::memcpy(L, cand, static_cast<size_t>(n));
    }
  }
  return best_scale;
}

void QuantQ6_K(const float* x, uint8_t* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    BlockQ6_K blk;
    float sc[16];
    int8_t L8[kQK_K];
    float max_sc = 0, max_abs = 0;
    for (int g = 0; g < 16; ++g) {
      sc[g] = FitScaleSymmetric(x + 16 * g, 16, 32, L8 + 16 * g);
      if (std::fabs(sc[g]) > max_abs) {
        max_abs = std::fabs(sc[g]);
        max_sc = sc[g];
      }
    }
    uint8_t L[kQK_K];
    if (max_abs < 1e-15f) {
      std::memset(&blk, 0, sizeof(blk));
      std::fill(L, L + kQK_K, 32);
    } else {
      // Signed: the group with the largest scale gets code -128, the widest int8 value.
      const float iscale = -128.0f / max_sc;
      blk.d = Fp32ToFp16(1.0f / iscale);
      const float d = Fp16ToFp32(blk.d);
      for (int g = 0; g < 16; ++g) {
        blk.scales[g] = static_cast<int8_t>(std::min(127, NearestInt(iscale * sc[g])));
        const float ds = d * blk.scales[g];
        for (int i = 0; i < 16; ++i) {
          const int l = ds != 0 ? Clamp(NearestInt(x[16 * g + i] / ds), -32, 31) : 0;
          L[16 * g + i] = static_cast<uint8_t>(l + 32);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      const uint8_t* Lh = L + 128 * h;
      for (int i = 0; i < 32; ++i) {
        ql[i] = static_cast<uint8_t>((Lh[i] & 0x0F) | ((Lh[64 + i] & 0x0F) << 4));
        ql[32 + i] = static_cast<uint8_t>((Lh[32 + i] & 0x0F) | ((Lh[96 + i] & 0x0F) << 4));
        qh[i] = static_cast<uint8_t>((Lh[i] >> 4) | ((Lh[32 + i] >> 4) << 2) |
                                     ((Lh[64 + i] >> 4) << 4) | ((Lh[96 + i] >> 4) << 6));
      }
    }
    StoreBlock(blk, dst, b);
  }
}

}  // namespace

bool CanQuantize(DType t) {
  return IsComputeSupported(t);  // every type the kernels compute with has a quantizer
}

Status QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  const DTypeTraits tr = Traits(t);
  if (tr.block_bytes == 0 || n % tr.block_elems != 0)
    return Status::InvalidArgument(
        base::StrFormat("row of %lld elements is not a multiple of the %s block size (%u)",
                        static_cast<long long>(n), tr.name.data(), tr.block_elems));
  auto* bytes = static_cast<uint8_t*>(dst);
  const int64_t nb = n / tr.block_elems;
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return Status::Ok();
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToFp16(src[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return Status::Ok();
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = Fp32ToBf16(src[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return Status::Ok();
    case DType::kQ8_0:
      QuantQ8_0(src, bytes, nb);
      return Status::Ok();
    case DType::kQ4_0:
      QuantQ4_0(src, bytes, nb);
      return Status::Ok();
    case DType::kQ4_1:
      QuantQ4_1(src, bytes, nb);
      return Status::Ok();
    case DType::kQ5_0:
      QuantQ5_0(src, bytes, nb);
      return Status::Ok();
    case DType::kQ5_1:
      QuantQ5_1(src, bytes, nb);
      return Status::Ok();
    case DType::kQ4_K:
      QuantQ4_K(src, bytes, nb);
      return Status::Ok();
    case DType::kQ5_K:
      QuantQ5_K(src, bytes, nb);
      return Status::Ok();
    case DType::kQ6_K:
      QuantQ6_K(src, bytes, nb);
      return Status::Ok();
    default:
      return Status::Unimplemented(
          base::StrFormat("no quantizer for weight type %s yet", tr.name.data()));
  }
}

std::optional<uint32_t> LlamaFileType(DType t) {
  switch (t) {
    case DType::kF32:
      return 0;
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ4_1:
      return 3;
    case DType::kQ8_0:
      return 7;
    case DType::kQ5_0:
      return 8;
    case DType::kQ5_1:
      return 9;
    case DType::kQ4_K:
      return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S
    case DType::kQ5_K:
      return 16;  // LLAMA_FTYPE_MOSTLY_Q5_K_S
    case DType::kQ6_K:
      return 18;
    case DType::kBF16:
      return 32;
    default:
      return std::nullopt;
  }
}

}  // namespace kvforge::tensor
