// kvforge calc — the KV-cache memory calculator. Thin layer over kvstore::ComputeKvCalc: parse
// flags, pick the model shape (GGUF file, preset or flags), print text or JSON. Exit codes: 0 ok,
// 1 the model file could not be read, 2 bad or conflicting flags / values / overflow.
#include <cstdio>
#include <string>
#include <vector>

#include "base/strings.h"
#include "commands.h"
#include "flags.h"
#include "kvstore/kv_calc.h"
#include "kvstore/kv_layout.h"
#include "model_shape.h"

namespace kvforge::cli {
namespace {

int UsageError(const std::string& message) {
  std::fprintf(stderr, "kvforge calc: %s\n(see kvforge calc --help)\n", message.c_str());
  return 2;
}

}  // namespace

int CalcMain(const Args& args) {
  std::string model_path;
  std::string preset;
  std::string kv_dtype = "f16";
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t mla_rank = 0;
  int64_t rope_dim = 0;
  int64_t seq_len = 0;
  int64_t batch = 1;
  int64_t block_tokens = 0;
  bool json = false;

  FlagParser p(
      "calc",
      "KV-cache memory calculator: bytes per token and total KV bytes for a model,\n"
      "with the same model compared as MHA / GQA / MQA (and MLA where it has one).\n"
      "  kvforge calc [--model PATH | --preset NAME | --layers L (--kv-heads H --head-dim D\n"
      "               | --mla-rank R --rope-dim P)] --seq-len T [--batch B] [--kv-dtype T]\n"
      "               [--json]");
  p.AddString("model", &model_path,
              "GGUF model to read the attention shape from (default: the embedded model)");
  p.AddString("preset", &preset, "built-in shape: " + kvstore::KvPresetNames());
  p.AddInt("layers", &layers, "number of layers (custom shape)");
  p.AddInt("heads", &heads, "query heads, for the MHA/MQA comparison (default: --kv-heads)");
  p.AddInt("kv-heads", &kv_heads, "K/V heads per layer (custom shape)");
  p.AddInt("head-dim", &head_dim, "width of one head (custom shape)");
  p.AddInt("mla-rank", &mla_rank, "MLA kv_lora_rank: latent values per token per layer");
  p.AddInt("rope-dim", &rope_dim, "MLA decoupled RoPE values per token per layer");
  p.AddInt("seq-len", &seq_len, "tokens per sequence");
  p.AddInt("batch", &batch, "number of sequences");
  p.AddString("kv-dtype", &kv_dtype, "KV dtype: " + kvstore::KvDtypeChoices());
  p.AddInt("block-tokens", &block_tokens,
           "tokens per paged block (default 16; 32 for kivi2/kivi4)");
  p.AddBool("json", &json, "print one JSON object");
  p.Require("seq-len");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;

  // Every integer flag that was given must be positive.
  const struct {
    const char* name;
    int64_t value;
  } ints[] = {{"layers", layers},     {"heads", heads},       {"kv-heads", kv_heads},
              {"head-dim", head_dim}, {"mla-rank", mla_rank}, {"rope-dim", rope_dim},
              {"seq-len", seq_len},   {"batch", batch},       {"block-tokens", block_tokens}};
  for (const auto& f : ints) {
    if (p.Given(f.name) && f.value <= 0) {
      return UsageError(base::StrFormat("--%s must be a positive integer (got %lld)", f.name,
                                        static_cast<long long>(f.value)));
    }
  }

  // Exactly one source of the model shape.
  const int sources =
      (p.Given("model") ? 1 : 0) + (p.Given("preset") ? 1 : 0) + (p.Given("layers") ? 1 : 0);
  if (sources > 1) return UsageError("--model, --preset and --layers are mutually exclusive");
  const std::vector<std::string> shape_flags = {"heads", "kv-heads", "head-dim", "mla-rank",
                                                "rope-dim"};
  if (!p.Given("layers")) {
    for (const std::string& f : shape_flags) {
      if (p.Given(f)) {
        return UsageError("--" + f + " describes a custom shape: use it with --layers, not with " +
                          (p.Given("model") ? "--model" : "--preset"));
      }
    }
  }

  Result<kvstore::KvDtype> dtype = kvstore::ParseKvDtype(kv_dtype);
  if (!dtype.ok()) return UsageError("--kv-dtype: " + dtype.status().message());

  kvstore::KvCalcRequest req;
  req.seq_len = seq_len;
  req.batch = batch;
  req.dtype = *dtype;
  req.block_tokens = block_tokens;
  kvstore::KvModelSpec& m = req.model;
  if (sources == 0 || p.Given("model")) {  // no shape given: the embedded model
    Result<KvModelShape> shape = ReadKvModelShape(model_path);
    if (!shape.ok()) {
      std::fprintf(stderr, "kvforge calc: %s: %s\n", model_path.c_str(),
                   shape.status().ToString().c_str());
      return shape.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    m.name = shape->name.empty() ? model_path : shape->name;
    m.n_layers = shape->n_layers;
    m.n_heads = shape->n_heads;
    m.n_kv_heads = shape->n_kv_heads;
    m.head_dim = shape->head_dim;
    m.mla_kv_lora_rank = shape->mla_kv_lora_rank;
    m.mla_rope_dim = shape->mla_rope_dim;
    m.context_length = shape->context_length;
  } else if (p.Given("preset")) {
    const kvstore::KvModelSpec* spec = kvstore::FindKvPreset(preset);
    if (spec == nullptr) {
      return UsageError("unknown --preset '" + preset + "' (choose from " +
                        kvstore::KvPresetNames() + ")");
    }
    m = *spec;
  } else {
    const bool mla = p.Given("mla-rank") || p.Given("rope-dim");
    if (mla && !(p.Given("mla-rank") && p.Given("rope-dim"))) {
      return UsageError("an MLA shape needs both --mla-rank and --rope-dim");
    }
    if (!mla && !(p.Given("kv-heads") && p.Given("head-dim"))) {
      return UsageError(
          "a custom shape needs --kv-heads and --head-dim (or --mla-rank and "
          "--rope-dim)");
    }
    if (mla && p.Given("head-dim") != (p.Given("heads") || p.Given("kv-heads"))) {
      return UsageError("the MHA equivalent of an MLA shape needs --head-dim with --heads");
    }
    m.name = "custom";
    m.n_layers = layers;
    m.n_heads = heads;
    m.n_kv_heads = p.Given("kv-heads") ? kv_heads : heads;
    m.head_dim = head_dim;
    m.mla_kv_lora_rank = mla_rank;
    m.mla_rope_dim = rope_dim;
    if (mla && m.n_heads == 0) m.n_heads = m.n_kv_heads;
  }

  Result<kvstore::KvCalcReport> report = kvstore::ComputeKvCalc(req);
  if (!report.ok()) {
    // Shapes read from a file that calc cannot handle are the file's fault, not a usage error;
    // everything else here comes from the flags.
    if (p.Given("model") && report.status().code() == StatusCode::kInternal) {
      std::fprintf(stderr, "kvforge calc: %s\n", report.status().ToString().c_str());
      return 1;
    }
    return UsageError(report.status().message());
  }
  const std::string out =
      json ? kvstore::FormatKvCalcJson(*report) : kvstore::FormatKvCalcText(*report);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace kvforge::cli
