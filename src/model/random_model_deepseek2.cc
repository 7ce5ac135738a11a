// Random-weight deepseek2 models (MLA, optionally MoE) in the layout llama.cpp writes today:
// split attn_k_b / attn_v_b, q-lora or a plain attn_q, 3-D expert tensors, a tied output.
#include <algorithm>
#include <cmath>

#include "base/strings.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/random_model.h"
#include "model/random_tensor_maker.h"

namespace kvforge::model {
namespace {

// Fills the defaults of a deepseek2 spec and checks the shapes the weight type can hold.
Status ResolveDeepseek2(RandomModelSpec* s) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument("deepseek2: " + m); };
  if (s->dim <= 0 || s->layers <= 0 || s->heads <= 0 || s->ctx <= 0 || s->dim > 65536 ||
      s->layers > 1024 || s->heads > 1024)
    return bad("dimensions must be positive (dim <= 65536, layers <= 1024, heads <= 1024)");
  if (s->ffn == 0) s->ffn = (s->dim * 8 / 3 + 31) / 32 * 32;
  if (s->kv_lora_rank == 0) s->kv_lora_rank = s->dim / 4;
  if (s->qk_nope_dim == 0) s->qk_nope_dim = s->dim / s->heads;
  if (s->qk_rope_dim == 0) s->qk_rope_dim = s->qk_nope_dim / 2;
  if (s->v_head_dim == 0) s->v_head_dim = s->qk_nope_dim;
  if (s->experts > 0) {
    if (s->experts_used == 0) s->experts_used = std::min<int64_t>(6, s->experts);
    if (s->expert_ffn == 0) s->expert_ffn = (s->ffn / 4 + 31) / 32 * 32;
    if (s->experts_used < 1 || s->experts_used > s->experts || s->experts > 1024)
      return bad("experts-used must be within 1 .. experts (<= 1024)");
    if (s->shared_experts < 0 || s->leading_dense < 0 || s->leading_dense > s->layers)
      return bad("shared experts and leading dense layers must be >= 0 (dense <= layers)");
  }
  for (int64_t v :
       {s->ffn, s->kv_lora_rank, s->qk_nope_dim, s->v_head_dim, s->expert_ffn, s->q_lora_rank})
    if (v < 0 || v > 262144) return bad("widths must be within 0 .. 262144");
  if (s->kv_lora_rank < 1 || s->qk_nope_dim < 1 || s->v_head_dim < 1 || s->qk_rope_dim < 2 ||
      s->qk_rope_dim % 2 != 0)
    return bad("kv-lora, nope and v widths must be positive and the RoPE width even, >= 2");
  const int64_t block = tensor::Traits(s->dtype).block_elems;
  // Every matrix's input width: dim, q_lora, kv_lora, nope (attn_k_b), H Vh, ffn, expert ffn.
  for (int64_t cols : {s->dim, s->q_lora_rank, s->kv_lora_rank, s->qk_nope_dim,
                       s->heads * s->v_head_dim, s->ffn, s->expert_ffn})
    if (cols % block != 0)
      return bad(base::StrFormat("every input width must be a multiple of %lld for %s",
                                 (long long)block, tensor::DTypeName(s->dtype).data()));
  return Status::Ok();
}

}  // namespace

