// gbnf_parser.cc — GBNF text to the flat Grammar of grammar.h, then the left-recursion check.
#include <algorithm>
#include <map>
#include <optional>

#include "base/strings.h"
#include "grammar/grammar.h"

namespace kvforge::grammar {

bool CharSet::Contains(uint32_t cp) const {
  // Ranges are few (a class rarely has more than a handful): a linear scan beats a search.
  for (const auto& [lo, hi] : ranges) {
    if (cp < lo) return false;
    if (cp <= hi) return true;
  }
  return false;
}

bool CharSet::Intersects(uint32_t lo, uint32_t hi) const {
  for (const auto& r : ranges)
    if (r.first <= hi && lo <= r.second) return true;
  return false;
}

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// One item of a sequence before flattening: a char set or a rule reference.
struct Item {
  bool is_rule = false;
  int32_t index = 0;  // rule index or char set index
};
using Sequence = std::vector<Item>;
using Alternatives = std::vector<Sequence>;

CharSet Normalize(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  CharSet merged;
  for (const auto& r : ranges) {
    if (!merged.ranges.empty() && r.first <= merged.ranges.back().second + 1) {
      merged.ranges.back().second = std::max(merged.ranges.back().second, r.second);
    } else {
      merged.ranges.push_back(r);
    }
  }
  if (!negated) return merged;
  CharSet inverted;
  uint32_t next = 0;
  for (const auto& [lo, hi] : merged.ranges) {
    if (lo > next) inverted.ranges.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) inverted.ranges.emplace_back(next, kMaxCodePoint);
  return inverted;
}

// Recursive-descent parser over the GBNF bytes. Rules are numbered as first seen (defined or
// referenced); generated rules (groups, repetitions) are appended as they are made.
class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

  Result<std::shared_ptr<const Grammar>> Parse();

 private:
  Status Error(const std::string& what) const { return ErrorAt(pos_, what); }
  Status ErrorAt(size_t at, const std::string& what) const;
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void SkipSpace();
  static bool IsNameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  }
  std::string_view ReadName();
  // Whether the text at pos_ is `name ::=` (the start of the next rule).
  bool AtRuleStart();
  Result<uint32_t> ReadCodePoint();                 // one UTF-8 code point, raw
  Result<uint32_t> ReadEscapedChar(bool in_class);  // after a backslash or a raw code point
  Result<int32_t> RuleIndex(std::string_view name);
  Result<int32_t> NewRule(const std::string& base_name, Alternatives alts);
  int32_t AddCharSet(CharSet set);

  Status ParseRule();
  Result<Alternatives> ParseAlternatives(bool nested);
  Result<Sequence> ParseSequence(bool nested);
  Result<Item> ParseLiteralOrAtom(Sequence* seq);  // appends literal chars; returns the last
  Result<Item> ParseClass();
  Status ParseRepetition(Sequence* seq, size_t item_start);
  Result<int32_t> ReadCount();

  Status Flatten(Grammar* g) const;

  std::string_view text_;
  GrammarLimits limits_;
  size_t pos_ = 0;
  std::map<std::string, int32_t, std::less<>> names_;
  std::vector<std::string> rule_names_;
  std::vector<std::optional<Alternatives>> rules_;  // nullopt: referenced, not (yet) defined
  std::vector<size_t> first_use_;                   // where an undefined rule was referenced
  std::vector<CharSet> sets_;
  int64_t items_ = 0;
  std::string current_rule_;
};

Status Parser::ErrorAt(size_t at, const std::string& what) const {
  int line = 1, col = 1;
  for (size_t i = 0; i < at && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return Status::InvalidArgument(
      base::StrFormat("grammar at line %d, column %d: %s", line, col, what.c_str()));
}

void Parser::SkipSpace() {
  while (!AtEnd()) {
    const char c = Peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      while (!AtEnd() && Peek() != '\n') ++pos_;
    } else {
      break;
    }
  }
}

std::string_view Parser::ReadName() {
  const size_t start = pos_;
  while (!AtEnd() && IsNameChar(Peek())) ++pos_;
  return text_.substr(start, pos_ - start);
}

bool Parser::AtRuleStart() {
  const size_t saved = pos_;
  bool is_rule = false;
  if (!ReadName().empty()) {
    SkipSpace();
    is_rule = text_.substr(pos_, 3) == "::=";
  }
  pos_ = saved;
  return is_rule;
}

