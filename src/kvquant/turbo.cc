#include "kvquant/turbo.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <numbers>
#include <tuple>

#include "base/fp16.h"
#include "base/strings.h"

namespace kvforge::kvquant {
namespace turbo_internal {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in (0, 1): 53 random bits, offset by half a step so log() never sees 0.
double Uniform(uint64_t& state) {
  return (static_cast<double>(SplitMix64(state) >> 11) + 0.5) * 0x1.0p-53;
}

// Grid resolution in theta for the codebook integrals: with the pro-rata boundary cells below,
// 2^18 cells keep every centroid well within 1e-6 of the exact conditional mean for d <= 1024.
constexpr int64_t kGrid = int64_t{1} << 18;

}  // namespace

std::vector<double> GaussianMatrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<double> m(static_cast<size_t>(rows * cols));
  uint64_t state = seed;
  for (size_t i = 0; i < m.size(); i += 2) {
    // Box-Muller: two independent normals per pair of uniforms.
    const double r = std::sqrt(-2.0 * std::log(Uniform(state)));
    const double a = 2.0 * std::numbers::pi * Uniform(state);
    m[i] = r * std::cos(a);
    if (i + 1 < m.size()) m[i + 1] = r * std::sin(a);
  }
  return m;
}

std::vector<double> RandomRotation(int64_t d, uint64_t seed) {
  std::vector<double> q = GaussianMatrix(d, d, seed);
  const size_t n = static_cast<size_t>(d);
  // Rows are orthonormalized in order; a second pass removes the rounding left by the first, so
  // Pi Pi^T = I to ~1e-15 in double (before the cast to float).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < n; ++i) {
      double* qi = q.data() + i * n;
      for (size_t j = 0; j < i; ++j) {
        const double* qj = q.data() + j * n;
        double dot = 0;
        for (size_t k = 0; k < n; ++k) dot += qi[k] * qj[k];
        for (size_t k = 0; k < n; ++k) qi[k] -= dot * qj[k];
      }
      double norm = 0;
      for (size_t k = 0; k < n; ++k) norm += qi[k] * qi[k];
      norm = std::sqrt(norm);
      for (size_t k = 0; k < n; ++k) qi[k] /= norm;
    }
  }
  return q;
}

Codebook LloydMax(int64_t d, int bits) {
  const size_t levels = size_t{1} << bits;
  const size_t n = static_cast<size_t>(kGrid);
  // Cell k of a uniform grid in theta covers t in [edge[k], edge[k + 1]] (ascending) and has
  // weight w_k = sin^(d-2)(theta_k) * dtheta at its midpoint. Prefix sums of w, w * t, w * t^2
  // give any interval's moments in O(log n); the grid cell a boundary cuts counts pro rata (as if
  // its weight were uniform in t), so the moments are smooth in the boundaries and the iteration
  // converges instead of hopping between grid points.
  std::vector<double> edge(n + 1), c0(n + 1, 0.0), c1(n + 1, 0.0), c2(n + 1, 0.0);
  for (size_t k = 0; k <= n; ++k)
    edge[k] = -std::cos(std::numbers::pi * static_cast<double>(k) / static_cast<double>(n));
  edge[0] = -1.0;
  edge[n] = 1.0;
  for (size_t k = 0; k < n; ++k) {
    const double theta =
        std::numbers::pi * (static_cast<double>(n - k) - 0.5) / static_cast<double>(n);
    const double w = d == 2 ? 1.0 : std::pow(std::sin(theta), static_cast<double>(d - 2));
    const double t = std::cos(theta);
    c0[k + 1] = c0[k] + w;
    c1[k + 1] = c1[k] + w * t;
    c2[k + 1] = c2[k] + w * t * t;
  }
  struct Moments {
    double m0, m1, m2;
  };
  // Moments of the distribution over [-1, b].
  auto below = [&](double b) -> Moments {
    if (b <= -1.0) return {0, 0, 0};
    if (b >= 1.0) return {c0[n], c1[n], c2[n]};
    size_t k = static_cast<size_t>(std::upper_bound(edge.begin(), edge.end(), b) - edge.begin());
    k = std::clamp<size_t>(k, 1, n) - 1;
    const double frac = (b - edge[k]) / (edge[k + 1] - edge[k]);
    const double w = (c0[k + 1] - c0[k]) * frac, mid = 0.5 * (edge[k] + b);
    return {c0[k] + w, c1[k] + w * mid, c2[k] + w * mid * mid};
  };
  Codebook cb;
  cb.centroids.resize(levels);
  cb.boundaries.resize(levels - 1);
  std::vector<double> bounds(levels + 1);
  // Start from equal-mass cells (quantiles, by bisection), which are symmetric already.
  bounds[0] = -1.0;
  bounds[levels] = 1.0;
  for (size_t i = 1; i < levels; ++i) {
    double lo = -1.0, hi = 1.0;
    const double target = c0[n] * static_cast<double>(i) / static_cast<double>(levels);
    for (int it = 0; it < 200; ++it) {
      const double mid = 0.5 * (lo + hi);
      (below(mid).m0 < target ? lo : hi) = mid;
    }
    bounds[i] = 0.5 * (lo + hi);
  }
  auto centroids_from_bounds = [&] {
    for (size_t i = 0; i < levels; ++i) {
      const Moments a = below(bounds[i]), b = below(bounds[i + 1]);
      const double mass = b.m0 - a.m0;
      cb.centroids[i] = mass > 0 ? (b.m1 - a.m1) / mass : 0.5 * (bounds[i] + bounds[i + 1]);
    }
    // Enforce the symmetry of f_d exactly (the grid is symmetric only up to rounding).
    for (size_t i = 0; i < levels / 2; ++i) {
      const double c = 0.5 * (cb.centroids[levels - 1 - i] - cb.centroids[i]);
      cb.centroids[i] = -c;
      cb.centroids[levels - 1 - i] = c;
    }
  };
  centroids_from_bounds();
  for (int iter = 0; iter < 20000; ++iter) {
    for (size_t i = 1; i < levels; ++i) bounds[i] = 0.5 * (cb.centroids[i - 1] + cb.centroids[i]);
    const std::vector<double> old = cb.centroids;
    centroids_from_bounds();
    double change = 0;
    for (size_t i = 0; i < levels; ++i)
      change = std::max(change, std::fabs(old[i] - cb.centroids[i]));
    if (change < 1e-14) break;
  }
  for (size_t i = 0; i + 1 < levels; ++i)
    cb.boundaries[i] = 0.5 * (cb.centroids[i] + cb.centroids[i + 1]);
  // MSE = sum over cells of E[t^2] - 2 c E[t] + c^2 P.
  double mse = 0;
  for (size_t i = 0; i < levels; ++i) {
    const Moments a = below(i == 0 ? -1.0 : cb.boundaries[i - 1]);
    const Moments b = below(i + 1 == levels ? 1.0 : cb.boundaries[i]);
    const double c = cb.centroids[i];
    mse += (b.m2 - a.m2) - 2 * c * (b.m1 - a.m1) + c * c * (b.m0 - a.m0);
  }
  cb.mse = mse / c0[n];
  return cb;
}