Status WriteRandomDeepseek2(const RandomModelSpec& in, const gguf::GgufFile& vocab,
                            const std::string& path) {
  RandomModelSpec s = in;
  if (!tensor::CanQuantize(s.dtype) || !tensor::IsComputeSupported(s.dtype))
    return Status::InvalidArgument(
        "dtype must be one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
  KVF_RETURN_IF_ERROR(ResolveDeepseek2(&s));
  const gguf::Value* toks = vocab.Find("tokenizer.ggml.tokens");
  if (!toks || toks->type != gguf::ValueType::kArray || toks->elem_type != gguf::ValueType::kString)
    return Status::InvalidArgument(vocab.path() + " has no tokenizer.ggml.tokens");
  const auto n_vocab = static_cast<int64_t>(toks->count);
  const int64_t H = s.heads, R = s.kv_lora_rank, P = s.qk_rope_dim, N = s.qk_nope_dim,
                Vh = s.v_head_dim, X = s.experts, F = s.expert_ffn;
  const tensor::DType t = s.dtype;
  gguf::GgufWriter w;
  const std::string a = "deepseek2.";
  auto u32 = [&](const std::string& k, int64_t v) { w.SetU32(a + k, static_cast<uint32_t>(v)); };
  w.SetString("general.architecture", "deepseek2");
  w.SetString("general.name",
              base::StrFormat("kvforge-random-deepseek2-d%lld-l%lld%s", (long long)s.dim,
                              (long long)s.layers, X > 0 ? "-moe" : ""));
  w.SetU32("general.file_type", tensor::LlamaFileType(t).value_or(0));
  u32("context_length", s.ctx);
  u32("embedding_length", s.dim);
  u32("block_count", s.layers);
  u32("feed_forward_length", s.ffn);
  u32("attention.head_count", H);
  u32("attention.head_count_kv", 1);
  u32("attention.key_length", R + P);
  u32("attention.value_length", R);
  u32("attention.key_length_mla", N + P);
  u32("attention.value_length_mla", Vh);
  u32("attention.q_lora_rank", s.q_lora_rank);
  u32("attention.kv_lora_rank", R);
  u32("leading_dense_block_count", X > 0 ? s.leading_dense : s.layers);
  w.SetF32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  u32("rope.dimension_count", P);
  w.SetF32(a + "rope.freq_base", s.rope_base);
  u32("vocab_size", n_vocab);
  if (X > 0) {
    u32("expert_count", X);
    u32("expert_used_count", s.experts_used);
    u32("expert_shared_count", s.shared_experts);
    u32("expert_feed_forward_length", F);
    w.SetF32(a + "expert_weights_scale", s.sigmoid_gating ? 2.5f : 1.0f);
    w.SetBool(a + "expert_weights_norm", s.sigmoid_gating);
    u32("expert_gating_func", s.sigmoid_gating ? 2 : 1);
  }
  for (const auto& key : vocab.keys())
    if (key.rfind("tokenizer.", 0) == 0) w.CopyValue(key, *vocab.Find(key));

  RandomTensors m{std::mt19937_64(s.seed), &w};
  auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  const float s_res = 1.0f / std::sqrt(2.0f * static_cast<float>(s.layers));
  KVF_RETURN_IF_ERROR(m.Matrix("token_embd.weight", s.dim, n_vocab, 1.0f, t));
  KVF_RETURN_IF_ERROR(m.Vector("output_norm.weight", s.dim, 1.0f, 0.0f));
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    KVF_RETURN_IF_ERROR(m.Vector(b + "attn_norm.weight", s.dim, 1.0f, 0.0f));
    if (s.q_lora_rank > 0) {
      KVF_RETURN_IF_ERROR(
          m.Matrix(b + "attn_q_a.weight", s.dim, s.q_lora_rank, inv_sqrt(s.dim), t));
      KVF_RETURN_IF_ERROR(m.Vector(b + "attn_q_a_norm.weight", s.q_lora_rank, 1.0f, 0.0f));
      KVF_RETURN_IF_ERROR(
          m.Matrix(b + "attn_q_b.weight", s.q_lora_rank, H * (N + P), inv_sqrt(s.q_lora_rank), t));
    } else {
      KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_q.weight", s.dim, H * (N + P), inv_sqrt(s.dim), t));
    }
    KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_kv_a_mqa.weight", s.dim, R + P, inv_sqrt(s.dim), t));
    KVF_RETURN_IF_ERROR(m.Vector(b + "attn_kv_a_norm.weight", R, 1.0f, 0.0f));
    KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_k_b.weight", N, R, inv_sqrt(R), t, H));
    KVF_RETURN_IF_ERROR(m.Matrix(b + "attn_v_b.weight", R, Vh, inv_sqrt(R), t, H));
    KVF_RETURN_IF_ERROR(
        m.Matrix(b + "attn_output.weight", H * Vh, s.dim, inv_sqrt(H * Vh) * s_res, t));
    KVF_RETURN_IF_ERROR(m.Vector(b + "ffn_norm.weight", s.dim, 1.0f, 0.0f));
    if (X == 0 || l < s.leading_dense) {
      KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_gate.weight", s.dim, s.ffn, inv_sqrt(s.dim), t));
      KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_up.weight", s.dim, s.ffn, inv_sqrt(s.dim), t));
      KVF_RETURN_IF_ERROR(
          m.Matrix(b + "ffn_down.weight", s.ffn, s.dim, inv_sqrt(s.ffn) * s_res, t));
      continue;
    }
    // The router stays f32, as llama.cpp's converters keep small routing tensors precise.
    KVF_RETURN_IF_ERROR(
        m.Matrix(b + "ffn_gate_inp.weight", s.dim, X, inv_sqrt(s.dim), tensor::DType::kF32));
    if (s.sigmoid_gating) KVF_RETURN_IF_ERROR(m.Vector(b + "exp_probs_b.bias", X, 0.0f, 0.05f));
    KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_gate_exps.weight", s.dim, F, inv_sqrt(s.dim), t, X));
    KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_up_exps.weight", s.dim, F, inv_sqrt(s.dim), t, X));
    KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_down_exps.weight", F, s.dim, inv_sqrt(F) * s_res, t, X));
    if (s.shared_experts > 0) {
      const int64_t S = s.shared_experts * F;
      KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_gate_shexp.weight", s.dim, S, inv_sqrt(s.dim), t));
      KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_up_shexp.weight", s.dim, S, inv_sqrt(s.dim), t));
      KVF_RETURN_IF_ERROR(m.Matrix(b + "ffn_down_shexp.weight", S, s.dim, inv_sqrt(S) * s_res, t));
    }
  }
  return w.WriteFile(path);
}

}  // namespace kvforge::model
