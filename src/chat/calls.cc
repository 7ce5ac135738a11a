// Attribute/item access, method dispatch and calls: macros, builtins, bound methods, loops.
#include <cstring>

#include "chat/errors.h"
#include "chat/interpreter.h"
#include "chat/parser.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

// Jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

int64_t ToIndex(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.int_value();
  if (v.is_undefined()) ThrowUndefined(v);
  ThrowTypeError("'" + std::string(PyTypeName(v)) + "' object cannot be interpreted as an " + what);
}

}  // namespace

Value Interpreter::GetAttr(const Value& obj, std::string_view name) {
  return GetAttr(obj, Value::Str(name));
}

Value Interpreter::GetAttr(const Value& obj, const Value& name) {
  const std::string& attr = name.str();
  switch (obj.kind()) {
    case Kind::kUndefined:
      ThrowUndefined(obj);
    case Kind::kDict: {
      if (HasMethod(obj, attr)) return Value::FromObject(std::make_shared<BoundMethod>(obj, attr));
      if (const Value* v = obj.dict().FindStr(attr)) return *v;
      break;
    }
    case Kind::kNamespace:
      if (const Value* v = obj.dict().FindStr(attr)) return *v;
      break;
    case Kind::kString:
    case Kind::kList:
    case Kind::kTuple:
      if (HasMethod(obj, attr)) return Value::FromObject(std::make_shared<BoundMethod>(obj, attr));
      break;
    case Kind::kObject: {
      Object& o = obj.object();
      if (o.object_kind() == ObjectKind::kLoop) {
        if (attr == "cycle" || attr == "changed") {
          return Value::FromObject(std::make_shared<BoundMethod>(obj, attr));
        }
        return LoopAttr(static_cast<const LoopObject&>(o), attr);
      }
      if (o.object_kind() == ObjectKind::kCycler) {
        auto& c = static_cast<CyclerObject&>(o);
        if (attr == "current") return c.items.empty() ? Value::None() : c.items[c.pos];
        if (attr == "next" || attr == "reset") {
          return Value::FromObject(std::make_shared<BoundMethod>(obj, attr));
        }
      }
      if (o.object_kind() == ObjectKind::kMacro && attr == "name") {
        return Value::Str(static_cast<const MacroObject&>(o).def->name);
      }
      break;
    }
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
      if (attr == "real") return obj.is_float() ? obj : Value::Int(obj.int_value());
      if (attr == "imag") return obj.is_float() ? Value::Float(0.0) : Value::Int(0);
      break;
    default:
      break;
  }
  return Value::UndefinedAttribute(ObjectTypeRepr(obj), name.str_ptr());
}

Value Interpreter::GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      ThrowUndefined(obj);
    case Kind::kDict: {
      if (key.is_list() || key.is_dict() || key.is_namespace()) break;
      if (const Value* v = obj.dict().Find(key)) return *v;
      if (key.is_string()) return GetAttr(obj, key);
      break;
    }
    case Kind::kNamespace:
      if (key.is_string()) return GetAttr(obj, key);
      break;
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kString: {
      if (!key.is_int() && !key.is_bool()) {
        if (key.is_string()) return GetAttr(obj, key);
        break;
      }
      int64_t i = key.int_value();
      if (obj.is_string()) {
        const std::string& s = obj.str();
        if (IsAscii(s)) {
          const auto n = static_cast<int64_t>(s.size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return Value::Str(s.substr(static_cast<size_t>(i), 1));
        } else {
          const std::vector<size_t> offsets = CodePointOffsets(s);
          const auto n = static_cast<int64_t>(offsets.size() - 1);
          if (i < 0) i += n;
          if (i >= 0 && i < n) {
            const size_t b = offsets[static_cast<size_t>(i)];
            return Value::Str(s.substr(b, offsets[static_cast<size_t>(i) + 1] - b));
          }
        }
      } else {
        const auto& items = obj.list().items;
        const auto n = static_cast<int64_t>(items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
      }
      break;
    }
    default:
      break;
  }
  if (key.is_string()) return Value::UndefinedAttribute(ObjectTypeRepr(obj), key.str_ptr());
  return Value::UndefinedElement(ObjectTypeRepr(obj), Repr(key));
}

