// kv_formats_avx2.h — AVX2 readers of encoded KV rows (kvquant/row_codec.h, kivi.h) for the
// quantized attention kernel. Include ONLY from translation units compiled with -mavx2 -mfma
// -mf16c. Two kinds of readers:
//   - Fmt* structs: fused loaders. A head's values are split into segments that share one scale
//     (the whole head, or a 32-value llama.cpp block); Raw8 returns 8 unscaled values and Scale a
//     segment's multiplier, so kernels apply the scale once per segment, not per value.
//   - DecodeTile: dequantizes a tile of tokens of one head into floats (KIVI groups, the residual
//     window, blocks spanning heads), for the general path.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/fp16.h"
#include "kernels/kernels.h"
#include "kvquant/kivi.h"
#include "kvquant/nuq.h"
#include "kvquant/row_codec.h"
#include "kvquant/turbo.h"

namespace kvforge::kernels::internal {

using kvquant::KvDtype;
inline constexpr int64_t kTile = 32;  // tokens per decoded tile

static inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

static inline void F16ToF32(const uint8_t* src, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(
        out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i))));
  for (; i < n; ++i) out[i] = _cvtsh_ss(LoadU16(src + 2 * i));
}

static inline void Bf16ToF32(const uint8_t* src, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) out[i] = Bf16ToFp32(LoadU16(src + 2 * i));
}

// 8 FP8 codes -> 8 floats through the f16 converter: an E5M2 byte is the top byte of a half; an
// E4M3 byte's exponent and mantissa slot into a half's low exponent bits and top mantissa bits,
// which reads as the value times 2^-8 (subnormals included), so the scale absorbs a factor 256.
// (NaN codes are never written: the encoder saturates and only NaN inputs produce them.)
template <bool kE4M3>
static inline __m256 Fp8x8(const uint8_t* src, __m256 scale) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
  __m128i h;
  if constexpr (kE4M3) {
    h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8),
                     _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7F)), 7));
  } else {
    h = _mm_slli_epi16(b, 8);
  }
  return _mm256_mul_ps(_mm256_cvtph_ps(h), scale);
}

static inline __m256 Int8x8(const uint8_t* src, __m256 scale) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), scale);
}

// Head kvh of one token row into out[hd] (row_tokens == 1).
static inline void DecodeRowHead(const KvPageView& v, const uint8_t* row, int32_t kvh, float* out) {
  const int64_t hd = v.head_dim;
  const int64_t begin = static_cast<int64_t>(kvh) * hd;
  const int64_t hd8 = hd / 8 * 8;
  switch (v.dtype) {
    case KvDtype::kF32:
      std::memcpy(out, row + 4 * begin, static_cast<size_t>(hd) * 4);
      return;
    case KvDtype::kF16:
      return F16ToF32(row + 2 * begin, hd, out);
    case KvDtype::kBf16:
      return Bf16ToF32(row + 2 * begin, hd, out);
    case KvDtype::kFp8E4M3:
    case KvDtype::kFp8E5M2: {
      const float s = v.scales ? v.scales[kvh] : 1.0f;
      const uint8_t* src = row + begin;
      const bool e4m3 = v.dtype == KvDtype::kFp8E4M3;
      const __m256 vs = _mm256_set1_ps(e4m3 ? s * 256.0f : s);
      for (int64_t d = 0; d < hd8; d += 8)
        _mm256_storeu_ps(out + d, e4m3 ? Fp8x8<true>(src + d, vs) : Fp8x8<false>(src + d, vs));
      if (hd8 < hd)
        kvquant::DecodeRowValues(v.dtype, hd, v.row_values, row, begin + hd8, hd - hd8, out + hd8,
                                 v.scales);
      return;
    }
    case KvDtype::kInt8: {
      const float d = _cvtsh_ss(LoadU16(row + v.row_values + 2 * kvh));
      const __m256 vs = _mm256_set1_ps(d);
      for (int64_t i = 0; i < hd8; i += 8) _mm256_storeu_ps(out + i, Int8x8(row + begin + i, vs));
      for (int64_t i = hd8; i < hd; ++i)
        out[i] = static_cast<float>(static_cast<int8_t>(row[begin + i])) * d;
      return;
    }
    case KvDtype::kQ8_0:
      if (hd % 32 == 0) {
        for (int64_t b = 0; b < hd / 32; ++b) {
          const uint8_t* blk = row + (begin / 32 + b) * 34;
          const __m256 vs = _mm256_set1_ps(_cvtsh_ss(LoadU16(blk)));
          for (int k = 0; k < 4; ++k)
            _mm256_storeu_ps(out + 32 * b + 8 * k, Int8x8(blk + 2 + 8 * k, vs));
        }
        return;
      }
      break;
    case KvDtype::kQ4_0:
      if (hd % 32 == 0) {
        const __m128i mask = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
        for (int64_t b = 0; b < hd / 32; ++b) {
          const uint8_t* blk = row + (begin / 32 + b) * 18;
          const __m256 vs = _mm256_set1_ps(_cvtsh_ss(LoadU16(blk)));
          const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
          // Elements 0..15 are the low nibbles, 16..31 the high ones; codes are offset by 8.
          const __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
          const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
          float* o = out + 32 * b;
          _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), vs));
          _mm256_storeu_ps(
              o + 8,
              _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), vs));
          _mm256_storeu_ps(o + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), vs));
          _mm256_storeu_ps(
              o + 24,
              _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), vs));
        }
        return;
      }
      break;
    case KvDtype::kTurbo3:
    case KvDtype::kTurbo4:
      // Only head widths the fused turbo kernel cannot take (not a multiple of 8) get here.
      return kvquant::TurboDecodeHead(*v.turbo, row, v.row_values / hd, kvh, out);
    default:
      break;
  }
  // Blocks that span heads (head_dim < 32) and KIVI value rows: the scalar codec.
  kvquant::DecodeRowValues(v.dtype, hd, v.row_values, row, begin, hd, out, v.scales);
}

