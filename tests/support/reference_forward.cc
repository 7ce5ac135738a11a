#include "support/reference_forward.h"

#include <cmath>

#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "tensor/dequant.h"

namespace kvforge::testing {

using Mat = std::vector<double>;  // row-major [rows][cols]

struct ReferenceModel::Impl {
  std::unique_ptr<gguf::GgufFile> file;
  model::ModelConfig c;
  struct Layer {
    Mat attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, wg, wu, wd;
  };
  Mat tok, out_norm, out;
  std::vector<Layer> layers;

  Status Read(const std::string& name, Mat* m, bool optional = false) {
    const gguf::TensorInfo* t = file->FindTensor(name);
    if (!t) return optional ? Status::Ok() : Status::NotFound(name);
    std::vector<float> f(static_cast<size_t>(t->NumElements()));
    KVF_RETURN_IF_ERROR(tensor::DequantizeRow(t->dtype, t->data, f.data(), t->NumElements()));
    m->assign(f.begin(), f.end());
    return Status::Ok();
  }
};

ReferenceModel::~ReferenceModel() = default;
int64_t ReferenceModel::n_vocab() const { return impl_->c.n_vocab; }

Result<std::unique_ptr<ReferenceModel>> ReferenceModel::Load(const std::string& path) {
  auto m = std::unique_ptr<ReferenceModel>(new ReferenceModel());
  m->impl_ = std::make_unique<Impl>();
  Impl& im = *m->impl_;
  KVF_ASSIGN_OR_RETURN(im.file, gguf::GgufFile::Open(path));
  KVF_ASSIGN_OR_RETURN(im.c, model::ModelConfig::FromGguf(*im.file));
  KVF_RETURN_IF_ERROR(im.Read("token_embd.weight", &im.tok));
  KVF_RETURN_IF_ERROR(im.Read("output_norm.weight", &im.out_norm));
  if (im.file->FindTensor("output.weight"))
    KVF_RETURN_IF_ERROR(im.Read("output.weight", &im.out));
  else
    im.out = im.tok;
  for (int64_t l = 0; l < im.c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Impl::Layer L;
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_norm.weight", &L.attn_norm));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q.weight", &L.wq));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_k.weight", &L.wk));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_v.weight", &L.wv));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_output.weight", &L.wo));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q.bias", &L.bq, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_k.bias", &L.bk, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_v.bias", &L.bv, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "ffn_norm.weight", &L.ffn_norm));
    KVF_RETURN_IF_ERROR(im.Read(p + "ffn_gate.weight", &L.wg));
    KVF_RETURN_IF_ERROR(im.Read(p + "ffn_up.weight", &L.wu));
    KVF_RETURN_IF_ERROR(im.Read(p + "ffn_down.weight", &L.wd));
    im.layers.push_back(std::move(L));
  }
  return m;
}

namespace {

// y = W x for W [rows][cols].
std::vector<double> MatVec(const Mat& w, const std::vector<double>& x, int64_t rows) {
  const int64_t cols = static_cast<int64_t>(x.size());
  std::vector<double> y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c)
      s += w[static_cast<size_t>(r * cols + c)] * x[static_cast<size_t>(c)];
    y[static_cast<size_t>(r)] = s;
  }
  return y;
}

std::vector<double> RmsNorm(const std::vector<double>& x, const Mat& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

void Rope(std::vector<double>& v, int64_t n_heads, int64_t hd, int64_t rot, int64_t pos,
          double base, double freq_scale, bool neox) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t k = 0; k < rot / 2; ++k) {
      const double theta = static_cast<double>(pos) * freq_scale *
                           std::pow(base, -2.0 * static_cast<double>(k) / static_cast<double>(rot));
      const int64_t i0 = h * hd + (neox ? k : 2 * k);
      const int64_t i1 = h * hd + (neox ? k + rot / 2 : 2 * k + 1);
      const double a = v[static_cast<size_t>(i0)], b = v[static_cast<size_t>(i1)];
      v[static_cast<size_t>(i0)] = a * std::cos(theta) - b * std::sin(theta);
      v[static_cast<size_t>(i1)] = a * std::sin(theta) + b * std::cos(theta);
    }
  }
}

}  // namespace

