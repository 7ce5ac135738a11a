// Jinja2's builtin filters (plus Hugging Face's tojson), with Jinja2 3.1 semantics.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "chat/errors.h"
#include "chat/filters_impl.h"
#include "chat/interpreter.h"
#include "chat/json.h"
#include "chat/parser.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace filters {

[[noreturn]] void FilterArgumentError(std::string message) {
  ThrowError("FilterArgumentError", std::move(message));
}

Value StrOf(const Value& v) { return v.is_string() ? v : Value::Str(ToStr(v)); }

int64_t IntArg(const Value& v, const char* filter, const char* param) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  if (v.is_undefined()) ThrowUndefined(v);
  ThrowTypeError(std::string(filter) + "(): '" + param + "' must be an integer, not '" +
                 std::string(PyTypeName(v)) + "'");
}

// Jinja2's make_attrgetter: "a.b" / "0" paths looked up with getitem semantics.
Value GetPath(Interpreter& in, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return in.GetItem(item, attribute);
  Value v = item;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.size() < 18;
    for (char c : part) digits = digits && c >= '0' && c <= '9';
    v = in.GetItem(v,
                   digits ? Value::Int(std::strtoll(part.c_str(), nullptr, 10)) : Value::Str(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value IgnoreCase(const Value& v) { return v.is_string() ? Value::Str(PyLower(v.str())) : v; }

std::vector<Value> Items(Interpreter& in, const Value& v) {
  std::vector<Value> items = Iterate(v);
  in.Tick(items.size());
  return items;
}

// select/reject/map start with `if value:` in Jinja2, so falsy operands (None) give nothing.
std::vector<Value> ItemsIfTruthy(Interpreter& in, const Value& v) {
  if (!Truthy(v)) return {};
  return Items(in, v);
}

Value ListOf(Interpreter& in, std::vector<Value> items) {
  in.ChargeElements(items.size());
  return Value::List(std::move(items));
}

// Filters that are generator functions in Jinja2 return one-shot iterators (always truthy, no
// len(), not JSON serialisable), exactly like Python.
Value IteratorOf(Interpreter& in, std::vector<Value> items, const char* type) {
  in.ChargeElements(items.size());
  return Value::Iterator(std::move(items), type);
}

}  // namespace filters

namespace {

using filters::FBatch;
using filters::FDictsort;
using filters::FFirst;
using filters::FilterArgumentError;
using filters::FItems;
using filters::FJoin;
using filters::FLast;
using filters::FLength;
using filters::FList;
using filters::FMap;
using filters::FMax;
using filters::FMin;
using filters::FReject;
using filters::FRejectAttr;
using filters::FReverse;
using filters::FSelect;
using filters::FSelectAttr;
using filters::FSlice;
using filters::FSort;
using filters::FSum;
using filters::FUnique;
using filters::IntArg;
using filters::StrOf;

// ---- string filters ----

Value FTrim(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "trim", {"chars"});
  const std::string s = ToStr(v);
  std::string chars;
  const bool custom = a.has(0) && !a[0].is_none();
  if (custom) chars = ToStr(a[0]);
  return Value::Str(PyStrip(s, custom ? &chars : nullptr, true, true));
}

Value FUpper(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "upper", {});
  const std::string s = ToStr(v);
  in.ChargeString(s.size());
  return Value::Str(PyUpper(s));
}

Value FLower(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "lower", {});
  const std::string s = ToStr(v);
  in.ChargeString(s.size());
  return Value::Str(PyLower(s));
}

Value FCapitalize(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "capitalize", {});
  const std::string s = ToStr(v);
  in.ChargeString(s.size());
  return Value::Str(PyCapitalize(s));
}

bool IsTitleSeparator(uint32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPySpace(c);
}

Value FTitle(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "title", {});
  const std::string s = ToStr(v);
  in.ChargeString(s.size());
  std::string out;
  bool chunk_start = true;
  bool in_separator = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t c = DecodeUtf8(s, &pos);
    const bool sep = IsTitleSeparator(c);
    if (sep != in_separator) chunk_start = true;
    in_separator = sep;
    AppendUtf8(chunk_start ? ToUpperCp(c) : ToLowerCp(c), &out);
    chunk_start = false;
  }
  return Value::Str(std::move(out));
}