// Rotates one decoded head to position pos with the table's element-order cos / signed sin:
// rotated[i] = x[i] cos[i] + x[partner(i)] sin[i].
static inline void RopeHeadAvx2(const kvquant::RopeTable& rope, int64_t pos, float* x) {
  const int32_t rot = rope.rot_dim();
  const float* c = rope.Cos(pos);
  const float* s = rope.Sin(pos);
  if (!rope.neox() && rot % 8 == 0) {
    for (int32_t d = 0; d < rot; d += 8) {
      const __m256 v = _mm256_loadu_ps(x + d);
      const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x1, x0, x3, x2, ...)
      _mm256_storeu_ps(x + d, _mm256_fmadd_ps(swapped, _mm256_loadu_ps(s + d),
                                              _mm256_mul_ps(v, _mm256_loadu_ps(c + d))));
    }
    return;
  }
  const int32_t half = rot / 2;
  if (rope.neox() && half % 8 == 0) {
    for (int32_t d = 0; d < half; d += 8) {
      const __m256 a = _mm256_loadu_ps(x + d), b = _mm256_loadu_ps(x + half + d);
      _mm256_storeu_ps(x + d, _mm256_fmadd_ps(b, _mm256_loadu_ps(s + d),
                                              _mm256_mul_ps(a, _mm256_loadu_ps(c + d))));
      _mm256_storeu_ps(x + half + d,
                       _mm256_fmadd_ps(a, _mm256_loadu_ps(s + half + d),
                                       _mm256_mul_ps(b, _mm256_loadu_ps(c + half + d))));
    }
    return;
  }
  rope.Apply(x, pos, false);
}

// Head kvh of a kvquant3 row (head_dim % 8 == 0): 8 three-bit codes per 24-bit group become 8
// table lookups in one permute, scaled by the keys' per-channel radius and center or the value
// row's own; then the head's outlier slots, then (keys) RoPE to position pos.
static inline void DecodeNuqHead(const KvPageView& v, const uint8_t* row, int32_t kvh, int64_t pos,
                                 float* out) {
  const kvquant::NuqLayer& layer = *v.nuq;
  const int64_t hd = v.head_dim, values = v.row_values, begin = static_cast<int64_t>(kvh) * hd;
  const __m256 lut = _mm256_loadu_ps(layer.lut);
  const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
  const __m256i seven = _mm256_set1_epi32(7);
  const int64_t slots = kvquant::NuqOutlierSlots(values, v.nuq_key);
  const uint8_t* slot = row + kvquant::NuqCodeBytes(values);
  // Reading 4 bytes per 3-byte group stays inside the row: the outlier slots follow the codes.
  auto table8 = [&](int64_t e) {
    uint32_t bits;
    std::memcpy(&bits, row + e / 8 * 3, 4);
    const __m256i codes = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(bits)), shifts), seven);
    return _mm256_permutevar8x32_ps(lut, codes);
  };
  if (v.nuq_key) {
    const float* center = layer.center.data() + begin;
    const float* radius = layer.radius.data() + begin;
    for (int64_t d = 0; d < hd; d += 8)
      _mm256_storeu_ps(out + d, _mm256_fmadd_ps(table8(begin + d), _mm256_loadu_ps(radius + d),
                                                _mm256_loadu_ps(center + d)));
  } else {
    const uint8_t* tail = slot + 4 * slots;
    const __m256 center = _mm256_set1_ps(_cvtsh_ss(LoadU16(tail)));
    const __m256 radius = _mm256_set1_ps(_cvtsh_ss(LoadU16(tail + 2)));
    for (int64_t d = 0; d < hd; d += 8)
      _mm256_storeu_ps(out + d, _mm256_fmadd_ps(table8(begin + d), radius, center));
  }
  // Slots hold ascending channels (unused ones, 0xFFFF, last): binary-search the head's first.
  int64_t lo = 0, hi = slots;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (LoadU16(slot + 4 * mid) < begin) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (int64_t i = lo; i < slots; ++i) {
    const uint16_t idx = LoadU16(slot + 4 * i);
    if (idx >= begin + hd) break;
    out[idx - begin] = _cvtsh_ss(LoadU16(slot + 4 * i + 2));
  }
  if (v.nuq_key && v.rope) RopeHeadAvx2(*v.rope, pos, out);
}