std::unique_ptr<TurboSpec> MakeSpec(int bits, int64_t d, bool qjl, uint64_t rotation_seed,
                                    uint64_t sketch_seed) {
  auto s = std::make_unique<TurboSpec>();
  s->bits = bits;
  s->qjl = qjl;
  s->code_bits = qjl ? bits - 1 : bits;
  s->head_dim = d;
  const std::vector<double> rot = RandomRotation(d, rotation_seed);
  s->rotation.assign(rot.begin(), rot.end());
  const Codebook cb = LloydMax(d, s->code_bits);
  s->centroids.assign(cb.centroids.begin(), cb.centroids.end());
  s->boundaries.assign(cb.boundaries.begin(), cb.boundaries.end());
  std::copy(s->centroids.begin(), s->centroids.end(), s->lut);
  if (qjl) {
    const std::vector<double> sk = GaussianMatrix(d, d, sketch_seed);
    s->sketch.assign(sk.begin(), sk.end());
    s->qjl_scale = static_cast<float>(std::sqrt(std::numbers::pi / 2.0) / static_cast<double>(d));
  }
  return s;
}

}  // namespace turbo_internal

Result<const TurboSpec*> TurboFor(int bits, int64_t head_dim, bool qjl) {
  if (bits != 3 && bits != 4)
    return Status::InvalidArgument(base::StrFormat("turbo: %d bits (3 or 4 supported)", bits));
  if (head_dim < kTurboMinHeadDim || head_dim > kTurboMaxHeadDim)
    return Status::InvalidArgument(base::StrFormat(
        "turbo: head_dim %lld outside [%lld, %lld] (the rotated-coordinate density needs d >= 2)",
        (long long)head_dim, (long long)kTurboMinHeadDim, (long long)kTurboMaxHeadDim));
  // Never freed: kernels hold raw pointers into the specs for the life of the process.
  static std::mutex mu;
  static auto* registry = new std::map<std::tuple<int, int64_t, bool>, std::unique_ptr<TurboSpec>>;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*registry)[{bits, head_dim, qjl}];
  if (!slot)
    slot = turbo_internal::MakeSpec(bits, head_dim, qjl, kTurboRotationSeed, kTurboSketchSeed);
  return slot.get();
}

int64_t TurboCodeBytes(const TurboSpec& s, int64_t n_heads) {
  return (n_heads * s.head_dim * s.code_bits + 7) / 8;
}
int64_t TurboSignBytes(const TurboSpec& s, int64_t n_heads) {
  return s.qjl ? (n_heads * s.head_dim + 7) / 8 : 0;
}
int64_t TurboMetaBytes(const TurboSpec& s, int64_t n_heads) { return n_heads * (s.qjl ? 4 : 2); }

