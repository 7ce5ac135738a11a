// Jinja2's builtin tests (`x is defined`, `n is divisibleby 3`, ...), with Jinja2 3.1 semantics.
#include "chat/errors.h"
#include "chat/interpreter.h"
#include "chat/parser.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

const Value& Arg(const CallArgs& args, const char* test, const char* param) {
  ArgBinder a(args, test, {param});
  if (!a.has(0)) {
    ThrowTypeError(std::string(test) + "() missing 1 required positional argument: '" + param +
                   "'");
  }
  return args.positional.empty() ? args.keyword[0].second : args.positional[0];
}

void NoArgs(const CallArgs& args, const char* test) { ArgBinder a(args, test, {}); }

int64_t IntOperand(const Value& v) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  if (v.is_undefined()) ThrowUndefined(v);
  ThrowTypeError("unsupported operand type(s) for %: '" + std::string(PyTypeName(v)) +
                 "' and 'int'");
}

bool TDefined(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "defined");
  return !v.is_undefined();
}
bool TUndefined(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "undefined");
  return v.is_undefined();
}
bool TNone(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "none");
  return v.is_none();
}
bool TBoolean(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "boolean");
  return v.is_bool();
}
bool TTrue(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "true");
  return v.is_bool() && v.bool_value();
}
bool TFalse(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "false");
  return v.is_bool() && !v.bool_value();
}
bool TInteger(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "integer");
  return v.is_int();
}
bool TFloat(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "float");
  return v.is_float();
}
bool TNumber(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "number");
  return v.is_number();
}
bool TString(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "string");
  return v.is_string();
}
bool TMapping(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "mapping");
  return v.is_dict();
}
bool TEscaped(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "escaped");
  return v.is_markup();
}

bool TIterable(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "iterable");
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_tuple() || v.is_dict() ||
         v.is_iterator() || (v.is_object() && v.object().object_kind() == ObjectKind::kLoop);
}

bool TSequence(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "sequence");
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_tuple() || v.is_dict();
}

bool TCallable(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "callable");
  return v.is_undefined() || (v.is_object() && v.object().callable());
}

bool TOdd(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "odd");
  return (IntOperand(v) % 2 + 2) % 2 == 1;
}

bool TEven(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "even");
  return IntOperand(v) % 2 == 0;
}

bool TDivisibleBy(Interpreter& in, const Value& v, CallArgs& a) {
  const Value& num = Arg(a, "divisibleby", "num");
  const Value rem = BinaryOperation(in, BinOp::kMod, v, num);
  return Equals(rem, Value::Int(0));
}

bool TEq(Interpreter&, const Value& v, CallArgs& a) { return Equals(v, Arg(a, "eq", "other")); }
bool TNe(Interpreter&, const Value& v, CallArgs& a) { return !Equals(v, Arg(a, "ne", "other")); }
bool TLt(Interpreter&, const Value& v, CallArgs& a) {
  return CompareOrder("<", v, Arg(a, "lt", "other"));
}
bool TLe(Interpreter&, const Value& v, CallArgs& a) {
  return CompareOrder("<=", v, Arg(a, "le", "other"));
}
bool TGt(Interpreter&, const Value& v, CallArgs& a) {
  return CompareOrder(">", v, Arg(a, "gt", "other"));
}
bool TGe(Interpreter&, const Value& v, CallArgs& a) {
  return CompareOrder(">=", v, Arg(a, "ge", "other"));
}
bool TIn(Interpreter&, const Value& v, CallArgs& a) { return Contains(Arg(a, "in", "seq"), v); }

bool TSameAs(Interpreter&, const Value& v, CallArgs& a) {
  const Value& other = Arg(a, "sameas", "other");
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Kind::kNone:
    case Kind::kUndefined:
      return true;
    case Kind::kBool:
    case Kind::kInt:
      return v.int_value() == other.int_value() &&
             (v.is_bool() || (v.int_value() >= -5 && v.int_value() <= 256));
    case Kind::kFloat:
      return false;
    default:
      return v.identity() == other.identity();
  }
}

bool TLower(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "lower");
  const std::string s = ToStr(v);
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t c = DecodeUtf8(s, &pos);
    if (IsPyUpper(c)) return false;
    cased = cased || IsPyLower(c);
  }
  return cased;
}

bool TUpper(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "upper");
  const std::string s = ToStr(v);
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const uint32_t c = DecodeUtf8(s, &pos);
    if (IsPyLower(c)) return false;
    cased = cased || IsPyUpper(c);
  }
  return cased;
}

bool TFilter(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "filter");
  return v.is_string() && FindFilter(v.str()) != nullptr;
}

bool TTest(Interpreter&, const Value& v, CallArgs& a) {
  NoArgs(a, "test");
  return v.is_string() && FindTest(v.str()) != nullptr;
}

struct TestEntry {
  const char* name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"!=", TNe},
    {"<", TLt},
    {"<=", TLe},
    {"==", TEq},
    {">", TGt},
    {">=", TGe},
    {"boolean", TBoolean},
    {"callable", TCallable},
    {"defined", TDefined},
    {"divisibleby", TDivisibleBy},
    {"eq", TEq},
    {"equalto", TEq},
    {"escaped", TEscaped},
    {"even", TEven},
    {"false", TFalse},
    {"filter", TFilter},
    {"float", TFloat},
    {"ge", TGe},
    {"greaterthan", TGt},
    {"gt", TGt},
    {"in", TIn},
    {"integer", TInteger},
    {"iterable", TIterable},
    {"le", TLe},
    {"lessthan", TLt},
    {"lower", TLower},
    {"lt", TLt},
    {"mapping", TMapping},
    {"ne", TNe},
    {"none", TNone},
    {"number", TNumber},
    {"odd", TOdd},
    {"sameas", TSameAs},
    {"sequence", TSequence},
    {"string", TString},
    {"test", TTest},
    {"true", TTrue},
    {"undefined", TUndefined},
    {"upper", TUpper},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const auto& t : kTests) {
    if (name == t.name) return t.fn;
  }
  return nullptr;
}

}  // namespace kvforge::chat