// KV head kvh of tokens [p0, p0 + cnt) into out[cnt][head_dim]. The tokens share one block (and
// one KIVI group) and lie on one side of recent_begin.
static inline void DecodeTile(const KvPageView& v, int64_t p0, int64_t cnt, int32_t kvh,
                              float* out) {
  const int64_t hd = v.head_dim;
  if (p0 >= v.recent_begin) {
    const uint8_t* row = v.recent + static_cast<size_t>(p0 - v.recent_begin) * v.recent_stride +
                         2 * static_cast<size_t>(kvh) * hd;
    for (int64_t j = 0; j < cnt; ++j, row += v.recent_stride) F16ToF32(row, hd, out + j * hd);
    return;
  }
  if (v.row_tokens > 1) {
    const uint8_t* row = v.Token(p0);
    const int64_t t0 = (p0 % v.block_tokens) % v.row_tokens;
    for (int64_t j = 0; j < cnt; ++j)
      kvquant::KiviDecodeKeyToken(row, t0 + j, v.row_values, kvquant::KiviBits(v.dtype),
                                  static_cast<int64_t>(kvh) * hd, hd, out + j * hd);
    return;
  }
  const uint8_t* row = v.Token(p0);
  if (kvquant::IsNuq(v.dtype)) {
    for (int64_t j = 0; j < cnt; ++j, row += v.token_stride) {
      if (hd % 8 == 0) {
        DecodeNuqHead(v, row, kvh, v.PositionOf(p0 + j), out + j * hd);
      } else {
        kvquant::NuqDecode(row, v.row_values, v.nuq_key, *v.nuq, static_cast<int64_t>(kvh) * hd, hd,
                           out + j * hd, v.rope, v.PositionOf(p0 + j));
      }
    }
    return;
  }
  for (int64_t j = 0; j < cnt; ++j, row += v.token_stride) DecodeRowHead(v, row, kvh, out + j * hd);
}

// Length of the tile starting at p0 (see DecodeTile's contract), at most n_kv - p0.
static inline int64_t TileLen(const KvPageView& v, int64_t p0, int64_t n_kv) {
  int64_t end = std::min(n_kv, p0 + kTile);
  if (p0 < v.recent_begin) {
    end = std::min(end, (p0 / v.block_tokens + 1) * v.block_tokens);
    end = std::min(end, v.recent_begin);
    if (v.row_tokens > 1) end = std::min(end, (p0 / v.row_tokens + 1) * v.row_tokens);
  }
  return end - p0;
}

// What a fused loader needs about one KV head: where its values start in a row, where the
// row's inline per-head scale is, and a per-head constant scale (FP8).
struct HeadCtx {
  int64_t begin = 0;        // first value of the head in the row
  int64_t scale_off = 0;    // int8: the head's f16 scale; KIVI values: the (s, mn) area
  float head_scale = 1.0f;  // fp8: the layer's (or head's) scale, x256 for E4M3
};

// Every format: kSeg values share Scale (0: the whole head); with kZero a segment also has an
// additive zero point, value = Scale * raw + Zero.
struct FmtF32 {
  static constexpr int64_t kSeg = 0;
  static constexpr bool kZero = false;
  static float Scale(const uint8_t*, const HeadCtx&, int64_t) { return 1.0f; }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c.begin + e);
  }
};

struct FmtF16 {
  static constexpr bool kZero = false;
  static constexpr int64_t kSeg = 0;
  static float Scale(const uint8_t*, const HeadCtx&, int64_t) { return 1.0f; }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (c.begin + e))));
  }
};