Value Interpreter::LoopAttr(const LoopObject& loop, std::string_view name) {
  const auto n = static_cast<int64_t>(loop.items.size());
  const int64_t i = loop.index0;
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(n - i);
  if (name == "revindex0") return Value::Int(n - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i == n - 1);
  if (name == "length") return Value::Int(n);
  if (name == "depth") return Value::Int(loop.depth0 + 1);
  if (name == "depth0") return Value::Int(loop.depth0);
  if (name == "previtem") {
    if (i > 0) return loop.items[static_cast<size_t>(i - 1)];
    return Value::UndefinedHint("there is no previous item");
  }
  if (name == "nextitem") {
    if (i + 1 < n) return loop.items[static_cast<size_t>(i + 1)];
    return Value::UndefinedHint("there is no next item");
  }
  return Value::UndefinedAttribute("jinja2.runtime.LoopContext object", name);
}

Value Interpreter::CallMethod(const Value& obj, const Value& name, CallArgs& args) {
  const std::string& method = name.str();
  switch (obj.kind()) {
    case Kind::kUndefined:
      ThrowUndefined(obj);
    case Kind::kString:
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kDict: {
      Value result;
      if (CallBuiltinMethod(*this, obj, method, args, &result)) return result;
      break;
    }
    case Kind::kObject: {
      Object& o = obj.object();
      if (o.object_kind() == ObjectKind::kLoop && (method == "cycle" || method == "changed")) {
        auto& loop = static_cast<LoopObject&>(o);
        if (!args.keyword.empty()) ThrowTypeError(method + "() takes no keyword arguments");
        if (method == "cycle") {
          if (args.positional.empty()) ThrowTypeError("no items for cycling given");
          const size_t k = static_cast<size_t>(loop.index0) % args.positional.size();
          return args.positional[k];
        }
        Value current = Value::List(args.positional);
        if (!loop.changed_seen || !Equals(current, loop.last_changed)) {
          loop.changed_seen = true;
          loop.last_changed = std::move(current);
          return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      if (o.object_kind() == ObjectKind::kCycler) {
        auto& c = static_cast<CyclerObject&>(o);
        if (method == "next") {
          if (c.items.empty()) return Value::None();
          Value v = c.items[c.pos];
          c.pos = (c.pos + 1) % c.items.size();
          return v;
        }
        if (method == "reset") {
          c.pos = 0;
          return Value::None();
        }
      }
      break;
    }
    default:
      break;
  }
  return Call(GetAttr(obj, name), args);
}

Value Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) ThrowUndefined(callee);
  if (callee.is_object()) {
    Object& o = callee.object();
    switch (o.object_kind()) {
      case ObjectKind::kMacro:
        return CallMacro(static_cast<const MacroObject&>(o), args, Value());
      case ObjectKind::kBuiltin:
        return CallBuiltin(static_cast<const BuiltinObject&>(o).builtin, args);
      case ObjectKind::kBoundMethod: {
        const auto& m = static_cast<const BoundMethod&>(o);
        return CallMethod(m.receiver, Value::Str(m.name), args);
      }
      case ObjectKind::kLoop:
        if (o.callable()) return CallLoop(static_cast<LoopObject&>(o), args);
        break;
      case ObjectKind::kJoiner: {
        auto& j = static_cast<JoinerObject&>(o);
        if (!j.used) {
          j.used = true;
          return Value::Str("");
        }
        return j.sep;
      }
      default:
        break;
    }
  }
  ThrowTypeError("'" + std::string(PyTypeName(callee)) + "' object is not callable");
}

