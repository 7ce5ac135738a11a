// kvquant/nuq_calibration.h — the calibrated constants of a kvquant3 cache (nuq.h): per layer,
// the per-channel key thresholds and the K and V lookup tables.
//
// KVQuant calibrates offline (16 x 2048 tokens of training text). kvforge takes the constants
// from a file (Save/Load, made from any text with `kvforge eval kv --save-calibration`), or
// calibrates each layer on the first batch it sees, as vLLM does for FP8 scales:
//   keys    per channel: lower / upper = the 0.5th / 99.5th percentiles of the batch's PRE-RoPE
//           keys; center = (upper + lower) / 2, radius = (upper - lower) / 2 (floored so that a
//           constant channel still gets a positive radius);
//   LUTs    1-D k-means (8 centroids) over every normalized inlier of the batch, K and V apart
//           (values normalized per token exactly as NuqEncodeValueRow does).
// File (text):
//   kvforge-kvquant-calib 1
//   layers <L> values <V>
//   kc <layer> <V centers>
//   kr <layer> <V radii>
//   klut <layer> <8 centroids>
//   vlut <layer> <8 centroids>
// Thread-safety: a value type; engine thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "kvquant/nuq.h"

namespace kvforge::kvquant {

class NuqCalibration {
 public:
  NuqCalibration() = default;
  // Uncalibrated layers: radius 1, center 0, uniform tables.
  NuqCalibration(int64_t n_layers, int64_t values);

  int64_t n_layers() const { return static_cast<int64_t>(key_.size()); }
  int64_t values() const { return values_; }
  const NuqLayer& key(int64_t layer) const { return key_[static_cast<size_t>(layer)]; }
  const NuqLayer& value(int64_t layer) const { return value_[static_cast<size_t>(layer)]; }
  bool calibrated(int64_t layer) const { return calibrated_[static_cast<size_t>(layer)] != 0; }

  // Fits `layer` from n_tokens rows of pre-RoPE keys and of values (`values` floats each, rows
  // `stride` floats apart; either pointer may be null to leave that stream as it is).
  void Calibrate(int64_t layer, const float* k, const float* v, int64_t n_tokens, int64_t stride);
  void Freeze();

  Status Save(const std::string& path) const;
  static Result<NuqCalibration> Load(const std::string& path, int64_t n_layers, int64_t values);

 private:
  int64_t values_ = 0;
  std::vector<NuqLayer> key_, value_;
  std::vector<uint8_t> calibrated_;
};

}  // namespace kvforge::kvquant
