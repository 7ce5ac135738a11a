#include "chat/pyops.h"

#include <cmath>

#include "chat/errors.h"
#include "chat/pystr.h"

namespace kvforge::chat {

void ThrowError(const char* type, std::string message) {
  throw TemplateException(type, std::move(message));
}

void ThrowUndefined(const Value& undefined) {
  throw TemplateException("UndefinedError", undefined.UndefinedMessage());
}

void ThrowLimit(std::string message) {
  throw TemplateException("LimitError", std::move(message), StatusCode::kResourceExhausted);
}

namespace {

void CheckDepth(int depth) {
  if (depth > kMaxValueDepth) {
    ThrowLimit("maximum nesting depth (" + std::to_string(kMaxValueDepth) +
               ") exceeded while comparing or printing a value (self-referencing container?)");
  }
}

}  // namespace

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return v.int_value() != 0;
    case Kind::kFloat:
      return v.float_value() != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !v.list().items.empty();
    case Kind::kDict:
      return v.dict().size() != 0;
    case Kind::kNamespace:
    case Kind::kObject:
    case Kind::kIterator:  // generators are always true in Python
      return true;
  }
  return false;
}

std::string_view PyTypeName(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return v.is_markup() ? "Markup" : "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kObject:
      return v.object().type_name();
    case Kind::kIterator:
      return v.list().iterator_type;
  }
  return "object";
}

const char* ObjectTypeRepr(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "jinja2.runtime.Undefined object";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool object";
    case Kind::kInt:
      return "int object";
    case Kind::kFloat:
      return "float object";
    case Kind::kString:
      return v.is_markup() ? "markupsafe.Markup object" : "str object";
    case Kind::kList:
      return "list object";
    case Kind::kTuple:
      return "tuple object";
    case Kind::kDict:
      return "dict object";
    case Kind::kNamespace:
      return "jinja2.utils.Namespace object";
    case Kind::kObject:
      switch (v.object().object_kind()) {
        case ObjectKind::kMacro:
          return "jinja2.runtime.Macro object";
        case ObjectKind::kLoop:
          return "jinja2.runtime.LoopContext object";
        case ObjectKind::kCycler:
          return "jinja2.utils.Cycler object";
        case ObjectKind::kJoiner:
          return "jinja2.utils.Joiner object";
        default:
          return "builtin_function_or_method object";
      }
    case Kind::kIterator:
      return "generator object";
  }
  return "object";
}

void AppendStr(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      out->append("None");
      return;
    case Kind::kBool:
      out->append(v.bool_value() ? "True" : "False");
      return;
    case Kind::kInt:
      out->append(std::to_string(v.int_value()));
      return;
    case Kind::kFloat:
      out->append(FloatRepr(v.float_value()));
      return;
    case Kind::kString:
      out->append(v.str());
      return;
    default:
      AppendRepr(v, out, 0);
      return;
  }
}

std::string ToStr(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  AppendStr(v, &out);
  return out;
}

void AppendRepr(const Value& v, std::string* out, int depth) {
  CheckDepth(depth);
  switch (v.kind()) {
    case Kind::kUndefined:
      out->append("Undefined");
      return;
    case Kind::kString:
      if (v.is_markup()) {
        out->append("Markup(");
        AppendStrRepr(v.str(), out);
        out->push_back(')');
      } else {
        AppendStrRepr(v.str(), out);
      }
      return;
    case Kind::kList:
    case Kind::kTuple: {
      const bool tuple = v.is_tuple();
      const auto& items = v.list().items;
      out->push_back(tuple ? '(' : '[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out->append(", ");
        AppendRepr(items[i], out, depth + 1);
      }
      if (tuple && items.size() == 1) out->push_back(',');
      out->push_back(tuple ? ')' : ']');
      return;
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      if (v.is_namespace()) out->append("<Namespace ");
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.dict().entries) {
        if (!first) out->append(", ");
        first = false;
        AppendRepr(key, out, depth + 1);
        out->append(": ");
        AppendRepr(item, out, depth + 1);
      }
      out->push_back('}');
      if (v.is_namespace()) out->push_back('>');
      return;
    }
    case Kind::kObject:
      out->append(v.object().Repr());
      return;
    case Kind::kIterator:
      out->append("<");
      out->append(v.list().iterator_type);
      out->append(" object>");
      return;
    default:
      AppendStr(v, out);
      return;
  }
}

