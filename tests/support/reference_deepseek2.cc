#include "support/reference_deepseek2.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "tensor/dequant.h"

namespace kvforge::testing {
namespace {

using Vec = std::vector<double>;

Vec MatVec(const Vec& w, const Vec& x, int64_t rows, int64_t row0 = 0) {
  const auto cols = static_cast<int64_t>(x.size());
  Vec y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[static_cast<size_t>(r)] +=
          w[static_cast<size_t>((row0 + r) * cols + c)] * x[static_cast<size_t>(c)];
  return y;
}

Vec RmsNorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
  return y;
}

// Adjacent pairs (2k, 2k+1) of v rotate by pos * base^(-2k/n) / factor_k.
void RopePairs(double* v, int64_t n, int64_t pos, double base, double freq_scale,
               const std::vector<float>& factors) {
  for (int64_t k = 0; k < n / 2; ++k) {
    const double theta = static_cast<double>(pos) * freq_scale *
                         std::pow(base, -2.0 * static_cast<double>(k) / static_cast<double>(n)) /
                         (factors.empty() ? 1.0 : factors[static_cast<size_t>(k)]);
    const double a = v[2 * k], b = v[2 * k + 1];
    v[2 * k] = a * std::cos(theta) - b * std::sin(theta);
    v[2 * k + 1] = a * std::sin(theta) + b * std::cos(theta);
  }
}

Vec SwiGlu(const Vec& wg, const Vec& wu, const Vec& x, int64_t width, int64_t row0 = 0) {
  const Vec g = MatVec(wg, x, width, row0), u = MatVec(wu, x, width, row0);
  Vec h(static_cast<size_t>(width));
  for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return h;
}

}  // namespace

struct ReferenceDeepseek2::Impl {
  std::unique_ptr<gguf::GgufFile> file;
  model::ModelConfig c;
  struct Layer {
    Vec attn_norm, wq_a, q_a_norm, wq_b, wq, wkv_a, kv_a_norm, wk_b, wv_b, wo, ffn_norm;
    Vec wg, wu, wd;                              // dense
    Vec gate_inp, bias, eg, eu, ed, sg, su, sd;  // MoE
  };
  Vec tok, out_norm, out;  // out: output.weight, or the tied token_embd
  std::vector<Layer> layers;
  std::vector<std::vector<std::vector<int32_t>>> routes;

  Status Read(const std::string& name, Vec* m, bool optional = false) {
    const gguf::TensorInfo* t = file->FindTensor(name);
    if (!t) return optional ? Status::Ok() : Status::NotFound(name);
    std::vector<float> f(static_cast<size_t>(t->NumElements()));
    KVF_RETURN_IF_ERROR(tensor::DequantizeRow(t->dtype, t->data, f.data(), t->NumElements()));
    m->assign(f.begin(), f.end());
    return Status::Ok();
  }

  // The experts of one token, best first, and their weights.
  void Route(const Layer& L, const Vec& xf, std::vector<int32_t>* chosen, Vec* w) const {
    const model::MoeConfig& m = c.moe;
    const Vec logit = MatVec(L.gate_inp, xf, m.n_expert);
    Vec prob(logit.size());
    if (m.gating == model::ExpertGating::kSigmoid) {
      for (size_t e = 0; e < prob.size(); ++e) prob[e] = 1.0 / (1.0 + std::exp(-logit[e]));
    } else {
      const double mx = *std::max_element(logit.begin(), logit.end());
      double sum = 0;
      for (size_t e = 0; e < prob.size(); ++e) sum += (prob[e] = std::exp(logit[e] - mx));
      for (double& p : prob) p /= sum;
    }
    Vec sel = prob;
    for (size_t e = 0; e < sel.size() && !L.bias.empty(); ++e) sel[e] += L.bias[e];
    std::vector<bool> eligible(sel.size(), true);
    if (m.n_group > 1 && m.n_group_used < m.n_group) {
      const int64_t per = m.n_expert / m.n_group;
      std::vector<std::pair<double, int64_t>> groups;
      for (int64_t g = 0; g < m.n_group; ++g) {
        Vec s(sel.begin() + g * per, sel.begin() + (g + 1) * per);
        std::sort(s.rbegin(), s.rend());
        groups.push_back({-(s[0] + (per > 1 ? s[1] : 0.0)), g});
      }
      std::sort(groups.begin(), groups.end());
      std::fill(eligible.begin(), eligible.end(), false);
      for (int64_t i = 0; i < m.n_group_used; ++i)
        for (int64_t e = 0; e < per; ++e)
          eligible[static_cast<size_t>(groups[static_cast<size_t>(i)].second * per + e)] = true;
    }
    std::vector<std::pair<double, int32_t>> cand;
    for (size_t e = 0; e < sel.size(); ++e)
      if (eligible[e]) cand.push_back({-sel[e], static_cast<int32_t>(e)});
    std::sort(cand.begin(), cand.end());
    chosen->clear();
    w->clear();
    double sum = 0;
    for (int64_t i = 0; i < m.n_expert_used; ++i) {
      chosen->push_back(cand[static_cast<size_t>(i)].second);
      w->push_back(prob[static_cast<size_t>(chosen->back())]);
      sum += w->back();
    }
    for (double& v : *w) v = (m.weights_norm ? v / sum : v) * m.weights_scale;
  }
};

