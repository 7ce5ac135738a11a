// vocab.h — the token vocabulary read from GGUF `tokenizer.ggml.*` metadata, shared by every
// tokenizer family: texts, scores, token types, special ids, and fast text -> id lookup.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::gguf {
class GgufFile;
}

namespace kvforge::tokenizer {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Values of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Hash/equality that accept std::string_view, so lookups build no temporary std::string.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE), ...
  std::string pre;    // tokenizer.ggml.pre (BPE pre-tokenizer family)
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::unordered_map<std::string, TokenId, TextHash, std::equal_to<>> to_id;
  std::vector<std::string> merges;  // BPE only: "left right", by rank

  TokenId bos = kNoToken, eos = kNoToken, unk = kNoToken, pad = kNoToken, eot = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;
  bool remove_extra_whitespaces = false;
  TokenId byte_tokens[256];  // SPM "<0xXX>" ids (kNoToken when absent)
  // Tokens matched as whole strings before sub-word encoding, longest text first.
  std::vector<TokenId> special_tokens;

  int64_t size() const { return static_cast<int64_t>(texts.size()); }
  TokenId Find(std::string_view text) const;
  // End-of-generation: EOS, EOT, or other control tokens llama.cpp treats as end markers.
  bool IsEog(TokenId id) const;

  static Result<Vocab> FromGguf(const gguf::GgufFile& file);
};

}  // namespace kvforge::tokenizer
