#include "kvquant/nuq.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"

namespace kvforge::kvquant {
namespace {

void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void PackCodes3(const uint8_t* codes, int64_t n, uint8_t* dst) {
  for (int64_t g = 0; g < n / 8; ++g) {
    uint32_t bits = 0;
    for (int j = 0; j < 8; ++j) bits |= static_cast<uint32_t>(codes[8 * g + j] & 7) << (3 * j);
    dst[3 * g] = static_cast<uint8_t>(bits);
    dst[3 * g + 1] = static_cast<uint8_t>(bits >> 8);
    dst[3 * g + 2] = static_cast<uint8_t>(bits >> 16);
  }
}

inline int Code3(const uint8_t* codes, int64_t i) {
  const uint8_t* g = codes + 3 * (i >> 3);
  const uint32_t bits =
      g[0] | (static_cast<uint32_t>(g[1]) << 8) | (static_cast<uint32_t>(g[2]) << 16);
  return static_cast<int>((bits >> (3 * (i & 7))) & 7);
}

// Writes the codes of z (already clamped to [-1, 1]) and the outlier slots.
void WriteRow(const float* z, int64_t values, const float* lut,
              std::vector<std::pair<float, int64_t>> outliers, const float* x, int64_t slots,
              uint8_t* dst) {
  // Ascending channels, so a decoder of one head stops at the first slot past it.
  std::sort(outliers.begin(), outliers.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  uint8_t codes[256];
  uint8_t* out = dst;
  for (int64_t i0 = 0; i0 < values; i0 += 256) {
    const int64_t n = std::min<int64_t>(256, values - i0);
    for (int64_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(NuqNearest(lut, z[i0 + i]));
    PackCodes3(codes, n, out);
    out += n / 8 * 3;
  }
  for (int64_t s = 0; s < slots; ++s) {
    uint8_t* slot = out + 4 * s;
    if (s < static_cast<int64_t>(outliers.size())) {
      const int64_t i = outliers[static_cast<size_t>(s)].second;
      StoreU16(slot, static_cast<uint16_t>(i));
      StoreU16(slot + 2, Fp32ToFp16(x[i]));
    } else {
      StoreU16(slot, kNuqNoOutlier);
      StoreU16(slot + 2, 0);
    }
  }
}

// Keeps the `slots` candidates of largest score; ties go to the lower channel.
void KeepLargest(std::vector<std::pair<float, int64_t>>* cand, int64_t slots) {
  auto by_score = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (static_cast<int64_t>(cand->size()) > slots) {
    std::nth_element(cand->begin(), cand->begin() + slots, cand->end(), by_score);
    cand->resize(static_cast<size_t>(slots));
  }
  std::sort(cand->begin(), cand->end(), by_score);
}

float Finite(float x) { return std::isfinite(x) ? x : 0.0f; }

}  // namespace

int64_t NuqOutlierSlots(int64_t values, bool key) {
  return key ? (values * 2 + 99) / 100 : (values + 99) / 100;
}
int64_t NuqCodeBytes(int64_t values) { return values * 3 / 8; }
int64_t NuqScaleBytes(int64_t values, bool key) {
  return 4 * NuqOutlierSlots(values, key) + (key ? 0 : 4);
}
int64_t NuqRowBytes(int64_t values, bool key) {
  return NuqCodeBytes(values) + NuqScaleBytes(values, key);
}

int NuqNearest(const float* lut, float z) {
  int best = 0;
  // The table is ascending: the nearest centroid is the last one whose midpoint with its left
  // neighbour lies at or below z.
  for (int c = 1; c < kNuqLevels; ++c)
    if (z >= 0.5f * (lut[c - 1] + lut[c])) best = c;
  return best;
}

RopeTable::RopeTable(int32_t head_dim, int32_t rot_dim, float freq_base, float freq_scale,
                     bool neox, std::vector<float> freq_factors)
    : head_dim_(head_dim),
      rot_dim_(rot_dim),
      freq_scale_(freq_scale),
      theta_scale_(std::pow(freq_base, -2.0f / static_cast<float>(rot_dim))),
      neox_(neox),
      freq_factors_(std::move(freq_factors)) {}

void RopeTable::Reserve(int64_t n) {
  if (n <= positions_) return;
  const int32_t half = rot_dim_ / 2;
  const int64_t target = std::max<int64_t>(n, positions_ * 2);
  cs_.resize(static_cast<size_t>(target * 2 * rot_dim_));
  for (int64_t p = positions_; p < target; ++p) {
    float theta = static_cast<float>(p) * freq_scale_;
    float* c = cs_.data() + p * 2 * rot_dim_;
    float* s = c + rot_dim_;
    for (int32_t k = 0; k < half; ++k) {
      const float t = freq_factors_.empty() ? theta : theta / freq_factors_[static_cast<size_t>(k)];
      const float cv = std::cos(t), sv = std::sin(t);
      const int32_t i0 = neox_ ? k : 2 * k;
      const int32_t i1 = neox_ ? k + half : 2 * k + 1;
      c[i0] = c[i1] = cv;
      s[i0] = -sv;  // rotated[i0] = x[i0] cos - x[i1] sin
      s[i1] = sv;   // rotated[i1] = x[i1] cos + x[i0] sin
      theta *= theta_scale_;
    }
  }
  positions_ = target;
}

void RopeTable::Apply(float* v, int64_t pos, bool inverse) const {
  KVF_DCHECK(pos >= 0 && pos < positions_);
  const int32_t half = rot_dim_ / 2;
  const float* c = Cos(pos);
  const float* s = Sin(pos);
  const float sign = inverse ? -1.0f : 1.0f;
  for (int32_t k = 0; k < half; ++k) {
    const int32_t i0 = neox_ ? k : 2 * k;
    const int32_t i1 = neox_ ? k + half : 2 * k + 1;
    const float a = v[i0], b = v[i1];
    v[i0] = a * c[i0] + b * (sign * s[i0]);
    v[i1] = b * c[i1] + a * (sign * s[i1]);
  }
}

void NuqEncodeKeyRow(const float* x, int64_t values, const NuqLayer& layer, uint8_t* dst) {
  const int64_t slots = NuqOutlierSlots(values, true);
  std::vector<float> z(static_cast<size_t>(values));
  std::vector<std::pair<float, int64_t>> cand;
  for (int64_t i = 0; i < values; ++i) {
    const float zi = Finite((x[i] - layer.center[i]) / layer.radius[i]);
    if (std::fabs(zi) > 1.0f && std::isfinite(x[i])) cand.emplace_back(std::fabs(zi), i);
    z[static_cast<size_t>(i)] = std::clamp(zi, -1.0f, 1.0f);
  }
  KeepLargest(&cand, slots);
  WriteRow(z.data(), values, layer.lut, cand, x, slots, dst);
}

NuqValueRange NuqValueRowRange(const float* x, int64_t values,
                               std::vector<std::pair<float, int64_t>>* outliers) {
  const int64_t slots = NuqOutlierSlots(values, false);
  std::vector<float> sorted(static_cast<size_t>(values));
  for (int64_t i = 0; i < values; ++i) sorted[static_cast<size_t>(i)] = Finite(x[i]);
  std::nth_element(sorted.begin(), sorted.begin() + values / 2, sorted.end());
  const float median = sorted[static_cast<size_t>(values / 2)];
  // The `slots` values farthest from the median are the outliers; the range covers the rest.
  std::vector<std::pair<float, int64_t>>& cand = *outliers;
  cand.clear();
  for (int64_t i = 0; i < values; ++i) cand.emplace_back(std::fabs(Finite(x[i]) - median), i);
  KeepLargest(&cand, slots);
  std::vector<uint8_t> is_out(static_cast<size_t>(values), 0);
  for (const auto& o : cand) is_out[static_cast<size_t>(o.second)] = 1;
  float lo = median, hi = median;
  for (int64_t i = 0; i < values; ++i) {
    if (is_out[static_cast<size_t>(i)]) continue;
    lo = std::min(lo, Finite(x[i]));
    hi = std::max(hi, Finite(x[i]));
  }
  NuqValueRange range;
  range.center_f16 = Fp32ToFp16(0.5f * (lo + hi));
  // Round the radius up so the f16 range still covers every inlier.
  range.radius_f16 = Fp32ToFp16(0.5f * (hi - lo));
  range.center = Fp16ToFp32(range.center_f16);
  if (Fp16ToFp32(range.radius_f16) < std::max(hi - range.center, range.center - lo) &&
      range.radius_f16 < 0x7BFF)
    ++range.radius_f16;
  range.radius = Fp16ToFp32(range.radius_f16);
  return range;
}

float NuqValueZ(const NuqValueRange& range, float x) {
  return range.radius > 0.0f
             ? std::clamp(Finite((Finite(x) - range.center) / range.radius), -1.0f, 1.0f)
             : 0.0f;
}

void NuqEncodeValueRow(const float* x, int64_t values, const NuqLayer& layer, uint8_t* dst) {
  const int64_t slots = NuqOutlierSlots(values, false);
  std::vector<std::pair<float, int64_t>> outliers;
  const NuqValueRange range = NuqValueRowRange(x, values, &outliers);
  std::vector<float> z(static_cast<size_t>(values)), xs(static_cast<size_t>(values));
  for (int64_t i = 0; i < values; ++i) {
    xs[static_cast<size_t>(i)] = Finite(x[i]);
    z[static_cast<size_t>(i)] = NuqValueZ(range, x[i]);
  }
  WriteRow(z.data(), values, layer.lut, outliers, xs.data(), slots, dst);
  uint8_t* tail = dst + NuqCodeBytes(values) + 4 * slots;
  StoreU16(tail, range.center_f16);
  StoreU16(tail + 2, range.radius_f16);
}

void NuqDecode(const uint8_t* row, int64_t values, bool key, const NuqLayer& layer, int64_t begin,
               int64_t count, float* out, const RopeTable* rope, int64_t pos) {
  const int64_t slots = NuqOutlierSlots(values, key);
  const uint8_t* slot = row + NuqCodeBytes(values);
  if (key) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t ch = begin + i;
      out[i] = layer.lut[Code3(row, ch)] * layer.radius[ch] + layer.center[ch];
    }
  } else {
    const uint8_t* tail = slot + 4 * slots;
    const float c = Fp16ToFp32(LoadU16(tail)), r = Fp16ToFp32(LoadU16(tail + 2));
    for (int64_t i = 0; i < count; ++i) out[i] = layer.lut[Code3(row, begin + i)] * r + c;
  }
  for (int64_t s = 0; s < slots; ++s) {
    const uint16_t idx = LoadU16(slot + 4 * s);
    if (idx >= begin + count) break;  // ascending channels; unused slots (0xFFFF) last
    if (idx >= begin) out[idx - begin] = Fp16ToFp32(LoadU16(slot + 4 * s + 2));
  }
  if (key && rope) {
    const int64_t hd = rope->head_dim();
    KVF_DCHECK(begin % hd == 0 && count % hd == 0);
    for (int64_t h = 0; h < count; h += hd) rope->Apply(out + h, pos, false);
  }
}

void NuqFitLut(std::vector<float>* zs, float lut[kNuqLevels], int iters) {
  std::vector<float>& z = *zs;
  if (z.empty()) {
    for (int c = 0; c < kNuqLevels; ++c)
      lut[c] = -1.0f + (2.0f * static_cast<float>(c) + 1.0f) / kNuqLevels;
    return;
  }
  std::sort(z.begin(), z.end());
  const size_t n = z.size();
  // Prefix sums (double) make each Lloyd step O(levels * log n) once the data are sorted.
  std::vector<double> prefix(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + z[i];
  double c[kNuqLevels];
  for (int k = 0; k < kNuqLevels; ++k)
    c[k] = z[std::min(n - 1, static_cast<size_t>((2.0 * k + 1.0) / (2.0 * kNuqLevels) * n))];
  for (int it = 0; it < iters; ++it) {
    size_t lo = 0;
    bool moved = false;
    for (int k = 0; k < kNuqLevels; ++k) {
      size_t hi = n;
      if (k + 1 < kNuqLevels) {
        const float mid = static_cast<float>(0.5 * (c[k] + c[k + 1]));
        hi = static_cast<size_t>(std::lower_bound(z.begin() + lo, z.end(), mid) - z.begin());
      }
      if (hi > lo) {
        const double mean = (prefix[hi] - prefix[lo]) / static_cast<double>(hi - lo);
        if (mean != c[k]) moved = true;
        c[k] = mean;
      }
      lo = hi;
    }
    // An empty cell keeps its centroid; keep the table sorted and strictly increasing.
    std::sort(c, c + kNuqLevels);
    if (!moved) break;
  }
  for (int k = 0; k < kNuqLevels; ++k) lut[k] = static_cast<float>(c[k]);
  for (int k = 1; k < kNuqLevels; ++k)
    if (!(lut[k] > lut[k - 1])) lut[k] = std::nextafter(lut[k - 1], 2.0f);
}

}  // namespace kvforge::kvquant
