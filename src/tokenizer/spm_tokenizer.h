// spm_tokenizer.h — SentencePiece-style tokenizer for GGUF "llama" vocabularies: whitespace
// escaped to U+2581, optional leading-space prefix, greedy highest-score bigram merging over
// UTF-8 characters, and byte fallback (<0xXX>) for anything the vocabulary lacks.
// Matches llama.cpp's llm_tokenizer_spm (and so SentencePiece's BPE-model encoding).
#pragma once

#include "tokenizer/tokenizer.h"

namespace kvforge::tokenizer {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab vocab);
  std::vector<TokenId> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenToPiece(TokenId id, bool render_special) const override;

 private:
  void EncodeFragment(std::string_view escaped, std::vector<TokenId>* out) const;
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;
  // True when no vocabulary piece has U+2581 after another character: then no merge can cross
  // the start of a whitespace-prefixed word, so words are encoded independently (and repeated
  // words once), with results identical to merging the whole fragment.
  bool split_words_ = false;
};

}  // namespace kvforge::tokenizer
