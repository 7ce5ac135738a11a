// Python str, list, tuple and dict methods reachable from templates (`text.split('x')`).
//
// Mutating list/dict methods work on containers the template created and raise SecurityError on
// frozen inputs (see value.h). dict.keys()/values()/items() return lists.
#include <algorithm>
#include <cstring>

#include "chat/errors.h"
#include "chat/interpreter.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

constexpr const char* kStrMethods[] = {
    "startswith", "endswith",   "split",        "rsplit",       "strip",     "lstrip",   "rstrip",
    "upper",      "lower",      "title",        "capitalize",   "swapcase",  "casefold", "replace",
    "find",       "rfind",      "index",        "rindex",       "count",     "join",     "format",
    "splitlines", "isdigit",    "isdecimal",    "isnumeric",    "isalpha",   "isalnum",  "isspace",
    "isupper",    "islower",    "isascii",      "zfill",        "ljust",     "rjust",    "center",
    "partition",  "rpartition", "removeprefix", "removesuffix", "format_map"};
constexpr const char* kListMethods[] = {"append", "extend", "insert", "pop",     "remove", "clear",
                                        "index",  "count",  "copy",   "reverse", "sort"};
constexpr const char* kTupleMethods[] = {"index", "count"};
constexpr const char* kDictMethods[] = {"get", "keys",    "values",     "items",  "copy",
                                        "pop", "popitem", "setdefault", "update", "clear"};

template <size_t N>
bool InList(const char* const (&list)[N], std::string_view name) {
  for (const char* m : list) {
    if (name == m) return true;
  }
  return false;
}

const std::string& RequireStr(const Value& v, const char* method, const char* what = "argument") {
  if (!v.is_string()) {
    if (v.is_undefined()) ThrowUndefined(v);
    ThrowTypeError(std::string(method) + "() " + what + " must be str, not " +
                   std::string(PyTypeName(v)));
  }
  return v.str();
}

int64_t RequireInt(const Value& v, const char* method) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  if (v.is_undefined()) ThrowUndefined(v);
  ThrowTypeError(std::string(method) + "() argument must be int, not " +
                 std::string(PyTypeName(v)));
}

// Code point index -> byte offset helpers for find/index with start/end.
size_t ByteToCodePoint(std::string_view s, size_t byte) {
  return CodePointCount(s.substr(0, byte));
}

// Resolves Python's optional [start, end] code point bounds into a byte range of s.
void Bounds(std::string_view s, const ArgBinder& a, size_t first, size_t* b0, size_t* b1) {
  *b0 = 0;
  *b1 = s.size();
  if (!a.has(first) && !a.has(first + 1)) return;
  const std::vector<size_t> offsets = CodePointOffsets(s);
  const auto n = static_cast<int64_t>(offsets.size() - 1);
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (!v.is_int() && !v.is_bool()) return fallback;
    int64_t i = v.int_value();
    if (i < 0) i = std::max<int64_t>(0, i + n);
    return std::min(i, n);
  };
  const int64_t lo = clamp(a[first], 0);
  const int64_t hi = clamp(a[first + 1], n);
  *b0 = offsets[static_cast<size_t>(lo)];
  *b1 = std::max(*b0, offsets[static_cast<size_t>(hi)]);
}

Value StrList(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(Value::Str(p));
  return Value::List(std::move(items));
}

std::string Pad(Interpreter& in, const std::string& s, int64_t width, const std::string& fill,
                int where /* -1 left-justify, 0 center, 1 right-justify */) {
  const auto len = static_cast<int64_t>(CodePointCount(s));
  if (width <= len) return s;
  const int64_t marg = width - len;
  in.ChargeString(s.size() + static_cast<size_t>(marg) * fill.size());
  int64_t left = 0;
  if (where == 1) left = marg;
  if (where == 0) left = marg / 2 + (marg & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = left; i < marg; ++i) out += fill;
  return out;
}

bool AllChars(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  for (size_t pos = 0; pos < s.size();) {
    if (!pred(DecodeUtf8(s, &pos))) return false;
  }
  return true;
}

