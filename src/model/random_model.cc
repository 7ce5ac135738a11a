#include "model/random_model.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/strings.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/random_tensor_maker.h"

namespace kvforge::model {
Status WriteRandomModel(const RandomModelSpec& in, const gguf::GgufFile& vocab,
                        const std::string& path) {
  if (in.arch == "deepseek2") return WriteRandomDeepseek2(in, vocab, path);
  RandomModelSpec s = in;
  if (s.kv_heads <= 0) s.kv_heads = s.heads;
  if (s.ffn == 0) s.ffn = (s.dim * 8 / 3 + 31) / 32 * 32;
  auto bad = [](const std::string& m) { return Status::InvalidArgument(m); };
  const bool qwen3 = s.arch == "qwen3", gemma = s.arch == "gemma", phi3 = s.arch == "phi3",
             falcon = s.arch == "falcon", qwen2 = s.arch == "qwen2";
  if (s.arch != "llama" && !qwen2 && !qwen3 && !gemma && !phi3 && !falcon)
    return bad("arch must be llama, qwen2, qwen3, gemma, phi3, falcon or deepseek2");
  const tensor::DType t = s.dtype;
  if (!tensor::CanQuantize(t) || !tensor::IsComputeSupported(t))
    return bad(
        "dtype must be one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
  if (s.dim <= 0 || s.layers <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.ffn <= 0 || s.ctx <= 0 ||
      s.dim > 65536 || s.layers > 1024 || s.ffn > 262144 || s.heads > 1024)
    return bad("dimensions must be positive (dim <= 65536, layers <= 1024, ffn <= 262144)");
  if (s.dim % s.heads != 0) return bad("dim must be a multiple of heads");
  if (s.heads % s.kv_heads != 0) return bad("heads must be a multiple of kv-heads");
  if ((s.dim / s.heads) % 2 != 0) return bad("the head dimension (dim/heads) must be even");
  const int64_t block = tensor::Traits(t).block_elems;
  if (s.dim % block != 0 || s.ffn % block != 0)
    return bad(base::StrFormat("dim and ffn must be multiples of %lld for %s", (long long)block,
                               tensor::DTypeName(t).data()));
  const gguf::Value* toks = vocab.Find("tokenizer.ggml.tokens");
  if (!toks || toks->type != gguf::ValueType::kArray || toks->elem_type != gguf::ValueType::kString)
    return bad(vocab.path() + " has no tokenizer.ggml.tokens");
  const int64_t n_vocab = static_cast<int64_t>(toks->count);
  const int64_t hd = s.dim / s.heads;

  gguf::GgufWriter w;
  const std::string a = s.arch + ".";
  w.SetString("general.architecture", s.arch);
  // b10573's vocabulary loader special-cases names containing "phi3": avoid the string.
  const std::string family = phi3 ? "phithree" : s.arch;
  w.SetString("general.name", base::StrFormat("kvforge-random-%s-d%lld-l%lld", family.c_str(),
                                              (long long)s.dim, (long long)s.layers));
  w.SetU32("general.file_type", tensor::LlamaFileType(t).value_or(0));
  w.SetU32(a + "context_length", static_cast<uint32_t>(s.ctx));
  w.SetU32(a + "embedding_length", static_cast<uint32_t>(s.dim));
  w.SetU32(a + "block_count", static_cast<uint32_t>(s.layers));
  w.SetU32(a + "feed_forward_length", static_cast<uint32_t>(s.ffn));
  w.SetU32(a + "attention.head_count", static_cast<uint32_t>(s.heads));
  w.SetU32(a + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  if (falcon)
    w.SetF32(a + "attention.layer_norm_epsilon", 1e-5f);
  else
    w.SetF32(a + "attention.layer_norm_rms_epsilon", qwen2 || qwen3 || gemma ? 1e-6f : 1e-5f);
  if (qwen3 || gemma) {
    w.SetU32(a + "attention.key_length", static_cast<uint32_t>(hd));
    w.SetU32(a + "attention.value_length", static_cast<uint32_t>(hd));
  }
  w.SetU32(a + "rope.dimension_count", static_cast<uint32_t>(hd));
  w.SetF32(a + "rope.freq_base", s.rope_base);
  for (const auto& key : vocab.keys())
    if (key.rfind("tokenizer.", 0) == 0) w.CopyValue(key, *vocab.Find(key));

  RandomTensors m{std::mt19937_64(s.seed), &w};
  const float s_in = 1.0f / std::sqrt(static_cast<float>(s.dim));
  const float s_ff = 1.0f / std::sqrt(static_cast<float>(s.ffn));
  const float s_res = 1.0f / std::sqrt(2.0f * static_cast<float>(s.layers));
  // Gemma scales its input embeddings by sqrt(dim): store them smaller to keep unit activations.
  KVF_RETURN_IF_ERROR(m.Matrix("token_embd.weight", s.dim, n_vocab, gemma ? s_in : 1.0f, t));
  KVF_RETURN_IF_ERROR(m.Vector("output_norm.weight", s.dim, 1.0f, 0.0f));
  if (falcon) KVF_RETURN_IF_ERROR(m.Vector("output_norm.bias", s.dim, 0.0f, 0.1f));
  if (!gemma) KVF_RETURN_IF_ERROR(m.Matrix("output.weight", s.dim, n_vocab, s_in * 4.0f, t));
  const int64_t qd = s.heads * hd, kvd = s.kv_heads * hd;
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    KVF_RETURN_IF_ERROR(m.Vector(b + "attn_norm.weight", s.dim, 1.0f, 0.0f));
    if (falcon) KVF_RETURN_IF_ERROR(m.Vector(b + "attn_norm.bias", s.dim, 0.0f, 0.1f));
    if (phi3 || falcon) {
      KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_qkv.weight", s.dim, qd + 2 * kvd, s_in, t));
    } else {
      KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_q.weight", s.dim, qd, s_in, t));
      KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_k.weight", s.dim, kvd, s_in, t));
      KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_v.weight", s.dim, kvd, s_in, t));
    }
    if (qwen2) {
      KVF_RETURN_IF_ERROR(m.Vector(b + "attn_q.bias", qd, 0.0f, 0.1f));
      KVF_RETURN_IF_ERROR(m.Vector(b + "attn_k.bias", kvd, 0.0f, 0.1f));
      KVF_RETURN_IF_ERROR(m.Vector(b + "attn_v.bias", kvd, 0.0f, 0.1f));
    }
    if (qwen3) {
      KVF_RETURN_IF_ERROR(m.Vector(b + "attn_q_norm.weight", hd, 1.0f, 0.1f));
      KVF_RETURN_IF_ERROR(m.Vector(b + "attn_k_norm.weight", hd, 1.0f, 0.1f));
    }
    KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_output.weight", qd, s.dim, s_in * s_res, t));
    if (!falcon) KVF_RETURN_IF_ERROR(m.Vector(b + "ffn_norm.weight", s.dim, 1.0f, 0.0f));
    if (phi3) {
      KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_up.weight", s.dim, 2 * s.ffn, s_in, t));
    } else {
      if (!falcon) KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_gate.weight", s.dim, s.ffn, s_in, t));
      KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_up.weight", s.dim, s.ffn, s_in, t));
    }
    KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_down.weight", s.ffn, s.dim, s_ff * s_res, t));
  }
  return w.WriteFile(path);
}

}  // namespace kvforge::model