Result<uint32_t> Parser::ReadCodePoint() {
  const auto b0 = static_cast<unsigned char>(Peek());
  int len = 0;
  uint32_t cp = 0;
  if (b0 < 0x80) {
    len = 1, cp = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07;
  } else {
    return Error("invalid UTF-8");
  }
  if (pos_ + static_cast<size_t>(len) > text_.size()) return Error("truncated UTF-8");
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(text_[pos_ + static_cast<size_t>(i)]);
    if ((b & 0xC0) != 0x80) return Error("invalid UTF-8");
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
    return Error("invalid UTF-8");
  pos_ += static_cast<size_t>(len);
  return cp;
}

Result<uint32_t> Parser::ReadEscapedChar(bool in_class) {
  if (AtEnd()) return Error("unexpected end of grammar");
  if (Peek() != '\\') return ReadCodePoint();
  const size_t at = pos_;
  ++pos_;
  if (AtEnd()) return ErrorAt(at, "unfinished escape");
  const char c = Peek();
  ++pos_;
  switch (c) {
    case 'n':
      return uint32_t{'\n'};
    case 'r':
      return uint32_t{'\r'};
    case 't':
      return uint32_t{'\t'};
    case '\\':
      return uint32_t{'\\'};
    case '"':
      return uint32_t{'"'};
    case '[':
      return uint32_t{'['};
    case ']':
      return uint32_t{']'};
    case '-':
      if (in_class) return uint32_t{'-'};
      break;
    case '^':
      if (in_class) return uint32_t{'^'};
      break;
    case 'x':
    case 'u':
    case 'U': {
      const int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
      uint32_t cp = 0;
      for (int i = 0; i < digits; ++i) {
        const char h = Peek();
        int v = -1;
        if (h >= '0' && h <= '9') v = h - '0';
        if (h >= 'a' && h <= 'f') v = h - 'a' + 10;
        if (h >= 'A' && h <= 'F') v = h - 'A' + 10;
        if (v < 0) return ErrorAt(at, base::StrFormat("\\%c needs %d hex digits", c, digits));
        cp = cp * 16 + static_cast<uint32_t>(v);
        ++pos_;
      }
      if (cp > kMaxCodePoint) return ErrorAt(at, "code point above U+10FFFF");
      return cp;
    }
    default:
      break;
  }
  return ErrorAt(at, base::StrFormat("unknown escape \\%c", c));
}

Result<int32_t> Parser::RuleIndex(std::string_view name) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  if (static_cast<int32_t>(rules_.size()) >= limits_.max_rules)
    return Error(base::StrFormat("more than max_rules (%d) rules", limits_.max_rules));
  const auto index = static_cast<int32_t>(rules_.size());
  names_.emplace(std::string(name), index);
  rule_names_.emplace_back(name);
  rules_.emplace_back(std::nullopt);
  first_use_.push_back(pos_);
  return index;
}

Result<int32_t> Parser::NewRule(const std::string& base_name, Alternatives alts) {
  if (static_cast<int32_t>(rules_.size()) >= limits_.max_rules)
    return Error(base::StrFormat("more than max_rules (%d) rules", limits_.max_rules));
  const auto index = static_cast<int32_t>(rules_.size());
  // Generated names hold a character GBNF names cannot, so they never collide with user rules.
  rule_names_.push_back(base_name + "#" + std::to_string(index));
  rules_.emplace_back(std::move(alts));
  first_use_.push_back(pos_);
  return index;
}

int32_t Parser::AddCharSet(CharSet set) {
  sets_.push_back(std::move(set));
  return static_cast<int32_t>(sets_.size() - 1);
}

Result<int32_t> Parser::ReadCount() {
  const size_t start = pos_;
  int64_t v = 0;
  while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
    v = v * 10 + (Peek() - '0');
    if (v > limits_.max_repeat)
      return ErrorAt(start,
                     base::StrFormat("repetition count above max_repeat (%d)", limits_.max_repeat));
    ++pos_;
  }
  if (pos_ == start) return Error("expected a number");
  return static_cast<int32_t>(v);
}

