// bpe_tokenizer.h — BPE tokenizer for GGUF vocabularies with merges: byte-level BPE
// (`tokenizer.ggml.model = gpt2`, GPT-2/Llama 3/Qwen/DeepSeek/... families) and SentencePiece-style
// BPE on raw UTF-8 (`gemma4`: spaces escaped to U+2581, <0xXX> byte fallback).
//
// Contract (llama.cpp's llm_tokenizer_bpe semantics, so ids match the models' own tokenizers):
//  * Encode(): optional BOS; special-token partition (user-defined tokens always matched, control
//    and unknown tokens only with parse_special; longer tokens first); each raw fragment is split
//    by the `tokenizer.ggml.pre` pre-tokenizer (bpe_pretokenizer.h), every word is byte-encoded
//    (GPT-2 byte-to-unicode map) and merged by rank (lowest rank first, leftmost on ties); symbols
//    that end up outside the vocabulary fall back to single-byte tokens; optional EOS.
//    add_bos: tokenizer.ggml.add_bos_token, else the family default (true for llama3, tekken,
//    chameleon, gemma4). Words that are whole tokens skip merging where the family says so.
//  * Control-looking tokens get llama.cpp's type fix-ups at load (e.g. "<|im_end|>" typed
//    user-defined becomes control; vocab() shows the new types), which also affects
//    TokenToPiece() and parse_special. llama.cpp's per-model lstrip/rstrip attributes (phi-3,
//    jina-v2, modern-bert names) apply to the partition.
//  * TokenToPiece(): normal tokens map back through the byte-level alphabet to raw bytes (U+2581
//    -> ' ' for gemma4); byte tokens give their byte; user-defined tokens their text; control and
//    unknown tokens their text only when render_special; unused/undefined tokens give "".
//  * Any input bytes are accepted. Invalid UTF-8 is tokenized byte-exactly (see the pre-tokenizer)
//    so Decode(Encode(x)) == x for every x whenever the vocabulary holds all 256 byte symbols as
//    normal tokens (true for the GPT-2-style vocabularies tested here).
//  * Cost: linear in the input, except merging, which is O(n log n) in one word's length, and the
//    partition, which scans the text once per distinct special token present in it. Each thread
//    that encodes keeps a bounded cache (about 640 KiB, shared by all tokenizers) of encoded short
//    words and recent merge-pair lookups.
// Thread-safety: immutable after Create(); Encode/TokenToPiece are const and thread-safe (the
// caches are thread_local).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/bpe_pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::tokenizer {

class BpeTokenizer final : public Tokenizer {
 public:
  // `vocab` comes from Vocab::FromGguf(file); `file` supplies the metadata Vocab does not keep
  // (presence of add_bos_token, FIM token ids, general.name).
  static Result<std::unique_ptr<Tokenizer>> Create(Vocab vocab, const gguf::GgufFile& file);
  ~BpeTokenizer() override;

  std::vector<TokenId> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string TokenToPiece(TokenId id, bool render_special) const override;

  // The pre-tokenizer family in use ("llama3", "qwen2", "gpt2", "gemma4", ...).
  const std::string& pre_family() const { return pre_->family(); }
  // The words the pre-tokenizer makes of raw text (after U+2581 escaping where the family uses
  // it); special tokens are not looked for.
  std::vector<std::string> PreTokenize(std::string_view text) const;

 private:
  struct MergeTable;
  struct Scratch;

  explicit BpeTokenizer(Vocab vocab);
  Status Init(const gguf::GgufFile& file);
  // Symbol id of `text`: its token id, else an extra id (created when `create`), else -1.
  int32_t SymbolId(std::string_view text, bool create);
  int32_t FindSymbol(std::string_view text) const;  // -1 when absent
  TokenId FindToken(std::string_view text) const;   // kNoToken unless a token
  const std::string& SymbolText(int32_t sym) const;
  void IndexSymbol(int32_t sym);

  // Special-token partition: Tokenizer::PartitionSpecial's result (plus strip attributes), with
  // one pass to find which special tokens occur and one find() pass per token that does.
  std::vector<Fragment> Partition(std::string_view text, bool parse_special) const;
  void EncodeRaw(std::string_view text, Scratch* s, std::vector<TokenId>* out) const;
  void EncodeCachedWord(std::string_view word, Scratch* s, std::vector<TokenId>* out) const;
  void EncodeWord(std::string_view word, Scratch* s, std::vector<TokenId>* out) const;
  void EmitSymbol(std::string_view word, int32_t sym, uint32_t start, uint32_t len,
                  std::vector<TokenId>* out) const;

  uint64_t instance_id_;  // keys the per-thread word cache
  std::unique_ptr<PreTokenizer> pre_;
  bool byte_encode_ = true;
  bool escape_whitespace_ = false;
  bool ignore_merges_ = false;

  // Symbols: ids < n_vocab are tokens; larger ids are strings that occur in merges but are not
  // tokens (llama.cpp merges by string, so they can still take part and then fall back to bytes).
  int32_t n_vocab_ = 0;
  std::vector<std::string> extra_texts_;
  // text -> symbol, open addressing (see FindSymbol).
  std::vector<uint64_t> sym_slots_;
  size_t sym_mask_ = 0;
  size_t sym_count_ = 0;
  std::unique_ptr<MergeTable> merges_;

  std::array<int32_t, 256> byte_sym_{};         // byte-level: symbol of each byte's unicode char
  std::array<std::string, 256> byte_chars_;     // byte-level: UTF-8 of each byte's unicode char
  std::vector<int32_t> char_sym_;               // raw-UTF-8 mode: symbol of each BMP character
  std::array<TokenId, 256> single_byte_tok_{};  // token whose text is that one byte
  std::array<TokenId, 256> hex_byte_tok_{};     // token "<0xXX>"

  std::vector<std::string> pieces_;  // TokenToPiece(id, render_special = true)

  // Special-token matcher: candidates bucketed by their first two bytes (or one, for 1-byte).
  struct SpecialEntry {
    TokenId id;
    int32_t priority;  // index in vocab_.special_tokens order (longest first)
    bool lstrip = false;
    bool rstrip = false;
  };
  std::vector<SpecialEntry> specials_;          // in priority order
  std::vector<uint32_t> special_bucket_start_;  // 65536 + 1 offsets into special_by_prefix_
  std::vector<int32_t> special_by_prefix_;      // indices into specials_
  std::array<std::vector<int32_t>, 256> special_single_;  // 1-byte specials by byte
  std::array<bool, 256> special_first_byte_{};
};

}  // namespace kvforge::tokenizer
