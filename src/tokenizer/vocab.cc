#include "tokenizer/vocab.h"

#include <algorithm>

#include "base/log.h"
#include "base/strings.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/special_types.h"

namespace kvforge::tokenizer {

TokenId Vocab::Find(std::string_view text) const {
  auto it = to_id.find(text);
  return it == to_id.end() ? kNoToken : it->second;
}

bool Vocab::IsEog(TokenId id) const { return id != kNoToken && (id == eos || id == eot); }

namespace {

// End-of-generation markers beyond EOS: control tokens such as <|eot_id|>, <|im_end|>.
void DetectEndOfTurn(Vocab* v) {
  if (v->eot != kNoToken) return;
  for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"}) {
    const TokenId id = v->Find(t);
    if (id != kNoToken && id != v->eos &&
        v->types[static_cast<size_t>(id)] == TokenType::kControl) {
      v->eot = id;
      return;
    }
  }
}

// Tokens matched as whole strings (control, user-defined, unknown), longest text first.
void IndexSpecialTokens(Vocab* v) {
  v->special_tokens.clear();
  for (size_t i = 0; i < v->texts.size(); ++i) {
    const TokenType t = v->types[i];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !v->texts[i].empty())
      v->special_tokens.push_back(static_cast<TokenId>(i));
  }
  std::stable_sort(v->special_tokens.begin(), v->special_tokens.end(), [&](TokenId a, TokenId b) {
    return v->texts[static_cast<size_t>(a)].size() > v->texts[static_cast<size_t>(b)].size();
  });
}

}  // namespace

Result<Vocab> Vocab::FromGguf(const gguf::GgufFile& f) {
  Vocab v;
  KVF_ASSIGN_OR_RETURN(v.model, f.GetString("tokenizer.ggml.model"));
  if (const auto* p = f.Find("tokenizer.ggml.pre"); p && p->type == gguf::ValueType::kString)
    v.pre = std::string(p->str);
  KVF_ASSIGN_OR_RETURN(const gguf::Value* tokens,
                       f.GetArray("tokenizer.ggml.tokens", gguf::ValueType::kString));
  const size_t n = tokens->strings.size();
  if (n == 0 || n > (1u << 24))
    return Status::InvalidArgument(f.path() + ": vocabulary size out of range");
  v.texts.reserve(n);
  v.to_id.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    v.texts.emplace_back(tokens->strings[i]);
    // First occurrence wins, like llama.cpp's token_to_id map built in order.
    v.to_id.emplace(v.texts.back(), static_cast<TokenId>(i));
  }
  v.scores.assign(n, 0.0f);
  if (f.Find("tokenizer.ggml.scores")) {
    KVF_ASSIGN_OR_RETURN(const gguf::Value* s,
                         f.GetArray("tokenizer.ggml.scores", gguf::ValueType::kF32));
    if (s->count != n)
      return Status::InvalidArgument(f.path() + ": tokenizer.ggml.scores length != token count");
    for (size_t i = 0; i < n; ++i)
      v.scores[i] = static_cast<float>(gguf::GgufFile::ArrayFloat(*s, i));
  }
  v.types.assign(n, TokenType::kNormal);
  if (f.Find("tokenizer.ggml.token_type")) {
    KVF_ASSIGN_OR_RETURN(const gguf::Value* t,
                         f.GetArray("tokenizer.ggml.token_type", gguf::ValueType::kI32));
    if (t->count != n)
      return Status::InvalidArgument(f.path() +
                                     ": tokenizer.ggml.token_type length != token count");
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = gguf::GgufFile::ArrayInt(*t, i);
      v.types[i] = (x >= 0 && x <= 6) ? static_cast<TokenType>(x) : TokenType::kNormal;
    }
  }
  if (f.Find("tokenizer.ggml.merges")) {
    KVF_ASSIGN_OR_RETURN(const gguf::Value* m,
                         f.GetArray("tokenizer.ggml.merges", gguf::ValueType::kString));
    v.merges.reserve(m->strings.size());
    for (auto s : m->strings) v.merges.emplace_back(s);
  }
  const bool spm = v.model == "llama";
  auto special = [&](const char* key, TokenId fallback, TokenId* out) -> Status {
    KVF_ASSIGN_OR_RETURN(int64_t id, f.GetIntOr(key, fallback));
    if (id == 0xFFFFFFFFll) id = kNoToken;  // llama.cpp writes u32 -1 for "none"
    if (id != kNoToken && (id < 0 || id >= static_cast<int64_t>(n))) {
      KVF_LOG_WARN("%s: %s = %lld is outside the vocabulary; ignored", f.path().c_str(), key,
                   (long long)id);
      id = kNoToken;
    }
    *out = static_cast<TokenId>(id);
    return Status::Ok();
  };
  KVF_RETURN_IF_ERROR(special("tokenizer.ggml.bos_token_id", spm ? 1 : kNoToken, &v.bos));
  KVF_RETURN_IF_ERROR(special("tokenizer.ggml.eos_token_id", spm ? 2 : kNoToken, &v.eos));
  KVF_RETURN_IF_ERROR(special("tokenizer.ggml.unknown_token_id", spm ? 0 : kNoToken, &v.unk));
  KVF_RETURN_IF_ERROR(special("tokenizer.ggml.padding_token_id", kNoToken, &v.pad));
  KVF_RETURN_IF_ERROR(special("tokenizer.ggml.eot_token_id", kNoToken, &v.eot));
  KVF_ASSIGN_OR_RETURN(v.add_bos, f.GetBoolOr("tokenizer.ggml.add_bos_token", spm));
  KVF_ASSIGN_OR_RETURN(v.add_eos, f.GetBoolOr("tokenizer.ggml.add_eos_token", false));
  KVF_ASSIGN_OR_RETURN(v.add_space_prefix, f.GetBoolOr("tokenizer.ggml.add_space_prefix", spm));
  KVF_ASSIGN_OR_RETURN(v.remove_extra_whitespaces,
                       f.GetBoolOr("tokenizer.ggml.remove_extra_whitespaces", false));
  if (v.add_bos && v.bos == kNoToken) v.add_bos = false;
  if (v.add_eos && v.eos == kNoToken) v.add_eos = false;

  for (int b = 0; b < 256; ++b) v.byte_tokens[b] = kNoToken;
  for (size_t i = 0; i < n; ++i) {
    if (v.types[i] != TokenType::kByte) continue;
    const std::string& t = v.texts[i];
    auto hex = [](char ch) {
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
      if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
      return -1;
    };
    if (t.size() == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && t[5] == '>' &&
        hex(t[3]) >= 0 && hex(t[4]) >= 0) {
      const int b = hex(t[3]) * 16 + hex(t[4]);
      if (v.byte_tokens[b] == kNoToken) v.byte_tokens[b] = static_cast<TokenId>(i);
    }
  }
  // The end-of-turn marker is looked for before and after llama.cpp's retyping, as it does.
  DetectEndOfTurn(&v);
  ApplyLlamaCppTokenTypes(f, &v);
  DetectEndOfTurn(&v);
  IndexSpecialTokens(&v);
  return v;
}

}  // namespace kvforge::tokenizer
