// Sequence filters: list, first, last, join, reverse, items, dictsort, sort, unique, min, max,
// sum, batch, slice, map, select, reject, selectattr, rejectattr (Jinja2 3.1 semantics; the
// generator filters return one-shot iterators).
#include <algorithm>

#include "chat/errors.h"
#include "chat/filters_impl.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat::filters {
// ---- sequences ----

Value FLength(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "length", {});
  return Value::Int(Length(v));
}

Value FList(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "list", {});
  return ListOf(in, Items(in, v));
}

Value FFirst(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "first", {});
  if (v.is_sequence_like()) {
    if (!v.list().items.empty()) return v.list().items.front();
  } else {
    std::vector<Value> items = Iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::UndefinedHint("No first item, sequence was empty.");
}

Value FLast(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a(args, "last", {});
  if (v.is_iterator()) {
    ThrowTypeError("'" + std::string(PyTypeName(v)) + "' object is not reversible");
  }
  if (v.is_sequence_like()) {
    if (!v.list().items.empty()) return v.list().items.back();
  } else {
    std::vector<Value> items = Iterate(v);
    if (!items.empty()) return items.back();
  }
  return Value::UndefinedHint("No last item, sequence was empty.");
}

Value FJoin(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "join", {"d", "attribute"});
  const std::string sep = a.has(0) ? ToStr(a[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& item : Items(in, v)) {
    if (!first) out += sep;
    first = false;
    AppendStr(a.has(1) && !a[1].is_none() ? GetPath(in, item, a[1]) : item, &out);
    if (out.size() > in.limits().max_output_bytes) in.ChargeString(out.size());
  }
  in.ChargeString(out.size());
  return Value::Str(std::move(out));
}

Value FReverse(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "reverse", {});
  if (v.is_string()) {
    return SliceValue(in, v, Value::None(), Value::None(), Value::Int(-1));
  }
  const char* type = v.is_list()    ? "list_reverseiterator"
                     : v.is_tuple() ? "reversed"
                     : v.is_dict()  ? "dict_reversekeyiterator"
                                    : nullptr;
  if (v.is_undefined()) ThrowTypeError("'Undefined' object is not reversible");
  std::vector<Value> items = Items(in, v);
  std::reverse(items.begin(), items.end());
  if (type == nullptr) return ListOf(in, std::move(items));
  return IteratorOf(in, std::move(items), type);
}

Value FItems(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "items", {});
  if (v.is_undefined()) return Value::Iterator({});
  if (!v.is_dict()) ThrowTypeError("Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto& [k, x] : v.dict().entries) items.push_back(Value::Tuple({k, x}));
  return IteratorOf(in, std::move(items));
}

Value FDictsort(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "dictsort", {"case_sensitive", "by", "reverse"});
  if (v.is_undefined()) ThrowUndefined(v);
  if (!v.is_dict()) ThrowTypeError("dictsort filter requires a mapping");
  const bool case_sensitive = a.has(0) && Truthy(a[0]);
  const std::string by = a.has(1) ? ToStr(a[1]) : "key";
  if (by != "key" && by != "value")
    FilterArgumentError("You can only sort by either \"key\" or \"value\"");
  const bool reverse = a.has(2) && Truthy(a[2]);
  std::vector<std::pair<Value, Value>> entries = v.dict().entries;
  in.Tick(entries.size() * 8);
  auto key = [&](const std::pair<Value, Value>& e) {
    const Value& k = by == "key" ? e.first : e.second;
    return case_sensitive ? k : IgnoreCase(k);
  };
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    return reverse ? Less(key(y), key(x)) : Less(key(x), key(y));
  });
  std::vector<Value> items;
  for (auto& [k, x] : entries) items.push_back(Value::Tuple({k, x}));
  return ListOf(in, std::move(items));
}

// Sort key for sort/unique/min/max: optional comma-separated attribute paths, optional
// case folding.
static Value SortKey(Interpreter& in, const Value& item, const Value& attribute,
                     bool case_sensitive) {
  auto post = [&](const Value& x) { return case_sensitive ? x : IgnoreCase(x); };
  if (attribute.is_undefined() || attribute.is_none()) return post(item);
  if (attribute.is_string() && attribute.str().find(',') != std::string::npos) {
    static const std::string kComma = ",";
    std::vector<Value> parts;
    for (const std::string& p : PySplit(attribute.str(), &kComma, -1)) {
      parts.push_back(post(GetPath(in, item, Value::Str(p))));
    }
    return Value::List(std::move(parts));
  }
  return post(GetPath(in, item, attribute));
}

Value FSort(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = a.has(0) && Truthy(a[0]);
  const bool case_sensitive = a.has(1) && Truthy(a[1]);
  std::vector<Value> items = Items(in, v);
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (Value& item : items) keyed.emplace_back(SortKey(in, item, a[2], case_sensitive), item);
  in.Tick(items.size() * 8);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Less(y.first, x.first) : Less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& e : keyed) out.push_back(std::move(e.second));
  return ListOf(in, std::move(out));
}

Value FUnique(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "unique", {"case_sensitive", "attribute"});
  const bool case_sensitive = a.has(0) && Truthy(a[0]);
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : Items(in, v)) {
    Value key = SortKey(in, item, a[1], case_sensitive);
    CheckHashable(key);
    in.Tick(seen.size() / 16 + 1);
    bool dup = false;
    for (const Value& s : seen) {
      if (KeyEquals(s, key)) {
        dup = true;
        break;
      }
    }
    if (!dup) {
      seen.push_back(std::move(key));
      out.push_back(item);
    }
  }
  return IteratorOf(in, std::move(out));
}

