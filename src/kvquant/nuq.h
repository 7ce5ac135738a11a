// kvquant/nuq.h — KVQuant-style non-uniform 3-bit KV rows ("nuq3-1%", arXiv 2401.18079;
// kv-methods.md A5), dtype `kvquant3`.
//
// Keys are quantized BEFORE RoPE, per channel: each channel i of a layer has calibrated
// thresholds (the 0.5th / 99.5th percentiles of calibration keys) giving a center c_i and a
// radius r_i, so z = (x - c_i) / r_i puts the inliers in [-1, 1]. Values are quantized per token:
// the row's center and radius come from the token itself (online), after the values farthest
// from the row's median are set aside as outliers. Every normalized inlier is rounded to the
// nearest of 8 centroids of a per-layer lookup table (one for K, one for V) fitted by 1-D k-means
// on calibration data (unweighted: kvforge has no gradients for KVQuant's Fisher weighting), and
// decodes as lut[code] * r + c. Outliers are kept exactly in f16, sparse, in a fixed number of
// slots per row so paged rows keep one size (KVQuant's --cap_outliers); extra candidates beyond
// the slots are clamped to the nearest threshold. Decoded keys are rotated with RoPE at their
// position (RopeTable), which is what attention reads.
//
// Row of `values` channels (all KV heads of one token; values % 8 == 0):
//   [values * 3 / 8 bytes of codes: each 8 codes fill 3 bytes, code j at bits 3j .. 3j+2 of the
//    little-endian 24-bit group]
//   [slots x (u16 channel index, f16 original value)]   ascending channels; unused slots
//                                                        (index 0xFFFF) come last
//   [values rows only: f16 center, f16 radius of the token]
// Thread-safety: functions are pure; RopeTable::Reserve mutates (engine thread only, between
// forward steps), everything else is const.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace kvforge::kvquant {

inline constexpr int kNuqLevels = 8;
inline constexpr uint16_t kNuqNoOutlier = 0xFFFF;

// Outlier slots per row: 1% of the channels for values (exactly what the per-token rule sets
// aside), 2% for keys, whose calibrated thresholds let the count vary from token to token.
int64_t NuqOutlierSlots(int64_t values, bool key);
int64_t NuqCodeBytes(int64_t values);
int64_t NuqScaleBytes(int64_t values, bool key);  // outlier slots (+ the value row's c, r)
int64_t NuqRowBytes(int64_t values, bool key);

// What decoding one layer's rows needs: the lookup table, and for keys the per-channel center
// and radius (values rows carry their own).
struct NuqLayer {
  float lut[kNuqLevels] = {};  // ascending
  std::vector<float> center;   // keys: one per channel
  std::vector<float> radius;   // keys: one per channel, > 0
};

// RoPE angles per position, computed exactly as kernels::Rope does (ggml's float recurrence), so
// applying a position and its inverse to a post-RoPE key recovers the pre-RoPE key up to one
// rounding per multiply. Stored in element order for SIMD: for element i < rot_dim of a head,
// rotated[i] = x[i] * Cos(pos)[i] + x[Partner(i)] * Sin(pos)[i], where the partner is i ^ 1
// (llama's adjacent pairs) or i +- rot_dim / 2 (NeoX halves) and Sin carries the pair's sign.
class RopeTable {
 public:
  // freq_factors: rot_dim / 2 divisors of the pairs' angles (Llama 3), or empty.
  RopeTable(int32_t head_dim, int32_t rot_dim, float freq_base, float freq_scale, bool neox,
            std::vector<float> freq_factors = {});
  // Makes positions [0, n) available. Engine thread, never while attention reads the table.
  void Reserve(int64_t n);
  int64_t positions() const { return positions_; }
  int32_t head_dim() const { return head_dim_; }
  int32_t rot_dim() const { return rot_dim_; }
  bool neox() const { return neox_; }
  const float* Cos(int64_t pos) const { return cs_.data() + pos * 2 * rot_dim_; }
  const float* Sin(int64_t pos) const { return cs_.data() + pos * 2 * rot_dim_ + rot_dim_; }
  int32_t Partner(int32_t i) const {
    return neox_ ? (i < rot_dim_ / 2 ? i + rot_dim_ / 2 : i - rot_dim_ / 2) : (i ^ 1);
  }
  // Rotates one head (head_dim floats) by the angles of `pos` (< positions()), or back.
  void Apply(float* head, int64_t pos, bool inverse) const;

 private:
  int32_t head_dim_, rot_dim_;
  float freq_scale_, theta_scale_;
  bool neox_;
  std::vector<float> freq_factors_;
  int64_t positions_ = 0;
  std::vector<float> cs_;  // [pos][cos: rot_dim][signed sin: rot_dim]
};

// Keys: x holds `values` PRE-RoPE floats.
void NuqEncodeKeyRow(const float* x, int64_t values, const NuqLayer& layer, uint8_t* dst);
// Values: center and radius computed from the row itself.
void NuqEncodeValueRow(const float* x, int64_t values, const NuqLayer& layer, uint8_t* dst);
// The per-token range of a value row: its outliers (the slots farthest from the row median, as
// (distance, channel)) and the f16 center / radius covering the remaining inliers.
struct NuqValueRange {
  uint16_t center_f16 = 0, radius_f16 = 0;
  float center = 0, radius = 0;
};
NuqValueRange NuqValueRowRange(const float* x, int64_t values,
                               std::vector<std::pair<float, int64_t>>* outliers);
// x normalized by a value row's range and clamped to [-1, 1].
float NuqValueZ(const NuqValueRange& range, float x);
// Decodes channels [begin, begin + count) of a row. Key rows decode pre-RoPE values; with
// `rope` set, [begin, begin + count) must be whole heads and each head is rotated to `pos`.
void NuqDecode(const uint8_t* row, int64_t values, bool key, const NuqLayer& layer, int64_t begin,
               int64_t count, float* out, const RopeTable* rope = nullptr, int64_t pos = 0);

// Index of the centroid nearest to z in an ascending table.
int NuqNearest(const float* lut, float z);
// 1-D k-means (Lloyd) with kNuqLevels clusters over `z` (reordered in place), initialized at the
// quantiles, at most `iters` iterations; deterministic. Empty input gives a uniform table.
void NuqFitLut(std::vector<float>* z, float lut[kNuqLevels], int iters = 50);

}  // namespace kvforge::kvquant