std::vector<std::vector<double>> ReferenceModel::Logits(const std::vector<int32_t>& tokens) {
  const Impl& im = *impl_;
  const model::ModelConfig& c = im.c;
  const int64_t E = c.n_embd, HD = c.head_dim, QD = c.q_dim(), KD = c.kv_dim();
  std::vector<std::vector<std::vector<double>>> kc(static_cast<size_t>(c.n_layer)),
      vc(static_cast<size_t>(c.n_layer));
  std::vector<std::vector<double>> all;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    std::vector<double> x(im.tok.begin() + tokens[pos] * E, im.tok.begin() + (tokens[pos] + 1) * E);
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const auto& L = im.layers[static_cast<size_t>(l)];
      auto xn = RmsNorm(x, L.attn_norm, c.rms_eps);
      auto q = MatVec(L.wq, xn, QD), k = MatVec(L.wk, xn, KD), v = MatVec(L.wv, xn, KD);
      if (!L.bq.empty()) {
        for (int64_t i = 0; i < QD; ++i) q[static_cast<size_t>(i)] += L.bq[static_cast<size_t>(i)];
        for (int64_t i = 0; i < KD; ++i) {
          k[static_cast<size_t>(i)] += L.bk[static_cast<size_t>(i)];
          v[static_cast<size_t>(i)] += L.bv[static_cast<size_t>(i)];
        }
      }
      Rope(q, c.n_head, HD, c.rope_dim, static_cast<int64_t>(pos), c.rope_freq_base,
           c.rope_freq_scale, c.rope_neox);
      Rope(k, c.n_head_kv, HD, c.rope_dim, static_cast<int64_t>(pos), c.rope_freq_base,
           c.rope_freq_scale, c.rope_neox);
      kc[static_cast<size_t>(l)].push_back(k);
      vc[static_cast<size_t>(l)].push_back(v);
      std::vector<double> att(static_cast<size_t>(QD), 0.0);
      const int64_t group = c.n_head / c.n_head_kv;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t kvh = h / group;
        std::vector<double> s(pos + 1);
        double mx = -1e300;
        for (size_t p = 0; p <= pos; ++p) {
          double d = 0;
          for (int64_t i = 0; i < HD; ++i)
            d += q[static_cast<size_t>(h * HD + i)] *
                 kc[static_cast<size_t>(l)][p][static_cast<size_t>(kvh * HD + i)];
          s[p] = d / std::sqrt(static_cast<double>(HD));
          mx = std::max(mx, s[p]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (size_t p = 0; p <= pos; ++p)
          for (int64_t i = 0; i < HD; ++i)
            att[static_cast<size_t>(h * HD + i)] +=
                s[p] / sum * vc[static_cast<size_t>(l)][p][static_cast<size_t>(kvh * HD + i)];
      }
      auto o = MatVec(L.wo, att, E);
      for (int64_t i = 0; i < E; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      xn = RmsNorm(x, L.ffn_norm, c.rms_eps);
      auto g = MatVec(L.wg, xn, c.n_ff), u = MatVec(L.wu, xn, c.n_ff);
      for (int64_t i = 0; i < c.n_ff; ++i) {
        const double gv = g[static_cast<size_t>(i)];
        g[static_cast<size_t>(i)] = gv / (1.0 + std::exp(-gv)) * u[static_cast<size_t>(i)];
      }
      auto d = MatVec(L.wd, g, E);
      for (int64_t i = 0; i < E; ++i) x[static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
    }
    all.push_back(MatVec(im.out, RmsNorm(x, im.out_norm, c.rms_eps), c.n_vocab));
  }
  return all;
}

}  // namespace kvforge::testing