Result<Item> Parser::ParseClass() {
  const size_t start = pos_;
  ++pos_;  // '['
  bool negated = false;
  if (Peek() == '^') {
    negated = true;
    ++pos_;
  }
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  while (true) {
    if (AtEnd()) return ErrorAt(start, "unterminated character class");
    if (Peek() == ']') {
      ++pos_;
      break;
    }
    KVF_ASSIGN_OR_RETURN(uint32_t lo, ReadEscapedChar(true));
    uint32_t hi = lo;
    if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
      ++pos_;
      const size_t at = pos_;
      KVF_ASSIGN_OR_RETURN(hi, ReadEscapedChar(true));
      if (hi < lo) return ErrorAt(at, "character range out of order");
    }
    ranges.emplace_back(lo, hi);
  }
  CharSet set = Normalize(std::move(ranges), negated);
  if (set.ranges.empty()) return ErrorAt(start, "character class matches nothing");
  return Item{false, AddCharSet(std::move(set))};
}

Result<Item> Parser::ParseLiteralOrAtom(Sequence* seq) {
  const char c = Peek();
  if (c == '"') {
    const size_t start = pos_;
    ++pos_;
    while (true) {
      if (AtEnd()) return ErrorAt(start, "unterminated string literal");
      if (Peek() == '"') {
        ++pos_;
        break;
      }
      KVF_ASSIGN_OR_RETURN(uint32_t cp, ReadEscapedChar(false));
      seq->push_back({false, AddCharSet(CharSet{{{cp, cp}}})});
    }
    if (pos_ - start == 2) {
      // "" is epsilon: a repetition after it has nothing to repeat.
      return Item{true, -1};
    }
    return seq->back();
  }
  if (c == '[') {
    KVF_ASSIGN_OR_RETURN(Item it, ParseClass());
    seq->push_back(it);
    return it;
  }
  if (c == '.') {
    ++pos_;
    Item it{false, AddCharSet(CharSet{{{0, kMaxCodePoint}}})};
    seq->push_back(it);
    return it;
  }
  if (c == '(') {
    const size_t start = pos_;
    ++pos_;
    KVF_ASSIGN_OR_RETURN(Alternatives alts, ParseAlternatives(true));
    SkipSpace();
    if (Peek() != ')') return ErrorAt(start, "unclosed '('");
    ++pos_;
    KVF_ASSIGN_OR_RETURN(int32_t rule, NewRule(current_rule_, std::move(alts)));
    Item it{true, rule};
    seq->push_back(it);
    return it;
  }
  if (IsNameChar(c)) {
    KVF_ASSIGN_OR_RETURN(int32_t rule, RuleIndex(ReadName()));
    Item it{true, rule};
    seq->push_back(it);
    return it;
  }
  return Error(base::StrFormat("unexpected character '%c'", c));
}

// Rewrites the item at seq[item_start] (a group or single char set; a literal's last char) with
// the repetition operator at pos_: x* -> R ::= x R | ; x+ -> x R; x? -> O ::= x | ;
// x{m,n} -> m copies, then n-m nested optionals.
Status Parser::ParseRepetition(Sequence* seq, size_t item_start) {
  const size_t op_at = pos_;
  const char op = Peek();
  int32_t min_count = 0, max_count = -1;  // -1: unbounded
  if (op == '*') {
    ++pos_;
  } else if (op == '+') {
    ++pos_;
    min_count = 1;
  } else if (op == '?') {
    ++pos_;
    max_count = 1;
  } else {
    ++pos_;  // '{'
    SkipSpace();
    KVF_ASSIGN_OR_RETURN(min_count, ReadCount());
    SkipSpace();
    if (Peek() == '}') {
      max_count = min_count;
    } else if (Peek() == ',') {
      ++pos_;
      SkipSpace();
      if (Peek() != '}') {
        KVF_ASSIGN_OR_RETURN(max_count, ReadCount());
        if (max_count < min_count) return ErrorAt(op_at, "repetition {m,n} with n < m");
      }
      SkipSpace();
    }
    if (Peek() != '}') return ErrorAt(op_at, "expected '}' to close the repetition");
    ++pos_;
  }
  if (seq->size() != item_start + 1) return ErrorAt(op_at, "nothing to repeat");
  const Item x = seq->back();
  seq->pop_back();
  for (int32_t i = 0; i < min_count; ++i) seq->push_back(x);
  if (max_count < 0) {
    // R ::= x R | (empty): right recursion in tail position keeps the recognizer's stacks flat.
    KVF_ASSIGN_OR_RETURN(int32_t r, NewRule(current_rule_, {}));
    rules_[static_cast<size_t>(r)] = Alternatives{{x, Item{true, r}}, {}};
    seq->push_back({true, r});
  } else if (max_count > min_count) {
    // O_1 ::= x | ; O_k ::= x O_{k-1} | .
    KVF_ASSIGN_OR_RETURN(int32_t prev, NewRule(current_rule_, Alternatives{{x}, {}}));
    for (int32_t k = 2; k <= max_count - min_count; ++k) {
      KVF_ASSIGN_OR_RETURN(prev, NewRule(current_rule_, Alternatives{{x, Item{true, prev}}, {}}));
    }
    seq->push_back({true, prev});
  }
  items_ += min_count;
  if (items_ > limits_.max_elements)
    return ErrorAt(op_at, base::StrFormat("more than max_elements (%lld) grammar elements",
                                          static_cast<long long>(limits_.max_elements)));
  return Status::Ok();
}

