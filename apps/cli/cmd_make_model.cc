// kvforge make-model — writes a random-weight GGUF with a real vocabulary, for tests and
// benchmarks at realistic shapes (weights N(0, 1/fan_in) so activations keep their scale), or
// with --induction the hand-set induction-head model that the passkey evaluation needs.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/strings.h"
#include "commands.h"
#include "flags.h"
#include "gguf/gguf_reader.h"
#include "model/induction_model.h"
#include "model/random_model.h"
#include "model_file.h"
#include "tensor/dtype.h"

namespace kvforge::cli {

namespace {

int WriteInduction(const model::InductionModelSpec& spec, const gguf::GgufFile& vocab,
                   const std::string& out) {
  auto r = model::WriteInductionModel(spec, vocab, out);
  if (!r.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", r.error().message().c_str());
    return r.error().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::fprintf(stderr,
               "kvforge: wrote %s (induction heads: llama, dim 512, %lld layers (2 of them the "
               "circuit), 2 heads of 256, ffn %lld, vocab %lld, ctx %lld; logit margins: position "
               "%.1f, bigram %.1f)\n",
               out.c_str(), (long long)spec.layers, (long long)spec.ffn, (long long)r->n_vocab,
               (long long)spec.ctx, r->position_margin, r->content_margin);
  return 0;
}

}  // namespace

int MakeModelMain(const Args& args) {
  std::string arch = "llama", vocab_from, dtype_name = "f16", out;
  int64_t dim = 64, layers = 2, heads = 4, kv_heads = -1, ffn = 0, seed = 1, ctx = 2048;
  double rope_base = 10000.0;
  bool induction = false;
  // deepseek2
  int64_t kv_lora = 0, q_lora = 0, nope = 0, rope = 0, v_head = 0, experts = 0, experts_used = 0,
          shared = 0, expert_ffn = 0, leading_dense = 1;
  bool sigmoid = false;
  FlagParser p(
      "make-model",
      "Writes a valid random-weight GGUF (llama, qwen2, qwen3, gemma, phi3, falcon or deepseek2)\n"
      "that "
      "kvforge and other "
      "GGUF engines load. The tokenizer is copied from --vocab-from (default: the embedded "
      "model's).");
  p.AddString("arch", &arch, "llama | qwen2 | qwen3 | gemma | phi3 | falcon | deepseek2");
  p.AddInt("dim", &dim, "embedding width");
  p.AddInt("layers", &layers, "transformer blocks");
  p.AddInt("heads", &heads, "attention heads");
  p.AddInt("kv-heads", &kv_heads, "KV heads (default: heads)");
  p.AddInt("ffn", &ffn, "feed-forward width (default: 8/3 x dim rounded up to 32)");
  p.AddString("vocab-from", &vocab_from, "GGUF whose tokenizer.* metadata to copy");
  p.AddString(
      "dtype", &dtype_name,
      "weight type: f32 | f16 | bf16 | q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | q4_k | q5_k | q6_k "
      "(k-quants need dim and ffn multiples of 256)");
  p.AddInt("seed", &seed, "RNG seed");
  p.AddInt("ctx", &ctx, "context length written to the metadata");
  p.AddFloat("rope-base", &rope_base, "RoPE frequency base");
  p.AddBool("induction", &induction,
            "write the hand-set induction-head model instead (copies the token after the last "
            "occurrence of the current bigram; solves eval passkey with the full KV; takes "
            "--ctx, --dtype, --seed, --vocab-from, and --layers / --ffn to pad it with zero blocks "
            "to a size for speed measurements)");
  p.AddInt("kv-lora-rank", &kv_lora, "deepseek2: MLA latent width (default: dim / 4)");
  p.AddInt("q-lora-rank", &q_lora, "deepseek2: query compression width (0: plain attn_q)");
  p.AddInt("qk-nope-dim", &nope, "deepseek2: per-head q/k dims without RoPE (default: dim/heads)");
  p.AddInt("qk-rope-dim", &rope, "deepseek2: decoupled RoPE dims (default: nope / 2)");
  p.AddInt("v-head-dim", &v_head, "deepseek2: per-head value width (default: nope)");
  p.AddInt("experts", &experts, "deepseek2: routed experts (0: dense FFN everywhere)");
  p.AddInt("experts-used", &experts_used, "deepseek2: experts per token (default: min(6, n))");
  p.AddInt("shared-experts", &shared, "deepseek2: shared experts");
  p.AddInt("expert-ffn", &expert_ffn, "deepseek2: width of one expert (default: ffn / 4)");
  p.AddInt("leading-dense", &leading_dense, "deepseek2: dense layers before the MoE ones");
  p.AddBool("sigmoid-gating", &sigmoid,
            "deepseek2: V3 routing (sigmoid, exp_probs_b bias, normalised, x2.5) instead of "
            "V2's softmax");
  p.AddString("out", &out, "output path");
  p.Require("out");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  auto dtype = tensor::DTypeFromName(dtype_name);
  if (!dtype) {
    std::fprintf(stderr,
                 "kvforge: unknown --dtype '%s' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                 "q4_k, q5_k, q6_k)\n",
                 dtype_name.c_str());
    return 2;
  }
  if (induction) {
    if (arch != "llama" || dim != 64 || heads != 4 || kv_heads != -1 || rope_base != 10000.0) {
      std::fprintf(stderr,
                   "kvforge: --induction fixes the architecture and width; drop --arch, --dim, "
                   "--heads, --kv-heads and --rope-base (--layers and --ffn pad it with zero "
                   "blocks)\n");
      return 2;
    }
    auto vf = OpenModelFile(vocab_from);
    if (!vf.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", vf.error().message().c_str());
      return 1;
    }
    model::InductionModelSpec spec;
    spec.ctx = ctx;
    spec.dtype = *dtype;
    spec.seed = static_cast<uint64_t>(seed);
    spec.layers = layers;
    if (ffn != 0) spec.ffn = ffn;
    return WriteInduction(spec, **vf, out);
  }
  model::RandomModelSpec spec;
  spec.arch = arch;
  spec.dim = dim;
  spec.layers = layers;
  spec.heads = heads;
  spec.kv_heads = kv_heads < 0 ? heads : kv_heads;
  spec.ffn = ffn;
  spec.ctx = ctx;
  spec.rope_base = static_cast<float>(rope_base);
  spec.dtype = *dtype;
  spec.seed = static_cast<uint64_t>(seed);
  spec.kv_lora_rank = kv_lora;
  spec.q_lora_rank = q_lora;
  spec.qk_nope_dim = nope;
  spec.qk_rope_dim = rope;
  spec.v_head_dim = v_head;
  spec.experts = experts;
  spec.experts_used = experts_used;
  spec.shared_experts = shared;
  spec.expert_ffn = expert_ffn;
  spec.leading_dense = leading_dense;
  spec.sigmoid_gating = sigmoid;
  if (arch == "deepseek2") kv_heads = 1;
  if (kv_heads < 0) kv_heads = heads;
  if (ffn == 0) ffn = (dim * 8 / 3 + 31) / 32 * 32;
  auto vf = OpenModelFile(vocab_from);
  if (!vf.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", vf.error().message().c_str());
    return 1;
  }
  const int64_t n_vocab = (*vf)->Find("tokenizer.ggml.tokens")
                              ? static_cast<int64_t>((*vf)->Find("tokenizer.ggml.tokens")->count)
                              : 0;
  if (Status st = model::WriteRandomModel(spec, **vf, out); !st.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", st.message().c_str());
    return st.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::fprintf(stderr,
               "kvforge: wrote %s (%s, dim %lld, %lld layers, %lld heads / %lld KV heads, ffn "
               "%lld, vocab %lld, %s)\n",
               out.c_str(), arch.c_str(), (long long)dim, (long long)layers, (long long)heads,
               (long long)kv_heads, (long long)ffn, (long long)n_vocab, dtype_name.c_str());
  return 0;
}

}  // namespace kvforge::cli
