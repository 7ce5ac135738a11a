#include "grammar/token_mask.h"

#include <algorithm>

namespace kvforge::grammar {
namespace {

void SetBit(TokenBitset* bits, int32_t id) {
  (*bits)[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
}

size_t LongestPiece(const TokenTrie& trie) {
  size_t longest = 0;
  for (int32_t id = 0; id < trie.vocab_size(); ++id)
    longest = std::max(longest, trie.piece(id).size());
  return longest;
}

}  // namespace

GrammarMasker::GrammarMasker(std::shared_ptr<const Grammar> grammar,
                             std::shared_ptr<const TokenTrie> trie, size_t context_frames)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), context_frames_(context_frames) {
  scratch_.resize(LongestPiece(*trie_) + 2);
}

void GrammarMasker::Walk(int32_t node, const StackSet& stacks, Utf8Decoder dec,
                         TokenBitset* allowed, std::vector<int32_t>* escapes, size_t depth) {
  const TokenTrie::Node& n = trie_->node(node);
  const int32_t* kids = trie_->children(n);
  for (int32_t k = 0; k < n.child_count; ++k) {
    const int32_t child = kids[k];
    const TokenTrie::Node& c = trie_->node(child);
    Utf8Decoder d = dec;
    uint32_t cp = 0;
    const Utf8Decoder::Fed fed = d.Feed(c.byte, &cp);
    if (fed == Utf8Decoder::Fed::kInvalid) continue;
    const StackSet* after = &stacks;
    if (fed == Utf8Decoder::Fed::kPartial) {
      uint32_t lo = 0, hi = 0;
      if (!d.PendingRange(&lo, &hi) || !AnyIntersects(*grammar_, stacks, lo, hi)) continue;
    } else {
      StackSet& next = scratch_[depth];
      AdvanceStacks(*grammar_, stacks, cp, &next);
      if (next.empty()) continue;
      if (escapes != nullptr && c.child_count > 0 && AnyComplete(next)) escapes->push_back(child);
      after = &next;
    }
    const int32_t* toks = trie_->tokens(c);
    for (int32_t t = 0; t < c.token_count; ++t) SetBit(allowed, toks[t]);
    if (c.child_count > 0) Walk(child, *after, d, allowed, escapes, depth + 1);
  }
}

const GrammarMasker::ContextResult& GrammarMasker::ForContext(const Stack& context) {
  auto it = cache_.find(context);
  if (it != cache_.end()) return it->second;
  ++cache_misses_;
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  ContextResult r;
  r.allowed.assign((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  const StackSet start{context};
  Walk(TokenTrie::kRoot, start, Utf8Decoder{}, &r.allowed, &r.escapes, 0);
  return cache_.emplace(context, std::move(r)).first->second;
}

void GrammarMasker::AllowedTokens(const StackSet& stacks, const Utf8Decoder& pending,
                                  TokenBitset* allowed) {
  allowed->assign((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  if (pending.Pending()) {
    // A character cut by the last token: rare, so walked exactly without the cache.
    Walk(TokenTrie::kRoot, stacks, pending, allowed, nullptr, 0);
    return;
  }
  for (const Stack& s : stacks) {
    if (s.empty()) continue;
    const size_t cut = s.size() > context_frames_ ? s.size() - context_frames_ : 0;
    const Stack context(s.begin() + static_cast<std::ptrdiff_t>(cut), s.end());
    const ContextResult& r = ForContext(context);
    for (size_t w = 0; w < allowed->size(); ++w) (*allowed)[w] |= r.allowed[w];
    if (cut == 0 || r.escapes.empty()) continue;
    // Tokens that outran the context go on with the frames below it.
    StackSet below;
    ExpandStack(*grammar_, Stack(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(cut)), &below);
    Canonicalize(&below);
    for (int32_t node : r.escapes) Walk(node, below, Utf8Decoder{}, allowed, nullptr, 0);
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<GrammarMasker> masker)
    : masker_(std::move(masker)),
      stacks_(InitialStacks(masker_->grammar(), masker_->grammar().root)) {}

bool GrammarMatcher::MustEnd() const {
  return !pending_.Pending() &&
         std::all_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  const TokenTrie& trie = masker_->trie();
  if (id < 0 || id >= trie.vocab_size() || !trie.is_included(id)) return false;
  return AcceptText(trie.piece(id));
}

bool GrammarMatcher::AcceptText(std::string_view text) {
  StackSet stacks = stacks_;
  Utf8Decoder dec = pending_;
  if (!ConsumeText(masker_->grammar(), text, &stacks, &dec)) return false;
  stacks_ = std::move(stacks);
  pending_ = dec;
  return true;
}

}  // namespace kvforge::grammar