Result<Sequence> Parser::ParseSequence(bool nested) {
  Sequence seq;
  while (true) {
    SkipSpace();
    if (AtEnd()) break;
    const char c = Peek();
    if (c == '|' || c == ')') break;
    if (!nested && AtRuleStart()) break;
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error("nothing to repeat");
    const size_t before = seq.size();
    KVF_ASSIGN_OR_RETURN(Item last, ParseLiteralOrAtom(&seq));
    items_ += static_cast<int64_t>(seq.size() - before);
    if (items_ > limits_.max_elements)
      return Error(base::StrFormat("more than max_elements (%lld) grammar elements",
                                   static_cast<long long>(limits_.max_elements)));
    const char op = Peek();
    if (op == '*' || op == '+' || op == '?' || op == '{') {
      if (last.is_rule && last.index < 0) return Error("nothing to repeat after \"\"");
      // For a literal, the operator applies to its last character only (as in llama.cpp).
      KVF_RETURN_IF_ERROR(ParseRepetition(&seq, seq.size() - 1));
      if (Peek() == '*' || Peek() == '+' || Peek() == '?' || Peek() == '{')
        return Error("repetition of a repetition: add parentheses");
    }
  }
  return seq;
}

Result<Alternatives> Parser::ParseAlternatives(bool nested) {
  Alternatives alts;
  while (true) {
    KVF_ASSIGN_OR_RETURN(Sequence seq, ParseSequence(nested));
    alts.push_back(std::move(seq));
    SkipSpace();
    if (Peek() != '|') break;
    ++pos_;
  }
  return alts;
}

Status Parser::ParseRule() {
  const size_t start = pos_;
  const std::string_view name = ReadName();
  if (name.empty()) return Error("expected a rule name");
  SkipSpace();
  if (text_.substr(pos_, 3) != "::=") return Error("expected '::=' after the rule name");
  pos_ += 3;
  KVF_ASSIGN_OR_RETURN(int32_t index, RuleIndex(name));
  if (rules_[static_cast<size_t>(index)].has_value())
    return ErrorAt(start, "rule '" + std::string(name) + "' defined twice");
  current_rule_ = std::string(name);
  KVF_ASSIGN_OR_RETURN(Alternatives alts, ParseAlternatives(false));
  SkipSpace();
  if (Peek() == ')') return Error("unmatched ')'");
  rules_[static_cast<size_t>(index)] = std::move(alts);
  return Status::Ok();
}

Status Parser::Flatten(Grammar* g) const {
  g->alternatives.resize(rules_.size());
  g->rule_names = rule_names_;
  g->char_sets = sets_;
  for (size_t r = 0; r < rules_.size(); ++r) {
    const Alternatives& alts = *rules_[r];
    for (size_t a = 0; a < alts.size(); ++a) {
      g->alternatives[r].push_back(static_cast<int32_t>(g->elements.size()));
      for (const Item& it : alts[a]) {
        g->elements.push_back({it.is_rule ? ElementKind::kRuleRef : ElementKind::kChars, it.index});
      }
      g->elements.push_back({ElementKind::kEnd, a + 1 == alts.size() ? 1 : 0});
    }
  }
  return Status::Ok();
}