std::string Repr(const Value& v) {
  std::string out;
  AppendRepr(v, &out, 0);
  return out;
}

bool Equals(const Value& a, const Value& b, int depth) {
  CheckDepth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number_as_double() == b.number_as_double();
    return a.int_value() == b.int_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.identity() == b.identity() || a.str() == b.str();
    case Kind::kList:
    case Kind::kTuple: {
      if (a.identity() == b.identity()) return true;
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.identity() == b.identity()) return true;
      const DictRep& x = a.dict();
      const DictRep& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, item] : x.entries) {
        const Value* other = y.Find(key);
        if (other == nullptr || !Equals(item, *other, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

namespace {

bool ApplyOrder(std::string_view op, int cmp) {
  if (op == "<") return cmp < 0;
  if (op == "<=") return cmp <= 0;
  if (op == ">") return cmp > 0;
  return cmp >= 0;
}

[[noreturn]] void Unorderable(std::string_view op, const Value& a, const Value& b) {
  ThrowTypeError("'" + std::string(op) + "' not supported between instances of '" +
                 std::string(PyTypeName(a)) + "' and '" + std::string(PyTypeName(b)) + "'");
}

}  // namespace

bool CompareOrder(std::string_view op, const Value& a, const Value& b, int depth) {
  CheckDepth(depth);
  if (a.is_undefined()) ThrowUndefined(a);
  if (b.is_undefined()) ThrowUndefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.number_as_double();
      const double y = b.number_as_double();
      if (op == "<") return x < y;
      if (op == "<=") return x <= y;
      if (op == ">") return x > y;
      return x >= y;
    }
    const int64_t x = a.int_value();
    const int64_t y = b.int_value();
    return ApplyOrder(op, x < y ? -1 : (x > y ? 1 : 0));
  }
  if (a.is_string() && b.is_string()) return ApplyOrder(op, a.str().compare(b.str()));
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    const size_t n = std::min(x.size(), y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!Equals(x[i], y[i], depth + 1)) return CompareOrder(op, x[i], y[i], depth + 1);
    }
    return ApplyOrder(op, x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0));
  }
  Unorderable(op, a, b);
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return 0;
    case Kind::kString:
      return static_cast<int64_t>(CodePointCount(v.str()));
    case Kind::kList:
    case Kind::kTuple:
      return static_cast<int64_t>(v.list().items.size());
    case Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      ThrowTypeError("object of type '" + std::string(PyTypeName(v)) + "' has no len()");
  }
}

std::vector<Value> Iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
    case Kind::kTuple:
      return v.list().items;
    case Kind::kIterator: {  // one-shot: iterating consumes it
      std::vector<Value> items;
      items.swap(v.list().items);
      return items;
    }
    case Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& entry : v.dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      chars.reserve(s.size());
      for (size_t pos = 0; pos < s.size();) {
        const size_t start = pos;
        DecodeUtf8(s, &pos);
        chars.push_back(Value::Str(s.substr(start, pos - start)));
      }
      return chars;
    }
    default:
      ThrowTypeError("'" + std::string(PyTypeName(v)) + "' object is not iterable");
  }
}

void CheckHashable(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
    case Kind::kDict:
    case Kind::kNamespace:
      ThrowTypeError("unhashable type: '" + std::string(PyTypeName(v)) + "'");
    case Kind::kUndefined:
      return;
    case Kind::kTuple:
      for (const Value& item : v.list().items) CheckHashable(item);
      return;
    default:
      return;
  }
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kString:
      if (!item.is_string()) {
        ThrowTypeError("'in <string>' requires string as left operand, not " +
                       std::string(PyTypeName(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
    case Kind::kTuple:
      for (const Value& x : container.list().items) {
        if (Equals(x, item)) return true;
      }
      return false;
    case Kind::kDict:
      CheckHashable(item);
      return container.dict().Find(item) != nullptr;
    case Kind::kUndefined:
      return false;
    case Kind::kIterator:
      for (const Value& x : Iterate(container)) {
        if (Equals(x, item)) return true;
      }
      return false;
    default:
      ThrowTypeError("argument of type '" + std::string(PyTypeName(container)) +
                     "' is not iterable");
  }
}

}  // namespace kvforge::chat
