#include "model/induction_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/quantize.h"

namespace kvforge::model {
namespace {

constexpr int64_t kDim = 512;
constexpr int64_t kHeads = 2;
constexpr int64_t kHeadDim = kDim / kHeads;  // 256: 128 RoPE pairs
constexpr int64_t kCode = 100;               // width of a token code
constexpr int64_t kFfn = 32;                 // zero weights: the circuit is attention only
constexpr float kRopeBase = 1e30f;           // pair p turns by 10^(-0.234 p) rad per position
constexpr int64_t kPositionPairs = 14;       // pairs 0..13 carry the layer-0 position heads
constexpr double kFirstPairWeight = 0.4;     // the fastest pair separates neighbours
constexpr int64_t kContentDim0 = kHeadDim - 2 * kCode;  // 56: pairs 28.. barely rotate
constexpr double kMaxContentTurn = 0.02;     // radians a content pair may turn over `ctx`
constexpr double kPositionLogitMargin = 30;  // nats between distance h+1 and any other
constexpr double kContentLogit = 40;         // nats per matched token of the bigram
constexpr double kOutputLogit = 40;          // the copied token's logit
constexpr float kEps = 1e-5f;

// Residual channel offsets.
constexpr int64_t kConst = 0;
constexpr int64_t kEmb = 1;
constexpr int64_t kPrev1 = kEmb + kCode;
constexpr int64_t kPrev2 = kPrev1 + kCode;
constexpr int64_t kOut = kPrev2 + kCode;
static_assert(kOut + kCode <= kDim);

// RMSNorm multiplies a residual holding `units` unit-norm channels by sqrt(kDim / units).
double NormGain(int units) { return std::sqrt(static_cast<double>(kDim) / units); }

// The angle per position of each RoPE pair, accumulated in float as the forward does.
std::vector<double> PairFrequencies() {
  std::vector<double> theta(kHeadDim / 2);
  const float scale = std::pow(kRopeBase, -2.0f / static_cast<float>(kHeadDim));
  float t = 1.0f;
  for (auto& x : theta) {
    x = t;
    t *= scale;
  }
  return theta;
}

std::vector<double> PositionWeights() {
  std::vector<double> w(kPositionPairs, (1 - kFirstPairWeight) / (kPositionPairs - 1));
  w[0] = kFirstPairWeight;
  return w;
}

// min over distances d in [0, ctx), d != delta, of sum_p w_p (1 - cos(theta_p (d - delta))):
// how much lower the position score is anywhere but at the target distance, per unit scale.
double PositionGap(const std::vector<double>& theta, const std::vector<double>& w, int64_t delta,
                   int64_t ctx) {
  double gap = 1e30;
  for (int64_t d = 0; d < ctx; ++d) {
    if (d == delta) continue;
    double g = 0;
    for (size_t p = 0; p < w.size(); ++p)
      g += w[p] * (1 - std::cos(theta[p] * static_cast<double>(d - delta)));
    gap = std::min(gap, g);
  }
  return gap;
}

// [n_vocab][kCode] unit vectors.
std::vector<float> TokenCodes(int64_t n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> codes(static_cast<size_t>(n_vocab * kCode));
  for (int64_t t = 0; t < n_vocab; ++t) {
    float* c = codes.data() + t * kCode;
    double norm = 0;
    for (int64_t e = 0; e < kCode; ++e) {
      c[e] = nd(rng);
      norm += static_cast<double>(c[e]) * c[e];
    }
    const float inv = static_cast<float>(1 / std::sqrt(norm));
    for (int64_t e = 0; e < kCode; ++e) c[e] *= inv;
  }
  return codes;
}

// A dense row-major matrix [rows][cols] written as a GGUF tensor {cols, rows}.
struct Matrix {
  int64_t rows, cols;
  std::vector<float> v;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c), 0.0f) {}
  float& at(int64_t r, int64_t c) { return v[static_cast<size_t>(r * cols + c)]; }
};

Status AddMatrix(gguf::GgufWriter& w, const std::string& name, const Matrix& m, tensor::DType t) {
  const uint64_t rb = *tensor::RowBytes(t, static_cast<uint64_t>(m.cols));
  std::vector<uint8_t> data(static_cast<size_t>(rb * static_cast<uint64_t>(m.rows)));
  for (int64_t r = 0; r < m.rows; ++r)
    KVF_RETURN_IF_ERROR(
        tensor::QuantizeRow(t, m.v.data() + r * m.cols, data.data() + r * rb, m.cols));
  return w.AddTensor(name, t, {m.cols, m.rows}, std::move(data));
}