std::string Replace(Interpreter& in, const std::string& s, const std::string& old,
                    const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    int64_t done = 0;
    size_t pos = 0;
    while (true) {
      if (count >= 0 && done >= count) break;
      out += repl;
      ++done;
      if (pos >= s.size()) break;
      const size_t start = pos;
      DecodeUtf8(s, &pos);
      out.append(s, start, pos - start);
      in.ChargeString(out.size());
    }
    out.append(s, std::min(pos, s.size()), std::string::npos);
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, start);
    if (hit == std::string::npos) break;
    out.append(s, start, hit - start);
    out += repl;
    start = hit + old.size();
    ++done;
    if (out.size() > in.limits().max_output_bytes) in.ChargeString(out.size());
  }
  out.append(s, start, std::string::npos);
  in.ChargeString(out.size());
  return out;
}

[[noreturn]] void ReadOnly(const Value& obj, std::string_view method) {
  ThrowError("SecurityError", "access to attribute '" + std::string(method) + "' of '" +
                                  std::string(PyTypeName(obj)) +
                                  "' object is unsafe: template inputs are read-only.");
}

bool StrMethod(Interpreter& in, const Value& obj, std::string_view m, CallArgs& args, Value* out) {
  const std::string& s = obj.str();
  const std::string name(m);
  if (m == "startswith" || m == "endswith") {
    ArgBinder a(args, name, {"prefix", "start", "end"});
    size_t b0 = 0;
    size_t b1 = 0;
    Bounds(s, a, 1, &b0, &b1);
    const std::string_view view(s.data() + b0, b1 - b0);
    auto test = [&](const Value& p) {
      const std::string& x = RequireStr(p, name.c_str());
      return m == "startswith"
                 ? view.substr(0, x.size()) == x
                 : (view.size() >= x.size() && view.substr(view.size() - x.size()) == x);
    };
    bool result = false;
    if (a[0].is_tuple()) {
      for (const Value& p : a[0].list().items) result = result || test(p);
    } else {
      result = test(a[0]);
    }
    *out = Value::Bool(result);
    return true;
  }
  if (m == "split" || m == "rsplit") {
    ArgBinder a(args, name, {"sep", "maxsplit"});
    const std::string* sep = nullptr;
    if (a.has(0) && !a[0].is_none()) {
      sep = &RequireStr(a[0], name.c_str());
      if (sep->empty()) ThrowValueError("empty separator");
    }
    const int64_t maxsplit = a.has(1) ? RequireInt(a[1], name.c_str()) : -1;
    std::vector<std::string> parts =
        m == "split" ? PySplit(s, sep, maxsplit) : PyRSplit(s, sep, maxsplit);
    in.ChargeElements(parts.size());
    *out = StrList(parts);
    return true;
  }
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    ArgBinder a(args, name, {"chars"});
    const std::string* chars = nullptr;
    if (a.has(0) && !a[0].is_none()) chars = &RequireStr(a[0], name.c_str());
    *out = Value::Str(PyStrip(s, chars, m != "rstrip", m != "lstrip"));
    return true;
  }
  if (m == "upper" || m == "lower" || m == "title" || m == "capitalize" || m == "swapcase" ||
      m == "casefold") {
    ArgBinder a(args, name, {});
    in.ChargeString(s.size());
    if (m == "upper") *out = Value::Str(PyUpper(s));
    if (m == "lower" || m == "casefold") *out = Value::Str(PyLower(s));
    if (m == "title") *out = Value::Str(PyTitle(s));
    if (m == "capitalize") *out = Value::Str(PyCapitalize(s));
    if (m == "swapcase") *out = Value::Str(PySwapCase(s));
    return true;
  }
  if (m == "replace") {
    ArgBinder a(args, name, {"old", "new", "count"});
    const std::string& old = RequireStr(a[0], "replace");
    const std::string& repl = RequireStr(a[1], "replace");
    const int64_t count = a.has(2) ? RequireInt(a[2], "replace") : -1;
    *out = Value::Str(Replace(in, s, old, repl, count));
    return true;
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    ArgBinder a(args, name, {"sub", "start", "end"});
    const std::string& sub = RequireStr(a[0], name.c_str());
    size_t b0 = 0;
    size_t b1 = 0;
    Bounds(s, a, 1, &b0, &b1);
    const std::string_view view(s.data() + b0, b1 - b0);
    if (m == "count") {
      int64_t n = 0;
      if (sub.empty()) {
        n = static_cast<int64_t>(CodePointCount(view)) + 1;
      } else {
        for (size_t p = view.find(sub); p != std::string_view::npos;
             p = view.find(sub, p + sub.size())) {
          ++n;
        }
      }
      *out = Value::Int(n);
      return true;
    }
    const size_t hit = (m == "find" || m == "index") ? view.find(sub) : view.rfind(sub);
    if (hit == std::string_view::npos) {
      if (m == "index" || m == "rindex") ThrowValueError("substring not found");
      *out = Value::Int(-1);
    } else {
      *out = Value::Int(static_cast<int64_t>(ByteToCodePoint(s, b0 + hit)));
    }
    return true;
  }
  if (m == "join") {
    ArgBinder a(args, name, {"iterable"});
    std::vector<Value> items = Iterate(a[0]);
    in.Tick(items.size());
    std::string result;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        ThrowTypeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                       std::string(PyTypeName(items[i])) + " found");
      }
      if (i > 0) result += s;
      result += items[i].str();
      if (result.size() > in.limits().max_output_bytes) in.ChargeString(result.size());
    }
    in.ChargeString(result.size());
    *out = Value::Str(std::move(result));
    return true;
  }
  if (m == "format") {
    std::string result = BraceFormat(in, s, args);
    in.ChargeString(result.size());
    *out = Value::Str(std::move(result));
    return true;
  }
  if (m == "format_map") {
    ArgBinder a(args, name, {"mapping"});
    if (!a[0].is_dict()) ThrowTypeError("format_map() argument must be a mapping");
    CallArgs kw;
    for (const auto& [k, v] : a[0].dict().entries) {
      if (k.is_string()) kw.keyword.emplace_back(k.str(), v);
    }
    std::string result = BraceFormat(in, s, kw);
    in.ChargeString(result.size());
    *out = Value::Str(std::move(result));
    return true;
  }
  if (m == "splitlines") {
    ArgBinder a(args, name, {"keepends"});
    std::vector<std::string> lines = PySplitLines(s, a.has(0) && Truthy(a[0]));
    in.ChargeElements(lines.size());
    *out = StrList(lines);
    return true;
  }
  if (m.substr(0, 2) == "is") {
    ArgBinder a(args, name, {});
    bool r = false;
    if (m == "isdigit" || m == "isdecimal" || m == "isnumeric") r = AllChars(s, IsPyDigit);
    if (m == "isalpha") r = AllChars(s, IsPyAlpha);
    if (m == "isalnum") r = AllChars(s, [](uint32_t c) { return IsPyAlpha(c) || IsPyDigit(c); });
    if (m == "isspace") r = AllChars(s, IsPySpace);
    if (m == "isascii") r = IsAscii(s);
    if (m == "isupper" || m == "islower") {
      bool cased = false;
      r = true;
      for (size_t pos = 0; pos < s.size();) {
        const uint32_t c = DecodeUtf8(s, &pos);
        if (m == "isupper" ? IsPyLower(c) : IsPyUpper(c)) r = false;
        if (IsPyLower(c) || IsPyUpper(c)) cased = true;
      }
      r = r && cased;
    }
    *out = Value::Bool(r);
    return true;
  }
  if (m == "zfill") {
    ArgBinder a(args, name, {"width"});
    const int64_t width = RequireInt(a[0], "zfill");
    const auto len = static_cast<int64_t>(CodePointCount(s));
    if (width <= len) {
      *out = obj.WithoutMarkup();
      return true;
    }
    in.ChargeString(s.size() + static_cast<size_t>(width - len));
    std::string z(static_cast<size_t>(width - len), '0');
    if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
      *out = Value::Str(s.substr(0, 1) + z + s.substr(1));
    } else {
      *out = Value::Str(z + s);
    }
    return true;
  }
  if (m == "ljust" || m == "rjust" || m == "center") {
    ArgBinder a(args, name, {"width", "fillchar"});
    const int64_t width = RequireInt(a[0], name.c_str());
    std::string fill = " ";
    if (a.has(1)) {
      fill = RequireStr(a[1], name.c_str());
      if (CodePointCount(fill) != 1) {
        ThrowTypeError("The fill character must be exactly one character long");
      }
    }
    *out = Value::Str(Pad(in, s, width, fill, m == "ljust" ? -1 : (m == "rjust" ? 1 : 0)));
    return true;
  }
  if (m == "partition" || m == "rpartition") {
    ArgBinder a(args, name, {"sep"});
    const std::string& sep = RequireStr(a[0], name.c_str());
    if (sep.empty()) ThrowValueError("empty separator");
    const size_t hit = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      *out = m == "partition" ? Value::Tuple({Value::Str(s), Value::Str(""), Value::Str("")})
                              : Value::Tuple({Value::Str(""), Value::Str(""), Value::Str(s)});
    } else {
      *out = Value::Tuple(
          {Value::Str(s.substr(0, hit)), Value::Str(sep), Value::Str(s.substr(hit + sep.size()))});
    }
    return true;
  }
  if (m == "removeprefix" || m == "removesuffix") {
    ArgBinder a(args, name, {"affix"});
    const std::string& x = RequireStr(a[0], name.c_str());
    std::string_view v(s);
    if (m == "removeprefix" && v.substr(0, x.size()) == x) v.remove_prefix(x.size());
    if (m == "removesuffix" && !x.empty() && v.size() >= x.size() &&
        v.substr(v.size() - x.size()) == x) {
      v.remove_suffix(x.size());
    }
    *out = Value::Str(v);
    return true;
  }
  return false;
}