ReferenceDeepseek2::~ReferenceDeepseek2() = default;

Result<std::unique_ptr<ReferenceDeepseek2>> ReferenceDeepseek2::Load(const std::string& path) {
  auto m = std::unique_ptr<ReferenceDeepseek2>(new ReferenceDeepseek2());
  m->impl_ = std::make_unique<Impl>();
  Impl& im = *m->impl_;
  KVF_ASSIGN_OR_RETURN(im.file, gguf::GgufFile::Open(path));
  KVF_ASSIGN_OR_RETURN(im.c, model::ModelConfig::FromGguf(*im.file));
  if (im.c.mla.kv_lora_rank == 0) return Status::InvalidArgument("not an MLA model");
  KVF_RETURN_IF_ERROR(im.Read("token_embd.weight", &im.tok));
  KVF_RETURN_IF_ERROR(im.Read("output_norm.weight", &im.out_norm));
  KVF_RETURN_IF_ERROR(im.Read("output.weight", &im.out, true));
  if (im.out.empty()) im.out = im.tok;
  for (int64_t l = 0; l < im.c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Impl::Layer L;
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_norm.weight", &L.attn_norm));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q_a.weight", &L.wq_a, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q_a_norm.weight", &L.q_a_norm, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q_b.weight", &L.wq_b, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q.weight", &L.wq, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_kv_a_mqa.weight", &L.wkv_a));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_kv_a_norm.weight", &L.kv_a_norm));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_k_b.weight", &L.wk_b));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_v_b.weight", &L.wv_b));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_output.weight", &L.wo));
    KVF_RETURN_IF_ERROR(im.Read(p + "ffn_norm.weight", &L.ffn_norm));
    if (im.c.moe.IsMoeLayer(l)) {
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_gate_inp.weight", &L.gate_inp));
      KVF_RETURN_IF_ERROR(im.Read(p + "exp_probs_b.bias", &L.bias, true));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_gate_exps.weight", &L.eg));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_up_exps.weight", &L.eu));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_down_exps.weight", &L.ed));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_gate_shexp.weight", &L.sg, true));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_up_shexp.weight", &L.su, true));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_down_shexp.weight", &L.sd, true));
    } else {
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_gate.weight", &L.wg));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_up.weight", &L.wu));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_down.weight", &L.wd));
    }
    im.layers.push_back(std::move(L));
  }
  return m;
}

const std::vector<std::vector<int32_t>>& ReferenceDeepseek2::Routes(int64_t layer) const {
  return impl_->routes[static_cast<size_t>(layer)];
}

