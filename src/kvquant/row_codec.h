// kvquant/row_codec.h — reference encode/decode of one token's K or V row, per KV dtype.
//
// A token row is the token's values for every KV head, n_heads x head_dim floats, stored as:
//   f32, f16, bf16   plain values (4 / 2 / 2 bytes each)
//   fp8_e4m3/e5m2    one byte per value, q = fp8(x / s) with s the head's scale (kept outside the
//                    row: per tensor or per KV head, see fp8_scales.h)
//   int8             n_heads x head_dim int8 codes, then one f16 scale per head; symmetric,
//                    s = amax(head) / 127, q = round_half_away(x / s) (our baseline, kv-methods A2)
//   q8_0, q4_0       llama.cpp blocks of 32 values along the row, bit-exact with ggml's reference
//                    quantizers: q8_0 {f16 d, int8 qs[32]} with d = amax / 127 and
//                    q = round_half_away(x / d); q4_0 {f16 d, uint8 qs[16]} with d = m / -8 where
//                    m is the value of largest magnitude (first one on ties),
//                    q = min(15, trunc(x / d + 8.5)), element j in the low nibble of byte j and
//                    element j + 16 in its high nibble.
//   kivi2, kivi4     the VALUE codec of KIVI: groups of 32 consecutive channels of the row, 2- or
//                    4-bit min-max codes (kivi.h) packed for the whole row, then (f16 s, f16 mn)
//                    per group. KIVI keys are grouped over tokens instead (kivi.h).
//   kvquant3         KVQuant nuq3 rows (nuq.h): 3-bit codes, outlier slots, and for values the
//                    token's center and radius. Encoding and decoding need the cache's
//                    calibration, so Encode / Decode / DecodeRowValues refuse this dtype (use
//                    NuqEncodeKeyRow / NuqEncodeValueRow / NuqDecode).
//   turbo3, turbo4   TurboQuant-mse per head (turbo.h): all heads' b-bit codes of the rotated unit
//                    vector as one bit stream, then one f16 norm per head (b + 16/d bits/value:
//                    turbo4 at d = 64 is 4.25). With turbo_qjl (keys): (b-1)-bit codes, then the
//                    heads' d-bit QJL sign streams, then per head f16 ||x|| and f16 ||residual||
//                    (b + 32/d bits/value).
// Blocks and groups of 32 run along the whole row, as in llama.cpp, so they may span heads when
// head_dim < 32; the row width must be a multiple of 32 for q8_0, q4_0 and KIVI.
// Rounding helpers divide, as the formulas say; encoders take the row's floats and write exactly
// RowBytes() bytes. Thread-safety: RowCodec is an immutable value.
#pragma once

#include <cstdint>

#include "kvforge/status.h"
#include "kvquant/kv_dtype.h"
#include "kvquant/turbo.h"

namespace kvforge::kvquant {

class RowCodec {
 public:
  // InvalidArgument for non-positive shapes or a row width that splits a 32-value block.
  // `key`: the row is a K row (kvquant3 sizes K and V rows differently). turbo_qjl: turbo
  // dtypes only, the TurboQuant-prod key format (turbo.h).
  static Result<RowCodec> Create(KvDtype dtype, int64_t n_heads, int64_t head_dim, bool key = false,
                                 bool turbo_qjl = false);

  KvDtype dtype() const { return dtype_; }
  int64_t n_heads() const { return n_heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t values() const { return n_heads_ * head_dim_; }
  // Encoded bytes of one row, scales included (no alignment padding).
  int64_t row_bytes() const { return row_bytes_; }

  // fp8_scales: one scale per head (fp8 dtypes only; nullptr means 1.0).
  void Encode(const float* x, uint8_t* dst, const float* fp8_scales = nullptr) const;
  // Decodes values [begin, begin + count) of a row (e.g. one head's slice).
  void Decode(const uint8_t* src, int64_t begin, int64_t count, float* out,
              const float* fp8_scales = nullptr) const;

 private:
  RowCodec() = default;
  KvDtype dtype_ = KvDtype::kF32;
  int64_t n_heads_ = 0;
  int64_t head_dim_ = 0;
  int64_t row_bytes_ = 0;
  bool turbo_qjl_ = false;
  const TurboSpec* turbo_ = nullptr;  // turbo dtypes (registry-owned)
};

// Decodes values [begin, begin + count) of one encoded row of `values` values (heads of head_dim)
// without building a RowCodec: what RowCodec::Decode and the reference attention kernel run.
// Turbo rows decode whole heads (the rotation mixes a head's values) and return the slice asked
// for; turbo_qjl says whether they are in the QJL key format.
void DecodeRowValues(KvDtype dtype, int64_t head_dim, int64_t values, const uint8_t* src,
                     int64_t begin, int64_t count, float* out, const float* fp8_scales,
                     bool turbo_qjl = false);

// The bytes of KV head `head` inside an encoded row, so that a head can move between rows
// without re-encoding (per-KV-head eviction): the head's codes and, for int8, its f16 scale.
// NotFound for dtypes whose heads share bytes: KIVI (groups over tokens or channels), kvquant3,
// turbo (one bit stream), and q8_0 / q4_0 when head_dim is not a multiple of 32.
struct HeadBytes {
  int64_t offset[2] = {0, 0};
  int64_t bytes[2] = {0, 0};
  int parts = 0;
};
Result<HeadBytes> HeadByteRanges(KvDtype dtype, int64_t n_heads, int64_t head_dim, int64_t head);

// Stand-alone llama.cpp block quantizers (32 values), used by RowCodec and by tests.
void QuantizeBlockQ8_0(const float* x, uint8_t* dst /* 34 bytes */);
void QuantizeBlockQ4_0(const float* x, uint8_t* dst /* 18 bytes */);

}  // namespace kvforge::kvquant
