// Arithmetic, concatenation and slicing with Python semantics.
#include <cmath>
#include <limits>

#include "chat/errors.h"
#include "chat/interpreter.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

const char* OpSymbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "+";
    case BinOp::kSub:
      return "-";
    case BinOp::kMul:
      return "*";
    case BinOp::kDiv:
      return "/";
    case BinOp::kFloorDiv:
      return "//";
    case BinOp::kMod:
      return "%";
    case BinOp::kPow:
      return "** or pow()";
    case BinOp::kConcat:
      return "~";
  }
  return "?";
}

[[noreturn]] void Unsupported(BinOp op, const Value& a, const Value& b) {
  ThrowTypeError(std::string("unsupported operand type(s) for ") + OpSymbol(op) + ": '" +
                 std::string(PyTypeName(a)) + "' and '" + std::string(PyTypeName(b)) + "'");
}

[[noreturn]] void IntOverflow() {
  ThrowError("OverflowError", "integer result does not fit in 64 bits");
}

[[noreturn]] void ZeroDivision(const char* message) { ThrowError("ZeroDivisionError", message); }

Value IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  int64_t b = base;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, b, &result)) IntOverflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(b, b, &b)) IntOverflow();
  }
  return Value::Int(result);
}

Value FloatArith(BinOp op, double x, double y) {
  switch (op) {
    case BinOp::kAdd:
      return Value::Float(x + y);
    case BinOp::kSub:
      return Value::Float(x - y);
    case BinOp::kMul:
      return Value::Float(x * y);
    case BinOp::kDiv:
      if (y == 0) ZeroDivision("float division by zero");
      return Value::Float(x / y);
    case BinOp::kFloorDiv:
    case BinOp::kMod: {
      if (y == 0) ZeroDivision(op == BinOp::kMod ? "float modulo" : "float floor division by zero");
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      if (op == BinOp::kMod) return Value::Float(mod);
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return Value::Float(floordiv);
    }
    case BinOp::kPow:
      if (x == 0 && y < 0) ZeroDivision("0.0 cannot be raised to a negative power");
      return Value::Float(std::pow(x, y));
    case BinOp::kConcat:
      break;
  }
  return Value();
}

Value NumberArith(BinOp op, const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    return FloatArith(op, a.number_as_double(), b.number_as_double());
  }
  const int64_t x = a.int_value();
  const int64_t y = b.int_value();
  int64_t r = 0;
  switch (op) {
    case BinOp::kAdd:
      if (__builtin_add_overflow(x, y, &r)) IntOverflow();
      return Value::Int(r);
    case BinOp::kSub:
      if (__builtin_sub_overflow(x, y, &r)) IntOverflow();
      return Value::Int(r);
    case BinOp::kMul:
      if (__builtin_mul_overflow(x, y, &r)) IntOverflow();
      return Value::Int(r);
    case BinOp::kDiv:
      if (y == 0) ZeroDivision("division by zero");
      return Value::Float(static_cast<double>(x) / static_cast<double>(y));
    case BinOp::kFloorDiv: {
      if (y == 0) ZeroDivision("integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) IntOverflow();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::Int(q);
    }
    case BinOp::kMod: {
      if (y == 0) ZeroDivision("integer modulo by zero");
      if (y == -1) return Value::Int(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Int(m);
    }
    case BinOp::kPow:
      if (y < 0) {
        if (x == 0) ZeroDivision("0.0 cannot be raised to a negative power");
        return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      }
      return IntPow(x, y);
    case BinOp::kConcat:
      break;
  }
  return Value();
}

Value Repeat(Interpreter& in, const Value& seq, const Value& count) {
  if (!count.is_int() && !count.is_bool()) {
    ThrowTypeError("can't multiply sequence by non-int of type '" + std::string(PyTypeName(count)) +
                   "'");
  }
  const int64_t n = count.int_value() < 0 ? 0 : count.int_value();
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && static_cast<uint64_t>(n) > in.limits().max_output_bytes / s.size() + 1) {
      in.ChargeString(in.limits().max_output_bytes + 1);  // throws
    }
    in.ChargeString(s.size() * static_cast<size_t>(n));
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return seq.is_markup() ? Value::Markup(std::move(out)) : Value::Str(std::move(out));
  }
  const auto& items = seq.list().items;
  if (!items.empty() &&
      static_cast<uint64_t>(n) > in.limits().max_collection_size / items.size() + 1) {
    in.ChargeElements(in.limits().max_collection_size + 1);  // throws
  }
  in.ChargeElements(items.size() * static_cast<size_t>(n));
  std::vector<Value> out;
  out.reserve(items.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value BinaryOperation(Interpreter& in, BinOp op, const Value& a, const Value& b) {
  if (op == BinOp::kConcat) {
    std::string s;
    AppendStr(a, &s);
    AppendStr(b, &s);
    in.ChargeString(s.size());
    return Value::Str(std::move(s));
  }
  if (a.is_undefined()) ThrowUndefined(a);
  if (b.is_undefined()) ThrowUndefined(b);
  if (a.is_number() && b.is_number()) return NumberArith(op, a, b);
  switch (op) {
    case BinOp::kAdd:
      if (a.is_string() && b.is_string()) {
        if (a.is_markup() || b.is_markup()) {
          std::string s = a.is_markup() ? a.str() : HtmlEscape(a.str());
          s += b.is_markup() ? b.str() : HtmlEscape(b.str());
          in.ChargeString(s.size());
          return Value::Markup(std::move(s));
        }
        in.ChargeString(a.str().size() + b.str().size());
        return Value::Str(a.str() + b.str());
      }
      if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
        const auto& x = a.list().items;
        const auto& y = b.list().items;
        in.ChargeElements(x.size() + y.size());
        std::vector<Value> items;
        items.reserve(x.size() + y.size());
        items.insert(items.end(), x.begin(), x.end());
        items.insert(items.end(), y.begin(), y.end());
        return a.is_list() ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
      }
      if (a.is_string() || a.is_list() || a.is_tuple()) {
        const std::string t(PyTypeName(a.is_markup() ? a.WithoutMarkup() : a));
        ThrowTypeError("can only concatenate " + t + " (not \"" + std::string(PyTypeName(b)) +
                       "\") to " + t);
      }
      break;
    case BinOp::kMul:
      if (a.is_string() || a.is_list() || a.is_tuple()) return Repeat(in, a, b);
      if (b.is_string() || b.is_list() || b.is_tuple()) return Repeat(in, b, a);
      break;
    case BinOp::kMod:
      if (a.is_string()) {
        std::string s = PercentFormat(in, a.str(), b);
        in.ChargeString(s.size());
        return Value::Str(std::move(s));
      }
      break;
    default:
      break;
  }
  Unsupported(op, a, b);
}

