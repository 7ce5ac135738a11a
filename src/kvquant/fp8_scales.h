// kvquant/fp8_scales.h — the f32 scales of an FP8 KV cache: one per layer for K and one for V
// (per tensor, vLLM's default), or one per layer and KV head. Stored as x / s, read as q * s.
//
// Where scales come from (kv-methods A1, vLLM calc_kv_scales):
//   unit        s = 1.0 (vLLM's default, no calibration)
//   calibrated  on the first batch a layer sees: s_k = amax|K| / 200, s_v = amax|V| / 100 (the max
//               over all tokens and heads, or per head), then frozen. The divisors leave headroom
//               for later tokens larger than the calibration batch (E4M3 saturates at 448). A
//               tensor that is all zeros keeps s = 1.
//   file        Load() of a file written by Save():
//                 kvforge-kv-scales 1
//                 layers <L> heads <H> per_head <0|1>
//                 k <layer> <s> [<s> ...]     (1 value, or H with per_head 1)
//                 v <layer> <s> [<s> ...]
// The scales are constants of the cache (KvLayout::FixedBytes), not part of the blocks.
// Thread-safety: a value type; engine thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::kvquant {

inline constexpr float kKeyScaleDivisor = 200.0f;    // vLLM K_SCALE_CONSTANT
inline constexpr float kValueScaleDivisor = 100.0f;  // vLLM V_SCALE_CONSTANT

class Fp8Scales {
 public:
  Fp8Scales() = default;
  // All scales 1.0.
  Fp8Scales(int64_t n_layers, int64_t n_heads, bool per_head);

  int64_t n_layers() const { return n_layers_; }
  int64_t n_heads() const { return n_heads_; }
  bool per_head() const { return per_head_; }
  // n_heads floats for `layer` (every head of a per-tensor layer holds the same value), the form
  // the codecs and kernels take.
  const float* key(int64_t layer) const { return k_.data() + layer * n_heads_; }
  const float* value(int64_t layer) const { return v_.data() + layer * n_heads_; }
  bool calibrated(int64_t layer) const { return calibrated_[static_cast<size_t>(layer)] != 0; }

  // Sets the scales of `layer` from n_tokens K and V rows (n_heads x head_dim floats, rows
  // `stride` floats apart) and marks it calibrated.
  void Calibrate(int64_t layer, const float* k, const float* v, int64_t n_tokens, int64_t head_dim,
                 int64_t stride);
  // Marks every layer calibrated (scales loaded or fixed).
  void Freeze();

  Status Save(const std::string& path) const;
  // Reads a file written by Save(); its shape must match n_layers x n_heads.
  static Result<Fp8Scales> Load(const std::string& path, int64_t n_layers, int64_t n_heads);

 private:
  int64_t n_layers_ = 0;
  int64_t n_heads_ = 0;
  bool per_head_ = false;
  std::vector<float> k_, v_;
  std::vector<uint8_t> calibrated_;
};

}  // namespace kvforge::kvquant
