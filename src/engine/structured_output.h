// engine/structured_output.h — constrained decoding in the engines: a request's
// StructuredOutputs compiled to a grammar over the model's vocabulary, and each sequence's
// grammar state masking its logits before the sampler.
//
// The order per sampled token: logits -> SequenceGrammar::Mask (refused tokens -inf; end tokens
// allowed only where the grammar may end) -> Sampler (logit_bias, penalties, top-k/p, min-p,
// temperature) -> SequenceGrammar::Accept. So every sampling option applies to the allowed
// tokens only, and the output is a sentence of the grammar or stops at max_tokens.
// Thread-safety: StructuredOutputGbnf is pure; GrammarCache and SequenceGrammar belong to the
// engine thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grammar/token_mask.h"
#include "kvforge/sampling_params.h"
#include "kvforge/status.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::engine {

// The GBNF text of a constraint (JSON Schema, json_object, regex or choice compiled; a grammar
// as given). Errors name the form ("structured_outputs.json: /properties/a: ...").
Result<std::string> StructuredOutputGbnf(const StructuredOutputs& so);
// Compiles the constraint and parses the grammar: the request-time check (any thread).
Status CheckStructuredOutput(const StructuredOutputs& so);

// Compiled constraints by their text, so that repeated schemas reuse their masks' caches.
class GrammarCache {
 public:
  explicit GrammarCache(const tokenizer::Tokenizer& tok) : tok_(tok) {}
  Result<std::shared_ptr<grammar::GrammarMasker>> Get(const StructuredOutputs& so);
  // The end-of-generation tokens of the vocabulary.
  const std::vector<int32_t>& eog_tokens();

  static constexpr size_t kMaxEntries = 32;

 private:
  const grammar::TokenTrie& Trie();

  const tokenizer::Tokenizer& tok_;
  std::shared_ptr<const grammar::TokenTrie> trie_;  // built on first use
  std::vector<int32_t> eog_;
  bool eog_ready_ = false;
  std::list<std::pair<std::string, std::shared_ptr<grammar::GrammarMasker>>> lru_;  // newest first
};

// The tokens a reasoning gate must look at (from one scan of the vocabulary).
struct GateTokens {
  std::vector<int32_t> opening;  // pieces that start with reasoning_start
  std::vector<int32_t> closing;  // pieces that hold reasoning_end or start with a proper suffix
};

// One sequence's position in its grammar. Copyable: n > 1 and beams fork it.
//
// With reasoning markers (StructuredOutputs::reasoning_start/end) the grammar waits: in the
// reasoning, tokens are free but end tokens (the reply must reach its constrained part) and the
// tokens that would close the reasoning with text the grammar refuses after the marker; once the
// marker is out, the text after it is the grammar's first text.
class SequenceGrammar {
 public:
  // `end_tokens`: the ids that end the sequence (EOG unless ignore_eos, and stop_token_ids).
  SequenceGrammar(std::shared_ptr<grammar::GrammarMasker> masker, std::vector<int32_t> end_tokens,
                  const StructuredOutputs& so = {});

  // Sets the logits (n_logits values: the model's rows, which may outnumber the vocabulary) of
  // refused tokens to -inf. False when nothing is allowed (a dead end).
  bool Mask(float* logits, int64_t n_logits);
  // Advances past a sampled token (end tokens are not part of the text and change nothing).
  void Accept(int32_t token);
  // The grammar is complete and allows nothing more: the sequence ends here.
  bool MustEnd() const { return phase_ == Phase::kActive && matcher_.MustEnd(); }

 private:
  enum class Phase { kOpening, kReasoning, kActive };

  const std::string& Piece(int32_t token) const { return matcher_masker_->trie().piece(token); }
  bool MaskReasoning(float* logits, int64_t n_logits);
  void MaskOpening(float* logits, int64_t n_logits);
  // Takes reasoning text; returns true when it closed the reasoning (the rest went to the grammar).
  bool TakeReasoning(const std::string& text);

  std::shared_ptr<grammar::GrammarMasker> matcher_masker_;
  grammar::GrammarMatcher matcher_;
  Phase phase_ = Phase::kActive;
  std::string start_, end_;                 // the reasoning markers
  std::string tail_;                        // kReasoning: the last end_.size() - 1 bytes
  std::shared_ptr<const GateTokens> gate_;  // set with the markers
  std::vector<int32_t> end_tokens_;
  grammar::TokenBitset allowed_;    // [vocab bits] scratch
  std::vector<float> ends_logits_;  // [end_tokens_] scratch
};

// The end tokens of a request, for SequenceGrammar.
std::vector<int32_t> EndTokens(GrammarCache& cache, const SamplingParams& params);

}  // namespace kvforge::engine