int64_t NormalizeIndex(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

bool ListMethod(Interpreter& in, const Value& obj, std::string_view m, CallArgs& args, Value* out) {
  ListRep& rep = obj.list();
  const std::string name(m);
  auto& items = rep.items;
  const bool mutating = m == "append" || m == "extend" || m == "insert" || m == "pop" ||
                        m == "remove" || m == "clear" || m == "reverse" || m == "sort";
  if (mutating && rep.frozen) ReadOnly(obj, m);
  auto note = [&](const Value& v) {
    if (v.is_list() || v.is_tuple() || v.is_dict() || v.is_namespace() || v.is_object()) {
      in.NoteMutation(obj);
    }
  };
  *out = Value::None();
  if (m == "append") {
    ArgBinder a(args, name, {"object"});
    in.ChargeElements(items.size() + 1);
    note(a[0]);
    items.push_back(a[0]);
  } else if (m == "extend") {
    ArgBinder a(args, name, {"iterable"});
    std::vector<Value> more = Iterate(a[0]);
    in.ChargeElements(items.size() + more.size());
    for (Value& v : more) {
      note(v);
      items.push_back(std::move(v));
    }
  } else if (m == "insert") {
    ArgBinder a(args, name, {"index", "object"});
    const auto n = static_cast<int64_t>(items.size());
    int64_t i = NormalizeIndex(RequireInt(a[0], "insert"), n);
    i = std::clamp<int64_t>(i, 0, n);
    in.ChargeElements(items.size() + 1);
    note(a[1]);
    items.insert(items.begin() + i, a[1]);
  } else if (m == "pop") {
    ArgBinder a(args, name, {"index"});
    const auto n = static_cast<int64_t>(items.size());
    if (n == 0) ThrowError("IndexError", "pop from empty list");
    const int64_t i = NormalizeIndex(a.has(0) ? RequireInt(a[0], "pop") : -1, n);
    if (i < 0 || i >= n) ThrowError("IndexError", "pop index out of range");
    *out = std::move(items[static_cast<size_t>(i)]);
    items.erase(items.begin() + i);
  } else if (m == "remove") {
    ArgBinder a(args, name, {"value"});
    auto it =
        std::find_if(items.begin(), items.end(), [&](const Value& v) { return Equals(v, a[0]); });
    if (it == items.end()) ThrowValueError("list.remove(x): x not in list");
    items.erase(it);
  } else if (m == "clear") {
    ArgBinder a(args, name, {});
    std::vector<Value> doomed;
    doomed.swap(items);
  } else if (m == "index" || m == "count") {
    ArgBinder a(args, name, {"value"});
    in.Tick(items.size());
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!Equals(items[i], a[0])) continue;
      if (m == "index") {
        *out = Value::Int(static_cast<int64_t>(i));
        return true;
      }
      ++count;
    }
    if (m == "index") ThrowValueError(Repr(a[0]) + " is not in list");
    *out = Value::Int(count);
  } else if (m == "copy") {
    ArgBinder a(args, name, {});
    in.ChargeElements(items.size());
    *out = Value::List(items);
  } else if (m == "reverse") {
    ArgBinder a(args, name, {});
    std::reverse(items.begin(), items.end());
  } else if (m == "sort") {
    ArgBinder a(args, name, {"reverse"});
    const bool reverse = a.has(0) && Truthy(a[0]);
    in.Tick(items.size() * 8);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return reverse ? Less(y, x) : Less(x, y);
    });
  } else {
    return false;
  }
  return true;
}

