// kvforge info — describe a GGUF model.
#include <cstdio>
#include <map>
#include <string>

#include "base/strings.h"
#include "commands.h"
#include "flags.h"
#include "gguf/gguf_reader.h"
#include "kvforge/engine.h"
#include "model_file.h"

namespace kvforge::cli {

int InfoMain(const Args& args) {
  std::string model;
  bool json = false;
  FlagParser p("info",
               "Prints a GGUF model's architecture, sizes, weight types, context length,\n"
               "parameter count and KV-cache bytes per token.");
  p.AddString("model", &model, "GGUF model path (default: the embedded model)");
  p.AddBool("json", &json, "print a JSON object");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  EngineConfig eo;
  eo.model = model;
  eo.threads = 1;
  eo.max_model_len = 16;
  auto engine = Engine::Create(eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", engine.error().message().c_str());
    return 1;
  }
  const ModelInfo& i = (*engine)->info();
  // Weight types by tensor count, read straight from the file.
  std::map<std::string, std::pair<int, uint64_t>> dtypes;
  if (auto f = OpenModelFile(model); f.ok()) {
    for (const auto& t : (*f)->tensors()) {
      auto& e = dtypes[std::string(tensor::DTypeName(t.dtype))];
      e.first++;
      e.second += t.nbytes;
    }
  }
  const uint64_t kv16 = i.kv_bytes_per_token;
  if (json) {
    std::string dt;
    for (const auto& [name, e] : dtypes)
      dt += base::StrFormat("%s\"%s\":{\"tensors\":%d,\"bytes\":%llu}", dt.empty() ? "" : ",",
                            name.c_str(), e.first, (unsigned long long)e.second);
    std::printf(
        "{\"architecture\":%s,\"name\":%s,\"n_vocab\":%lld,\"n_embd\":%lld,\"n_layer\":%lld,"
        "\"n_head\":%lld,\"n_head_kv\":%lld,\"head_dim\":%lld,\"n_ff\":%lld,\"context_length\":%"
        "lld,"
        "\"rope_dim\":%lld,\"rope_freq_base\":%g,\"rope_freq_scale\":%g,\"rope_neox\":%s,"
        "\"rope_freq_factors\":%lld,\"block\":%s,\"rms_eps\":%g,\"tied_output\":%s,\"n_params\":%"
        "llu,\"weight_bytes\":%llu,"
        "\"tokenizer\":%s,\"bos\":%d,\"eos\":%d,\"kv_bytes_per_token_f16\":%llu,"
        "\"kv_bytes_per_token_f32\":%llu,\"dtypes\":{%s}}\n",
        base::JsonQuote(i.architecture).c_str(), base::JsonQuote(i.name).c_str(),
        (long long)i.n_vocab, (long long)i.n_embd, (long long)i.n_layer, (long long)i.n_head,
        (long long)i.n_head_kv, (long long)i.head_dim, (long long)i.n_ff, (long long)i.n_ctx_train,
        (long long)i.rope_dim, i.rope_freq_base, i.rope_freq_scale, i.rope_neox ? "true" : "false",
        (long long)i.rope_freq_factors, base::JsonQuote(i.block).c_str(), i.rms_eps,
        i.tied_output ? "true" : "false", (unsigned long long)i.n_params,
        (unsigned long long)i.weight_bytes, base::JsonQuote(i.tokenizer_model).c_str(), i.bos,
        i.eos, (unsigned long long)kv16, (unsigned long long)(kv16 * 2), dt.c_str());
    return 0;
  }
  std::printf("model:          %s\n",
              model.empty() ? "<embedded stories260K.gguf>" : model.c_str());
  std::printf("architecture:   %s%s%s\n", i.architecture.c_str(),
              i.name.empty() ? "" : "  name: ", i.name.c_str());
  std::printf("parameters:     %llu (%s of weights)\n", (unsigned long long)i.n_params,
              base::HumanBytes(i.weight_bytes).c_str());
  std::printf("vocab:          %lld tokens (%s tokenizer, bos %d, eos %d)\n", (long long)i.n_vocab,
              i.tokenizer_model.c_str(), i.bos, i.eos);
  std::printf("dims:           n_embd %lld, n_layer %lld, n_ff %lld\n", (long long)i.n_embd,
              (long long)i.n_layer, (long long)i.n_ff);
  const char* kind = i.n_head_kv == i.n_head ? "MHA" : (i.n_head_kv == 1 ? "MQA" : "GQA");
  std::printf("attention:      %lld heads, %lld KV heads (%s), head dim %lld\n",
              (long long)i.n_head, (long long)i.n_head_kv, kind, (long long)i.head_dim);
  if (i.kv_lora_rank > 0)
    std::printf(
        "MLA:            latent %lld + RoPE %lld per token per layer (one row for K and V); "
        "per head q/k %lld + %lld, v %lld; q_lora %lld\n",
        (long long)i.kv_lora_rank, (long long)i.qk_rope_dim, (long long)i.qk_nope_dim,
        (long long)i.qk_rope_dim, (long long)i.v_head_dim, (long long)i.q_lora_rank);
  if (i.n_expert > 0)
    std::printf(
        "MoE:            %lld experts x %lld wide, %lld used per token, %lld shared; "
        "layers 0-%lld dense\n",
        (long long)i.n_expert, (long long)i.n_ff_expert, (long long)i.n_expert_used,
        (long long)i.n_expert_shared, (long long)i.leading_dense - 1);
  std::printf("rope:           %lld dims, base %g, freq scale %g, %s%s\n", (long long)i.rope_dim,
              i.rope_freq_base, i.rope_freq_scale, i.rope_neox ? "neox" : "normal",
              i.rope_freq_factors == 0 ? ""
              : i.kv_lora_rank > 0     ? ", YaRN per-pair frequency factors"
                                       : ", Llama 3 frequency factors (rope_freqs)");
  std::printf("block:          %s\n", i.block.c_str());
  std::printf("norm eps:       %g;  output: %s\n", i.rms_eps,
              i.tied_output ? "tied to token embedding" : "separate");
  std::printf("context:        %lld tokens (trained)\n", (long long)i.n_ctx_train);
  std::printf("KV bytes/token: %llu (f16), %llu (f32); full context in f16: %s\n",
              (unsigned long long)kv16, (unsigned long long)(kv16 * 2),
              base::HumanBytes(kv16 * static_cast<uint64_t>(i.n_ctx_train)).c_str());
  for (const auto& [name, e] : dtypes)
    std::printf("weights %-7s %d tensors, %s\n", (name + ":").c_str(), e.first,
                base::HumanBytes(e.second).c_str());
  return 0;
}

}  // namespace kvforge::cli
