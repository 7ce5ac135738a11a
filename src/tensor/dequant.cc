#include "tensor/dequant.h"

#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "base/strings.h"
#include "tensor/quant_blocks.h"

namespace kvforge::tensor {

Status DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const DTypeTraits tr = Traits(t);
  if (tr.block_bytes == 0 || n % tr.block_elems != 0)
    return Status::InvalidArgument(
        base::StrFormat("row of %lld elements is not a multiple of %s blocks",
                        static_cast<long long>(n), tr.name.data()));
  const auto* bytes = static_cast<const uint8_t*>(src);
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
      for (int64_t b = 0; b < n / kQK8_0; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, bytes + b * sizeof(BlockQ8_0), sizeof(blk));
        const float d = Fp16ToFp32(blk.d);
        for (int j = 0; j < kQK8_0; ++j) dst[b * kQK8_0 + j] = d * static_cast<float>(blk.qs[j]);
      }
      return Status::Ok();
    case DType::kQ4_0:
      for (int64_t b = 0; b < n / kQK4_0; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, bytes + b * sizeof(BlockQ4_0), sizeof(blk));
        const float d = Fp16ToFp32(blk.d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
          dst[b * kQK4_0 + j] = d * static_cast<float>((blk.qs[j] & 0x0F) - 8);
          dst[b * kQK4_0 + j + kQK4_0 / 2] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
        }
      }
      return Status::Ok();
    default:
      return Status::Unimplemented(
          base::StrFormat("no dequantizer for weight type %s yet", tr.name.data()));
  }
}

Status QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  const DTypeTraits tr = Traits(t);
  if (tr.block_bytes == 0 || n % tr.block_elems != 0)
    return Status::InvalidArgument("row length is not a multiple of the block size");
  auto* bytes = static_cast<uint8_t*>(dst);
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
      for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const float* x = src + b * kQK8_0;
        float amax = 0;
        for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        BlockQ8_0 blk;
        blk.d = Fp32ToFp16(d);
        for (int j = 0; j < kQK8_0; ++j) blk.qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
        std::memcpy(bytes + b * sizeof(BlockQ8_0), &blk, sizeof(blk));
      }
      return Status::Ok();
    case DType::kQ4_0:
      for (int64_t b = 0; b < n / kQK4_0; ++b) {
        const float* x = src + b * kQK4_0;
        float amax = 0, max = 0;
        for (int j = 0; j < kQK4_0; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        BlockQ4_0 blk;
        blk.d = Fp32ToFp16(d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
          auto q = [&](float v) {
            int qi = static_cast<int>(v * id + 8.5f);
            return static_cast<uint8_t>(qi < 0 ? 0 : qi > 15 ? 15 : qi);
          };
          blk.qs[j] = static_cast<uint8_t>(q(x[j]) | (q(x[j + kQK4_0 / 2]) << 4));
        }
        std::memcpy(bytes + b * sizeof(BlockQ4_0), &blk, sizeof(blk));
      }
      return Status::Ok();
    default:
      return Status::Unimplemented(
          base::StrFormat("no quantizer for weight type %s yet", tr.name.data()));
  }
}

}  // namespace kvforge::tensor
