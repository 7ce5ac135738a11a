// kvforge make-model — writes a random-weight GGUF with a real vocabulary, for tests and
// benchmarks at realistic shapes. Weights are N(0, 1/fan_in) so activations keep their scale.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/strings.h"
#include "commands.h"
#include "flags.h"
#include "gguf/gguf_reader.h"
#include "model/random_model.h"
#include "model_file.h"
#include "tensor/dtype.h"

namespace kvforge::cli {

int MakeModelMain(const Args& args) {
  std::string arch = "llama", vocab_from, dtype_name = "f16", out;
  int64_t dim = 64, layers = 2, heads = 4, kv_heads = -1, ffn = 0, seed = 1, ctx = 2048;
  double rope_base = 10000.0;
  FlagParser p(
      "make-model",
      "Writes a valid random-weight GGUF (llama or qwen2 architecture) that kvforge and other\n"
      "GGUF engines load. The tokenizer is copied from --vocab-from (default: the embedded "
      "model's).");
  p.AddString("arch", &arch, "llama | qwen2");
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
