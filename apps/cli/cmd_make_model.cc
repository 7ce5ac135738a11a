// kvforge make-model — writes a random-weight GGUF with a real vocabulary, for tests and
// benchmarks at realistic shapes. Weights are N(0, 1/fan_in) so activations keep their scale.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <string>

#include "assets/default_model.h"
#include "base/strings.h"
#include "commands.h"
#include "flags.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/dequant.h"

namespace kvforge::cli {
namespace {

struct Maker {
  std::mt19937_64 rng;
  tensor::DType dtype;
  gguf::GgufWriter* w;

  Status Matrix(const std::string& name, int64_t cols, int64_t rows, float std, tensor::DType t) {
    std::normal_distribution<float> nd(0.0f, std);
    std::vector<float> row(static_cast<size_t>(cols));
    const uint64_t rb = *tensor::RowBytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> data(static_cast<size_t>(rb * static_cast<uint64_t>(rows)));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& x : row) x = nd(rng);
      KVF_RETURN_IF_ERROR(tensor::QuantizeRow(t, row.data(), data.data() + r * rb, cols));
    }
    return w->AddTensor(name, t, {cols, rows}, std::move(data));
  }
  Status Vector(const std::string& name, int64_t n, float value, float jitter) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<uint8_t> data(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
      const float v = value + (jitter > 0 ? jitter * nd(rng) : 0.0f);
      std::memcpy(data.data() + 4 * i, &v, 4);
    }
    return w->AddTensor(name, tensor::DType::kF32, {n}, std::move(data));
  }
};

}  // namespace

