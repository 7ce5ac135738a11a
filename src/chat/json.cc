#include "chat/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <new>

#include "chat/errors.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

class JsonParser {
 public:
  JsonParser(std::string_view text, const JsonParseOptions& options)
      : text_(text), options_(options) {}

  Result<Value> Run() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // tolerate a UTF-8 byte order mark
    if (!IsValidUtf8(text_)) return Fail("input is not valid UTF-8", FirstInvalidUtf8());
    Value v;
    if (!ParseValue(&v, 0)) return error_;
    SkipSpace();
    if (pos_ != text_.size()) return Fail("unexpected data after the JSON value", pos_);
    if (options_.freeze) v.Freeze();
    return v;
  }

 private:
  Status Fail(const std::string& what, size_t at) {
    size_t line = 1;
    size_t column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    error_ = Status::InvalidArgument("invalid JSON at line " + std::to_string(line) + " column " +
                                     std::to_string(column) + ": " + what);
    return error_;
  }
  bool FailB(const std::string& what, size_t at) {
    (void)Fail(what, at);
    return false;
  }

  size_t FirstInvalidUtf8() const {
    for (size_t pos = 0; pos < text_.size();) {
      const size_t start = pos;
      const uint32_t cp = DecodeUtf8(text_, &pos);
      if (cp == 0xFFFD && pos == start + 1 && static_cast<unsigned char>(text_[start]) >= 0x80) {
        return start;
      }
    }
    return text_.size();
  }

  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  bool ParseValue(Value* out, int depth) {
    SkipSpace();
    if (pos_ >= text_.size()) return FailB("unexpected end of input, expected a value", pos_);
    const char c = text_[pos_];
    switch (c) {
      case '{':
        return ParseObject(out, depth + 1);
      case '[':
        return ParseArray(out, depth + 1);
      case '"': {
        std::string s;
        if (!ParseString(&s)) return false;
        *out = Value::Str(std::move(s));
        return true;
      }
      case 't':
        if (Consume("true")) {
          *out = Value::Bool(true);
          return true;
        }
        break;
      case 'f':
        if (Consume("false")) {
          *out = Value::Bool(false);
          return true;
        }
        break;
      case 'n':
        if (Consume("null")) {
          *out = Value::None();
          return true;
        }
        break;
      case 'N':
        if (Consume("NaN")) {
          *out = Value::Float(std::nan(""));
          return true;
        }
        break;
      case 'I':
        if (Consume("Infinity")) {
          *out = Value::Float(HUGE_VAL);
          return true;
        }
        break;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
        break;
    }
    return FailB(std::string("unexpected character '") + Printable(c) + "', expected a value",
                 pos_);
  }

  static std::string Printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", u);
    return buf;
  }

  bool ParseNumber(Value* out) {
    const size_t start = pos_;
    if (text_[pos_] == '-') {
      ++pos_;
      if (Consume("Infinity")) {
        *out = Value::Float(-HUGE_VAL);
        return true;
      }
    }
    auto digit = [&](size_t i) { return i < text_.size() && text_[i] >= '0' && text_[i] <= '9'; };
    if (!digit(pos_)) return FailB("invalid number: expected a digit", pos_);
    if (text_[pos_] == '0') {
      ++pos_;
      if (digit(pos_)) return FailB("invalid number: leading zeros are not allowed", start);
    } else {
      while (digit(pos_)) ++pos_;
    }
    bool is_float = false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      is_float = true;
      ++pos_;
      if (!digit(pos_)) return FailB("invalid number: expected a digit after '.'", pos_);
      while (digit(pos_)) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      is_float = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digit(pos_)) return FailB("invalid number: expected a digit in the exponent", pos_);
      while (digit(pos_)) ++pos_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (!is_float) {
      int64_t i = 0;
      auto res = std::from_chars(first, last, i);
      if (res.ec == std::errc() && res.ptr == last) {
        *out = Value::Int(i);
        return true;
      }
      // Too large for int64: fall through to double (Python would keep a big integer).
    }
    double d = 0;
    auto res = std::from_chars(first, last, d);
    if (res.ec == std::errc::result_out_of_range) {
      // Python's float() rounds to inf/0 instead of failing.
      d = std::strtod(std::string(first, last).c_str(), nullptr);
    } else if (res.ec != std::errc() || res.ptr != last) {
      return FailB("invalid number", start);
    }
    *out = Value::Float(d);
    return true;
  }

  bool ParseHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return FailB("truncated \\u escape", pos_);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_ + static_cast<size_t>(i)];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return FailB("invalid \\u escape: expected 4 hex digits", pos_);
      }
    }
    pos_ += 4;
    *out = v;
    return true;
  }

  bool ParseString(std::string* out) {
    const size_t open = pos_;
    ++pos_;  // opening quote
    while (true) {
      const size_t run = pos_;
      while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\' &&
             static_cast<unsigned char>(text_[pos_]) >= 0x20) {
        ++pos_;
      }
      out->append(text_.substr(run, pos_ - run));
      if (pos_ >= text_.size()) return FailB("unterminated string", open);
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c != '\\') return FailB("invalid control character in string", pos_);
      ++pos_;
      if (pos_ >= text_.size()) return FailB("unterminated string", open);
      const char e = text_[pos_++];
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!ParseHex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (text_.substr(pos_, 2) == "\\u") {
              const size_t save = pos_;
              pos_ += 2;
              if (!ParseHex4(&low)) return false;
              if (low >= 0xDC00 && low <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
              } else {
                pos_ = save;  // not a low surrogate: decode it on its own next round
                cp = 0xFFFD;
              }
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = 0xFFFD;
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return FailB(std::string("invalid escape '\\") + Printable(e) + "' in string", pos_ - 2);
      }
    }
  }

  bool ParseArray(Value* out, int depth) {
    if (depth > options_.max_depth) return FailB("nesting too deep", pos_);
    ++pos_;  // [
    std::vector<Value> items;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      *out = Value::List(std::move(items));
      return true;
    }
    while (true) {
      Value item;
      if (!ParseValue(&item, depth)) return false;
      items.push_back(std::move(item));
      SkipSpace();
      if (pos_ >= text_.size()) return FailB("unexpected end of input inside an array", pos_);
      if (text_[pos_] == ',') {
        ++pos_;
        SkipSpace();
        if (pos_ < text_.size() && text_[pos_] == ']') {
          return FailB("trailing comma in array", pos_);
        }
        continue;
      }
      if (text_[pos_] == ']') {
        ++pos_;
        *out = Value::List(std::move(items));
        return true;
      }
      return FailB("expected ',' or ']' in array", pos_);
    }
  }

  bool ParseObject(Value* out, int depth) {
    if (depth > options_.max_depth) return FailB("nesting too deep", pos_);
    ++pos_;  // {
    Value dict = Value::Dict();
    DictRep& rep = dict.dict();
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      *out = std::move(dict);
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return FailB("expected a property name in double quotes", pos_);
      }
      std::string key;
      if (!ParseString(&key)) return false;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') {
        return FailB("expected ':' after an object key", pos_);
      }
      ++pos_;
      Value item;
      if (!ParseValue(&item, depth)) return false;
      rep.Set(Value::Str(std::move(key)), std::move(item));
      SkipSpace();
      if (pos_ >= text_.size()) return FailB("unexpected end of input inside an object", pos_);
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == '}') {
        ++pos_;
        *out = std::move(dict);
        return true;
      }
      return FailB("expected ',' or '}' in object", pos_);
    }
  }

  std::string_view text_;
  const JsonParseOptions& options_;
  size_t pos_ = 0;
  Status error_;
};

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t pos = 0; pos < s.size();) {
    const auto byte = static_cast<unsigned char>(s[pos]);
    if (byte >= 0x20 && byte < 0x7F && byte != '"' && byte != '\\') {
      out->push_back(static_cast<char>(byte));
      ++pos;
      continue;
    }
    const size_t start = pos;
    const uint32_t cp = DecodeUtf8(s, &pos);
    char buf[16];
    switch (cp) {
      case '"':
        out->append("\\\"");
        continue;
      case '\\':
        out->append("\\\\");
        continue;
      case '\n':
        out->append("\\n");
        continue;
      case '\r':
        out->append("\\r");
        continue;
      case '\t':
        out->append("\\t");
        continue;
      case '\b':
        out->append("\\b");
        continue;
      case '\f':
        out->append("\\f");
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out->append(buf);
    } else {
      out->append(s.substr(start, pos - start));
    }
  }
  out->push_back('"');
}

