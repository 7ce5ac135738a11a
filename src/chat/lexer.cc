#include "chat/lexer.h"

#include <charconv>
#include <cstdlib>

#include "chat/errors.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

[[noreturn]] void SyntaxError(const std::string& message, int line) {
  throw TemplateException("TemplateSyntaxError", message + " (line " + std::to_string(line) + ")");
}

// Newlines to "\n", then drop one trailing newline (Jinja2's keep_trailing_newline=False).
std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    if (c == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(c);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsSpaceAt(std::string_view s, size_t pos, size_t* next) {
  if (pos >= s.size()) return false;
  size_t p = pos;
  if (!IsPySpace(DecodeUtf8(s, &p))) return false;
  *next = p;
  return true;
}

// Returns the position after a run of Python whitespace starting at pos.
size_t SkipSpaces(std::string_view s, size_t pos) {
  size_t next = pos;
  while (IsSpaceAt(s, pos, &next)) pos = next;
  return pos;
}

bool AllSpace(std::string_view s) {
  if (s.empty()) return false;
  return SkipSpaces(s, 0) == s.size();
}

int CountNewlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

const char* const kOperators[] = {"**", "//", "==", "!=", ">=", "<=", "+", "-", "/",
                                  "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                  "=",  ".",  ":",  "|",  ",",  ";",  ">", "<"};

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(NormalizeSource(source)) {}

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const size_t tag = FindTagStart(pos);
      std::string_view text(src_.data() + pos,
                            (tag == std::string::npos ? src_.size() : tag) - pos);
      if (tag == std::string::npos) {
        EmitText(text);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = 0;
      if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) {
        sign = src_[tag + 2];
      }
      size_t raw_body = 0;
      const bool raw = kind == '%' && MatchRawBegin(tag, &raw_body);
      std::string_view kept = ApplyLeftControl(text, sign, kind != '{', line_starting);
      EmitText(kept);
      line_ += CountNewlines(text);
      const size_t open_end = tag + 2 + (sign ? 1 : 0);
      if (raw) {
        pos = LexRaw(raw_body, &line_starting, tag);
      } else if (kind == '#') {
        pos = LexComment(open_end, &line_starting);
      } else {
        pos = LexTag(kind == '%', open_end, &line_starting);
      }
    }
    Token eof;
    eof.type = Tok::kEof;
    eof.line = line_;
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t pos) const {
    while (true) {
      const size_t brace = src_.find('{', pos);
      if (brace == std::string::npos || brace + 1 >= src_.size()) return std::string::npos;
      const char next = src_[brace + 1];
      if (next == '{' || next == '%' || next == '#') return brace;
      pos = brace + 1;
    }
  }

  // `{%[-+]?\s*raw\s*(-%}\s*|%})`; on success *body is where the raw text starts.
  bool MatchRawBegin(size_t tag, size_t* body) const {
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpaces(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpaces(src_, p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      *body = SkipSpaces(src_, p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      *body = p + 2;
      return true;
    }
    return false;
  }

  // Whitespace control on the text before a tag: `-` strips trailing whitespace; otherwise
  // lstrip_blocks removes an all-whitespace tail after the last newline for block/comment tags.
  std::string_view ApplyLeftControl(std::string_view text, char sign, bool lstrip_kind,
                                    bool line_starting) const {
    if (sign == '-') return PyStrip(text, nullptr, false, true);
    if (sign != '+' && lstrip_kind) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && AllSpace(text.substr(l_pos))) {
        return text.substr(0, l_pos);
      }
    }
    return text;
  }

  void EmitText(std::string_view text) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::kText;
    t.value = std::string(text);
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  void Emit(Tok type, int line, std::string value = {}) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  // After a block/comment end marker at `after` ("%}" or "#}" already consumed), apply `-`/`+`/
  // trim_blocks and return the new position.
  size_t AfterBlockEnd(char modifier, size_t after, bool* line_starting) {
    size_t end = after;
    if (modifier == '-') {
      end = SkipSpaces(src_, after);
    } else if (modifier != '+' && after < src_.size() && src_[after] == '\n') {
      end = after + 1;  // trim_blocks
    }
    line_ += CountNewlines(std::string_view(src_).substr(after, end - after));
    *line_starting = end > 0 && src_[end - 1] == '\n';
    return end;
  }

  size_t LexComment(size_t pos, bool* line_starting) {
    const int start_line = line_;
    const size_t close = src_.find("#}", pos);
    if (close == std::string::npos) SyntaxError("Missing end of comment tag", start_line);
    char modifier = 0;
    if (close > pos && (src_[close - 1] == '-' || src_[close - 1] == '+')) {
      modifier = src_[close - 1];
    }
    line_ += CountNewlines(std::string_view(src_).substr(pos, close - pos));
    return AfterBlockEnd(modifier, close + 2, line_starting);
  }

  size_t LexRaw(size_t body, bool* line_starting, size_t tag) {
    line_ += CountNewlines(std::string_view(src_).substr(tag, body - tag));
    // `{%[-+]?\s*endraw\s*(\+%}|-%}\s*|%}\n?)`
    size_t search = body;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) SyntaxError("Missing end of raw directive", line_);
      size_t p = open + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = SkipSpaces(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      p = SkipSpaces(src_, p + 6);
      char modifier = 0;
      if (src_.compare(p, 3, "-%}") == 0 || src_.compare(p, 3, "+%}") == 0) {
        modifier = src_[p];
        p += 1;
      } else if (src_.compare(p, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string_view text(src_.data() + body, open - body);
      // The raw text's own line_starting is whether the raw-begin tag ended a line.
      const bool starting = body > 0 && src_[body - 1] == '\n';
      EmitText(ApplyLeftControl(text, sign, true, starting));
      line_ += CountNewlines(std::string_view(src_).substr(body, p - body));
      return AfterBlockEnd(modifier, p + 2, line_starting);
    }
  }

  size_t LexTag(bool block, size_t pos, bool* line_starting) {
    const int start_line = line_;
    Emit(block ? Tok::kBlockBegin : Tok::kVarBegin, line_);
    std::string balance;  // expected closing brackets
    while (true) {
      const size_t next = SkipSpaces(src_, pos);
      line_ += CountNewlines(std::string_view(src_).substr(pos, next - pos));
      pos = next;
      if (pos >= src_.size()) {
        SyntaxError(std::string("unexpected end of template, expected '") +
                        (block ? "end of statement block" : "end of print statement") + "'",
                    start_line);
      }
      if (balance.empty()) {
        if (block) {
          if (src_.compare(pos, 3, "-%}") == 0 || src_.compare(pos, 3, "+%}") == 0) {
            Emit(Tok::kBlockEnd, line_);
            return AfterBlockEnd(src_[pos], pos + 3, line_starting);
          }
          if (src_.compare(pos, 2, "%}") == 0) {
            Emit(Tok::kBlockEnd, line_);
            return AfterBlockEnd(0, pos + 2, line_starting);
          }
        } else {
          if (src_.compare(pos, 3, "-}}") == 0) {
            Emit(Tok::kVarEnd, line_);
            const size_t end = SkipSpaces(src_, pos + 3);
            line_ += CountNewlines(std::string_view(src_).substr(pos, end - pos));
            *line_starting = src_[end - 1] == '\n';
            return end;
          }
          if (src_.compare(pos, 2, "}}") == 0) {
            Emit(Tok::kVarEnd, line_);
            *line_starting = false;
            return pos + 2;
          }
        }
      }
      pos = LexOne(pos, &balance);
    }
  }

  static bool IsDigitAt(std::string_view s, size_t i) {
    return i < s.size() && s[i] >= '0' && s[i] <= '9';
  }

  // `(\d+_)*\d+` starting at i; returns the end or i when there is no match.
  static size_t MatchDigits(std::string_view s, size_t i) {
    if (!IsDigitAt(s, i)) return i;
    size_t p = i;
    while (true) {
      while (IsDigitAt(s, p)) ++p;
      if (p < s.size() && s[p] == '_' && IsDigitAt(s, p + 1)) {
        ++p;
        continue;
      }
      return p;
    }
  }

  size_t LexNumber(size_t pos) {
    const std::string_view s(src_);
    // Prefixed integers: 0x.., 0o.., 0b..
    if (s[pos] == '0' && pos + 1 < s.size()) {
      const char p = static_cast<char>(s[pos + 1] | 0x20);
      const int base = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
      if (base != 0) {
        size_t q = pos + 2;
        std::string digits;
        while (q < s.size()) {
          const char c = s[q];
          const int d = (c >= '0' && c <= '9')   ? c - '0'
                        : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                        : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                                 : (c == '_' ? -2 : -1);
          if (d == -2) {
            ++q;
            continue;
          }
          if (d < 0 || d >= base) break;
          digits.push_back(c);
          ++q;
        }
        if (!digits.empty()) {
          Token t;
          t.type = Tok::kInt;
          t.line = line_;
          auto res =
              std::from_chars(digits.data(), digits.data() + digits.size(), t.int_value, base);
          if (res.ec != std::errc()) SyntaxError("integer literal is too large", line_);
          tokens_.push_back(std::move(t));
          return q;
        }
      }
    }
    size_t end = MatchDigits(s, pos);
    bool is_float = false;
    if (end < s.size() && s[end] == '.' && IsDigitAt(s, end + 1)) {
      end = MatchDigits(s, end + 1);
      is_float = true;
    }
    if (end < s.size() && (s[end] == 'e' || s[end] == 'E')) {
      size_t q = end + 1;
      if (q < s.size() && (s[q] == '+' || s[q] == '-')) ++q;
      const size_t exp_end = MatchDigits(s, q);
      if (exp_end > q) {
        end = exp_end;
        is_float = true;
      }
    }
    std::string digits;
    for (size_t i = pos; i < end; ++i) {
      if (s[i] != '_') digits.push_back(s[i]);
    }
    Token t;
    t.line = line_;
    if (is_float) {
      t.type = Tok::kFloat;
      t.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      t.type = Tok::kInt;
      auto res = std::from_chars(digits.data(), digits.data() + digits.size(), t.int_value);
      if (res.ec != std::errc()) SyntaxError("integer literal is too large", line_);
    }
    tokens_.push_back(std::move(t));
    return end;
  }

  size_t LexString(size_t pos) {
    const char quote = src_[pos];
    const int start_line = line_;
    std::string value;
    size_t p = pos + 1;
    while (true) {
      if (p >= src_.size()) SyntaxError("unexpected end of string", start_line);
      const char c = src_[p];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        value.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) SyntaxError("unexpected end of string", start_line);
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n':
          value.push_back('\n');
          break;
        case 't':
          value.push_back('\t');
          break;
        case 'r':
          value.push_back('\r');
          break;
        case '\\':
          value.push_back('\\');
          break;
        case '\'':
          value.push_back('\'');
          break;
        case '"':
          value.push_back('"');
          break;
        case 'a':
          value.push_back('\a');
          break;
        case 'b':
          value.push_back('\b');
          break;
        case 'f':
          value.push_back('\f');
          break;
        case 'v':
          value.push_back('\v');
          break;
        case '\n':
          ++line_;  // backslash-newline continues the line
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          uint32_t cp = 0;
          if (p + n > src_.size())
            SyntaxError("truncated \\" + std::string(1, e) + " escape", line_);
          auto res = std::from_chars(src_.data() + p, src_.data() + p + n, cp, 16);
          if (res.ec != std::errc() || res.ptr != src_.data() + p + n || cp > 0x10FFFF) {
            SyntaxError("invalid \\" + std::string(1, e) + " escape in string literal", line_);
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
          AppendUtf8(cp, &value);
          p += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {  // octal escape, up to 3 digits
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[p++] - '0');
            }
            AppendUtf8(cp, &value);
          } else {  // unknown escapes stay as written
            value.push_back('\\');
            value.push_back(e);
            if (e == '\n') ++line_;
          }
          break;
      }
    }
    Token t;
    t.type = Tok::kString;
    t.value = std::move(value);
    t.line = start_line;
    tokens_.push_back(std::move(t));
    return p + 1;
  }

  size_t LexOne(size_t pos, std::string* balance) {
    const char c = src_[pos];
    if (c >= '0' && c <= '9') return LexNumber(pos);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
      size_t end = pos + 1;
      while (end < src_.size()) {
        const char d = src_[end];
        if (!((d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '_' ||
              (d >= '0' && d <= '9'))) {
          break;
        }
        ++end;
      }
      Emit(Tok::kName, line_, src_.substr(pos, end - pos));
      return end;
    }
    if (c == '\'' || c == '"') return LexString(pos);
    for (const char* op : kOperators) {
      const size_t n = std::char_traits<char>::length(op);
      if (src_.compare(pos, n, op) != 0) continue;
      if (n == 1) {
        if (c == '(' || c == '[' || c == '{') {
          balance->push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
        } else if (c == ')' || c == ']' || c == '}') {
          if (balance->empty()) SyntaxError(std::string("unexpected '") + c + "'", line_);
          if (balance->back() != c) {
            SyntaxError(std::string("unexpected '") + c + "', expected '" + balance->back() + "'",
                        line_);
          }
          balance->pop_back();
        }
      }
      Emit(Tok::kOp, line_, std::string(op));
      return pos + n;
    }
    std::string shown;
    size_t p = pos;
    AppendUtf8(DecodeUtf8(src_, &p), &shown);
    SyntaxError("unexpected char '" + shown + "'", line_);
  }

  std::string src_;
  std::vector<Token> tokens_;
  int line_ = 1;
};

}  // namespace

std::vector<Token> Lex(std::string_view source) { return Lexer(source).Run(); }

std::string DescribeToken(const Token& token) {
  switch (token.type) {
    case Tok::kText:
      return "template data";
    case Tok::kVarBegin:
      return "begin of print statement";
    case Tok::kVarEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "begin of statement block";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kName:
    case Tok::kOp:
      return token.value;
    case Tok::kString:
      return "string";
    case Tok::kInt:
      return "integer";
    case Tok::kFloat:
      return "float";
    case Tok::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace kvforge::chat
