// grammar/token_mask.h — which tokens a grammar allows next, for the sampler's mask.
//
// GrammarMasker holds what is shared by every sequence constrained by one grammar over one
// vocabulary: the grammar, the token trie and a cache of per-context results. A mask for a set of
// parse stacks is the union over its leaf stacks; for each leaf stack the trie is walked with
// only its top few frames (the "context"): tokens consumed inside the context are
// allowed whatever lies below, which is cached per context; tokens that run past the end of the
// context ("escapes", recorded as trie nodes) are walked on with the real stack below, uncached.
// Most tokens are decided inside the context, so a step costs a few bitset ORs plus the escapes.
//
// GrammarMatcher is one sequence's position in the grammar: its stacks and a UTF-8 sequence cut
// by the last token, if any. Copyable (n > 1 and beams fork it).
// Thread-safety: a GrammarMasker and its matchers belong to one thread (the engine thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/recognizer.h"
#include "grammar/token_trie.h"

namespace kvforge::grammar {

// One bit per token id: bit (id % 64) of word (id / 64).
using TokenBitset = std::vector<uint64_t>;

class GrammarMasker {
 public:
  // `context_frames`: how many top frames a cached context holds (tests use small values to
  // exercise the escape walks).
  GrammarMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                size_t context_frames = kDefaultContextFrames);

  const Grammar& grammar() const { return *grammar_; }
  const TokenTrie& trie() const { return *trie_; }

  // Sets in `allowed` (vocab bits, cleared first) every token that can follow `stacks`, with
  // `pending` the UTF-8 sequence left open by the last token.
  void AllowedTokens(const StackSet& stacks, const Utf8Decoder& pending, TokenBitset* allowed);

  int64_t cache_entries() const { return static_cast<int64_t>(cache_.size()); }
  int64_t cache_misses() const { return cache_misses_; }

  static constexpr size_t kDefaultContextFrames = 4;
  static constexpr size_t kMaxCacheEntries = 4096;

 private:
  struct ContextResult {
    TokenBitset allowed;           // tokens decided inside the context
    std::vector<int32_t> escapes;  // trie nodes where the context completed
  };
  const ContextResult& ForContext(const Stack& context);
  // Walks the trie below `node` from `stacks`; marks the tokens the walk accepts. With
  // `escapes` non-null, records the nodes where a stack completes (the context ran out).
  void Walk(int32_t node, const StackSet& stacks, Utf8Decoder dec, TokenBitset* allowed,
            std::vector<int32_t>* escapes, size_t depth);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t context_frames_;
  std::map<Stack, ContextResult> cache_;
  int64_t cache_misses_ = 0;
  std::vector<StackSet> scratch_;  // [trie depth] stack sets of the walk, reused
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<GrammarMasker> masker);

  // Every token id that may come next (vocab bits).
  void AllowedTokens(TokenBitset* allowed) { masker_->AllowedTokens(stacks_, pending_, allowed); }
  // Whether the text so far is a full sentence (end of sequence allowed here).
  bool CanEnd() const { return !pending_.Pending() && AnyComplete(stacks_); }
  // Whether no token can follow (the sentence is complete and the grammar allows nothing more).
  bool MustEnd() const;
  // Advances by token `id`'s bytes; false (and no change) when the grammar does not allow it.
  bool AcceptToken(int32_t id);
  // Advances by raw text (a forced prefix); false (and no change) when not allowed.
  bool AcceptText(std::string_view text);

 private:
  std::shared_ptr<GrammarMasker> masker_;
  StackSet stacks_;
  Utf8Decoder pending_;
};

}  // namespace kvforge::grammar
