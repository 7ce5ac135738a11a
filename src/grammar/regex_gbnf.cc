// regex_gbnf.cc — a recursive-descent regex parser that writes the GBNF expression as it goes.
// GBNF has groups, alternation and every quantifier, so one rule holds the whole pattern.
#include "grammar/regex_gbnf.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "base/strings.h"
#include "grammar/gbnf_text.h"
#include "grammar/recognizer.h"

namespace kvforge::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges Normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Ranges Complement(const Ranges& in) {
  Ranges r = Normalized(in), out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

// The JSON escape of a code point that cannot appear raw inside a JSON string (JsonQuote's,
// without the quotes).
std::string JsonEscapeText(uint32_t cp) {
  std::string raw;
  base::AppendUtf8(cp, &raw);
  const std::string quoted = base::JsonQuote(raw);
  return quoted.substr(1, quoted.size() - 2);
}

bool NeedsJsonEscape(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\'; }

class RegexCompiler {
 public:
  RegexCompiler(std::string_view pattern, bool json, const RegexLimits& limits)
      : p_(pattern), json_(json), limits_(limits) {}

  Result<std::string> Compile() {
    if (static_cast<int64_t>(p_.size()) > limits_.max_pattern_bytes)
      return Status::InvalidArgument(
          base::StrFormat("regex is %zu bytes, above max_pattern_bytes (%lld)", p_.size(),
                          static_cast<long long>(limits_.max_pattern_bytes)));
    KVF_RETURN_IF_ERROR(Decode());
    size_t end = cps_.size();
    if (!cps_.empty() && cps_[0] == '^') pos_ = 1;
    if (end > pos_ && cps_[end - 1] == '$' && !EscapedAt(end - 1)) --end;
    end_ = end;
    KVF_ASSIGN_OR_RETURN(std::string expr, Alternation(0));
    if (pos_ < end_)
      return Error(pos_, cps_[pos_] == ')' ? "unmatched ')'" : "unexpected character");
    return expr;
  }

 private:
  Status Decode() {
    Utf8Decoder dec;
    size_t start = 0;
    for (size_t i = 0; i < p_.size(); ++i) {
      if (!dec.Pending()) start = i;
      uint32_t cp = 0;
      const auto fed = dec.Feed(static_cast<uint8_t>(p_[i]), &cp);
      if (fed == Utf8Decoder::Fed::kInvalid)
        return Status::InvalidArgument(base::StrFormat("regex at offset %zu: invalid UTF-8", i));
      if (fed == Utf8Decoder::Fed::kCodePoint) {
        cps_.push_back(cp);
        offsets_.push_back(start);
      }
    }
    if (dec.Pending()) return Status::InvalidArgument("regex: truncated UTF-8 at the end");
    return Status::Ok();
  }
  bool EscapedAt(size_t i) const {
    size_t n = 0;
    while (i > n && cps_[i - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }
  Status Error(size_t cp_index, const std::string& what) const {
    const size_t off = cp_index < offsets_.size() ? offsets_[cp_index] : p_.size();
    return Status::InvalidArgument(base::StrFormat("regex at offset %zu: %s", off, what.c_str()));
  }
  bool AtEnd() const { return pos_ >= end_; }
  uint32_t Peek() const { return AtEnd() ? 0 : cps_[pos_]; }

  // One code point as GBNF text: a literal, or in JSON mode its escape when it needs one.
  std::string Char(uint32_t cp) const {
    std::string utf8;
    base::AppendUtf8(cp, &utf8);
    if (json_ && NeedsJsonEscape(cp)) return GbnfLiteral(JsonEscapeText(cp));
    return GbnfLiteral(utf8);
  }
  // A set of code points as GBNF: one class, plus in JSON mode the escaped alternatives.
  std::string Set(const Ranges& in) const {
    Ranges r = Normalized(in);
    std::vector<std::string> alts;
    if (json_) {
      Ranges needs_escape;
      for (uint32_t cp = 0; cp <= '\\'; ++cp) {
        if (!NeedsJsonEscape(cp)) continue;
        needs_escape.emplace_back(cp, cp);
        for (const auto& [lo, hi] : r)
          if (lo <= cp && cp <= hi) alts.push_back(GbnfLiteral(JsonEscapeText(cp)));
      }
      r = Intersect(r, Complement(needs_escape));
    }
    if (!r.empty()) {
      std::string cls = "[";
      for (const auto& [lo, hi] : r) {
        cls += GbnfClassChar(lo);
        if (hi != lo) cls += "-" + GbnfClassChar(hi);
      }
      alts.insert(alts.begin(), cls + "]");
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }
  static Ranges Intersect(const Ranges& a, const Ranges& b) {
    Ranges out;
    for (const auto& x : a)
      for (const auto& y : b) {
        const uint32_t lo = std::max(x.first, y.first), hi = std::min(x.second, y.second);
        if (lo <= hi) out.emplace_back(lo, hi);
      }
    return Normalized(out);
  }

  Result<std::string> Alternation(int depth) {
    if (depth > limits_.max_nesting)
      return Error(
          pos_, base::StrFormat("groups nest deeper than max_nesting (%d)", limits_.max_nesting));
    std::vector<std::string> alts;
    while (true) {
      KVF_ASSIGN_OR_RETURN(std::string seq, Sequence(depth));
      alts.push_back(seq.empty() ? "\"\"" : seq);
      if (Peek() != '|' || AtEnd()) break;
      ++pos_;
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return out + ")";
  }

  Result<std::string> Sequence(int depth) {
    std::string out;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      const size_t at = pos_;
      KVF_ASSIGN_OR_RETURN(std::string atom, Atom(depth));
      KVF_ASSIGN_OR_RETURN(std::string quant, Quantifier());
      if (!quant.empty()) atom = "(" + atom + ")" + quant;
      if (atom.empty()) return Error(at, "empty atom");
      out += (out.empty() ? "" : " ") + atom;
    }
    return out;
  }

  // A quantifier after an atom (lazy forms are the same language; possessive ones are not).
  Result<std::string> Quantifier() {
    if (AtEnd()) return std::string();
    const size_t at = pos_;
    std::string q;
    const uint32_t c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, static_cast<char>(c));
    } else if (c == '{') {
      size_t save = pos_;
      ++pos_;
      int64_t m = -1, n = -1;
      bool comma = false;
      if (!ReadNumber(&m)) {
        pos_ = save;  // not a quantifier: a literal '{'
        return std::string();
      }
      if (Peek() == ',') {
        comma = true;
        ++pos_;
        if (Peek() != '}' && !ReadNumber(&n)) return Error(at, "bad {m,n} quantifier");
      }
      if (Peek() != '}') return Error(at, "bad {m,n} quantifier");
      ++pos_;
      if (m > limits_.max_repeat || n > limits_.max_repeat)
        return Error(at, base::StrFormat("repetition above max_repeat (%d)", limits_.max_repeat));
      if (comma && n >= 0 && n < m) return Error(at, "{m,n} with n < m");
      q = "{" + std::to_string(m) + (comma ? "," + (n >= 0 ? std::to_string(n) : "") : "") + "}";
    } else {
      return std::string();
    }
    if (Peek() == '?') {
      ++pos_;
    } else if (Peek() == '+') {
      return Error(pos_, "possessive quantifiers are not supported");
    }
    if (!AtEnd() && (Peek() == '*' || Peek() == '+' || Peek() == '?'))
      return Error(pos_, "a quantifier must follow an atom");
    return q;
  }
  bool ReadNumber(int64_t* out) {
    size_t start = pos_;
    int64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = std::min<int64_t>(v * 10 + (Peek() - '0'), 1 << 30);
      ++pos_;
    }
    if (pos_ == start) return false;
    *out = v;
    return true;
  }

  Result<std::string> Atom(int depth) {
    const size_t at = pos_;
    const uint32_t c = Peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (Peek() == '?') {
          ++pos_;
          if (Peek() == ':') {
            ++pos_;
          } else if (Peek() == '<' && pos_ + 1 < end_ && cps_[pos_ + 1] != '=' &&
                     cps_[pos_ + 1] != '!') {
            while (!AtEnd() && Peek() != '>') ++pos_;
            if (AtEnd()) return Error(at, "unterminated group name");
            ++pos_;
          } else if (Peek() == 'P' && pos_ + 1 < end_ && cps_[pos_ + 1] == '<') {
            while (!AtEnd() && Peek() != '>') ++pos_;
            if (AtEnd()) return Error(at, "unterminated group name");
            ++pos_;
          } else {
            return Error(at, "lookaround, atomic groups and inline flags are not supported");
          }
        }
        KVF_ASSIGN_OR_RETURN(std::string inner, Alternation(depth + 1));
        if (Peek() != ')' || AtEnd()) return Error(at, "unclosed '('");
        ++pos_;
        return "(" + inner + ")";
      }
      case '[':
        return Class();
      case '.':
        ++pos_;
        return Set(Complement({{'\n', '\n'}}));
      case '\\':
        return Escape(false, nullptr);
      case '*':
      case '+':
      case '?':
        return Error(at, "nothing to repeat");
      case '^':
      case '$':
        return Error(at, "anchors are supported only at the start and the end");
      default:
        ++pos_;
        return Char(c);
    }
  }