Status AddOnes(gguf::GgufWriter& w, const std::string& name, int64_t n) {
  std::vector<uint8_t> data(static_cast<size_t>(n) * 4);
  const float one = 1.0f;
  for (int64_t i = 0; i < n; ++i) std::memcpy(data.data() + 4 * i, &one, 4);
  return w.AddTensor(name, tensor::DType::kF32, {n}, std::move(data));
}

// Layer 0: head h attends to distance h + 1 and copies that token's code to prev(h+1).
struct Layer {
  Matrix q{kHeads * kHeadDim, kDim}, k{kHeads * kHeadDim, kDim}, v{kHeads * kHeadDim, kDim};
  Matrix o{kDim, kHeads* kHeadDim};
};

Layer PositionLayer(const std::vector<double>& theta, const std::vector<double>& w,
                    double qk_scale) {
  Layer L;
  const double gain = NormGain(2);  // const + emb
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t base = h * kHeadDim;
    const double delta = static_cast<double>(h + 1);
    for (int64_t p = 0; p < kPositionPairs; ++p) {
      // score(d) = qk_scale * w_p * cos(theta_p (d - delta)) per pair (see the header).
      const double a = std::sqrt(w[static_cast<size_t>(p)]);
      L.q.at(base + 2 * p, kConst) =
          static_cast<float>(qk_scale * a * std::cos(delta * theta[p]) / gain);
      L.q.at(base + 2 * p + 1, kConst) =
          static_cast<float>(-qk_scale * a * std::sin(delta * theta[p]) / gain);
      L.k.at(base + 2 * p, kConst) = static_cast<float>(a / gain);
    }
    const int64_t dst = h == 0 ? kPrev1 : kPrev2;
    for (int64_t e = 0; e < kCode; ++e) {
      L.v.at(base + e, kEmb + e) = static_cast<float>(1 / gain);
      L.o.at(dst + e, base + e) = 1.0f;
    }
  }
  return L;
}

// Layer 1, head 0: bigram match in the slow pairs; head 1 stays zero.
Layer InductionLayer(double content_scale) {
  Layer L;
  const double gain = NormGain(4);  // const + emb + prev1 + prev2
  for (int64_t e = 0; e < kCode; ++e) {
    L.q.at(kContentDim0 + e, kEmb + e) = static_cast<float>(content_scale / gain);
    L.q.at(kContentDim0 + kCode + e, kPrev1 + e) = static_cast<float>(content_scale / gain);
    L.k.at(kContentDim0 + e, kPrev1 + e) = static_cast<float>(1 / gain);
    L.k.at(kContentDim0 + kCode + e, kPrev2 + e) = static_cast<float>(1 / gain);
    L.v.at(e, kEmb + e) = static_cast<float>(1 / gain);
    L.o.at(kOut + e, e) = 1.0f;
  }
  return L;
}

Status AddLayer(gguf::GgufWriter& w, int64_t l, const Layer& L, int64_t ffn, tensor::DType t) {
  const std::string b = "blk." + std::to_string(l) + ".";
  KVF_RETURN_IF_ERROR(AddOnes(w, b + "attn_norm.weight", kDim));
  KVF_RETURN_IF_ERROR(AddMatrix(w, b + "attn_q.weight", L.q, t));
  KVF_RETURN_IF_ERROR(AddMatrix(w, b + "attn_k.weight", L.k, t));
  KVF_RETURN_IF_ERROR(AddMatrix(w, b + "attn_v.weight", L.v, t));
  KVF_RETURN_IF_ERROR(AddMatrix(w, b + "attn_output.weight", L.o, t));
  KVF_RETURN_IF_ERROR(AddOnes(w, b + "ffn_norm.weight", kDim));
  // Zero weights: the circuit is attention only.
  KVF_RETURN_IF_ERROR(AddMatrix(w, b + "ffn_gate.weight", Matrix(ffn, kDim), t));
  KVF_RETURN_IF_ERROR(AddMatrix(w, b + "ffn_up.weight", Matrix(ffn, kDim), t));
  return AddMatrix(w, b + "ffn_down.weight", Matrix(kDim, ffn), t);
}

}  // namespace

