// kvquant/turbo.h — TurboQuant-style KV rows (kv-methods A6; arXiv 2504.19874), dtypes turbo3 and
// turbo4.
//
// TurboQuant-mse, per KV head of d values x: store ||x|| (f16) and quantize the unit vector
// u = x / ||x|| after a fixed random rotation Pi: every coordinate of Pi u follows the density
// f_d(t) ∝ (1 - t^2)^((d-3)/2) on [-1, 1] whatever u is, so one scalar Lloyd-Max codebook of 2^b
// centroids for f_d serves every coordinate, token, head and layer. Decode: x^ = ||x|| Pi^T
// C[code].
//
// TurboQuant-prod (keys only, option turbo_qjl): (b-1)-bit mse codes, then a 1-bit QJL sketch of
// the residual. We sketch in the ROTATED domain: r' = Pi x - ||x||_f16 C[code] (= Pi r), signs
// s = sign(S r') with S a d x d i.i.d. N(0, 1) matrix, plus ||r'|| (f16). Since S Pi is again
// i.i.d. Gaussian this is the paper's sketch of r. Estimate:
//   <y, x> ≈ ||x|| <Pi y, C[code]> + sqrt(pi/2) / d * ||r|| * <S Pi y, s>,
// unbiased over S (E[sign(s.r) s.z] = sqrt(2/pi) <r, z> / ||r|| for s ~ N(0, I)).
//
// Row format (one token, n_heads heads of d values), see also row_codec.h:
//   [codes]  n_heads * d codes of code_bits bits, one little-endian bit stream over the row (head h
//            starts at bit h * d * code_bits), padded to a byte;
//   [signs]  QJL only: n_heads * d sign bits (1 = +1), one bit stream, padded to a byte;
//   [meta]   per head: f16 ||x||, then (QJL only) f16 ||r||.
// With d a multiple of 8 every head's codes and signs start on a byte, which the AVX2 kernel uses.
//
// Pi and S are generated from fixed seeds by a deterministic generator (splitmix64, Box-Muller and
// modified Gram-Schmidt in double): they are part of the cache format, versioned by
// kTurboFormatVersion. Codebooks are computed numerically (double) at first use. Everything is
// cached per (bits, d, qjl) in a process-wide registry, built once under a mutex and never freed.
//
// Non-finite inputs: NaN and +-inf components are encoded as 0 (a single NaN would otherwise spread
// through the rotation to the whole head); norms above the f16 range saturate at 65504.
// A zero (or f16-underflowing) head stores norm 0 and decodes to exact zeros.
// Thread-safety: TurboFor is thread-safe; specs are immutable once returned.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::kvquant {

// Bump when the seeds, the generator or the row format change: cached bytes of another version
// decode to garbage.
inline constexpr int kTurboFormatVersion = 1;
inline constexpr uint64_t kTurboRotationSeed = 0x74757262'6f000001ULL;  // "turbo" v1
inline constexpr uint64_t kTurboSketchSeed = 0x716a6c00'00000001ULL;    // "qjl" v1
// f_d is a density for d >= 2 (the arcsine law at d = 2); the cap bounds the O(d^3) set-up.
inline constexpr int64_t kTurboMinHeadDim = 2;
inline constexpr int64_t kTurboMaxHeadDim = 1024;

struct TurboSpec {
  int bits = 0;       // nominal bits per value: 3 or 4
  int code_bits = 0;  // bits of an mse code: bits, or bits - 1 with QJL
  bool qjl = false;
  int64_t head_dim = 0;
  std::vector<float> rotation;     // Pi, d x d row-major: (Pi x)_i = sum_j rotation[i*d + j] x_j
  std::vector<float> centroids;    // 2^code_bits, ascending, symmetric about 0
  std::vector<float> boundaries;   // 2^code_bits - 1 cell boundaries (midpoints)
  alignas(32) float lut[16] = {};  // centroids padded with zeros, for 8/16-entry SIMD lookups
  std::vector<float> sketch;       // S, d x d row-major (QJL only)
  float qjl_scale = 0.0f;          // sqrt(pi/2) / d
};

// The spec for `bits` (3 or 4), head width d and the QJL option. InvalidArgument for other bits or
// d outside [kTurboMinHeadDim, kTurboMaxHeadDim]. The pointer stays valid for the process.
Result<const TurboSpec*> TurboFor(int bits, int64_t head_dim, bool qjl);

// Row layout of n_heads heads.
int64_t TurboCodeBytes(const TurboSpec& s, int64_t n_heads);
int64_t TurboSignBytes(const TurboSpec& s, int64_t n_heads);
int64_t TurboMetaBytes(const TurboSpec& s, int64_t n_heads);
inline int64_t TurboRowBytes(const TurboSpec& s, int64_t n_heads) {
  return TurboCodeBytes(s, n_heads) + TurboSignBytes(s, n_heads) + TurboMetaBytes(s, n_heads);
}
// Offset of head h's metadata (f16 norm, then f16 residual norm with QJL).
inline int64_t TurboMetaOffset(const TurboSpec& s, int64_t n_heads, int64_t h) {
  return TurboCodeBytes(s, n_heads) + TurboSignBytes(s, n_heads) + h * (s.qjl ? 4 : 2);
}

// Encodes n_heads heads of d floats into TurboRowBytes bytes.
void TurboEncodeRow(const TurboSpec& s, const float* x, int64_t n_heads, uint8_t* dst);
// Decodes head h of a row into out[d] (original domain, QJL correction included).
void TurboDecodeHead(const TurboSpec& s, const uint8_t* row, int64_t n_heads, int64_t h,
                     float* out);
// Code i of a code bit stream (codes may straddle bytes: 3-bit codes).
inline uint32_t TurboCode(const uint8_t* src, int64_t i, int bits) {
  const int64_t bit = i * bits;
  uint32_t v = src[bit >> 3];
  if ((bit & 7) + bits > 8) v |= static_cast<uint32_t>(src[(bit >> 3) + 1]) << 8;
  return (v >> (bit & 7)) & ((1u << bits) - 1);
}

// Building blocks, exposed for tests (seeds as parameters so a test can draw many matrices).
namespace turbo_internal {
// rows x cols i.i.d. N(0, 1), row-major, from splitmix64 + Box-Muller.
std::vector<double> GaussianMatrix(int64_t rows, int64_t cols, uint64_t seed);
// A d x d orthogonal matrix (row-major): modified Gram-Schmidt (twice) of a Gaussian matrix.
std::vector<double> RandomRotation(int64_t d, uint64_t seed);
struct Codebook {
  std::vector<double> centroids;   // ascending
  std::vector<double> boundaries;  // midpoints of neighbouring centroids
  double mse = 0.0;                // E[(t - Q(t))^2] for one coordinate under f_d
};
// Lloyd-Max codebook of 2^bits levels for f_d (d >= 2), computed on a fine grid in theta, where
// t = cos(theta) has the smooth density ∝ sin^(d-2)(theta) on [0, pi].
Codebook LloydMax(int64_t d, int bits);
// A fresh spec with the given seeds (TurboFor uses kTurboRotationSeed / kTurboSketchSeed).
std::unique_ptr<TurboSpec> MakeSpec(int bits, int64_t d, bool qjl, uint64_t rotation_seed,
                                    uint64_t sketch_seed);
}  // namespace turbo_internal

}  // namespace kvforge::kvquant
