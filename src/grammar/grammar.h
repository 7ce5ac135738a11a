// grammar/grammar.h — a context-free grammar over Unicode code points, compiled from GBNF text
// (llama.cpp's syntax, so users' .gbnf files work), and full-string matching against it.
//
// GBNF accepted: `name ::= body` rules (names of [a-zA-Z0-9_-], any order; a rule runs until the
// next `name ::=`), alternatives `|` (an empty one is epsilon), sequences of: "literal" (UTF-8,
// escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [a-z0-9_] and [^...] classes (the same escapes
// and \] \[ \- \^), `.` (any code point), rule names, ( groups ); each may be followed by *, +, ?,
// {m}, {m,} or {m,n}. `#` starts a comment. The start rule is `root`.
//
// Compiled form: every rule is a list of alternatives; every alternative a run of elements ended
// by kEnd, all in one flat array so that a parse position is one index (see Element). Repetitions
// and groups become generated rules. Left recursion (a rule that can reach itself without
// consuming a character) is refused: the recognizer could not terminate on it.
// Thread-safety: a Grammar is immutable after ParseGbnf and may be shared across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::grammar {

struct GrammarLimits {
  int64_t max_text_bytes = 1 << 20;  // GBNF text size
  int32_t max_rules = 1 << 14;       // rules, generated ones included
  int64_t max_elements = 1 << 20;    // elements of all rules together
  int32_t max_repeat = 1024;         // largest m or n of x{m,n}
};

enum class ElementKind : uint8_t {
  kEnd,      // ends an alternative (rule = -1) or, after a rule's last alternative, the rule
  kRuleRef,  // `rule` is the referenced rule
  kChars,    // `set` indexes Grammar::char_sets
};

struct Element {
  ElementKind kind = ElementKind::kEnd;
  int32_t arg = 0;  // kRuleRef: rule index; kChars: char set index; kEnd: 1 after the rule's last
                    // alternative, else 0
};

// A set of code points: sorted, disjoint, inclusive ranges.
struct CharSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  bool Contains(uint32_t cp) const;
  // Whether some code point in [lo, hi] is in the set (for UTF-8 sequences cut short).
  bool Intersects(uint32_t lo, uint32_t hi) const;
};

struct Grammar {
  std::vector<Element> elements;                   // all alternatives, each ended by kEnd
  std::vector<std::vector<int32_t>> alternatives;  // rule -> first element of each alternative
  std::vector<std::string> rule_names;             // for messages (generated rules: "name-3")
  std::vector<CharSet> char_sets;
  int32_t root = 0;
};

Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits = {});

// Whether `text` (UTF-8) is a full sentence of the grammar. Invalid UTF-8 never matches.
bool GrammarMatches(const Grammar& grammar, std::string_view text);
// Whether `text` can be extended to a full sentence (every prefix of a sentence is viable).
bool GrammarViablePrefix(const Grammar& grammar, std::string_view text);

}  // namespace kvforge::grammar
