#include "kvquant/fp8_scales.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/strings.h"

namespace kvforge::kvquant {
namespace {

// amax over heads [h0, h1) of n_tokens rows.
float AbsMax(const float* x, int64_t n_tokens, int64_t stride, int64_t begin, int64_t end) {
  float m = 0.0f;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(x[t * stride + i]));
  return m;
}

float ScaleFor(float amax, float divisor) {
  // Non-finite or zero statistics would poison every later token: keep 1.0 instead.
  return (amax > 0.0f && std::isfinite(amax)) ? amax / divisor : 1.0f;
}

}  // namespace

Fp8Scales::Fp8Scales(int64_t n_layers, int64_t n_heads, bool per_head)
    : n_layers_(n_layers),
      n_heads_(n_heads),
      per_head_(per_head),
      k_(static_cast<size_t>(n_layers * n_heads), 1.0f),
      v_(k_.size(), 1.0f),
      calibrated_(static_cast<size_t>(n_layers), 0) {}

void Fp8Scales::Calibrate(int64_t layer, const float* k, const float* v, int64_t n_tokens,
                          int64_t head_dim, int64_t stride) {
  float* ks = k_.data() + layer * n_heads_;
  float* vs = v_.data() + layer * n_heads_;
  if (per_head_) {
    for (int64_t h = 0; h < n_heads_; ++h) {
      ks[h] =
          ScaleFor(AbsMax(k, n_tokens, stride, h * head_dim, (h + 1) * head_dim), kKeyScaleDivisor);
      vs[h] = ScaleFor(AbsMax(v, n_tokens, stride, h * head_dim, (h + 1) * head_dim),
                       kValueScaleDivisor);
    }
  } else {
    const float sk =
        ScaleFor(AbsMax(k, n_tokens, stride, 0, n_heads_ * head_dim), kKeyScaleDivisor);
    const float sv =
        ScaleFor(AbsMax(v, n_tokens, stride, 0, n_heads_ * head_dim), kValueScaleDivisor);
    std::fill(ks, ks + n_heads_, sk);
    std::fill(vs, vs + n_heads_, sv);
  }
  calibrated_[static_cast<size_t>(layer)] = 1;
}

void Fp8Scales::Freeze() { std::fill(calibrated_.begin(), calibrated_.end(), 1); }

Status Fp8Scales::Save(const std::string& path) const {
  std::string out = base::StrFormat("kvforge-kv-scales 1\nlayers %lld heads %lld per_head %d\n",
                                    (long long)n_layers_, (long long)n_heads_, per_head_ ? 1 : 0);
  const int64_t per_line = per_head_ ? n_heads_ : 1;
  for (int kind = 0; kind < 2; ++kind) {
    for (int64_t l = 0; l < n_layers_; ++l) {
      out += base::StrFormat("%c %lld", kind == 0 ? 'k' : 'v', (long long)l);
      const float* s = kind == 0 ? key(l) : value(l);
      for (int64_t h = 0; h < per_line; ++h) out += base::StrFormat(" %.9g", s[h]);
      out += "\n";
    }
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::IoError("cannot write KV scales to " + path);
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  if (std::fclose(f) != 0 || !ok) return Status::IoError("cannot write KV scales to " + path);
  return Status::Ok();
}

Result<Fp8Scales> Fp8Scales::Load(const std::string& path, int64_t n_layers, int64_t n_heads) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read KV scales file " + path);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("KV scales file " + path + ": " + why);
  };
  std::string magic, w1, w2, w3;
  int version = 0, per_head = 0;
  long long layers = 0, heads = 0;
  if (!(in >> magic >> version) || magic != "kvforge-kv-scales" || version != 1)
    return bad("not a kvforge-kv-scales version 1 file");
  if (!(in >> w1 >> layers >> w2 >> heads >> w3 >> per_head) || w1 != "layers" || w2 != "heads" ||
      w3 != "per_head" || (per_head != 0 && per_head != 1))
    return bad("bad header line");
  if (layers != n_layers || heads != n_heads)
    return bad(base::StrFormat("made for %lld layers x %lld KV heads, the model has %lld x %lld",
                               layers, heads, (long long)n_layers, (long long)n_heads));
  Fp8Scales s(n_layers, n_heads, per_head == 1);
  std::vector<uint8_t> seen(static_cast<size_t>(2 * n_layers), 0);
  const int64_t per_line = per_head ? n_heads : 1;
  std::string kind;
  long long layer = 0;
  while (in >> kind >> layer) {
    if ((kind != "k" && kind != "v") || layer < 0 || layer >= n_layers)
      return bad("bad line for '" + kind + " " + std::to_string(layer) + "'");
    float* dst = (kind == "k" ? s.k_.data() : s.v_.data()) + layer * n_heads;
    for (int64_t h = 0; h < per_line; ++h) {
      float x = 0;
      if (!(in >> x) || !(x > 0.0f) || !std::isfinite(x))
        return bad("scales must be positive finite numbers (" + kind + " " + std::to_string(layer) +
                   ")");
      dst[h] = x;
    }
    if (!per_head) std::fill(dst + 1, dst + n_heads, dst[0]);
    seen[static_cast<size_t>((kind == "k" ? 0 : n_layers) + layer)] = 1;
  }
  if (!in.eof()) return bad("trailing garbage");
  if (std::find(seen.begin(), seen.end(), 0) != seen.end())
    return bad("every layer needs a k and a v line");
  s.Freeze();
  return s;
}

}  // namespace kvforge::kvquant