int MakeModelMain(const Args& args) {
  std::string arch = "llama", vocab_from, dtype_name = "f16", out;
  int64_t dim = 64, layers = 2, heads = 4, kv_heads = -1, ffn = 0, seed = 1, ctx = 2048;
  double rope_base = 10000.0;
  FlagParser p("make-model", "Writes a valid random-weight GGUF (llama or qwen2 architecture) that kvforge and other\n"
                             "GGUF engines load. The tokenizer is copied from --vocab-from (default: the embedded model's).");
  p.AddString("arch", &arch, "llama | qwen2");
  p.AddInt("dim", &dim, "embedding width");
  p.AddInt("layers", &layers, "transformer blocks");
  p.AddInt("heads", &heads, "attention heads");
  p.AddInt("kv-heads", &kv_heads, "KV heads (default: heads)");
  p.AddInt("ffn", &ffn, "feed-forward width (default: 8/3 x dim rounded up to 32)");
  p.AddString("vocab-from", &vocab_from, "GGUF whose tokenizer.* metadata to copy");
  p.AddString("dtype", &dtype_name, "weight type: f32 | f16 | bf16 | q8_0 | q4_0");
  p.AddInt("seed", &seed, "RNG seed");
  p.AddInt("ctx", &ctx, "context length written to the metadata");
  p.AddFloat("rope-base", &rope_base, "RoPE frequency base");
  p.AddString("out", &out, "output path");
  p.Require("out");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (kv_heads < 0) kv_heads = heads;
  if (ffn == 0) ffn = (dim * 8 / 3 + 31) / 32 * 32;
  auto usage_error = [](const std::string& m) {
    std::fprintf(stderr, "kvforge: %s\n", m.c_str());
    return 2;
  };
  if (arch != "llama" && arch != "qwen2") return usage_error("--arch must be llama or qwen2");
  auto dtype = tensor::DTypeFromName(dtype_name);
  if (!dtype || !(*dtype == tensor::DType::kF32 || *dtype == tensor::DType::kF16 || *dtype == tensor::DType::kBF16 ||
                  *dtype == tensor::DType::kQ8_0 || *dtype == tensor::DType::kQ4_0))
    return usage_error("--dtype must be one of f32, f16, bf16, q8_0, q4_0");
  if (dim <= 0 || layers <= 0 || heads <= 0 || kv_heads <= 0 || ffn <= 0 || ctx <= 0 || dim > 65536 ||
      layers > 1024 || ffn > 262144)
    return usage_error("dimensions must be positive (and sane)");
  if (dim % heads != 0) return usage_error("--dim must be a multiple of --heads");
  if (heads % kv_heads != 0) return usage_error("--heads must be a multiple of --kv-heads");
  if ((dim / heads) % 2 != 0) return usage_error("the head dimension (dim/heads) must be even");
  const int64_t block = tensor::Traits(*dtype).block_elems;
  if (dim % block != 0 || ffn % block != 0)
    return usage_error(base::StrFormat("--dim and --ffn must be multiples of %lld for %s", (long long)block, dtype_name.c_str()));

  std::unique_ptr<gguf::GgufFile> vocab_file;
  auto vf = vocab_from.empty()
                ? gguf::GgufFile::FromMemory(assets::DefaultModelData(), assets::DefaultModelSize(), assets::kDefaultModelName)
                : gguf::GgufFile::Open(vocab_from);
  if (!vf.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", vf.error().message().c_str());
    return 1;
  }
  vocab_file = std::move(*vf);
  const gguf::Value* toks = vocab_file->Find("tokenizer.ggml.tokens");
  if (!toks || toks->type != gguf::ValueType::kArray || toks->elem_type != gguf::ValueType::kString) {
    std::fprintf(stderr, "kvforge: %s has no tokenizer.ggml.tokens\n", vocab_file->path().c_str());
    return 1;
  }
  const int64_t n_vocab = static_cast<int64_t>(toks->count);
  const int64_t hd = dim / heads;

  gguf::GgufWriter w;
  const std::string a = arch + ".";
  w.SetString("general.architecture", arch);
  w.SetString("general.name", base::StrFormat("kvforge-random-%s-d%lld-l%lld", arch.c_str(), (long long)dim, (long long)layers));
  const uint32_t file_type = *dtype == tensor::DType::kF32 ? 0 : *dtype == tensor::DType::kF16 ? 1
                           : *dtype == tensor::DType::kQ4_0 ? 2 : *dtype == tensor::DType::kQ8_0 ? 7 : 32;
  w.SetU32("general.file_type", file_type);
  w.SetU32(a + "context_length", static_cast<uint32_t>(ctx));
  w.SetU32(a + "embedding_length", static_cast<uint32_t>(dim));
  w.SetU32(a + "block_count", static_cast<uint32_t>(layers));
  w.SetU32(a + "feed_forward_length", static_cast<uint32_t>(ffn));
  w.SetU32(a + "attention.head_count", static_cast<uint32_t>(heads));
  w.SetU32(a + "attention.head_count_kv", static_cast<uint32_t>(kv_heads));
  w.SetF32(a + "attention.layer_norm_rms_epsilon", arch == "qwen2" ? 1e-6f : 1e-5f);
  w.SetU32(a + "rope.dimension_count", static_cast<uint32_t>(hd));
  w.SetF32(a + "rope.freq_base", static_cast<float>(rope_base));
  for (const auto& key : vocab_file->keys())
    if (key.rfind("tokenizer.", 0) == 0) w.CopyValue(key, *vocab_file->Find(key));

  Maker m{std::mt19937_64(static_cast<uint64_t>(seed)), *dtype, &w};
  const float s_in = 1.0f / std::sqrt(static_cast<float>(dim));
  const float s_ff = 1.0f / std::sqrt(static_cast<float>(ffn));
  const float s_res = 1.0f / std::sqrt(2.0f * static_cast<float>(layers));
  Status st = m.Matrix("token_embd.weight", dim, n_vocab, 1.0f, *dtype);
  if (st.ok()) st = m.Vector("output_norm.weight", dim, 1.0f, 0.0f);
  if (st.ok()) st = m.Matrix("output.weight", dim, n_vocab, s_in * 4.0f, *dtype);
  for (int64_t l = 0; l < layers && st.ok(); ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (st.ok()) st = m.Vector(b + "attn_norm.weight", dim, 1.0f, 0.0f);
    if (st.ok()) st = m.Matrix(b + "attn_q.weight", dim, heads * hd, s_in, *dtype);
    if (st.ok()) st = m.Matrix(b + "attn_k.weight", dim, kv_heads * hd, s_in, *dtype);
    if (st.ok()) st = m.Matrix(b + "attn_v.weight", dim, kv_heads * hd, s_in, *dtype);
    if (st.ok() && arch == "qwen2") {
      st = m.Vector(b + "attn_q.bias", heads * hd, 0.0f, 0.1f);
      if (st.ok()) st = m.Vector(b + "attn_k.bias", kv_heads * hd, 0.0f, 0.1f);
      if (st.ok()) st = m.Vector(b + "attn_v.bias", kv_heads * hd, 0.0f, 0.1f);
    }
    if (st.ok()) st = m.Matrix(b + "attn_output.weight", heads * hd, dim, s_in * s_res, *dtype);
    if (st.ok()) st = m.Vector(b + "ffn_norm.weight", dim, 1.0f, 0.0f);
    if (st.ok()) st = m.Matrix(b + "ffn_gate.weight", dim, ffn, s_in, *dtype);
    if (st.ok()) st = m.Matrix(b + "ffn_up.weight", dim, ffn, s_in, *dtype);
    if (st.ok()) st = m.Matrix(b + "ffn_down.weight", ffn, dim, s_ff * s_res, *dtype);
  }
  if (st.ok()) st = w.WriteFile(out);
  if (!st.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "kvforge: wrote %s (%s, dim %lld, %lld layers, %lld heads / %lld KV heads, ffn %lld, vocab %lld, %s)\n",
               out.c_str(), arch.c_str(), (long long)dim, (long long)layers, (long long)heads, (long long)kv_heads,
               (long long)ffn, (long long)n_vocab, dtype_name.c_str());
  return 0;
}

}  // namespace kvforge::cli
