#include "kvquant/kivi.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"

namespace kvforge::kvquant {

void KiviQuantizeGroup(const float* x, int64_t n, int64_t stride, int bits, uint8_t* codes,
                       uint16_t* step_f16, uint16_t* min_f16) {
  KVF_DCHECK(n > 0 && (bits == 2 || bits == 4 || bits == 8));
  float mn = x[0], mx = x[0];
  for (int64_t i = 1; i < n; ++i) {
    mn = std::min(mn, x[i * stride]);
    mx = std::max(mx, x[i * stride]);
  }
  const int levels = (1 << bits) - 1;
  *min_f16 = Fp32ToFp16(mn);
  *step_f16 = Fp32ToFp16((mx - mn) / static_cast<float>(levels));
  // Quantize against the values decoding will see.
  const float zero = Fp16ToFp32(*min_f16);
  const float step = Fp16ToFp32(*step_f16);
  if (!(step > 0.0f) || std::isinf(step)) {
    std::memset(codes, 0, static_cast<size_t>(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint((x[i * stride] - zero) / step);
    codes[i] = static_cast<uint8_t>(std::clamp(q, 0.0f, static_cast<float>(levels)));
  }
}

void PackCodes(const uint8_t* codes, int64_t n, int bits, uint8_t* dst) {
  const int64_t bytes = (n * bits + 7) / 8;
  std::memset(dst, 0, static_cast<size_t>(bytes));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t bit = i * bits;
    dst[bit >> 3] = static_cast<uint8_t>(dst[bit >> 3] | (codes[i] << (bit & 7)));
  }
}

int64_t KiviKeyGroupBytes(int64_t values, int bits) {
  return values * kKiviGroup * bits / 8 + values * 4;
}

void KiviEncodeKeyGroup(const float* keys, int64_t n_tokens, int64_t stride, int64_t values,
                        int bits, uint8_t* dst) {
  KVF_DCHECK(n_tokens >= 1 && n_tokens <= kKiviGroup);
  const int64_t channel_bytes = kKiviGroup * bits / 8;
  uint8_t* scales = dst + values * channel_bytes;
  uint8_t codes[kKiviGroup];
  for (int64_t c = 0; c < values; ++c) {
    uint16_t step = 0, zero = 0;
    std::memset(codes, 0, sizeof(codes));
    // Per channel: the statistics run down the token axis.
    KiviQuantizeGroup(keys + c, n_tokens, stride, bits, codes, &step, &zero);
    PackCodes(codes, kKiviGroup, bits, dst + c * channel_bytes);
    std::memcpy(scales + 4 * c, &step, 2);
    std::memcpy(scales + 4 * c + 2, &zero, 2);
  }
}

void KiviDecodeKeyToken(const uint8_t* row, int64_t t, int64_t values, int bits, int64_t c0,
                        int64_t count, float* out) {
  const int64_t channel_bytes = kKiviGroup * bits / 8;
  const uint8_t* scales = row + values * channel_bytes;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t c = c0 + i;
    uint16_t step, zero;
    std::memcpy(&step, scales + 4 * c, 2);
    std::memcpy(&zero, scales + 4 * c + 2, 2);
    const float q = UnpackCode(row + c * channel_bytes, t, bits);
    out[i] = q * Fp16ToFp32(step) + Fp16ToFp32(zero);
  }
}

}  // namespace kvforge::kvquant