Result<InductionModelReport> WriteInductionModel(const InductionModelSpec& s,
                                                 const gguf::GgufFile& vocab,
                                                 const std::string& path) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  const std::vector<double> theta = PairFrequencies();
  const int64_t max_ctx =
      static_cast<int64_t>(kMaxContentTurn / theta[static_cast<size_t>(kContentDim0 / 2)]);
  if (s.ctx < 8 || s.ctx > max_ctx)
    return bad("--ctx for the induction model must be 8.." + std::to_string(max_ctx) +
               " (its content heads would turn with position beyond that)");
  if (!tensor::CanQuantize(s.dtype) || !tensor::IsComputeSupported(s.dtype))
    return bad(
        "dtype must be one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
  if (s.layers < 2 || s.layers > 256) return bad("the induction model has 2..256 layers");
  if (s.ffn < kFfn || s.ffn > (1 << 20))
    return bad("the induction model's feed-forward width must be 32..1048576");
  if (kDim % tensor::Traits(s.dtype).block_elems != 0 ||
      s.ffn % tensor::Traits(s.dtype).block_elems != 0)
    return bad("the induction model's feed-forward width (" + std::to_string(s.ffn) +
               ") does not fit this dtype's blocks");
  const gguf::Value* toks = vocab.Find("tokenizer.ggml.tokens");
  if (!toks || toks->type != gguf::ValueType::kArray || toks->elem_type != gguf::ValueType::kString)
    return bad(vocab.path() + " has no tokenizer.ggml.tokens");
  const int64_t n_vocab = static_cast<int64_t>(toks->count);

  const std::vector<double> w = PositionWeights();
  const double gap = std::min(PositionGap(theta, w, 1, s.ctx), PositionGap(theta, w, 2, s.ctx));
  const double attn = 1 / std::sqrt(static_cast<double>(kHeadDim));
  const double qk_scale = kPositionLogitMargin / (gap * attn);

  gguf::GgufWriter g;
  g.SetString("general.architecture", "llama");
  g.SetString("general.name", "kvforge-induction-heads");
  g.SetU32("general.file_type", tensor::LlamaFileType(s.dtype).value_or(0));
  g.SetU32("llama.context_length", static_cast<uint32_t>(s.ctx));
  g.SetU32("llama.embedding_length", kDim);
  g.SetU32("llama.block_count", static_cast<uint32_t>(s.layers));
  g.SetU32("llama.feed_forward_length", static_cast<uint32_t>(s.ffn));
  g.SetU32("llama.attention.head_count", kHeads);
  g.SetU32("llama.attention.head_count_kv", kHeads);
  g.SetF32("llama.attention.layer_norm_rms_epsilon", kEps);
  g.SetU32("llama.rope.dimension_count", kHeadDim);
  g.SetF32("llama.rope.freq_base", kRopeBase);
  for (const auto& key : vocab.keys())
    if (key.rfind("tokenizer.", 0) == 0) g.CopyValue(key, *vocab.Find(key));

  // token_embd [n_vocab][kDim]: the constant channel and the token's code;
  // output [n_vocab][kDim]: reads the copied code.
  const std::vector<float> codes = TokenCodes(n_vocab, s.seed);
  const double out_scale = kOutputLogit / NormGain(5);
  Matrix embd(n_vocab, kDim), out(n_vocab, kDim);
  for (int64_t t = 0; t < n_vocab; ++t) {
    embd.at(t, kConst) = 1.0f;
    for (int64_t e = 0; e < kCode; ++e) {
      const float c = codes[static_cast<size_t>(t * kCode + e)];
      embd.at(t, kEmb + e) = c;
      out.at(t, kOut + e) = static_cast<float>(out_scale * c);
    }
  }
  KVF_RETURN_IF_ERROR(AddMatrix(g, "token_embd.weight", embd, s.dtype));
  KVF_RETURN_IF_ERROR(AddOnes(g, "output_norm.weight", kDim));
  KVF_RETURN_IF_ERROR(AddMatrix(g, "output.weight", out, s.dtype));
  KVF_RETURN_IF_ERROR(AddLayer(g, 0, PositionLayer(theta, w, qk_scale), s.ffn, s.dtype));
  KVF_RETURN_IF_ERROR(AddLayer(g, 1, InductionLayer(kContentLogit / attn), s.ffn, s.dtype));
  for (int64_t l = 2; l < s.layers; ++l)  // all-zero blocks: the residual passes unchanged
    KVF_RETURN_IF_ERROR(AddLayer(g, l, Layer{}, s.ffn, s.dtype));
  KVF_RETURN_IF_ERROR(g.WriteFile(path));

  // The content margin: a full match minus a one-token match whose other token's code is the
  // closest to the right one (over the first 1024 tokens, which covers small vocabularies).
  double coherence = 0;
  const int64_t n_check = std::min<int64_t>(n_vocab, 1024);
  for (int64_t a = 0; a < n_check; ++a)
    for (int64_t b = a + 1; b < n_check; ++b) {
      double dot = 0;
      for (int64_t e = 0; e < kCode; ++e)
        dot += static_cast<double>(codes[static_cast<size_t>(a * kCode + e)]) *
               codes[static_cast<size_t>(b * kCode + e)];
      coherence = std::max(coherence, std::fabs(dot));
    }
  InductionModelReport r;
  r.n_vocab = n_vocab;
  r.position_margin = kPositionLogitMargin;
  r.content_margin = kContentLogit * (1 - coherence);
  return r;
}

}  // namespace kvforge::model