Value FReplace(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "replace", {"old", "new", "count"});
  CallArgs call;
  call.positional = {StrOf(a[0]), StrOf(a[1])};
  if (a.has(2) && !a[2].is_none()) call.positional.push_back(a[2]);
  Value result;
  CallBuiltinMethod(in, Value::Str(ToStr(v)), "replace", call, &result);
  return result;
}

Value FCenter(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "center", {"width"});
  CallArgs call;
  call.positional = {a.get(0, Value::Int(80))};
  Value result;
  CallBuiltinMethod(in, Value::Str(ToStr(v)), "center", call, &result);
  return result;
}

Value FIndent(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "indent", {"width", "first", "blank"});
  std::string indention;
  const Value width = a.get(0, Value::Int(4));
  if (width.is_string()) {
    indention = width.str();
  } else {
    const int64_t w = IntArg(width, "indent", "width");
    in.ChargeString(static_cast<size_t>(std::max<int64_t>(w, 0)));
    indention.assign(static_cast<size_t>(std::max<int64_t>(w, 0)), ' ');
  }
  const bool first = a.has(1) && Truthy(a[1]);
  const bool blank = a.has(2) && Truthy(a[2]);
  const std::string s = ToStr(v) + "\n";
  const std::vector<std::string> lines = PySplitLines(s, false);
  in.ChargeString(s.size() + lines.size() * indention.size());
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines[i];
    }
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return Value::Str(std::move(rv));
}

Value FTruncate(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "truncate", {"length", "killwords", "end", "leeway"});
  const std::string s = ToStr(v);
  const int64_t length = a.has(0) ? IntArg(a[0], "truncate", "length") : 255;
  const bool killwords = a.has(1) && Truthy(a[1]);
  const std::string end = a.has(2) ? ToStr(a[2]) : "...";
  const int64_t leeway = a.has(3) && !a[3].is_none() ? IntArg(a[3], "truncate", "leeway") : 5;
  const auto end_len = static_cast<int64_t>(CodePointCount(end));
  if (length < end_len)
    ThrowError("AssertionError",
               "expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0)
    ThrowError("AssertionError", "expected leeway >= 0, got " + std::to_string(leeway));
  const std::vector<size_t> offsets = CodePointOffsets(s);
  const auto n = static_cast<int64_t>(offsets.size() - 1);
  if (n <= length + leeway) return Value::Str(s);
  std::string head = s.substr(0, offsets[static_cast<size_t>(length - end_len)]);
  if (!killwords) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head = head.substr(0, space);
  }
  return Value::Str(head + end);
}

Value FWordcount(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "wordcount", {});
  const std::string s = ToStr(v);
  int64_t words = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size();) {
    const bool w = IsWordChar(DecodeUtf8(s, &pos));
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value::Int(words);
}

Value FFormat(Interpreter& in, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    FilterArgumentError("can't handle positional and keyword arguments at the same time");
  }
  Value operand;
  if (!args.keyword.empty()) {
    operand = Value::Dict();
    for (const auto& [k, x] : args.keyword) operand.dict().SetStr(k, x);
  } else {
    operand = Value::Tuple(args.positional);
  }
  std::string s = PercentFormat(in, ToStr(v), operand);
  in.ChargeString(s.size());
  return Value::Str(std::move(s));
}

Value FStriptags(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "striptags", {});
  const std::string s = ToStr(v);
  std::string text;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      const size_t end = s.find("-->", i + 4);
      i = end == std::string::npos ? s.size() : end + 3;
    } else if (s[i] == '<') {
      const size_t end = s.find('>', i + 1);
      if (end == std::string::npos) {
        text.push_back(s[i++]);
      } else {
        i = end + 1;
      }
    } else {
      text.push_back(s[i++]);
    }
  }
  std::vector<std::string> words = PySplit(text, nullptr, -1);
  std::string joined;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) joined.push_back(' ');
    joined += words[i];
  }
  static const std::pair<const char*, const char*> kEntities[] = {{"&lt;", "<"},    {"&gt;", ">"},
                                                                  {"&quot;", "\""}, {"&#34;", "\""},
                                                                  {"&#39;", "'"},   {"&amp;", "&"}};
  for (const auto& [from, to] : kEntities) {
    for (size_t p = joined.find(from); p != std::string::npos; p = joined.find(from, p + 1)) {
      joined.replace(p, std::strlen(from), to);
    }
  }
  return Value::Str(std::move(joined));
}

