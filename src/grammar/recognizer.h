// grammar/recognizer.h — the pushdown recognizer behind grammar matching: a set of parse stacks
// advanced one code point at a time (every parse of an ambiguous grammar is kept).
//
// A stack holds element positions (Grammar::elements indices), innermost last; each is the next
// element to match in its frame. A "leaf" stack has a kChars element on top; the empty stack
// means the root rule is complete. Stacks are kept expanded: rule references on top are replaced
// by the starts of their alternatives, and a reference that ends its alternative leaves no
// frame behind (tail calls), so repetition (R ::= x R | ) keeps stacks flat.
// Thread-safety: free functions over an immutable Grammar.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace kvforge::grammar {

using Stack = std::vector<int32_t>;
using StackSet = std::vector<Stack>;  // sorted, no duplicates, every stack leaf or empty

// The expanded stacks at the start of `rule` (the root for a whole grammar).
StackSet InitialStacks(const Grammar& g, int32_t rule);
// Appends to `out` the leaf (or empty) stacks that `stack` expands to.
void ExpandStack(const Grammar& g, Stack stack, StackSet* out);
// Sorts and removes duplicates.
void Canonicalize(StackSet* set);
// The stacks after matching code point `cp` from `stacks` (empty when nothing matches).
void AdvanceStacks(const Grammar& g, const StackSet& stacks, uint32_t cp, StackSet* out);
// Whether one of the stacks is complete.
bool AnyComplete(const StackSet& stacks);
// Whether some leaf stack's next character lies in [lo, hi].
bool AnyIntersects(const Grammar& g, const StackSet& stacks, uint32_t lo, uint32_t hi);

// Incremental UTF-8 decoding: bytes in, code points out, with the range of code points a cut
// sequence can still become (tokens may end inside a character).
struct Utf8Decoder {
  uint32_t value = 0;
  int8_t remaining = 0;  // continuation bytes still expected
  int8_t length = 0;     // bytes of the sequence in progress

  enum class Fed { kInvalid, kPartial, kCodePoint };
  // On kCodePoint, `*cp` is the decoded code point and the decoder is empty again.
  Fed Feed(uint8_t byte, uint32_t* cp);
  bool Pending() const { return remaining > 0; }
  // The smallest and largest code point the pending sequence can still decode to; false when
  // none (a lead byte followed by bytes that can only make an overlong or too large value).
  bool PendingRange(uint32_t* lo, uint32_t* hi) const;
};

// Feeds `text` (bytes) to `stacks` and `dec`; false when a byte is refused or a cut character
// can no longer be matched (then the state is unspecified: work on copies).
bool ConsumeText(const Grammar& g, std::string_view text, StackSet* stacks, Utf8Decoder* dec);

}  // namespace kvforge::grammar