  // An escape at pos_ (the backslash). In a class, adds to *ranges and returns "".
  Result<std::string> Escape(bool in_class, Ranges* ranges) {
    const size_t at = pos_;
    ++pos_;
    if (AtEnd()) return Error(at, "trailing backslash");
    const uint32_t c = Peek();
    ++pos_;
    const Ranges* shorthand = nullptr;
    bool negated = false;
    switch (c) {
      case 'd':
        shorthand = &kDigit;
        break;
      case 'w':
        shorthand = &kWord;
        break;
      case 's':
        shorthand = &kSpace;
        break;
      case 'D':
        shorthand = &kDigit, negated = true;
        break;
      case 'W':
        shorthand = &kWord, negated = true;
        break;
      case 'S':
        shorthand = &kSpace, negated = true;
        break;
      default:
        break;
    }
    if (shorthand != nullptr) {
      Ranges r = negated ? Complement(*shorthand) : *shorthand;
      if (in_class) {
        ranges->insert(ranges->end(), r.begin(), r.end());
        return std::string();
      }
      return Set(r);
    }
    uint32_t cp = 0;
    switch (c) {
      case 'n':
        cp = '\n';
        break;
      case 't':
        cp = '\t';
        break;
      case 'r':
        cp = '\r';
        break;
      case 'f':
        cp = '\f';
        break;
      case 'v':
        cp = '\v';
        break;
      case '0':
        cp = 0;
        break;
      case 'x':
      case 'u': {
        const int digits = c == 'x' ? 2 : 4;
        for (int i = 0; i < digits; ++i) {
          const uint32_t h = Peek();
          int v = -1;
          if (h >= '0' && h <= '9') v = static_cast<int>(h - '0');
          if (h >= 'a' && h <= 'f') v = static_cast<int>(h - 'a' + 10);
          if (h >= 'A' && h <= 'F') v = static_cast<int>(h - 'A' + 10);
          if (v < 0 || AtEnd()) return Error(at, "bad hex escape");
          cp = cp * 16 + static_cast<uint32_t>(v);
          ++pos_;
        }
        break;
      }
      case 'b':
        if (in_class) {
          cp = '\b';
          break;
        }
        return Error(at, "\\b (word boundary) is not supported");
      default:
        if ((c >= '1' && c <= '9') || c == 'k')
          return Error(at, "backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
          return Error(at, base::StrFormat("\\%c is not supported", static_cast<char>(c)));
        cp = c;  // an escaped punctuation character stands for itself
    }
    if (in_class) {
      ranges->emplace_back(cp, cp);
      return std::string();
    }
    return Char(cp);
  }

  // One class member at pos_ (a character or an escape): its code point in *cp when single.
  Status ClassMember(Ranges* ranges, bool* single, uint32_t* cp) {
    *single = false;
    if (Peek() == '\\') {
      const size_t before = ranges->size();
      KVF_ASSIGN_OR_RETURN(std::string unused, Escape(true, ranges));
      (void)unused;
      if (ranges->size() == before + 1 && (*ranges)[before].first == (*ranges)[before].second) {
        *single = true;
        *cp = (*ranges)[before].first;
        ranges->pop_back();
      }
      return Status::Ok();
    }
    *single = true;
    *cp = Peek();
    ++pos_;
    return Status::Ok();
  }

  Result<std::string> Class() {
    const size_t at = pos_;
    ++pos_;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error(at, "unterminated character class");
      if (Peek() == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      bool single = false;
      uint32_t lo = 0;
      KVF_RETURN_IF_ERROR(ClassMember(&ranges, &single, &lo));
      if (!single) continue;
      if (Peek() == '-' && pos_ + 1 < end_ && cps_[pos_ + 1] != ']') {
        const size_t dash = pos_;
        ++pos_;
        bool single_hi = false;
        uint32_t hi = 0;
        KVF_RETURN_IF_ERROR(ClassMember(&ranges, &single_hi, &hi));
        if (!single_hi) return Error(dash, "a class shorthand cannot end a range");
        if (hi < lo) return Error(dash, "character range out of order");
        ranges.emplace_back(lo, hi);
      } else {
        ranges.emplace_back(lo, lo);
      }
    }
    if (negated) ranges = Complement(ranges);
    if (Normalized(ranges).empty()) return Error(at, "character class matches nothing");
    return Set(ranges);
  }

  std::string_view p_;
  bool json_;
  RegexLimits limits_;
  std::vector<uint32_t> cps_;    // the pattern's code points
  std::vector<size_t> offsets_;  // [cps_] byte offset of each
  size_t pos_ = 0, end_ = 0;
};

}  // namespace

Result<std::string> RegexToGbnfRules(std::string_view pattern, std::string_view rule_name,
                                     bool inside_json_string, const RegexLimits& limits) {
  KVF_ASSIGN_OR_RETURN(std::string expr,
                       RegexCompiler(pattern, inside_json_string, limits).Compile());
  return std::string(rule_name) + " ::= " + expr + "\n";
}

Result<std::string> RegexToGbnf(std::string_view pattern, const RegexLimits& limits) {
  return RegexToGbnfRules(pattern, "root", false, limits);
}

}  // namespace kvforge::grammar
