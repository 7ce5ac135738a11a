#include "kvquant/nuq_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "base/strings.h"

namespace kvforge::kvquant {
namespace {

constexpr double kLowerQuantile = 0.005;  // KVQuant --sparsity-threshold 0.99
constexpr double kUpperQuantile = 0.995;

// Linear-interpolated quantile of v (reordered).
float Quantile(std::vector<float>* v, double q) {
  const double pos = q * static_cast<double>(v->size() - 1);
  const size_t i = static_cast<size_t>(pos);
  std::nth_element(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(i), v->end());
  const float a = (*v)[i];
  if (i + 1 >= v->size()) return a;
  const float b = *std::min_element(v->begin() + static_cast<std::ptrdiff_t>(i) + 1, v->end());
  return a + static_cast<float>(pos - static_cast<double>(i)) * (b - a);
}

float Finite(float x) { return std::isfinite(x) ? x : 0.0f; }

void UniformLut(float* lut) {
  std::vector<float> none;
  NuqFitLut(&none, lut);
}

}  // namespace

NuqCalibration::NuqCalibration(int64_t n_layers, int64_t values)
    : values_(values),
      key_(static_cast<size_t>(n_layers)),
      value_(static_cast<size_t>(n_layers)),
      calibrated_(static_cast<size_t>(n_layers), 0) {
  for (size_t l = 0; l < key_.size(); ++l) {
    key_[l].center.assign(static_cast<size_t>(values), 0.0f);
    key_[l].radius.assign(static_cast<size_t>(values), 1.0f);
    UniformLut(key_[l].lut);
    UniformLut(value_[l].lut);
  }
}

void NuqCalibration::Calibrate(int64_t layer, const float* k, const float* v, int64_t n_tokens,
                               int64_t stride) {
  if (n_tokens < 1) return;
  const size_t n = static_cast<size_t>(n_tokens);
  if (k != nullptr) {
    NuqLayer& kl = key_[static_cast<size_t>(layer)];
    std::vector<float> col(n), z;
    z.reserve(n * static_cast<size_t>(values_));
    for (int64_t ch = 0; ch < values_; ++ch) {
      for (size_t t = 0; t < n; ++t) col[t] = Finite(k[static_cast<int64_t>(t) * stride + ch]);
      const float lo = Quantile(&col, kLowerQuantile);
      const float hi = Quantile(&col, kUpperQuantile);
      const float c = 0.5f * (lo + hi);
      // A constant channel (or a one-token batch) still needs a positive radius: at least a
      // thousandth of the channel's magnitude, and never below 1e-6.
      const float r = std::max({0.5f * (hi - lo), 1e-3f * std::fabs(c), 1e-6f});
      kl.center[static_cast<size_t>(ch)] = c;
      kl.radius[static_cast<size_t>(ch)] = r;
      for (size_t t = 0; t < n; ++t) {
        const float zi = (Finite(k[static_cast<int64_t>(t) * stride + ch]) - c) / r;
        if (std::fabs(zi) <= 1.0f) z.push_back(zi);
      }
    }
    NuqFitLut(&z, kl.lut);
  }
  if (v != nullptr) {
    std::vector<float> z;
    z.reserve(n * static_cast<size_t>(values_));
    std::vector<std::pair<float, int64_t>> outliers;
    std::vector<uint8_t> is_out(static_cast<size_t>(values_));
    for (size_t t = 0; t < n; ++t) {
      const float* row = v + static_cast<int64_t>(t) * stride;
      const NuqValueRange range = NuqValueRowRange(row, values_, &outliers);
      std::fill(is_out.begin(), is_out.end(), 0);
      for (const auto& o : outliers) is_out[static_cast<size_t>(o.second)] = 1;
      if (!(range.radius > 0.0f)) continue;
      for (int64_t ch = 0; ch < values_; ++ch)
        if (!is_out[static_cast<size_t>(ch)]) z.push_back(NuqValueZ(range, row[ch]));
    }
    NuqFitLut(&z, value_[static_cast<size_t>(layer)].lut);
  }
  calibrated_[static_cast<size_t>(layer)] = 1;
}

void NuqCalibration::Freeze() { std::fill(calibrated_.begin(), calibrated_.end(), 1); }

Status NuqCalibration::Save(const std::string& path) const {
  std::string out = base::StrFormat("kvforge-kvquant-calib 1\nlayers %lld values %lld\n",
                                    (long long)n_layers(), (long long)values_);
  auto line = [&](const char* tag, int64_t l, const float* x, int64_t n) {
    out += base::StrFormat("%s %lld", tag, (long long)l);
    for (int64_t i = 0; i < n; ++i) out += base::StrFormat(" %.9g", x[i]);
    out += "\n";
  };
  for (int64_t l = 0; l < n_layers(); ++l) {
    const NuqLayer& k = key(l);
    line("kc", l, k.center.data(), values_);
    line("kr", l, k.radius.data(), values_);
    line("klut", l, k.lut, kNuqLevels);
    line("vlut", l, value(l).lut, kNuqLevels);
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IoError("cannot write kvquant calibration to " + path);
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok)
    return Status::IoError("cannot write kvquant calibration to " + path);
  return Status::Ok();
}

Result<NuqCalibration> NuqCalibration::Load(const std::string& path, int64_t n_layers,
                                            int64_t values) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read kvquant calibration file " + path);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("kvquant calibration file " + path + ": " + why);
  };
  std::string magic, w1, w2;
  int version = 0;
  long long layers = 0, width = 0;
  if (!(in >> magic >> version) || magic != "kvforge-kvquant-calib" || version != 1)
    return bad("not a kvforge-kvquant-calib version 1 file");
  if (!(in >> w1 >> layers >> w2 >> width) || w1 != "layers" || w2 != "values")
    return bad("bad header line");
  if (layers != n_layers || width != values)
    return bad(
        base::StrFormat("made for %lld layers x %lld K/V channels, the model has %lld x %lld",
                        layers, width, (long long)n_layers, (long long)values));
  NuqCalibration c(n_layers, values);
  std::vector<uint8_t> seen(static_cast<size_t>(4 * n_layers), 0);
  const char* tags[] = {"kc", "kr", "klut", "vlut"};
  std::string tag;
  long long layer = 0;
  while (in >> tag) {
    const int kind = static_cast<int>(std::find(tags, tags + 4, tag) - tags);
    if (!(in >> layer) || kind == 4 || layer < 0 || layer >= n_layers)
      return bad("bad line '" + tag + " " + std::to_string(layer) + "'");
    NuqLayer& k = c.key_[static_cast<size_t>(layer)];
    float* dst = kind == 0   ? k.center.data()
                 : kind == 1 ? k.radius.data()
                 : kind == 2 ? k.lut
                             : c.value_[static_cast<size_t>(layer)].lut;
    const int64_t count = kind < 2 ? values : kNuqLevels;
    for (int64_t i = 0; i < count; ++i) {
      float x = 0;
      if (!(in >> x) || !std::isfinite(x) || (kind == 1 && !(x > 0.0f)) ||
          (kind >= 2 && (x < -1.5f || x > 1.5f || (i > 0 && !(x > dst[i - 1])))))
        return bad("bad number in '" + tag + " " + std::to_string(layer) +
                   "' (radii positive, tables ascending within [-1.5, 1.5])");
      dst[i] = x;
    }
    seen[static_cast<size_t>(4 * layer + kind)] = 1;
  }
  if (!in.eof()) return bad("trailing garbage");
  if (std::find(seen.begin(), seen.end(), 0) != seen.end())
    return bad("every layer needs kc, kr, klut and vlut lines");
  c.Freeze();
  return c;
}

}  // namespace kvforge::kvquant