Value Negate(const Value& v) {
  if (v.is_undefined()) ThrowUndefined(v);
  if (v.is_int() || v.is_bool()) {
    if (v.int_value() == std::numeric_limits<int64_t>::min()) IntOverflow();
    return Value::Int(-v.int_value());
  }
  if (v.is_float()) return Value::Float(-v.float_value());
  ThrowTypeError("bad operand type for unary -: '" + std::string(PyTypeName(v)) + "'");
}

namespace {

// Python's slice.indices(): clamps start/stop for a sequence of length n.
void SliceIndices(const Value& start, const Value& stop, int64_t step, int64_t n, int64_t* lo,
                  int64_t* hi) {
  auto index = [](const Value& v) {
    if (v.is_int() || v.is_bool()) return v.int_value();
    ThrowTypeError("slice indices must be integers or None or have an __index__ method");
  };
  auto clamp = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = index(v);
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  *lo = clamp(start, step < 0 ? n - 1 : 0);
  *hi = clamp(stop, step < 0 ? -1 : n);
}

}  // namespace

Value SliceValue(Interpreter& in, const Value& obj, const Value& start, const Value& stop,
                 const Value& step) {
  if (obj.is_undefined()) ThrowUndefined(obj);
  if (!obj.is_string() && !obj.is_list() && !obj.is_tuple()) {
    return Value::UndefinedElement(
        ObjectTypeRepr(obj), "slice(" + Repr(start) + ", " + Repr(stop) + ", " + Repr(step) + ")");
  }
  int64_t st = 1;
  if (!step.is_none()) {
    if (!step.is_int() && !step.is_bool()) {
      ThrowTypeError("slice indices must be integers or None or have an __index__ method");
    }
    st = step.int_value();
    if (st == 0) ThrowValueError("slice step cannot be zero");
  }
  std::vector<size_t> offsets;
  int64_t n = 0;
  const bool ascii = obj.is_string() && IsAscii(obj.str());
  if (obj.is_string()) {
    if (ascii) {
      n = static_cast<int64_t>(obj.str().size());
    } else {
      offsets = CodePointOffsets(obj.str());
      n = static_cast<int64_t>(offsets.size() - 1);
    }
  } else {
    n = static_cast<int64_t>(obj.list().items.size());
  }
  int64_t lo = 0;
  int64_t hi = 0;
  SliceIndices(start, stop, st, n, &lo, &hi);
  if (obj.is_string()) {
    const std::string& s = obj.str();
    if (st == 1) {
      if (hi <= lo) return Value::Str("");
      if (ascii) return Value::Str(s.substr(static_cast<size_t>(lo), static_cast<size_t>(hi - lo)));
      const size_t b = offsets[static_cast<size_t>(lo)];
      return Value::Str(s.substr(b, offsets[static_cast<size_t>(hi)] - b));
    }
    std::string out;
    for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
      if (ascii) {
        out.push_back(s[static_cast<size_t>(i)]);
      } else {
        const size_t b = offsets[static_cast<size_t>(i)];
        out.append(s, b, offsets[static_cast<size_t>(i) + 1] - b);
      }
    }
    in.ChargeString(out.size());
    return Value::Str(std::move(out));
  }
  const auto& items = obj.list().items;
  std::vector<Value> out;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
    out.push_back(items[static_cast<size_t>(i)]);
  }
  in.ChargeElements(out.size());
  return obj.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

}  // namespace kvforge::chat
