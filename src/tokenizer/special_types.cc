#include "tokenizer/special_types.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "gguf/gguf_reader.h"

namespace kvforge::tokenizer {

// Mirrors llama.cpp b10573 llama_vocab::impl::load (src/llama-vocab.cpp): the FIM token ids from
// their keys or well-known texts, the end-of-generation text list, and the gpt-oss / Gemma 4
// exceptions, in that order.
void ApplyLlamaCppTokenTypes(const gguf::GgufFile& file, Vocab* vocab) {
  Vocab& v = *vocab;
  auto find = [&](std::string_view t) { return v.Find(t); };
  auto type = [&](TokenId id) -> TokenType& { return v.types[static_cast<size_t>(id)]; };
  auto make_control = [&](TokenId id) {
    if (type(id) != TokenType::kControl && type(id) != TokenType::kUnknown)
      type(id) = TokenType::kControl;
  };
  std::vector<TokenId> eog;
  auto add_eog = [&](TokenId id) {
    if (id != kNoToken && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
  };
  auto key_id = [&](const char* key) -> TokenId {
    auto x = file.GetIntOr(key, -1);
    return x.ok() && *x >= 0 && *x < v.size() ? static_cast<TokenId>(*x) : kNoToken;
  };
  struct FimKind {
    const char* key;
    const char* old_key;
    std::vector<const char*> texts;
    bool eog;
  };
  const std::vector<FimKind> fim = {
      {"tokenizer.ggml.fim_pre_token_id",
       "tokenizer.ggml.prefix_token_id",
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
        "<\xEF\xBD\x9C"
        "fim\xE2\x96\x81"
        "begin\xEF\xBD\x9C>",
        "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"},
       false},
      {"tokenizer.ggml.fim_suf_token_id",
       "tokenizer.ggml.suffix_token_id",
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
        "<\xEF\xBD\x9C"
        "fim\xE2\x96\x81"
        "hole\xEF\xBD\x9C>",
        "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"},
       false},
      {"tokenizer.ggml.fim_mid_token_id",
       "tokenizer.ggml.middle_token_id",
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
        "<\xEF\xBD\x9C"
        "fim\xE2\x96\x81"
        "end\xEF\xBD\x9C>",
        "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"},
       false},
      {"tokenizer.ggml.fim_pad_token_id",
       nullptr,
       {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
       true},
      {"tokenizer.ggml.fim_rep_token_id",
       nullptr,
       {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
       true},
      {"tokenizer.ggml.fim_sep_token_id", nullptr, {"<|file_sep|>"}, true},
  };
  for (const FimKind& k : fim) {
    TokenId id = key_id(k.key);
    if (id == kNoToken && k.old_key != nullptr) id = key_id(k.old_key);
    if (id == kNoToken) {
      for (const char* t : k.texts) {
        id = find(t);
        if (id != kNoToken) {
          make_control(id);
          break;
        }
      }
    }
    if (k.eog) add_eog(id);
  }
  static const char* const kEogTexts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<\xEF\xBD\x9C"
                                          "end\xE2\x96\x81"
                                          "of\xE2\x96\x81"
                                          "sentence\xEF\xBD\x9C>",
                                          "[e~["};
  for (const char* t : kEogTexts) {
    const TokenId id = find(t);
    if (id == kNoToken) continue;
    add_eog(id);
    make_control(id);
  }
  for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const TokenId id = find(t);
    if (id != kNoToken) type(id) = TokenType::kUserDefined;
  }
  add_eog(v.eos);
  add_eog(v.eot);
  auto in_eog = [&](const char* t) {
    const TokenId id = find(t);
    return id != kNoToken && std::find(eog.begin(), eog.end(), id) != eog.end();
  };
  if (in_eog("<|end|>") && ((in_eog("<|return|>") && in_eog("<|call|>")) ||
                            (in_eog("<|calls|>") && in_eog("<|flush|>"))))
    type(find("<|end|>")) = TokenType::kUserDefined;
  if (in_eog("<|tool_response>") && in_eog("</s>")) type(find("</s>")) = TokenType::kNormal;
}

}  // namespace kvforge::tokenizer
