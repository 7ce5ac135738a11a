// tokenizer.h — text <-> token ids, with the vocabulary family chosen from GGUF metadata.
//
// Encode() follows llama.cpp's llama_tokenize semantics: add_special adds BOS/EOS as the vocab
// asks; parse_special matches control-token text (e.g. "<s>", "<|im_start|>") as those tokens,
// while user-defined tokens are always matched. Decoding is per token (TokenToPiece, raw bytes)
// or streamed through StreamDecoder, which never splits a UTF-8 character.
// Implementations: SentencePiece-style (model "llama", spm_tokenizer.h) and byte-level BPE
// ("gpt2", plus Gemma-4's "gemma4" BPE; bpe_tokenizer.h).
// Thread-safety: immutable after creation; all methods const and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "tokenizer/vocab.h"

namespace kvforge::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer the file's tokenizer.ggml.model names.
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);

  virtual std::vector<TokenId> Encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // Bytes of one token. Control tokens give "" unless render_special.
  virtual std::string TokenToPiece(TokenId id, bool render_special = false) const = 0;
  // Concatenated pieces.
  std::string Decode(const std::vector<TokenId>& ids, bool render_special = false) const;

  const Vocab& vocab() const { return vocab_; }
  int64_t n_vocab() const { return vocab_.size(); }
  TokenId bos() const { return vocab_.bos; }
  TokenId eos() const { return vocab_.eos; }
  bool IsEog(TokenId id) const { return vocab_.IsEog(id); }

 protected:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

  // Splits text into raw-text fragments and special tokens (llama.cpp tokenizer_st_partition).
  struct Fragment {
    TokenId token = kNoToken;  // != kNoToken: a matched special token
    std::string_view text;     // raw text otherwise
  };
  std::vector<Fragment> PartitionSpecial(std::string_view text, bool parse_special) const;

  Vocab vocab_;
};

// Incremental detokenizer: feed ids, get the bytes that form complete UTF-8 characters; an
// incomplete trailing sequence is held back until the next token completes it (or Finish()).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool render_special = false)
      : tok_(tok), render_special_(render_special) {}
  std::string Push(TokenId id);
  std::string Finish();  // whatever is held back (possibly invalid UTF-8)

 private:
  const Tokenizer& tok_;
  bool render_special_;
  std::string pending_;
};

// Length of the longest prefix of `s` that does not end inside an incomplete UTF-8 sequence.
size_t CompleteUtf8Prefix(std::string_view s);

}  // namespace kvforge::tokenizer
