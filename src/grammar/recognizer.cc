#include "grammar/recognizer.h"

#include <algorithm>

namespace kvforge::grammar {

void Canonicalize(StackSet* set) {
  std::sort(set->begin(), set->end());
  set->erase(std::unique(set->begin(), set->end()), set->end());
}

void ExpandStack(const Grammar& g, Stack stack, StackSet* out) {
  // A cycle of tail references (("a"?)* and the like) comes back to a stack already seen: the
  // `seen` list ends it. Left recursion that would grow stacks is refused by the parser.
  std::vector<Stack> work;
  std::vector<Stack> seen;
  work.push_back(std::move(stack));
  while (!work.empty()) {
    Stack cur = std::move(work.back());
    work.pop_back();
    if (std::find(seen.begin(), seen.end(), cur) != seen.end()) continue;
    seen.push_back(cur);
    if (cur.empty() || g.elements[static_cast<size_t>(cur.back())].kind == ElementKind::kChars) {
      out->push_back(std::move(cur));
      continue;
    }
    const int32_t pos = cur.back();
    const auto rule = static_cast<size_t>(g.elements[static_cast<size_t>(pos)].arg);
    cur.pop_back();
    if (g.elements[static_cast<size_t>(pos) + 1].kind != ElementKind::kEnd) cur.push_back(pos + 1);
    for (int32_t alt : g.alternatives[rule]) {
      Stack next = cur;
      if (g.elements[static_cast<size_t>(alt)].kind != ElementKind::kEnd) next.push_back(alt);
      work.push_back(std::move(next));
    }
  }
}

StackSet InitialStacks(const Grammar& g, int32_t rule) {
  StackSet out;
  for (int32_t alt : g.alternatives[static_cast<size_t>(rule)]) {
    Stack s;
    if (g.elements[static_cast<size_t>(alt)].kind != ElementKind::kEnd) s.push_back(alt);
    ExpandStack(g, std::move(s), &out);
  }
  Canonicalize(&out);
  return out;
}

void AdvanceStacks(const Grammar& g, const StackSet& stacks, uint32_t cp, StackSet* out) {
  out->clear();
  for (const Stack& s : stacks) {
    if (s.empty()) continue;
    const int32_t pos = s.back();
    const CharSet& set = g.char_sets[static_cast<size_t>(g.elements[static_cast<size_t>(pos)].arg)];
    if (!set.Contains(cp)) continue;
    Stack next(s.begin(), s.end() - 1);
    if (g.elements[static_cast<size_t>(pos) + 1].kind != ElementKind::kEnd) next.push_back(pos + 1);
    ExpandStack(g, std::move(next), out);
  }
  if (out->size() > 1) Canonicalize(out);
}

bool AnyComplete(const StackSet& stacks) {
  return std::any_of(stacks.begin(), stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool AnyIntersects(const Grammar& g, const StackSet& stacks, uint32_t lo, uint32_t hi) {
  for (const Stack& s : stacks) {
    if (s.empty()) continue;
    const auto set = static_cast<size_t>(g.elements[static_cast<size_t>(s.back())].arg);
    if (g.char_sets[set].Intersects(lo, hi)) return true;
  }
  return false;
}

Utf8Decoder::Fed Utf8Decoder::Feed(uint8_t byte, uint32_t* cp) {
  if (remaining == 0) {
    if (byte < 0x80) {
      *cp = byte;
      return Fed::kCodePoint;
    }
    if ((byte & 0xE0) == 0xC0) {
      length = 2, value = byte & 0x1F;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3, value = byte & 0x0F;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4, value = byte & 0x07;
    } else {
      return Fed::kInvalid;
    }
    remaining = static_cast<int8_t>(length - 1);
    return Fed::kPartial;
  }
  if ((byte & 0xC0) != 0x80) return Fed::kInvalid;
  value = (value << 6) | (byte & 0x3F);
  if (--remaining > 0) return Fed::kPartial;
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kMin[length] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    return Fed::kInvalid;
  }
  *cp = value;
  value = 0;
  length = 0;
  return Fed::kCodePoint;
}

bool Utf8Decoder::PendingRange(uint32_t* lo, uint32_t* hi) const {
  // The smallest code point a sequence of this length may encode (shorter ones are overlong).
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  const int bits = 6 * remaining;
  *lo = std::max(value << bits, kMin[length]);
  *hi = std::min<uint32_t>((value << bits) | ((1u << bits) - 1), 0x10FFFF);
  return *lo <= *hi;
}

bool ConsumeText(const Grammar& g, std::string_view text, StackSet* stacks, Utf8Decoder* dec) {
  StackSet next;
  for (unsigned char b : text) {
    uint32_t cp = 0;
    const Utf8Decoder::Fed fed = dec->Feed(b, &cp);
    if (fed == Utf8Decoder::Fed::kInvalid) return false;
    if (fed == Utf8Decoder::Fed::kPartial) continue;
    AdvanceStacks(g, *stacks, cp, &next);
    if (next.empty()) return false;
    stacks->swap(next);
  }
  if (!dec->Pending()) return true;
  uint32_t lo = 0, hi = 0;
  return dec->PendingRange(&lo, &hi) && AnyIntersects(g, *stacks, lo, hi);
}

bool GrammarMatches(const Grammar& grammar, std::string_view text) {
  StackSet stacks = InitialStacks(grammar, grammar.root);
  Utf8Decoder dec;
  return ConsumeText(grammar, text, &stacks, &dec) && !dec.Pending() && AnyComplete(stacks);
}

bool GrammarViablePrefix(const Grammar& grammar, std::string_view text) {
  StackSet stacks = InitialStacks(grammar, grammar.root);
  Utf8Decoder dec;
  return ConsumeText(grammar, text, &stacks, &dec);
}

}  // namespace kvforge::grammar
