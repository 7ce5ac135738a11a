// Decode attention split over slot ranges (kernels.h: attention_decode_part): which views the
// split kernels read, and the combination of their partial results (the log-sum-exp merge of
// flash-decoding: each part's exponentials are relative to its own maximum).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/kernels.h"

namespace kvforge::kernels {
namespace {

// f32 / f16 rows, or q8_0 rows whose heads are whole 32-value blocks, one token per row, no
// residual window.
bool WholeRowFormat(const KvPageView& v) {
  const bool format = v.dtype == kvquant::KvDtype::kF32 || v.dtype == kvquant::KvDtype::kF16 ||
                      (v.dtype == kvquant::KvDtype::kQ8_0 && v.head_dim % 32 == 0);
  return format && v.recent == nullptr && v.row_tokens == 1 && v.block_tokens > 0;
}

}  // namespace

bool DecodePartApplies(const AttentionArgs& a) {
  return a.n_q == 1 && a.slot_scores == nullptr && a.dead_begin >= a.dead_end &&
         WholeRowFormat(a.k) && WholeRowFormat(a.v) && a.n_kv_head > 0 &&
         a.n_head % a.n_kv_head == 0 && a.head_dim % 8 == 0 && a.VDim() % 8 == 0 &&
         (a.v.dtype != kvquant::KvDtype::kQ8_0 || a.VDim() == a.v.head_dim);
}

void MergeDecodeParts(int64_t n_parts, int32_t n_head, int32_t v_dim, const float* o,
                      const float* m, const float* l, float* out) {
  for (int32_t h = 0; h < n_head; ++h) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < n_parts; ++c) mx = std::max(mx, m[c * n_head + h]);
    float* dst = out + static_cast<int64_t>(h) * v_dim;
    std::fill(dst, dst + v_dim, 0.0f);
    if (mx == -std::numeric_limits<float>::infinity()) continue;  // no slot at all
    float sum = 0;
    for (int64_t c = 0; c < n_parts; ++c) {
      const float mc = m[c * n_head + h];
      if (mc == -std::numeric_limits<float>::infinity()) continue;  // an empty part
      const float f = std::exp(mc - mx);
      sum += f * l[c * n_head + h];
      const float* src = o + (c * n_head + h) * v_dim;
      for (int32_t d = 0; d < v_dim; ++d) dst[d] += f * src[d];
    }
    const float inv = 1.0f / sum;
    for (int32_t d = 0; d < v_dim; ++d) dst[d] *= inv;
  }
}

}  // namespace kvforge::kernels