bool DictMethod(Interpreter& in, const Value& obj, std::string_view m, CallArgs& args, Value* out) {
  DictRep& rep = obj.dict();
  const std::string name(m);
  const bool mutating =
      m == "pop" || m == "popitem" || m == "setdefault" || m == "update" || m == "clear";
  if (mutating && rep.frozen) ReadOnly(obj, m);
  if (m == "get") {
    ArgBinder a(args, name, {"key", "default"});
    CheckHashable(a[0]);
    const Value* v = rep.Find(a[0]);
    *out = v ? *v : (a.has(1) ? a[1] : Value::None());
  } else if (m == "keys" || m == "values" || m == "items") {
    ArgBinder a(args, name, {});
    in.ChargeElements(rep.size());
    std::vector<Value> items;
    items.reserve(rep.size());
    for (const auto& [k, v] : rep.entries) {
      if (m == "keys") items.push_back(k);
      if (m == "values") items.push_back(v);
      if (m == "items") items.push_back(Value::Tuple({k, v}));
    }
    *out = Value::List(std::move(items));
  } else if (m == "copy") {
    ArgBinder a(args, name, {});
    in.ChargeElements(rep.size());
    Value copy = Value::Dict();
    for (const auto& [k, v] : rep.entries) copy.dict().Set(k, v);
    *out = std::move(copy);
  } else if (m == "pop") {
    ArgBinder a(args, name, {"key", "default"});
    CheckHashable(a[0]);
    if (const Value* v = rep.Find(a[0])) {
      *out = *v;
      rep.Erase(a[0]);
    } else if (a.has(1)) {
      *out = a[1];
    } else {
      ThrowError("KeyError", Repr(a[0]));
    }
  } else if (m == "popitem") {
    ArgBinder a(args, name, {});
    if (rep.size() == 0) ThrowError("KeyError", "'popitem(): dictionary is empty'");
    auto last = rep.entries.back();
    rep.Erase(last.first);
    *out = Value::Tuple({last.first, last.second});
  } else if (m == "setdefault") {
    ArgBinder a(args, name, {"key", "default"});
    CheckHashable(a[0]);
    if (const Value* v = rep.Find(a[0])) {
      *out = *v;
    } else {
      const Value def = a.has(1) ? a[1] : Value::None();
      if (def.is_list() || def.is_dict() || def.is_namespace() || def.is_object()) {
        in.NoteMutation(obj);
      }
      in.ChargeElements(rep.size() + 1);
      rep.Set(a[0], def);
      *out = def;
    }
  } else if (m == "update") {
    if (args.positional.size() > 1) ThrowTypeError("update expected at most 1 argument");
    auto put = [&](const Value& k, const Value& v) {
      CheckHashable(k);
      if (v.is_list() || v.is_tuple() || v.is_dict() || v.is_namespace() || v.is_object()) {
        in.NoteMutation(obj);
      }
      rep.Set(k, v);
    };
    if (!args.positional.empty()) {
      const Value& src = args.positional[0];
      if (src.is_dict() || src.is_namespace()) {
        const auto entries = src.dict().entries;
        for (const auto& [k, v] : entries) put(k, v);
      } else {
        for (const Value& pair : Iterate(src)) {
          std::vector<Value> kv = Iterate(pair);
          if (kv.size() != 2)
            ThrowValueError("dictionary update sequence element has wrong length");
          put(kv[0], kv[1]);
        }
      }
    }
    for (const auto& [k, v] : args.keyword) put(Value::Str(k), v);
    in.ChargeElements(rep.size());
    *out = Value::None();
  } else if (m == "clear") {
    ArgBinder a(args, name, {});
    rep.Clear();
    *out = Value::None();
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool HasMethod(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::kString:
      return InList(kStrMethods, name);
    case Kind::kList:
      return InList(kListMethods, name);
    case Kind::kTuple:
      return InList(kTupleMethods, name);
    case Kind::kDict:
      return InList(kDictMethods, name);
    default:
      return false;
  }
}

bool CallBuiltinMethod(Interpreter& in, const Value& obj, std::string_view name, CallArgs& args,
                       Value* result) {
  if (!HasMethod(obj, name)) return false;
  in.Tick();
  switch (obj.kind()) {
    case Kind::kString:
      return StrMethod(in, obj, name, args, result);
    case Kind::kList:
    case Kind::kTuple:
      return ListMethod(in, obj, name, args, result);
    case Kind::kDict:
      return DictMethod(in, obj, name, args, result);
    default:
      return false;
  }
}

}  // namespace kvforge::chat