Value FSafe(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "safe", {});
  return Value::Markup(ToStr(v));
}

Value FEscape(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "escape", {});
  if (v.is_markup()) return v;
  return Value::Markup(HtmlEscape(ToStr(v)));
}

Value FForceEscape(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "forceescape", {});
  return Value::Markup(HtmlEscape(ToStr(v)));
}

Value FString(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "string", {});
  return StrOf(v);
}

// ---- numbers ----

// Python int(str, base): whitespace, sign, underscores between digits, optional base prefix.
bool ParsePyInt(std::string_view s, int base, int64_t* out) {
  s = PyStrip(s, nullptr, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() >= 2 && s[0] == '0') {
    const char p = static_cast<char>(s[1] | 0x20);
    const int prefixed = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  if (s.empty()) return false;
  uint64_t value = 0;
  bool last_underscore = true;
  for (char c : s) {
    if (c == '_') {
      if (last_underscore) return false;
      last_underscore = true;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
    if (d < 0 || d >= base) return false;
    if (value > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
      ThrowError("OverflowError", "integer result does not fit in 64 bits");
    }
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    last_underscore = false;
  }
  if (last_underscore) return false;
  if (value > static_cast<uint64_t>(INT64_MAX) + (negative ? 1 : 0)) {
    ThrowError("OverflowError", "integer result does not fit in 64 bits");
  }
  *out = negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
  return true;
}

bool ParsePyFloat(std::string_view s, double* out) {
  s = PyStrip(s, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || !isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !isdigit(static_cast<unsigned char>(s[i + 1]))) {
        return false;
      }
      continue;
    }
    clean.push_back(s[i]);
  }
  if (clean.empty()) return false;
  std::string lower = PyLower(clean);
  const bool neg = lower[0] == '-';
  const std::string body = (lower[0] == '-' || lower[0] == '+') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity") {
    *out = neg ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (body == "nan") {
    *out = std::nan("");
    return true;
  }
  for (char c : body) {
    if (!(isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) {
      return false;
    }
  }
  char* end = nullptr;
  *out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

Value FInt(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "int", {"default", "base"});
  const Value fallback = a.get(0, Value::Int(0));
  const int64_t base = a.has(1) ? IntArg(a[1], "int", "base") : 10;
  if (v.is_undefined()) ThrowUndefined(v);
  if (v.is_int() || v.is_bool()) return Value::Int(v.int_value());
  if (v.is_float()) {
    const double d = v.float_value();
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) ThrowError("OverflowError", "cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18)
      ThrowError("OverflowError", "integer result does not fit in 64 bits");
    return Value::Int(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    if (base != 0 && (base < 2 || base > 36))
      ThrowValueError("int() base must be >= 2 and <= 36, or 0");
    int64_t i = 0;
    if (ParsePyInt(v.str(), static_cast<int>(base), &i)) return Value::Int(i);
    double d = 0;
    if (ParsePyFloat(v.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(d));
    }
    if (ParsePyFloat(v.str(), &d) && std::isinf(d)) {
      ThrowError("OverflowError", "cannot convert float infinity to integer");
    }
  }
  return fallback;
}

Value FFloat(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "float", {"default"});
  if (v.is_undefined()) ThrowUndefined(v);
  if (v.is_number()) return Value::Float(v.number_as_double());
  double d = 0;
  if (v.is_string() && ParsePyFloat(v.str(), &d)) return Value::Float(d);
  return a.get(0, Value::Float(0.0));
}

Value FAbs(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "abs", {});
  if (v.is_int() || v.is_bool()) {
    if (v.int_value() == INT64_MIN)
      ThrowError("OverflowError", "integer result does not fit in 64 bits");
    return Value::Int(v.int_value() < 0 ? -v.int_value() : v.int_value());
  }
  if (v.is_float()) return Value::Float(std::fabs(v.float_value()));
  if (v.is_undefined()) ThrowUndefined(v);
  ThrowTypeError("bad operand type for abs(): '" + std::string(PyTypeName(v)) + "'");
}

double PyRound(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits > 330) return x;
  if (ndigits < -330) return std::copysign(0.0, x);
  if (ndigits >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / p) * p;
}