struct FmtBf16 {
  static constexpr bool kZero = false;
  static constexpr int64_t kSeg = 0;
  static float Scale(const uint8_t*, const HeadCtx&, int64_t) { return 1.0f; }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (c.begin + e)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

template <bool kE4M3>
struct FmtFp8 {
  static constexpr bool kZero = false;
  static constexpr int64_t kSeg = 0;
  static float Scale(const uint8_t*, const HeadCtx& c, int64_t) { return c.head_scale; }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    return Fp8x8<kE4M3>(row + c.begin + e, _mm256_set1_ps(1.0f));
  }
};

struct FmtInt8 {
  static constexpr bool kZero = false;
  static constexpr int64_t kSeg = 0;
  static float Scale(const uint8_t* row, const HeadCtx& c, int64_t) {
    return _cvtsh_ss(LoadU16(row + c.scale_off));
  }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c.begin + e));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
};

// llama.cpp blocks; the head starts on a block boundary (head_dim % 32 == 0).
struct FmtQ8_0 {
  static constexpr bool kZero = false;
  static constexpr int64_t kSeg = 32;
  static float Scale(const uint8_t* row, const HeadCtx& c, int64_t seg) {
    return _cvtsh_ss(LoadU16(row + (c.begin / 32 + seg) * 34));
  }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    const int64_t x = c.begin + e;
    const __m128i b =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + (x >> 5) * 34 + 2 + (x & 31)));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
};

struct FmtQ4_0 {
  static constexpr bool kZero = false;
  static constexpr int64_t kSeg = 32;
  static float Scale(const uint8_t* row, const HeadCtx& c, int64_t seg) {
    return _cvtsh_ss(LoadU16(row + (c.begin / 32 + seg) * 18));
  }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    const int64_t x = c.begin + e;
    const int64_t i = x & 31;  // elements 0..15: low nibbles of bytes 0..15; 16..31: high nibbles
    __m128i b =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + (x >> 5) * 18 + 2 + (i & 15)));
    if (i >= 16) b = _mm_srli_epi16(b, 4);
    b = _mm_sub_epi8(_mm_and_si128(b, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
};

// KIVI value rows: 32-channel groups with (f16 step, f16 zero point); codes are a bit stream,
// so the 8 codes of elements x..x+7 (x a multiple of 8) sit in 2 (2-bit) or 4 (4-bit) bytes.
template <int kBits>
struct FmtKiviV {
  static constexpr bool kZero = true;
  static constexpr int64_t kSeg = 32;
  static float Scale(const uint8_t* row, const HeadCtx& c, int64_t seg) {
    return _cvtsh_ss(LoadU16(row + c.scale_off + 4 * (c.begin / 32 + seg)));
  }
  static float Zero(const uint8_t* row, const HeadCtx& c, int64_t seg) {
    return _cvtsh_ss(LoadU16(row + c.scale_off + 4 * (c.begin / 32 + seg) + 2));
  }
  static __m256 Raw8(const uint8_t* row, const HeadCtx& c, int64_t e) {
    const int64_t x = c.begin + e;
    uint32_t chunk = 0;
    std::memcpy(&chunk, row + x * kBits / 8, kBits);  // 8 codes: 16 or 32 bits
    const __m256i shifts = kBits == 2 ? _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)
                                      : _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i codes =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(chunk)), shifts),
                         _mm256_set1_epi32((1 << kBits) - 1));
    return _mm256_cvtepi32_ps(codes);
  }
};

// Fused loaders apply to per-token rows outside a residual window whose head width is a multiple
// of 8 (and of 32 for the block formats, so a head starts on a block).
// (The residual window, if any, is handled separately as f16 rows.)
inline bool FusedOk(const KvPageView& v) {
  if (v.row_tokens != 1 || v.head_dim % 8 != 0) return false;
  switch (v.dtype) {
    case KvDtype::kQ8_0:
    case KvDtype::kQ4_0:
    case KvDtype::kKivi2:
    case KvDtype::kKivi4:
      return v.head_dim % 32 == 0;
    case KvDtype::kKvQuant3:  // sparse outliers and (keys) RoPE after decoding: tiles
      return false;
    case KvDtype::kTurbo3:
    case KvDtype::kTurbo4:
      return false;  // rotated-domain kernel (attention_turbo_avx2.cc), not a per-value loader
    default:
      return true;
  }
}

inline HeadCtx MakeHeadCtx(const KvPageView& v, int32_t kvh) {
  HeadCtx c;
  c.begin = static_cast<int64_t>(kvh) * v.head_dim;
  c.scale_off = kvquant::IsKivi(v.dtype) ? v.row_values * kvquant::KiviBits(v.dtype) / 8
                                         : v.row_values + 2 * static_cast<int64_t>(kvh);
  const float s = v.scales ? v.scales[kvh] : 1.0f;
  c.head_scale = v.dtype == KvDtype::kFp8E4M3 ? s * 256.0f : s;
  return c;
}

}  // namespace kvforge::kernels::internal
