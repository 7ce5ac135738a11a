#include "tensor/dequant.h"

#include <cstring>

#include "base/fp16.h"
#include "base/strings.h"
#include "tensor/quant_blocks.h"

namespace kvforge::tensor {
namespace {

// Reads block b of a row into a properly aligned local copy (rows in the mmap may be unaligned).
template <typename Block>
Block LoadBlock(const uint8_t* row, int64_t b) {
  Block blk;
  std::memcpy(&blk, row + b * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return blk;
}

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void DequantQ8_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK8_0) {
    const auto blk = LoadBlock<BlockQ8_0>(src, b);
    const float d = Fp16ToFp32(blk.d);
    for (int j = 0; j < kQK8_0; ++j) dst[j] = d * static_cast<float>(blk.qs[j]);
  }
}

void DequantQ4_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK4_0) {
    const auto blk = LoadBlock<BlockQ4_0>(src, b);
    const float d = Fp16ToFp32(blk.d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      dst[j] = d * static_cast<float>((blk.qs[j] & 0x0F) - 8);
      dst[j + kQK4_0 / 2] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK4_1) {
    const auto blk = LoadBlock<BlockQ4_1>(src, b);
    const float d = Fp16ToFp32(blk.d), m = Fp16ToFp32(blk.m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      dst[j] = d * static_cast<float>(blk.qs[j] & 0x0F) + m;
      dst[j + kQK4_1 / 2] = d * static_cast<float>(blk.qs[j] >> 4) + m;
    }
  }
}

// 5-bit code j (0..31) of a Q5_0/Q5_1 block.
inline int Code5(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return lo | static_cast<int>(((qh >> j) & 1u) << 4);
}

void DequantQ5_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK5_0) {
    const auto blk = LoadBlock<BlockQ5_0>(src, b);
    const float d = Fp16ToFp32(blk.d);
    const uint32_t qh = LoadU32(blk.qh);
    for (int j = 0; j < kQK5_0; ++j) dst[j] = d * static_cast<float>(Code5(blk.qs, qh, j) - 16);
  }
}

void DequantQ5_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK5_1) {
    const auto blk = LoadBlock<BlockQ5_1>(src, b);
    const float d = Fp16ToFp32(blk.d), m = Fp16ToFp32(blk.m);
    const uint32_t qh = LoadU32(blk.qh);
    for (int j = 0; j < kQK5_1; ++j) dst[j] = d * static_cast<float>(Code5(blk.qs, qh, j)) + m;
  }
}

void DequantQ4_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK_K) {
    const auto blk = LoadBlock<BlockQ4_K>(src, b);
    const float d = Fp16ToFp32(blk.d), dmin = Fp16ToFp32(blk.dmin);
    for (int g = 0; g < 4; ++g) {  // 64 values: sub-blocks 2g (low nibbles), 2g+1 (high)
      const uint8_t* q = blk.qs + 32 * g;
      uint8_t sc0, m0, sc1, m1;
      UnpackScaleMinK4(2 * g, blk.scales, &sc0, &m0);
      UnpackScaleMinK4(2 * g + 1, blk.scales, &sc1, &m1);
      const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
      for (int i = 0; i < 32; ++i) {
        dst[64 * g + i] = d0 * static_cast<float>(q[i] & 0x0F) - mm0;
        dst[64 * g + 32 + i] = d1 * static_cast<float>(q[i] >> 4) - mm1;
      }
    }
  }
}

void DequantQ5_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK_K) {
    const auto blk = LoadBlock<BlockQ5_K>(src, b);
    const float d = Fp16ToFp32(blk.d), dmin = Fp16ToFp32(blk.dmin);
    for (int g = 0; g < 4; ++g) {
      const uint8_t* q = blk.qs + 32 * g;
      uint8_t sc0, m0, sc1, m1;
      UnpackScaleMinK4(2 * g, blk.scales, &sc0, &m0);
      UnpackScaleMinK4(2 * g + 1, blk.scales, &sc1, &m1);
      const float d0 = d * sc0, mm0 = dmin * m0, d1 = d * sc1, mm1 = dmin * m1;
      for (int i = 0; i < 32; ++i) {
        const int lo = (q[i] & 0x0F) | (((blk.qh[i] >> (2 * g)) & 1) << 4);
        const int hi = (q[i] >> 4) | (((blk.qh[i] >> (2 * g + 1)) & 1) << 4);
        dst[64 * g + i] = d0 * static_cast<float>(lo) - mm0;
        dst[64 * g + 32 + i] = d1 * static_cast<float>(hi) - mm1;
      }
    }
  }
}

void DequantQ6_K(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, dst += kQK_K) {
    const auto blk = LoadBlock<BlockQ6_K>(src, b);
    const float d = Fp16ToFp32(blk.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      for (int k = 0; k < 4; ++k) {
        for (int i = 0; i < 32; ++i) {
          const uint8_t l = ql[32 * (k & 1) + i];
          const int lo = k < 2 ? (l & 0x0F) : (l >> 4);
          const int code = lo | (((qh[i] >> (2 * k)) & 3) << 4);
          const int pos = 128 * h + 32 * k + i;
          dst[pos] = d * static_cast<float>(blk.scales[pos / 16]) * static_cast<float>(code - 32);
        }
      }
    }
  }
}

}  // namespace

Status DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const DTypeTraits tr = Traits(t);
  if (tr.block_bytes == 0 || n % tr.block_elems != 0)
    return Status::InvalidArgument(
        base::StrFormat("row of %lld elements is not a multiple of %s blocks",
                        static_cast<long long>(n), tr.name.data()));
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int64_t nb = n / tr.block_elems;
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return Status::Ok();
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = Fp16ToFp32(h);
      }
      return Status::Ok();
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = Bf16ToFp32(h);
      }
      return Status::Ok();
    case DType::kQ8_0:
      DequantQ8_0(bytes, dst, nb);
      return Status::Ok();
    case DType::kQ4_0:
      DequantQ4_0(bytes, dst, nb);
      return Status::Ok();
    case DType::kQ4_1:
      DequantQ4_1(bytes, dst, nb);
      return Status::Ok();
    case DType::kQ5_0:
      DequantQ5_0(bytes, dst, nb);
      return Status::Ok();
    case DType::kQ5_1:
      DequantQ5_1(bytes, dst, nb);
      return Status::Ok();
    case DType::kQ4_K:
      DequantQ4_K(bytes, dst, nb);
      return Status::Ok();
    case DType::kQ5_K:
      DequantQ5_K(bytes, dst, nb);
      return Status::Ok();
    case DType::kQ6_K:
      DequantQ6_K(bytes, dst, nb);
      return Status::Ok();
    default:
      return Status::Unimplemented(
          base::StrFormat("no dequantizer for weight type %s yet", tr.name.data()));
  }
}

}  // namespace kvforge::tensor