Status CheckLeftRecursion(const Grammar& g);

Result<std::shared_ptr<const Grammar>> Parser::Parse() {
  if (static_cast<int64_t>(text_.size()) > limits_.max_text_bytes)
    return Status::InvalidArgument(
        base::StrFormat("grammar is %zu bytes, above max_text_bytes (%lld)", text_.size(),
                        static_cast<long long>(limits_.max_text_bytes)));
  SkipSpace();
  while (!AtEnd()) {
    KVF_RETURN_IF_ERROR(ParseRule());
    SkipSpace();
  }
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (!rules_[r].has_value())
      return ErrorAt(first_use_[r], "rule '" + rule_names_[r] + "' is used but not defined");
  }
  auto root = names_.find("root");
  if (root == names_.end()) return Status::InvalidArgument("grammar has no 'root' rule");
  auto g = std::make_shared<Grammar>();
  g->root = root->second;
  KVF_RETURN_IF_ERROR(Flatten(g.get()));
  KVF_RETURN_IF_ERROR(CheckLeftRecursion(*g));
  return std::shared_ptr<const Grammar>(std::move(g));
}

// Rules that can match the empty string (fixpoint over the alternatives).
std::vector<bool> NullableRules(const Grammar& g) {
  const size_t n = g.alternatives.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (int32_t start : g.alternatives[r]) {
        auto pos = static_cast<size_t>(start);
        while (g.elements[pos].kind == ElementKind::kRuleRef &&
               nullable[static_cast<size_t>(g.elements[pos].arg)])
          ++pos;
        if (g.elements[pos].kind == ElementKind::kEnd) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Left recursion that grows the recognizer's stack forever: a cycle of "rule A can start with
// rule B" edges that contains an edge where B is not the last item of A's alternative (a cycle
// of tail edges only, as in ("a"?)*, repeats one stack and is cut by deduplication).
Status CheckLeftRecursion(const Grammar& g) {
  const size_t n = g.alternatives.size();
  const std::vector<bool> nullable = NullableRules(g);
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (int32_t start : g.alternatives[r]) {
      for (auto pos = static_cast<size_t>(start); g.elements[pos].kind == ElementKind::kRuleRef;
           ++pos) {
        const Element& e = g.elements[pos];
        const bool tail = g.elements[pos + 1].kind == ElementKind::kEnd;
        edges[r].push_back({e.arg, tail});
        if (!nullable[static_cast<size_t>(e.arg)]) break;
      }
    }
  }
  // Tarjan's strongly connected components, iteratively (grammars can be deep).
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<bool> on_stack(n, false);
  std::vector<int32_t> stack;
  int32_t next_index = 0, next_comp = 0;
  for (size_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    std::vector<std::pair<int32_t, size_t>> call{{static_cast<int32_t>(start), 0}};
    while (!call.empty()) {
      auto& [v, child] = call.back();
      const auto vs = static_cast<size_t>(v);
      if (child == 0 && index[vs] < 0) {
        index[vs] = low[vs] = next_index++;
        stack.push_back(v);
        on_stack[vs] = true;
      }
      if (child < edges[vs].size()) {
        const auto w = static_cast<size_t>(edges[vs][child].to);
        ++child;
        if (index[w] < 0) {
          call.emplace_back(static_cast<int32_t>(w), 0);
        } else if (on_stack[w]) {
          low[vs] = std::min(low[vs], index[w]);
        }
        continue;
      }
      if (low[vs] == index[vs]) {
        while (true) {
          const int32_t w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = false;
          comp[static_cast<size_t>(w)] = next_comp;
          if (w == v) break;
        }
        ++next_comp;
      }
      const int32_t done = v;
      call.pop_back();
      if (!call.empty()) {
        const auto parent = static_cast<size_t>(call.back().first);
        low[parent] = std::min(low[parent], low[static_cast<size_t>(done)]);
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (!e.tail && comp[static_cast<size_t>(e.to)] == comp[r]) {
        return Status::InvalidArgument("grammar rule '" + g.rule_names[r] +
                                       "' is left-recursive (it can reach itself before "
                                       "matching a character); rewrite it with repetition");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GrammarLimits& limits) {
  return Parser(text, limits).Parse();
}

}  // namespace kvforge::grammar