Value FRound(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "round", {"precision", "method"});
  const int64_t precision = a.has(0) ? IntArg(a[0], "round", "precision") : 0;
  const std::string method = a.has(1) ? ToStr(a[1]) : "common";
  if (v.is_undefined()) ThrowUndefined(v);
  if (!v.is_number()) {
    ThrowTypeError("type " + std::string(PyTypeName(v)) + " doesn't define __round__ method");
  }
  if (method == "common") {
    if (!v.is_float()) {
      if (precision >= 0) return Value::Int(v.int_value());
      return Value::Int(
          static_cast<int64_t>(PyRound(static_cast<double>(v.int_value()), precision)));
    }
    return Value::Float(PyRound(v.float_value(), precision));
  }
  if (method != "ceil" && method != "floor")
    FilterArgumentError("method must be common, ceil or floor");
  const double p = std::pow(10.0, static_cast<double>(precision));
  const double x = v.number_as_double() * p;
  return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value FDefault(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "default", {"default_value", "boolean"});
  const bool boolean = a.has(1) && Truthy(a[1]);
  if (v.is_undefined() || (boolean && !Truthy(v))) return a.get(0, Value::Str(""));
  return v;
}

Value FAttr(Interpreter& in, const Value& v, CallArgs& args) {
  // Jinja2's attr() looks up Python attributes only (methods, namespace attributes, loop
  // fields), never dict keys.
  ArgBinder a(args, "attr", {"name"});
  const Value name = StrOf(a[0]);
  if (v.is_dict()) {
    if (HasMethod(v, name.str())) return in.GetAttr(v, name);
    return Value::UndefinedAttribute(ObjectTypeRepr(v), name.str());
  }
  return in.GetAttr(v, name);
}

Value FPprint(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "pprint", {});
  std::string s = Repr(v);
  in.ChargeString(s.size());
  return Value::Str(std::move(s));
}

// Hugging Face's override: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), no HTML escaping.
Value FTojson(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = a.has(0) && Truthy(a[0]);
  if (a.has(1) && !a[1].is_none()) {
    if (a[1].is_string()) {
      options.indent = a[1].str();
    } else {
      const int64_t n = IntArg(a[1], "tojson", "indent");
      in.ChargeString(static_cast<size_t>(std::max<int64_t>(n, 0)));
      options.indent = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
    }
  }
  if (a.has(2) && !a[2].is_none()) {
    std::vector<Value> seps = Iterate(a[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      ThrowValueError("separators must be a pair of strings");
    }
    options.item_separator = seps[0].str();
    options.key_separator = seps[1].str();
  }
  options.sort_keys = a.has(3) && Truthy(a[3]);
  std::string out;
  AppendJson(v, options, &out);
  in.ChargeString(out.size());
  return Value::Str(std::move(out));
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", FAbs},
    {"attr", FAttr},
    {"batch", FBatch},
    {"capitalize", FCapitalize},
    {"center", FCenter},
    {"count", FLength},
    {"d", FDefault},
    {"default", FDefault},
    {"dictsort", FDictsort},
    {"e", FEscape},
    {"escape", FEscape},
    {"first", FFirst},
    {"float", FFloat},
    {"forceescape", FForceEscape},
    {"format", FFormat},
    {"indent", FIndent},
    {"int", FInt},
    {"items", FItems},
    {"join", FJoin},
    {"last", FLast},
    {"length", FLength},
    {"list", FList},
    {"lower", FLower},
    {"map", FMap},
    {"max", FMax},
    {"min", FMin},
    {"pprint", FPprint},
    {"reject", FReject},
    {"rejectattr", FRejectAttr},
    {"replace", FReplace},
    {"reverse", FReverse},
    {"round", FRound},
    {"safe", FSafe},
    {"select", FSelect},
    {"selectattr", FSelectAttr},
    {"slice", FSlice},
    {"sort", FSort},
    {"string", FString},
    {"striptags", FStriptags},
    {"sum", FSum},
    {"title", FTitle},
    {"tojson", FTojson},
    {"trim", FTrim},
    {"truncate", FTruncate},
    {"unique", FUnique},
    {"upper", FUpper},
    {"wordcount", FWordcount},
};

}  // namespace

FilterFn FindFilter(std::string_view name) {
  for (const auto& f : kFilters) {
    if (name == f.name) return f.fn;
  }
  return nullptr;
}

}  // namespace kvforge::chat
