#include "support/reference_forward.h"

#include <cmath>
#include <tuple>

#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "tensor/dequant.h"

namespace kvforge::testing {

using Mat = std::vector<double>;  // row-major [rows][cols]

struct ReferenceModel::Impl {
  std::unique_ptr<gguf::GgufFile> file;
  model::ModelConfig c;
  struct Layer {
    Mat attn_norm, attn_norm_b, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, wg, wu, wd;
  };
  Mat tok, out_norm, out_norm_b, out;
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
  const std::string& arch = im.c.arch_name;
  const bool falcon = arch == "falcon", phi3 = arch == "phi3", gemma = arch == "gemma";
  const int64_t E = im.c.n_embd, QD = im.c.q_dim(), KD = im.c.kv_dim(), F = im.c.n_ff;
  KVF_RETURN_IF_ERROR(im.Read("token_embd.weight", &im.tok));
  KVF_RETURN_IF_ERROR(im.Read("output_norm.weight", &im.out_norm));
  KVF_RETURN_IF_ERROR(im.Read("output_norm.bias", &im.out_norm_b, !falcon));
  if (!gemma && im.file->FindTensor("output.weight")) {
    KVF_RETURN_IF_ERROR(im.Read("output.weight", &im.out));
  } else {
    im.out = im.tok;
  }
  // Rows [r0, r0 + n) of a row-major matrix with `cols` columns.
  auto rows = [](const Mat& mat, int64_t cols, int64_t r0, int64_t n) {
    return Mat(mat.begin() + r0 * cols, mat.begin() + (r0 + n) * cols);
  };
  for (int64_t l = 0; l < im.c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Impl::Layer L;
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_norm.weight", &L.attn_norm));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_norm.bias", &L.attn_norm_b, !falcon));
    if (falcon || phi3) {
      Mat qkv;
      KVF_RETURN_IF_ERROR(im.Read(p + "attn_qkv.weight", &qkv));
      L.wq = rows(qkv, E, 0, QD);
      L.wk = rows(qkv, E, QD, KD);
      L.wv = rows(qkv, E, QD + KD, KD);
    } else {
      KVF_RETURN_IF_ERROR(im.Read(p + "attn_q.weight", &L.wq));
      KVF_RETURN_IF_ERROR(im.Read(p + "attn_k.weight", &L.wk));
      KVF_RETURN_IF_ERROR(im.Read(p + "attn_v.weight", &L.wv));
    }
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_output.weight", &L.wo));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q.bias", &L.bq, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_k.bias", &L.bk, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_v.bias", &L.bv, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_q_norm.weight", &L.q_norm, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "attn_k_norm.weight", &L.k_norm, true));
    KVF_RETURN_IF_ERROR(im.Read(p + "ffn_norm.weight", &L.ffn_norm, falcon));
    if (phi3) {
      Mat gu;
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_up.weight", &gu));
      L.wg = rows(gu, E, 0, F);
      L.wu = rows(gu, E, F, F);
    } else {
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_gate.weight", &L.wg, falcon));
      KVF_RETURN_IF_ERROR(im.Read(p + "ffn_up.weight", &L.wu));
    }
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

// LayerNorm with bias (falcon).
std::vector<double> LayerNorm(const std::vector<double>& x, const Mat& w, const Mat& b,
                              double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  const double scale = 1.0 / std::sqrt(var / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * scale * w[i] + b[i];
  return y;
}

double Gelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
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
          double base, double freq_scale, bool neox, const std::vector<float>& factors) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t k = 0; k < rot / 2; ++k) {
      const double theta =
          static_cast<double>(pos) * freq_scale *
          std::pow(base, -2.0 * static_cast<double>(k) / static_cast<double>(rot)) /
          (factors.empty() ? 1.0 : factors[static_cast<size_t>(k)]);
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
  const std::string& arch = c.arch_name;
  const bool falcon = arch == "falcon", gemma = arch == "gemma";
  auto norm = [&](const std::vector<double>& x, const Mat& w, const Mat& b) {
    return falcon ? LayerNorm(x, w, b, c.rms_eps) : RmsNorm(x, w, c.rms_eps);
  };
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    std::vector<double> x(im.tok.begin() + tokens[pos] * E, im.tok.begin() + (tokens[pos] + 1) * E);
    if (gemma)
      for (double& v : x) v *= std::sqrt(static_cast<double>(E));
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const auto& L = im.layers[static_cast<size_t>(l)];
      const auto xn = norm(x, L.attn_norm, L.attn_norm_b);
      auto q = MatVec(L.wq, xn, QD), k = MatVec(L.wk, xn, KD), v = MatVec(L.wv, xn, KD);
      if (!L.bq.empty()) {
        for (int64_t i = 0; i < QD; ++i) q[static_cast<size_t>(i)] += L.bq[static_cast<size_t>(i)];
        for (int64_t i = 0; i < KD; ++i) {
          k[static_cast<size_t>(i)] += L.bk[static_cast<size_t>(i)];
          v[static_cast<size_t>(i)] += L.bv[static_cast<size_t>(i)];
        }
      }
      if (!L.q_norm.empty())  // qwen3: each head RMS-normalised before RoPE
        for (auto [vec, heads, w] :
             {std::tuple{&q, c.n_head, &L.q_norm}, std::tuple{&k, c.n_head_kv, &L.k_norm}})
          for (int64_t h = 0; h < heads; ++h) {
            std::vector<double> head(vec->begin() + h * HD, vec->begin() + (h + 1) * HD);
            head = RmsNorm(head, *w, c.rms_eps);
            std::copy(head.begin(), head.end(), vec->begin() + h * HD);
          }
      Rope(q, c.n_head, HD, c.rope_dim, static_cast<int64_t>(pos), c.rope_freq_base,
           c.rope_freq_scale, c.rope_neox, c.rope_freq_factors);
      Rope(k, c.n_head_kv, HD, c.rope_dim, static_cast<int64_t>(pos), c.rope_freq_base,
           c.rope_freq_scale, c.rope_neox, c.rope_freq_factors);
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
      // Falcon's MLP reads the same normed input as its attention (a parallel block).
      const auto xf = falcon ? xn : RmsNorm(x, L.ffn_norm, c.rms_eps);
      auto u = MatVec(L.wu, xf, c.n_ff);
      std::vector<double> h(static_cast<size_t>(c.n_ff));
      if (falcon) {
        for (int64_t i = 0; i < c.n_ff; ++i)
          h[static_cast<size_t>(i)] = Gelu(u[static_cast<size_t>(i)]);
      } else {
        const auto g = MatVec(L.wg, xf, c.n_ff);
        for (int64_t i = 0; i < c.n_ff; ++i) {
          const double gv = g[static_cast<size_t>(i)];
          const double act = gemma ? Gelu(gv) : gv / (1.0 + std::exp(-gv));
          h[static_cast<size_t>(i)] = act * u[static_cast<size_t>(i)];
        }
      }
      auto d = MatVec(L.wd, h, E);
      for (int64_t i = 0; i < E; ++i) x[static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
    }
    all.push_back(MatVec(im.out, norm(x, im.out_norm, im.out_norm_b), c.n_vocab));
  }
  return all;
}

}  // namespace kvforge::testing
