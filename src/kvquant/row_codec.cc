#include "kvquant/row_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/check.h"
#include "base/fp16.h"
#include "base/strings.h"
#include "kvquant/fp8.h"
#include "kvquant/kivi.h"
#include "kvquant/nuq.h"

namespace kvforge::kvquant {
namespace {

constexpr int64_t kBlock = 32;  // ggml QK8_0 / QK4_0, and the KIVI value group

uint16_t LoadU16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}
void StoreU16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// f16 rows: a prefill writes every layer's K and V rows (pp512 of a 110M model: 9.4M values),
// and the scalar converter took ~4 ns a value, ~5% of the step on the engine thread. The F16C
// instruction rounds the same way (to nearest even); only NaN payloads may differ.
#if defined(__x86_64__)
// Converts the whole groups of 8 values; returns how many it converted.
__attribute__((target("avx,f16c"))) int64_t EncodeF16RowF16c(const float* x, uint8_t* dst,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
  }
  return i;
}
#endif

void EncodeF16Row(const float* x, uint8_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__x86_64__)
  static const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  if (f16c) i = EncodeF16RowF16c(x, dst, n);
#endif
  for (; i < n; ++i) StoreU16(dst + 2 * i, Fp32ToFp16(x[i]));
}

}  // namespace

void QuantizeBlockQ8_0(const float* x, uint8_t* dst) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(dst, Fp32ToFp16(d));
  for (int64_t j = 0; j < kBlock; ++j)
    dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