namespace {

// Dot product of two rows of n floats with 8 independent float partial sums, in a fixed order:
// vectorizable without -ffast-math, and the same bytes on every run (encoding must be
// deterministic for prefix caching). Float accuracy is ample next to 3- or 4-bit codes.
float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; ++u) acc[u] += a[j + u] * b[j + u];
  for (; j < n; ++j) acc[j & 7] += a[j] * b[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void SetBits(uint8_t* dst, int64_t bit, uint32_t value, int bits) {
  for (int k = 0; k < bits; ++k, ++bit)
    if ((value >> k) & 1u) dst[bit >> 3] = static_cast<uint8_t>(dst[bit >> 3] | (1u << (bit & 7)));
}

void StoreU16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }
float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

constexpr float kF16Max = 65504.0f;

}  // namespace

void TurboEncodeRow(const TurboSpec& s, const float* x, int64_t n_heads, uint8_t* dst) {
  const int64_t d = s.head_dim;
  std::memset(dst, 0, static_cast<size_t>(TurboRowBytes(s, n_heads)));
  uint8_t* signs = dst + TurboCodeBytes(s, n_heads);
  std::vector<float> xs(static_cast<size_t>(d)), y(static_cast<size_t>(d));
  std::vector<float> r(static_cast<size_t>(d));
  const int levels = 1 << s.code_bits;
  for (int64_t h = 0; h < n_heads; ++h) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) {
      const float v = x[h * d + i];
      xs[static_cast<size_t>(i)] = std::isfinite(v) ? v : 0.0f;
      ss += static_cast<double>(xs[static_cast<size_t>(i)]) * xs[static_cast<size_t>(i)];
    }
    const double norm = std::sqrt(ss);
    const uint16_t norm_h = Fp32ToFp16(static_cast<float>(std::min<double>(norm, kF16Max)));
    uint8_t* meta = dst + TurboMetaOffset(s, n_heads, h);
    StoreU16(meta, norm_h);
    const float nf = Fp16ToFp32(norm_h);
    if (!(nf > 0.0f)) continue;  // zero head: all codes 0, norms 0 -> decodes to zeros
    // y = Pi x (the rotated head); codes quantize y / ||x||.
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(i)] = Dot(s.rotation.data() + i * d, xs.data(), d);
    const float inv = static_cast<float>(1.0 / norm);
    for (int64_t i = 0; i < d; ++i) {
      const float u = y[static_cast<size_t>(i)] * inv;
      const int code = static_cast<int>(
          std::upper_bound(s.boundaries.begin(), s.boundaries.end(), u) - s.boundaries.begin());
      SetBits(dst, (h * d + i) * s.code_bits, static_cast<uint32_t>(std::min(code, levels - 1)),
              s.code_bits);
      // The residual against what decoding will reconstruct (the f16 norm, not the exact one).
      r[static_cast<size_t>(i)] =
          y[static_cast<size_t>(i)] - nf * s.centroids[static_cast<size_t>(code)];
    }
    if (!s.qjl) continue;
    double rs = 0;
    for (float v : r) rs += static_cast<double>(v) * v;
    StoreU16(meta + 2, Fp32ToFp16(static_cast<float>(std::min<double>(std::sqrt(rs), kF16Max))));
    for (int64_t j = 0; j < d; ++j)
      if (Dot(s.sketch.data() + j * d, r.data(), d) >= 0.0f) SetBits(signs, h * d + j, 1u, 1);
  }
}

void TurboDecodeHead(const TurboSpec& s, const uint8_t* row, int64_t n_heads, int64_t h,
                     float* out) {
  const int64_t d = s.head_dim;
  const uint8_t* meta = row + TurboMetaOffset(s, n_heads, h);
  const float nf = LoadF16(meta);
  std::vector<float> z(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i)
    z[static_cast<size_t>(i)] = nf * s.centroids[TurboCode(row, h * d + i, s.code_bits)];
  if (s.qjl) {
    // z += sqrt(pi/2)/d * ||r|| * S^T sign
    const uint8_t* signs = row + TurboCodeBytes(s, n_heads);
    const float c = s.qjl_scale * LoadF16(meta + 2);
    for (int64_t j = 0; j < d; ++j) {
      const int64_t bit = h * d + j;
      const float sj = ((signs[bit >> 3] >> (bit & 7)) & 1) ? c : -c;
      const float* srow = s.sketch.data() + j * d;
      for (int64_t i = 0; i < d; ++i) z[static_cast<size_t>(i)] += sj * srow[i];
    }
  }
  // out = Pi^T z
  for (int64_t j = 0; j < d; ++j) out[j] = 0.0f;
  for (int64_t i = 0; i < d; ++i) {
    const float zi = z[static_cast<size_t>(i)];
    const float* prow = s.rotation.data() + i * d;
    for (int64_t j = 0; j < d; ++j) out[j] += zi * prow[j];
  }
}

}  // namespace kvforge::kvquant