std::vector<std::vector<double>> ReferenceDeepseek2::Logits(const std::vector<int32_t>& tokens) {
  Impl& im = *impl_;
  const model::ModelConfig& c = im.c;
  const model::MlaConfig& a = c.mla;
  const int64_t E = c.n_embd, H = c.n_head, R = a.kv_lora_rank, P = a.rope_dim, N = a.nope_dim,
                Vh = a.v_head_dim, QK = N + P;
  // Per layer, per position: the normed latent c and the rotated shared key.
  std::vector<std::vector<Vec>> lat(static_cast<size_t>(c.n_layer)),
      kpe(static_cast<size_t>(c.n_layer));
  im.routes.assign(static_cast<size_t>(c.n_layer), {});
  std::vector<std::vector<double>> all;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    Vec x(im.tok.begin() + tokens[pos] * E, im.tok.begin() + (tokens[pos] + 1) * E);
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const auto& L = im.layers[static_cast<size_t>(l)];
      const Vec xn = RmsNorm(x, L.attn_norm, c.rms_eps);
      Vec q =
          L.wq_a.empty()
              ? MatVec(L.wq, xn, H * QK)
              : MatVec(L.wq_b, RmsNorm(MatVec(L.wq_a, xn, a.q_lora_rank), L.q_a_norm, c.rms_eps),
                       H * QK);
      for (int64_t h = 0; h < H; ++h)
        RopePairs(q.data() + h * QK + N, P, static_cast<int64_t>(pos), c.rope_freq_base,
                  c.rope_freq_scale, c.rope_freq_factors);
      const Vec kv = MatVec(L.wkv_a, xn, R + P);
      lat[static_cast<size_t>(l)].push_back(
          RmsNorm(Vec(kv.begin(), kv.begin() + R), L.kv_a_norm, c.rms_eps));
      Vec pe(kv.begin() + R, kv.end());
      RopePairs(pe.data(), P, static_cast<int64_t>(pos), c.rope_freq_base, c.rope_freq_scale,
                c.rope_freq_factors);
      kpe[static_cast<size_t>(l)].push_back(pe);
      // Naive MLA: per head, K and V decompressed from every position's latent.
      Vec att(static_cast<size_t>(H * Vh), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        Vec s(pos + 1);
        std::vector<Vec> v(pos + 1);
        double mx = -1e300;
        for (size_t p = 0; p <= pos; ++p) {
          const Vec& cp = lat[static_cast<size_t>(l)][p];
          double dot = 0;
          for (int64_t d = 0; d < N; ++d) {
            double k = 0;  // (W_UK_h^T c)[d]; W_UK_h is [R x N] at rows h R ..
            for (int64_t r = 0; r < R; ++r)
              k += L.wk_b[static_cast<size_t>((h * R + r) * N + d)] * cp[static_cast<size_t>(r)];
            dot += q[static_cast<size_t>(h * QK + d)] * k;
          }
          for (int64_t d = 0; d < P; ++d)
            dot += q[static_cast<size_t>(h * QK + N + d)] *
                   kpe[static_cast<size_t>(l)][p][static_cast<size_t>(d)];
          s[p] = dot * a.attn_scale;
          mx = std::max(mx, s[p]);
          v[p] = MatVec(L.wv_b, cp, Vh, h * Vh);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (size_t p = 0; p <= pos; ++p)
          for (int64_t d = 0; d < Vh; ++d)
            att[static_cast<size_t>(h * Vh + d)] += s[p] / sum * v[p][static_cast<size_t>(d)];
      }
      const Vec o = MatVec(L.wo, att, E);
      for (int64_t i = 0; i < E; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      const Vec xf = RmsNorm(x, L.ffn_norm, c.rms_eps);
      Vec y(static_cast<size_t>(E), 0.0);
      if (L.gate_inp.empty()) {
        y = MatVec(L.wd, SwiGlu(L.wg, L.wu, xf, c.n_ff), E);
      } else {
        std::vector<int32_t> chosen;
        Vec w;
        im.Route(L, xf, &chosen, &w);
        im.routes[static_cast<size_t>(l)].push_back(chosen);
        const int64_t F = c.moe.n_ff_expert;
        for (size_t j = 0; j < chosen.size(); ++j) {
          const Vec h = SwiGlu(L.eg, L.eu, xf, F, chosen[j] * F);
          const Vec d = MatVec(L.ed, h, E, chosen[j] * E);
          for (int64_t i = 0; i < E; ++i)
            y[static_cast<size_t>(i)] += w[j] * d[static_cast<size_t>(i)];
        }
        if (!L.sg.empty()) {
          const int64_t S = static_cast<int64_t>(L.sg.size()) / E;
          const Vec d = MatVec(L.sd, SwiGlu(L.sg, L.su, xf, S), E);
          for (int64_t i = 0; i < E; ++i) y[static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
        }
      }
      for (int64_t i = 0; i < E; ++i) x[static_cast<size_t>(i)] += y[static_cast<size_t>(i)];
    }
    all.push_back(MatVec(im.out, RmsNorm(x, im.out_norm, c.rms_eps), c.n_vocab));
  }
  return all;
}

}  // namespace kvforge::testing