void QuantizeBlockQ4_0(const float* x, uint8_t* dst) {
  float amax = 0.0f, m = 0.0f;
  for (int64_t j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {  // strict: the first value of largest magnitude wins
      amax = std::fabs(x[j]);
      m = x[j];
    }
  }
  const float d = m / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreU16(dst, Fp32ToFp16(d));
  for (int64_t j = 0; j < kBlock / 2; ++j) {
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
    dst[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

Result<RowCodec> RowCodec::Create(KvDtype dtype, int64_t n_heads, int64_t head_dim, bool key,
                                  bool turbo_qjl) {
  if (n_heads < 1 || head_dim < 1 || n_heads > (1 << 20) || head_dim > (1 << 20))
    return Status::InvalidArgument(base::StrFormat("row codec: bad shape %lld heads x %lld",
                                                   (long long)n_heads, (long long)head_dim));
  RowCodec c;
  c.dtype_ = dtype;
  c.n_heads_ = n_heads;
  c.head_dim_ = head_dim;
  const int64_t v = n_heads * head_dim;
  const bool blocked = dtype == KvDtype::kQ8_0 || dtype == KvDtype::kQ4_0 || IsKivi(dtype);
  if (blocked && v % kBlock != 0)
    return Status::InvalidArgument(base::StrFormat(
        "%s groups 32 values along a token row, so the row width (%lld) must be a multiple of 32",
        std::string(KvDtypeName(dtype)).c_str(), (long long)v));
  switch (dtype) {
    case KvDtype::kF32:
      c.row_bytes_ = 4 * v;
      break;
    case KvDtype::kF16:
    case KvDtype::kBf16:
      c.row_bytes_ = 2 * v;
      break;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2:
      c.row_bytes_ = v;
      break;
    case KvDtype::kInt8:
      c.row_bytes_ = v + 2 * n_heads;
      break;
    case KvDtype::kQ8_0:
      c.row_bytes_ = v / kBlock * 34;
      break;
    case KvDtype::kQ4_0:
      c.row_bytes_ = v / kBlock * 18;
      break;
    case KvDtype::kKivi2:
    case KvDtype::kKivi4:
      c.row_bytes_ = v * KiviBits(dtype) / 8 + v / kBlock * 4;
      break;
    case KvDtype::kKvQuant3:
      if (v % 8 != 0)
        return Status::InvalidArgument(base::StrFormat(
            "kvquant3 packs 8 three-bit codes in 3 bytes, so the row width (%lld) must be a "
            "multiple of 8",
            (long long)v));
      c.row_bytes_ = NuqRowBytes(v, key);
      break;
    case KvDtype::kTurbo3:
    case KvDtype::kTurbo4: {
      KVF_ASSIGN_OR_RETURN(c.turbo_, TurboFor(TurboBits(dtype), head_dim, turbo_qjl));
      c.turbo_qjl_ = turbo_qjl;
      c.row_bytes_ = TurboRowBytes(*c.turbo_, n_heads);
      break;
    }
  }
  return c;
}

void RowCodec::Encode(const float* x, uint8_t* dst, const float* fp8_scales) const {
  const int64_t v = values();
  switch (dtype_) {
    case KvDtype::kF32:
      std::memcpy(dst, x, static_cast<size_t>(v) * 4);
      return;
    case KvDtype::kF16:
      return EncodeF16Row(x, dst, v);
    case KvDtype::kBf16:
      for (int64_t i = 0; i < v; ++i) StoreU16(dst + 2 * i, Fp32ToBf16(x[i]));
      return;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2: {
      const bool e4m3 = dtype_ == KvDtype::kFp8E4M3;
      for (int64_t h = 0; h < n_heads_; ++h) {
        const float s = fp8_scales ? fp8_scales[h] : 1.0f;
        for (int64_t i = h * head_dim_; i < (h + 1) * head_dim_; ++i)
          dst[i] = e4m3 ? FloatToE4M3(x[i] / s) : FloatToE5M2(x[i] / s);
      }
      return;
    }
    case KvDtype::kInt8: {
      for (int64_t h = 0; h < n_heads_; ++h) {
        const float* xh = x + h * head_dim_;
        float amax = 0.0f;
        for (int64_t i = 0; i < head_dim_; ++i) amax = std::max(amax, std::fabs(xh[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int64_t i = 0; i < head_dim_; ++i) {
          const float q = std::clamp(std::round(xh[i] * id), -127.0f, 127.0f);
          dst[h * head_dim_ + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
        }
        StoreU16(dst + v + 2 * h, Fp32ToFp16(d));
      }
      return;
    }
    case KvDtype::kQ8_0:
      for (int64_t b = 0; b < v / kBlock; ++b) QuantizeBlockQ8_0(x + b * kBlock, dst + b * 34);
      return;
    case KvDtype::kQ4_0:
      for (int64_t b = 0; b < v / kBlock; ++b) QuantizeBlockQ4_0(x + b * kBlock, dst + b * 18);
      return;
    case KvDtype::kKivi2:
    case KvDtype::kKivi4: {
      const int bits = KiviBits(dtype_);
      uint8_t* scales = dst + v * bits / 8;
      uint8_t codes[kBlock];
      for (int64_t g = 0; g < v / kBlock; ++g) {
        uint16_t step = 0, zero = 0;
        KiviQuantizeGroup(x + g * kBlock, kBlock, 1, bits, codes, &step, &zero);
        PackCodes(codes, kBlock, bits, dst + g * kBlock * bits / 8);
        StoreU16(scales + 4 * g, step);
        StoreU16(scales + 4 * g + 2, zero);
      }
      return;
    }
    case KvDtype::kKvQuant3:
      KVF_CHECK_MSG(false, "kvquant3 rows need a calibration: encode with NuqEncode*Row");
      return;
    case KvDtype::kTurbo3:
    case KvDtype::kTurbo4:
      TurboEncodeRow(*turbo_, x, n_heads_, dst);
      return;
  }
}

void RowCodec::Decode(const uint8_t* src, int64_t begin, int64_t count, float* out,
                      const float* fp8_scales) const {
  DecodeRowValues(dtype_, head_dim_, values(), src, begin, count, out, fp8_scales, turbo_qjl_);
}

void DecodeRowValues(KvDtype dtype, int64_t head_dim, int64_t v, const uint8_t* src, int64_t begin,
                     int64_t count, float* out, const float* fp8_scales, bool turbo_qjl) {
  switch (dtype) {
    case KvDtype::kF32:
      std::memcpy(out, src + 4 * begin, static_cast<size_t>(count) * 4);
      return;
    case KvDtype::kF16:
      for (int64_t i = 0; i < count; ++i) out[i] = Fp16ToFp32(LoadU16(src + 2 * (begin + i)));
      return;
    case KvDtype::kBf16:
      for (int64_t i = 0; i < count; ++i) out[i] = Bf16ToFp32(LoadU16(src + 2 * (begin + i)));
      return;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2: {
      const bool e4m3 = dtype == KvDtype::kFp8E4M3;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t e = begin + i;
        const float s = fp8_scales ? fp8_scales[e / head_dim] : 1.0f;
        out[i] = (e4m3 ? E4M3ToFloat(src[e]) : E5M2ToFloat(src[e])) * s;
      }
      return;
    }
    case KvDtype::kInt8:
      for (int64_t i = 0; i < count; ++i) {
        const int64_t e = begin + i;
        const float d = Fp16ToFp32(LoadU16(src + v + 2 * (e / head_dim)));
        out[i] = static_cast<float>(static_cast<int8_t>(src[e])) * d;
      }
      return;
    case KvDtype::kQ8_0:
      for (int64_t i = 0; i < count; ++i) {
        const uint8_t* blk = src + (begin + i) / kBlock * 34;
        const int64_t j = (begin + i) % kBlock;
        out[i] = static_cast<float>(static_cast<int8_t>(blk[2 + j])) * Fp16ToFp32(LoadU16(blk));
      }
      return;
    case KvDtype::kQ4_0:
      for (int64_t i = 0; i < count; ++i) {
        const uint8_t* blk = src + (begin + i) / kBlock * 18;
        const int64_t j = (begin + i) % kBlock;
        const int nib = j < 16 ? (blk[2 + j] & 0x0F) : (blk[2 + j - 16] >> 4);
        out[i] = static_cast<float>(nib - 8) * Fp16ToFp32(LoadU16(blk));
      }
      return;
    case KvDtype::kKivi2:
    case KvDtype::kKivi4: {
      const int bits = KiviBits(dtype);
      const uint8_t* scales = src + v * bits / 8;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t e = begin + i;
        const uint8_t* gs = scales + 4 * (e / kBlock);
        out[i] = static_cast<float>(UnpackCode(src, e, bits)) * Fp16ToFp32(LoadU16(gs)) +
                 Fp16ToFp32(LoadU16(gs + 2));
      }
      return;
    }
    case KvDtype::kKvQuant3:
      KVF_CHECK_MSG(false, "kvquant3 rows need a calibration: decode with NuqDecode");
      return;
    case KvDtype::kTurbo3:
    case KvDtype::kTurbo4: {
      Result<const TurboSpec*> spec = TurboFor(TurboBits(dtype), head_dim, turbo_qjl);
      if (!spec.ok()) {  // a shape RowCodec::Create would have rejected: nothing was encoded
        std::fill(out, out + count, 0.0f);
        return;
      }
      std::vector<float> head(static_cast<size_t>(head_dim));
      for (int64_t i = 0; i < count;) {
        const int64_t e = begin + i;
        const int64_t h = e / head_dim, off = e % head_dim;
        const int64_t n = std::min(count - i, head_dim - off);
        TurboDecodeHead(**spec, src, v / head_dim, h, head.data());
        std::copy(head.begin() + off, head.begin() + off + n, out + i);
        i += n;
      }
      return;
    }
  }
}

Result<HeadBytes> HeadByteRanges(KvDtype dtype, int64_t n_heads, int64_t head_dim, int64_t head) {
  if (n_heads <= 0 || head_dim <= 0 || head < 0 || head >= n_heads)
    return Status::InvalidArgument(base::StrFormat("head %lld of %lld heads x %lld",
                                                   (long long)head, (long long)n_heads,
                                                   (long long)head_dim));
  HeadBytes h;
  const auto one = [&](int64_t value_bytes) {
    h.offset[0] = head * head_dim * value_bytes;
    h.bytes[0] = head_dim * value_bytes;
    h.parts = 1;
  };
  const auto blocks = [&](int64_t block_bytes) {
    h.offset[0] = head * head_dim / kBlock * block_bytes;
    h.bytes[0] = head_dim / kBlock * block_bytes;
    h.parts = 1;
  };
  switch (dtype) {
    case KvDtype::kF32:
      one(4);
      return h;
    case KvDtype::kF16:
    case KvDtype::kBf16:
      one(2);
      return h;
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2:
      one(1);
      return h;
    case KvDtype::kInt8:  // codes, then one f16 scale per head
      one(1);
      h.offset[1] = n_heads * head_dim + 2 * head;
      h.bytes[1] = 2;
      h.parts = 2;
      return h;
    case KvDtype::kQ8_0:
    case KvDtype::kQ4_0:
      if (head_dim % kBlock == 0) {
        blocks(dtype == KvDtype::kQ8_0 ? 34 : 18);
        return h;
      }
      break;
    default:
      break;
  }
  return Status::NotFound(base::StrFormat(
      "%s rows share bytes between KV heads (head_dim %lld), so heads cannot keep different tokens",
      std::string(KvDtypeName(dtype)).c_str(), (long long)head_dim));
}

}  // namespace kvforge::kvquant