Value Interpreter::CallLoop(LoopObject& loop, CallArgs& args) {
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    ThrowTypeError("loop() takes exactly one argument (the items to recurse into)");
  }
  std::string buffer;
  {
    OutputSwap swap(&out_, &buffer);
    ++call_depth_;
    struct Restore {
      int* depth;
      ~Restore() { --*depth; }
    } restore{&call_depth_};
    if (call_depth_ > limits_.max_call_depth) {
      ThrowLimit("recursive loop depth exceeds max_call_depth (" +
                 std::to_string(limits_.max_call_depth) + ")");
    }
    RunLoop(*loop.stmt, args.positional[0], loop.depth0 + 1, loop.outer);
  }
  ChargeString(buffer.size());
  return Value::Str(std::move(buffer));
}

Value Interpreter::CallMacro(const MacroObject& macro, CallArgs& args, const Value& caller) {
  const MacroStmt& def = *macro.def;
  ++call_depth_;
  struct Restore {
    int* depth;
    ~Restore() { --*depth; }
  } restore{&call_depth_};
  if (call_depth_ > limits_.max_call_depth) {
    ThrowLimit("macro calls nested deeper than max_call_depth (" +
               std::to_string(limits_.max_call_depth) + ") in macro '" + def.name + "'");
  }
  auto frame = std::make_shared<Frame>(macro.closure);
  const size_t nparams = def.params.size();
  std::vector<uint8_t> given(nparams, 0);
  std::vector<Value> extra;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < nparams) {
      frame->vars.emplace_back(def.params[i].slot, args.positional[i]);
      given[i] = 1;
    } else {
      extra.push_back(args.positional[i]);
    }
  }
  if (!extra.empty() && !def.uses_varargs) {
    ThrowTypeError("macro '" + def.name + "' takes not more than " + std::to_string(nparams) +
                   " argument(s)");
  }
  Value the_caller = caller;
  Value kwargs = def.uses_kwargs ? Value::Dict() : Value();
  for (auto& [key, value] : args.keyword) {
    size_t j = 0;
    while (j < nparams && def.params[j].name != key) ++j;
    if (j < nparams) {
      if (given[j]) {  // Jinja2 reports a keyword that repeats a positional this way
        ThrowTypeError("macro '" + def.name + "' takes no keyword argument '" + key + "'");
      }
      frame->vars.emplace_back(def.params[j].slot, value);
      given[j] = 1;
    } else if (key == "caller" && def.uses_caller) {
      the_caller = value;
    } else if (def.uses_kwargs) {
      kwargs.dict().SetStr(key, value);
    } else {
      ThrowTypeError("macro '" + def.name + "' takes no keyword argument '" + key + "'");
    }
  }
  if (!the_caller.is_undefined() && !def.uses_caller) {
    ThrowTypeError("macro '" + def.name + "' takes no keyword argument 'caller'");
  }
  FrameSwap swap(&frame_, frame);
  for (size_t j = 0; j < nparams; ++j) {
    if (given[j]) continue;
    const MacroParam& p = def.params[j];
    Value v = p.default_value ? Eval(*p.default_value)
                              : Value::UndefinedHint("parameter '" + p.name + "' was not provided");
    frame->Set(p.slot, std::move(v));
  }
  if (def.uses_caller) {
    frame->Set(def.caller_slot,
               the_caller.is_undefined() ? Value::UndefinedHint("No caller defined") : the_caller);
  }
  if (def.uses_varargs) frame->Set(def.varargs_slot, Value::Tuple(std::move(extra)));
  if (def.uses_kwargs) frame->Set(def.kwargs_slot, std::move(kwargs));
  std::string buffer;
  {
    OutputSwap out_swap(&out_, &buffer);
    ExecBody(def.body);
  }
  return Value::Str(std::move(buffer));
}