void AppendJsonFloat(double d, std::string* out) {
  if (std::isnan(d)) {
    out->append("NaN");
  } else if (std::isinf(d)) {
    out->append(d < 0 ? "-Infinity" : "Infinity");
  } else {
    out->append(FloatRepr(d));
  }
}

[[noreturn]] void NotSerializable(const Value& v) {
  ThrowTypeError("Object of type " + std::string(PyTypeName(v)) + " is not JSON serializable");
}

std::string JsonKey(const Value& key) {
  switch (key.kind()) {
    case Kind::kString:
      return key.str();
    case Kind::kBool:
      return key.bool_value() ? "true" : "false";
    case Kind::kNone:
      return "null";
    case Kind::kInt:
      return std::to_string(key.int_value());
    case Kind::kFloat: {
      std::string s;
      AppendJsonFloat(key.float_value(), &s);
      return s;
    }
    default:
      ThrowTypeError("keys must be str, int, float, bool or None, not " +
                     std::string(PyTypeName(key)));
  }
}

void NewLine(const JsonDumpOptions& options, int level, std::string* out) {
  out->push_back('\n');
  for (int i = 0; i < level; ++i) out->append(*options.indent);
}

void AppendJsonImpl(const Value& v, const JsonDumpOptions& options, std::string* out, int depth) {
  if (depth > kMaxValueDepth) ThrowValueError("Circular reference detected");
  const std::string& item_sep = *options.item_separator;
  switch (v.kind()) {
    case Kind::kNone:
      out->append("null");
      return;
    case Kind::kBool:
      out->append(v.bool_value() ? "true" : "false");
      return;
    case Kind::kInt:
      out->append(std::to_string(v.int_value()));
      return;
    case Kind::kFloat:
      AppendJsonFloat(v.float_value(), out);
      return;
    case Kind::kString:
      AppendJsonString(v.str(), options.ensure_ascii, out);
      return;
    case Kind::kList:
    case Kind::kTuple: {
      const auto& items = v.list().items;
      if (items.empty()) {
        out->append("[]");
        return;
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out->append(item_sep);
        if (options.indent) NewLine(options, depth + 1, out);
        AppendJsonImpl(items[i], options, out, depth + 1);
      }
      if (options.indent) NewLine(options, depth, out);
      out->push_back(']');
      return;
    }
    case Kind::kDict: {
      const auto& entries = v.dict().entries;
      if (entries.empty()) {
        out->append("{}");
        return;
      }
      std::vector<std::pair<std::string, const Value*>> items;
      items.reserve(entries.size());
      for (const auto& [key, item] : entries) items.emplace_back(JsonKey(key), &item);
      if (options.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out->append(item_sep);
        if (options.indent) NewLine(options, depth + 1, out);
        AppendJsonString(items[i].first, options.ensure_ascii, out);
        out->append(options.key_separator);
        AppendJsonImpl(*items[i].second, options, out, depth + 1);
      }
      if (options.indent) NewLine(options, depth, out);
      out->push_back('}');
      return;
    }
    default:
      NotSerializable(v);
  }
}

}  // namespace

Result<Value> ParseJson(std::string_view text, const JsonParseOptions& options) {
  try {
    JsonParser parser(text, options);
    return parser.Run();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while parsing JSON");
  }
}

void AppendJson(const Value& value, const JsonDumpOptions& options, std::string* out) {
  if (!options.item_separator) {
    JsonDumpOptions fixed = options;
    fixed.item_separator = options.indent ? "," : ", ";
    AppendJsonImpl(value, fixed, out, 0);
    return;
  }
  AppendJsonImpl(value, options, out, 0);
}

Result<std::string> ToJson(const Value& value, const JsonDumpOptions& options) {
  try {
    std::string out;
    AppendJson(value, options, &out);
    return out;
  } catch (const TemplateException& e) {
    return e.ToStatus();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while writing JSON");
  }
}

}  // namespace kvforge::chat