static Value MinMax(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  ArgBinder a(args, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const bool case_sensitive = a.has(0) && Truthy(a[0]);
  std::vector<Value> items = Items(in, v);
  if (items.empty()) return Value::UndefinedHint("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = SortKey(in, items[0], a[1], case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = SortKey(in, items[i], a[1], case_sensitive);
    if (want_max ? Less(best_key, key) : Less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value FMax(Interpreter& in, const Value& v, CallArgs& args) { return MinMax(in, v, args, true); }
Value FMin(Interpreter& in, const Value& v, CallArgs& args) { return MinMax(in, v, args, false); }

Value FSum(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "sum", {"attribute", "start"});
  Value total = a.get(1, Value::Int(0));
  for (const Value& item : Items(in, v)) {
    const Value x = a.has(0) && !a[0].is_none() ? GetPath(in, item, a[0]) : item;
    total = BinaryOperation(in, BinOp::kAdd, total, x);
  }
  return total;
}

Value FBatch(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "batch", {"linecount", "fill_with"});
  const int64_t count = IntArg(a[0], "batch", "linecount");
  if (count <= 0) FilterArgumentError("batch size must be positive");
  std::vector<Value> out;
  std::vector<Value> tmp;
  for (const Value& item : Items(in, v)) {
    if (static_cast<int64_t>(tmp.size()) == count) {
      out.push_back(Value::List(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (a.has(1) && !a[1].is_none()) {
      in.ChargeElements(static_cast<size_t>(count));
      while (static_cast<int64_t>(tmp.size()) < count) tmp.push_back(a[1]);
    }
    out.push_back(Value::List(std::move(tmp)));
  }
  return IteratorOf(in, std::move(out));
}

Value FSlice(Interpreter& in, const Value& v, CallArgs& args) {
  ArgBinder a(args, "slice", {"slices", "fill_with"});
  const int64_t slices = IntArg(a[0], "slice", "slices");
  if (slices <= 0) FilterArgumentError("number of slices must be positive");
  in.ChargeElements(static_cast<size_t>(std::min<int64_t>(slices, INT32_MAX)));
  const std::vector<Value> seq = Items(in, v);
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t per = length / slices;
  const int64_t extra = length % slices;
  int64_t offset = 0;
  std::vector<Value> out;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * per;
    if (k < extra) ++offset;
    const int64_t end = offset + (k + 1) * per;
    std::vector<Value> tmp(seq.begin() + start, seq.begin() + end);
    if (a.has(1) && !a[1].is_none() && k >= extra) tmp.push_back(a[1]);
    out.push_back(Value::List(std::move(tmp)));
  }
  return IteratorOf(in, std::move(out));
}

Value FMap(Interpreter& in, const Value& v, CallArgs& args) {
  std::vector<Value> out;
  if (args.positional.empty()) {
    Value attribute;
    Value fallback;
    for (const auto& [k, x] : args.keyword) {
      if (k == "attribute") {
        attribute = x;
      } else if (k == "default") {
        fallback = x;
      } else {
        FilterArgumentError("Unexpected keyword argument '" + k + "'");
      }
    }
    if (attribute.is_undefined()) FilterArgumentError("map requires a filter argument");
    for (const Value& item : ItemsIfTruthy(in, v)) {
      Value x = GetPath(in, item, attribute);
      if (x.is_undefined() && !fallback.is_undefined()) x = fallback;
      out.push_back(std::move(x));
    }
    return IteratorOf(in, std::move(out));
  }
  const std::string name = ToStr(args.positional[0]);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : ItemsIfTruthy(in, v)) {
    CallArgs call = rest;
    out.push_back(in.ApplyFilter(name, item, call));
  }
  return IteratorOf(in, std::move(out));
}

static Value SelectOrReject(Interpreter& in, const Value& v, CallArgs& args, bool select,
                            bool attr) {
  size_t off = 0;
  Value attribute;
  if (attr) {
    if (args.positional.empty()) FilterArgumentError("Missing parameter for attribute name");
    attribute = args.positional[0];
    off = 1;
  }
  const bool has_test = args.positional.size() > off;
  const std::string test = has_test ? ToStr(args.positional[off]) : "";
  CallArgs rest;
  if (has_test)
    rest.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(off) + 1,
                           args.positional.end());
  rest.keyword = args.keyword;
  std::vector<Value> out;
  for (const Value& item : ItemsIfTruthy(in, v)) {
    const Value x = attr ? GetPath(in, item, attribute) : item;
    bool ok;
    if (has_test) {
      CallArgs call = rest;
      ok = in.ApplyTest(test, x, call);
    } else {
      ok = Truthy(x);
    }
    if (ok == select) out.push_back(item);
  }
  return IteratorOf(in, std::move(out));
}

Value FSelect(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectOrReject(in, v, a, true, false);
}
Value FReject(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectOrReject(in, v, a, false, false);
}
Value FSelectAttr(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectOrReject(in, v, a, true, true);
}
Value FRejectAttr(Interpreter& in, const Value& v, CallArgs& a) {
  return SelectOrReject(in, v, a, false, true);
}

}  // namespace kvforge::chat::filters