Value Interpreter::CallBuiltin(Builtin builtin, CallArgs& args) {
  switch (builtin) {
    case Builtin::kRange: {
      if (!args.keyword.empty()) ThrowTypeError("range() takes no keyword arguments");
      const auto& p = args.positional;
      if (p.empty() || p.size() > 3) {
        ThrowTypeError("range expected at most 3 arguments, got " + std::to_string(p.size()));
      }
      int64_t start = 0;
      int64_t stop = 0;
      int64_t step = 1;
      if (p.size() == 1) {
        stop = ToIndex(p[0], "integer");
      } else {
        start = ToIndex(p[0], "integer");
        stop = ToIndex(p[1], "integer");
        if (p.size() == 3) step = ToIndex(p[2], "integer");
      }
      if (step == 0) ThrowValueError("range() arg 3 must not be zero");
      int64_t count = 0;
      if (step > 0 && start < stop) {
        count =
            static_cast<int64_t>((static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) /
                                 static_cast<uint64_t>(step)) +
            1;
      } else if (step < 0 && start > stop) {
        count =
            static_cast<int64_t>((static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) /
                                 (0 - static_cast<uint64_t>(step))) +
            1;
      }
      if (count > kMaxRange || count < 0) {
        ThrowError("OverflowError",
                   "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      }
      ChargeElements(static_cast<size_t>(count));
      std::vector<Value> items;
      items.reserve(static_cast<size_t>(count));
      for (int64_t k = 0; k < count; ++k) items.push_back(Value::Int(start + k * step));
      return Value::List(std::move(items));
    }
    case Builtin::kDict:
    case Builtin::kNamespace: {
      Value result = builtin == Builtin::kDict ? Value::Dict() : Value::Namespace();
      DictRep& rep = result.dict();
      if (args.positional.size() > 1) {
        ThrowTypeError("dict expected at most 1 argument, got " +
                       std::to_string(args.positional.size()));
      }
      if (args.positional.size() == 1) {
        const Value& src = args.positional[0];
        if (src.is_dict() || src.is_namespace()) {
          for (const auto& [k, v] : src.dict().entries) rep.Set(k, v);
        } else {
          for (const Value& pair : Iterate(src)) {
            std::vector<Value> kv = Iterate(pair);
            if (kv.size() != 2) {
              ThrowValueError("dictionary update sequence element has length " +
                              std::to_string(kv.size()) + "; 2 is required");
            }
            CheckHashable(kv[0]);
            rep.Set(std::move(kv[0]), std::move(kv[1]));
          }
        }
      }
      for (auto& [k, v] : args.keyword) rep.SetStr(k, v);
      ChargeElements(rep.size());
      return result;
    }
    case Builtin::kRaiseException: {
      ArgBinder a(args, "raise_exception", {"message"});
      throw TemplateException("TemplateError", ToStr(a[0]));
    }
    case Builtin::kStrftimeNow: {
      ArgBinder a(args, "strftime_now", {"format"});
      if (!a[0].is_string()) ThrowTypeError("strftime_now() argument must be str");
      std::string fmt;
      const std::string& raw = a[0].str();
      if (raw.size() > 1024) ThrowValueError("strftime format is too long");
      for (size_t i = 0; i < raw.size(); ++i) {  // Python handles %f/%z/%Z itself
        if (raw[i] == '%' && i + 1 < raw.size()) {
          const char c = raw[i + 1];
          if (c == 'f') {
            fmt += "000000";
            ++i;
            continue;
          }
          if (c == 'z' || c == 'Z') {
            ++i;
            continue;
          }
          fmt += raw.substr(i, 2);
          ++i;
          continue;
        }
        fmt.push_back(raw[i]);
      }
      if (fmt.empty()) return Value::Str("");
      std::vector<char> buf(256 + fmt.size() * 16);
      const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &env_.now);
      return Value::Str(std::string(buf.data(), n));
    }
    case Builtin::kCycler: {
      auto c = std::make_shared<CyclerObject>();
      c->items = args.positional;
      return Value::FromObject(std::move(c));
    }
    case Builtin::kJoiner: {
      ArgBinder a(args, "joiner", {"sep"});
      auto j = std::make_shared<JoinerObject>();
      j->sep = a.has(0) ? a[0] : Value::Str(", ");
      return Value::FromObject(std::move(j));
    }
  }
  return Value();
}

}  // namespace kvforge::chat
