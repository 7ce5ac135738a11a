// bpe_pretokenizer.h — the word splitter that runs before BPE merging, chosen by the GGUF key
// `tokenizer.ggml.pre`.
//
// Each family is llama.cpp's list of steps for that `pre` value (llm_tokenizer_bpe), applied the
// way Hugging Face applies a Sequence of Split(behavior = Isolated) pre-tokenizers: step k
// re-splits every piece that step k-1 produced, on its own (anchors and lookarounds see only that
// piece), and both the matches and the text between them become pieces. Where llama.cpp rewrote a
// tokenizer.json regex only because std::regex lacks a feature (\p{Lu}, possessive quantifiers),
// the original regex is used. Regexes run on PCRE2 with PCRE2_UTF | PCRE2_UCP (JIT when the CPU
// supports it), so \p{L}, \p{N} and \s follow the Unicode tables, \s including U+0085 and U+3000.
//
// Contract:
//  * Split() partitions its input for any bytes: the pieces are non-empty, in order, and
//    concatenate to the input exactly. Invalid UTF-8 (llama.cpp would map it to U+FFFD; Hugging
//    Face cannot take it at all) is kept byte-exact: every byte that does not start a valid UTF-8
//    sequence becomes a piece of its own, and the valid text around it is split as usual.
//  * Create() knows every llama.cpp `pre` name it lists in KnownNames(). An empty name gives
//    llama.cpp's "default" steps (with a warning); any other unknown name logs a warning and falls
//    back to the GPT-2 pattern (documented fallback).
//  * Time is linear in the input for every family. The tokenizer.json regexes whose lookaheads
//    rescan digit runs (tiny_aya, superbpe, afmoe digit groups) are replaced by exact hand-written
//    steps (tested against the regexes), and a step is skipped for pieces that hold no byte that
//    can start one of its matches.
// Thread-safety: immutable after Create(); Split() is const and may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::tokenizer {

class PreTokenizer {
 public:
  // Options of the family that affect the tokenizer around the splitter.
  struct Traits {
    bool byte_encode = true;         // GPT-2 byte-to-unicode mapping before merging
    bool escape_whitespace = false;  // ' ' -> U+2581 before splitting (SentencePiece-style BPE)
    bool ignore_merges = false;      // a word that is itself a token skips merging
    bool default_add_bos = false;    // add BOS when tokenizer.ggml.add_bos_token is absent
  };

  static Result<std::unique_ptr<PreTokenizer>> Create(std::string_view pre);
  // A pre-tokenizer from explicit steps: PCRE2 regexes applied in order as described above (or
  // the "<...>" names of the hand-written steps that step_patterns() reports). family() is
  // "custom". InvalidArgument when a regex does not compile.
  static Result<std::unique_ptr<PreTokenizer>> FromPatterns(const std::vector<std::string>& steps,
                                                            Traits traits);
  static Result<std::unique_ptr<PreTokenizer>> FromPatterns(const std::vector<std::string>& steps) {
    return FromPatterns(steps, Traits());
  }
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Calls fn(ctx, piece) for each piece of `text` in order (views into `text`).
  using PieceFn = void (*)(void* ctx, std::string_view piece);
  void Split(std::string_view text, PieceFn fn, void* ctx) const;
  // Appends the pieces of `text` to *words.
  void Split(std::string_view text, std::vector<std::string_view>* words) const;

  // Canonical family name ("llama3", "qwen2", "gpt2", ...).
  const std::string& family() const { return family_; }
  const Traits& traits() const { return traits_; }
  // The steps in use: regex sources, or "<name>" for a hand-written step.
  std::vector<std::string> step_patterns() const;

  // Every `pre` value Create() recognises.
  static std::vector<std::string_view> KnownNames();

 private:
  struct Step;
  class Splitter;
  PreTokenizer();

  std::string family_;
  Traits traits_;
  std::vector<Step> steps_;
};

}  // namespace kvforge::tokenizer
