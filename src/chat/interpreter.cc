#include "chat/interpreter.h"

#include <algorithm>
#include <cstring>

#include "chat/errors.h"
#include "chat/parser.h"
#include "chat/pyops.h"
#include "chat/pystr.h"

namespace kvforge::chat {
namespace {

// Nested Exec/Eval levels allowed at render time; bounds C++ stack use to roughly a megabyte.
constexpr int kMaxEvalDepth = 1000;

[[noreturn]] void RuntimeError(std::string message) {
  ThrowError("TemplateRuntimeError", std::move(message));
}

bool HoldsChildren(const Value& v) {
  return v.is_list() || v.is_tuple() || v.is_dict() || v.is_namespace() || v.is_object() ||
         v.is_iterator();
}

const Value& BuiltinValue(Builtin b) {
  static const Value kValues[] = {
      Value::FromObject(std::make_shared<BuiltinObject>(Builtin::kRange)),
      Value::FromObject(std::make_shared<BuiltinObject>(Builtin::kDict)),
      Value::FromObject(std::make_shared<BuiltinObject>(Builtin::kNamespace)),
      Value::FromObject(std::make_shared<BuiltinObject>(Builtin::kRaiseException)),
      Value::FromObject(std::make_shared<BuiltinObject>(Builtin::kStrftimeNow)),
      Value::FromObject(std::make_shared<BuiltinObject>(Builtin::kCycler)),
      Value::FromObject(std::make_shared<BuiltinObject>(Builtin::kJoiner)),
  };
  return kValues[static_cast<int>(b)];
}

struct BuiltinName {
  const char* name;
  Builtin builtin;
};
constexpr BuiltinName kBuiltinNames[] = {
    {"range", Builtin::kRange},
    {"dict", Builtin::kDict},
    {"namespace", Builtin::kNamespace},
    {"raise_exception", Builtin::kRaiseException},
    {"strftime_now", Builtin::kStrftimeNow},
    {"cycler", Builtin::kCycler},
    {"joiner", Builtin::kJoiner},
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Small helpers

ArgBinder::ArgBinder(const CallArgs& args, std::string_view function,
                     std::initializer_list<std::string_view> params)
    : slots_(params.size(), nullptr) {
  const std::string fn(function);
  if (args.positional.size() > params.size()) {
    ThrowTypeError(fn + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                   std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t j = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++j;
    }
    if (j == params.size()) {
      ThrowTypeError(fn + "() got an unexpected keyword argument '" + key + "'");
    }
    if (slots_[j] != nullptr) {
      ThrowTypeError(fn + "() got multiple values for argument '" + key + "'");
    }
    slots_[j] = &value;
  }
}

const Value& ArgBinder::operator[](size_t i) const {
  static const Value kUndefined;
  return has(i) ? *slots_[i] : kUndefined;
}

void Frame::Set(int slot, Value v) {
  if (Value* existing = Find(slot)) {
    *existing = std::move(v);
  } else {
    vars.emplace_back(slot, std::move(v));
  }
}

std::string BuiltinObject::Repr() const {
  for (const auto& b : kBuiltinNames) {
    if (b.builtin == builtin) return std::string("<built-in function ") + b.name + ">";
  }
  return "<built-in function>";
}

std::string BoundMethod::Repr() const {
  return "<built-in method " + name + " of " + std::string(PyTypeName(receiver)) + " object>";
}

std::string LoopObject::Repr() const {
  return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items.size()) + ">";
}

Interpreter::DepthGuard::DepthGuard(Interpreter* i) : in(i) {
  if (++in->depth_ > kMaxEvalDepth) {
    --in->depth_;
    ThrowLimit("maximum render recursion depth (" + std::to_string(kMaxEvalDepth) + ") exceeded");
  }
}

Interpreter::Interpreter(const Template& tmpl, const Limits& limits, const RenderEnv& env)
    : tmpl_(tmpl), limits_(limits), env_(env) {
  const size_t n = tmpl.symbols.size();
  root_.resize(n);
  root_set_.assign(n, 0);
  for (const auto& b : kBuiltinNames) {
    auto it = tmpl.slot_of.find(b.name);
    if (it == tmpl.slot_of.end()) continue;
    root_[static_cast<size_t>(it->second)] = BuiltinValue(b.builtin);
    root_set_[static_cast<size_t>(it->second)] = 1;
  }
  for (const auto& [name, value] : env.globals) {
    auto it = tmpl.slot_of.find(name);
    if (it == tmpl.slot_of.end()) continue;
    root_[static_cast<size_t>(it->second)] = value;
    root_set_[static_cast<size_t>(it->second)] = 1;
  }
}

Interpreter::~Interpreter() { BreakCycles(); }

std::string Interpreter::Render() {
  std::string out;
  out.reserve(4096);
  out_ = &out;
  ExecBody(tmpl_.body);
  out_ = nullptr;
  return out;
}

void Interpreter::StepLimit() {
  ThrowLimit("render exceeded max_steps (" + std::to_string(limits_.max_steps) +
             " work units); the template loops or recurses too much");
}

void Interpreter::ChargeString(size_t bytes) {
  if (bytes > limits_.max_output_bytes) {
    ThrowLimit("string of " + std::to_string(bytes) + " bytes exceeds max_output_bytes (" +
               std::to_string(limits_.max_output_bytes) + ")");
  }
  Tick(bytes / 16 + 1);
}

void Interpreter::ChargeElements(size_t count) {
  if (count > limits_.max_collection_size) {
    ThrowLimit("collection of " + std::to_string(count) +
               " elements exceeds max_collection_size (" +
               std::to_string(limits_.max_collection_size) + ")");
  }
  Tick(count * 2 + 1);
}

void Interpreter::NoteMutation(const Value& container) {
  Held kind;
  if (container.is_list()) {
    kind = Held::kList;
  } else if (container.is_dict() || container.is_namespace()) {
    kind = Held::kDict;
  } else {
    return;
  }
  mutated_.emplace_back(container.weak_ref(), kind);
  if (mutated_.size() >= mutated_compact_at_) {
    std::erase_if(mutated_, [](const auto& e) { return e.first.expired(); });
    mutated_compact_at_ = std::max<size_t>(1024, mutated_.size() * 2);
  }
}

void Interpreter::NoteFrame(const std::shared_ptr<Frame>& frame) {
  if (!frame) return;
  if (!mutated_.empty() && mutated_.back().second == Held::kFrame &&
      !mutated_.back().first.owner_before(frame) && !frame.owner_before(mutated_.back().first)) {
    return;  // same frame as last time
  }
  mutated_.emplace_back(std::weak_ptr<void>(frame), Held::kFrame);
  if (mutated_.size() >= mutated_compact_at_) {
    std::erase_if(mutated_, [](const auto& e) { return e.first.expired(); });
    mutated_compact_at_ = std::max<size_t>(1024, mutated_.size() * 2);
  }
}

void Interpreter::BreakCycles() {
  for (auto& [weak, kind] : mutated_) {
    std::shared_ptr<void> alive = weak.lock();
    if (!alive) continue;
    switch (kind) {
      case Held::kList: {
        std::vector<Value> doomed;
        doomed.swap(static_cast<ListRep*>(alive.get())->items);
        break;
      }
      case Held::kDict:
        static_cast<DictRep*>(alive.get())->Clear();
        break;
      case Held::kFrame: {
        auto* frame = static_cast<Frame*>(alive.get());
        std::vector<std::pair<int, Value>> doomed;
        doomed.swap(frame->vars);
        frame->parent.reset();
        break;
      }
    }
  }
  mutated_.clear();
}

Value Interpreter::Lookup(int slot, const Value& name) const {
  for (const Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
    for (const auto& entry : f->vars) {
      if (entry.first == slot) return entry.second;
    }
  }
  const auto s = static_cast<size_t>(slot);
  if (root_set_[s]) return root_[s];
  return Value::UndefinedName(name.str_ptr());
}

void Interpreter::Assign(const Target& target, Value value) {
  switch (target.kind) {
    case Target::Kind::kName:
      if (frame_) {
        if (value.is_object()) NoteFrame(frame_);
        frame_->Set(target.slot, std::move(value));
      } else {
        root_[static_cast<size_t>(target.slot)] = std::move(value);
        root_set_[static_cast<size_t>(target.slot)] = 1;
      }
      return;
    case Target::Kind::kTuple: {
      std::vector<Value> items = Iterate(value);
      const size_t want = target.items.size();
      if (items.size() < want) {
        ThrowValueError("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                        std::to_string(items.size()) + ")");
      }
      if (items.size() > want) {
        ThrowValueError("too many values to unpack (expected " + std::to_string(want) + ")");
      }
      for (size_t i = 0; i < want; ++i) Assign(target.items[i], std::move(items[i]));
      return;
    }
    case Target::Kind::kAttr: {
      Value ns = Lookup(target.slot, Value::Str(target.name));
      if (!ns.is_namespace()) RuntimeError("cannot assign attribute on non-namespace object");
      if (HoldsChildren(value)) NoteMutation(ns);
      ns.dict().SetStr(target.attr, std::move(value));
      return;
    }
  }
}

void Interpreter::Write(std::string_view text) {
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    ThrowLimit("rendered output exceeds max_output_bytes (" +
               std::to_string(limits_.max_output_bytes) + ")");
  }
  out_->append(text);
}

// ---------------------------------------------------------------------------------------------
// Statements

Interpreter::Flow Interpreter::ExecBody(const Body& body) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = Exec(*stmt);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

std::string Interpreter::Capture(const Body& body, std::shared_ptr<Frame> frame) {
  std::string buffer;
  OutputSwap out_swap(&out_, &buffer);
  FrameSwap frame_swap(&frame_, std::move(frame));
  ExecBody(body);
  return buffer;
}

Interpreter::Flow Interpreter::Exec(const Stmt& stmt) {
  Tick();
  DepthGuard guard(this);
  switch (stmt.type) {
    case StmtType::kText:
      Write(static_cast<const TextStmt&>(stmt).text);
      return Flow::kNormal;
    case StmtType::kOutput: {
      const Value v = Eval(*static_cast<const OutputStmt&>(stmt).expr);
      if (v.is_string()) {
        Write(v.str());
      } else {
        std::string text;
        AppendStr(v, &text);
        ChargeString(text.size());
        Write(text);
      }
      return Flow::kNormal;
    }
    case StmtType::kIf: {
      const auto& s = static_cast<const IfStmt&>(stmt);
      for (const auto& [test, body] : s.branches) {
        if (Truthy(Eval(*test))) return ExecBody(body);
      }
      return ExecBody(s.else_body);
    }
    case StmtType::kFor: {
      const auto& s = static_cast<const ForStmt&>(stmt);
      const Value iterable = Eval(*s.iter);
      RunLoop(s, iterable, 0, frame_);
      return Flow::kNormal;
    }
    case StmtType::kSet: {
      const auto& s = static_cast<const SetStmt&>(stmt);
      Assign(s.target, Eval(*s.value));
      return Flow::kNormal;
    }
    case StmtType::kSetBlock: {
      const auto& s = static_cast<const SetBlockStmt&>(stmt);
      Value v = Value::Str(Capture(s.body, std::make_shared<Frame>(frame_)));
      if (s.filter) v = EvalFilter(static_cast<const FilterExpr&>(*s.filter), &v);
      Assign(s.target, std::move(v));
      return Flow::kNormal;
    }
    case StmtType::kMacro: {
      const auto& s = static_cast<const MacroStmt&>(stmt);
      Target target;
      target.slot = s.slot;
      Assign(target, Value::FromObject(std::make_shared<MacroObject>(&s, frame_)));
      return Flow::kNormal;
    }
    case StmtType::kCallBlock: {
      const auto& s = static_cast<const CallBlockStmt&>(stmt);
      const auto& call = static_cast<const CallExpr&>(*s.call);
      const Value callee = Eval(*call.callee);
      CallArgs args;
      EvalArgs(call.args, &args);
      const Value caller = Value::FromObject(std::make_shared<MacroObject>(s.caller.get(), frame_));
      Value result;
      if (callee.is_object() && callee.object().object_kind() == ObjectKind::kMacro) {
        result = CallMacro(static_cast<const MacroObject&>(callee.object()), args, caller);
      } else {
        args.keyword.emplace_back("caller", caller);
        result = Call(callee, args);
      }
      std::string text = ToStr(result);
      Write(text);
      return Flow::kNormal;
    }
    case StmtType::kFilterBlock: {
      const auto& s = static_cast<const FilterBlockStmt&>(stmt);
      const Value body = Value::Str(Capture(s.body, std::make_shared<Frame>(frame_)));
      const Value v = EvalFilter(static_cast<const FilterExpr&>(*s.filter), &body);
      std::string text = ToStr(v);
      Write(text);
      return Flow::kNormal;
    }
    case StmtType::kWith: {
      const auto& s = static_cast<const WithStmt&>(stmt);
      std::vector<Value> values;
      values.reserve(s.assigns.size());
      for (const auto& assign : s.assigns) values.push_back(Eval(*assign.second));
      FrameSwap swap(&frame_, std::make_shared<Frame>(frame_));
      for (size_t i = 0; i < values.size(); ++i) Assign(s.assigns[i].first, std::move(values[i]));
      return ExecBody(s.body);
    }
    case StmtType::kBreak:
      return Flow::kBreak;
    case StmtType::kContinue:
      return Flow::kContinue;
    case StmtType::kScope:
      return ExecBody(static_cast<const ScopeStmt&>(stmt).body);
  }
  return Flow::kNormal;
}

// `outer` is taken by value: callers pass frame_, which the FrameSwap below replaces.
void Interpreter::RunLoop(const ForStmt& stmt, const Value& iterable, int depth0,
                          std::shared_ptr<Frame> outer) {
  std::vector<Value> items = Iterate(iterable);
  Tick(items.size());
  auto frame = std::make_shared<Frame>(outer);
  FrameSwap swap(&frame_, frame);
  auto loop = std::make_shared<LoopObject>();
  loop->depth0 = depth0;
  if (stmt.recursive) {
    loop->stmt = &stmt;
    loop->outer = outer;
  }
  const Value loop_value = Value::FromObject(loop);
  if (stmt.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      Tick();
      frame->vars.clear();
      Assign(stmt.target, item);
      if (Truthy(Eval(*stmt.filter))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  loop->items = std::move(items);
  const size_t n = loop->items.size();
  for (size_t i = 0; i < n; ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      ThrowLimit("render exceeded max_loop_iterations (" +
                 std::to_string(limits_.max_loop_iterations) + ")");
    }
    Tick();
    frame->vars.clear();
    loop->index0 = static_cast<int64_t>(i);
    frame->vars.emplace_back(stmt.loop_slot, loop_value);
    Assign(stmt.target, loop->items[i]);
    if (ExecBody(stmt.body) == Flow::kBreak) break;
  }
  if (n == 0) {
    frame->vars.clear();
    ExecBody(stmt.else_body);
  }
}

// ---------------------------------------------------------------------------------------------
// Expressions

Value Interpreter::Eval(const Expr& expr) {
  Tick();
  DepthGuard guard(this);
  switch (expr.type) {
    case ExprType::kConst:
      return static_cast<const ConstExpr&>(expr).value;
    case ExprType::kName: {
      const auto& e = static_cast<const NameExpr&>(expr);
      return Lookup(e.slot, e.name);
    }
    case ExprType::kGetAttr: {
      const auto& e = static_cast<const GetAttrExpr&>(expr);
      return GetAttr(Eval(*e.object), e.attr);
    }
    case ExprType::kGetItem: {
      const auto& e = static_cast<const GetItemExpr&>(expr);
      const Value obj = Eval(*e.object);
      if (e.key->type == ExprType::kSlice) {
        return EvalSlice(obj, static_cast<const SliceExpr&>(*e.key));
      }
      return GetItem(obj, Eval(*e.key));
    }
    case ExprType::kSlice:
      ThrowTypeError("slice used outside a subscript");
    case ExprType::kCall:
      return EvalCall(static_cast<const CallExpr&>(expr));
    case ExprType::kFilter:
      return EvalFilter(static_cast<const FilterExpr&>(expr), nullptr);
    case ExprType::kTest: {
      const auto& e = static_cast<const TestExpr&>(expr);
      const Value operand = Eval(*e.operand);
      CallArgs args;
      EvalArgs(e.args, &args);
      if (e.fn == nullptr) RuntimeError("No test named '" + e.name + "' found.");
      return Value::Bool(e.fn(*this, operand, args));
    }
    case ExprType::kNeg:
      return Negate(Eval(*static_cast<const UnaryExpr&>(expr).operand));
    case ExprType::kPos: {
      Value v = Eval(*static_cast<const UnaryExpr&>(expr).operand);
      if (v.is_undefined()) ThrowUndefined(v);
      if (v.is_bool()) return Value::Int(v.int_value());
      if (!v.is_int() && !v.is_float()) {
        ThrowTypeError("bad operand type for unary +: '" + std::string(PyTypeName(v)) + "'");
      }
      return v;
    }
    case ExprType::kNot:
      return Value::Bool(!Truthy(Eval(*static_cast<const UnaryExpr&>(expr).operand)));
    case ExprType::kAnd: {
      const auto& e = static_cast<const BinaryExpr&>(expr);
      Value left = Eval(*e.left);
      if (!Truthy(left)) return left;
      return Eval(*e.right);
    }
    case ExprType::kOr: {
      const auto& e = static_cast<const BinaryExpr&>(expr);
      Value left = Eval(*e.left);
      if (Truthy(left)) return left;
      return Eval(*e.right);
    }
    case ExprType::kBinary: {
      const auto& e = static_cast<const BinaryExpr&>(expr);
      const Value left = Eval(*e.left);
      const Value right = Eval(*e.right);
      return BinaryOperation(*this, e.op, left, right);
    }
    case ExprType::kCompare: {
      const auto& e = static_cast<const CompareExpr&>(expr);
      Value left = Eval(*e.first);
      for (const auto& [op, operand] : e.rest) {
        Value right = Eval(*operand);
        if (!EvalCompare(op, left, right)) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case ExprType::kCond: {
      const auto& e = static_cast<const CondExpr&>(expr);
      if (Truthy(Eval(*e.test))) return Eval(*e.then_expr);
      if (e.else_expr) return Eval(*e.else_expr);
      return Value::UndefinedHint("the inline if-expression on line " + std::to_string(e.line) +
                                  " evaluated to false and no else section was defined.");
    }
    case ExprType::kList:
    case ExprType::kTuple: {
      const auto& e = static_cast<const SeqExpr&>(expr);
      ChargeElements(e.items.size());
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& item : e.items) items.push_back(Eval(*item));
      return expr.type == ExprType::kList ? Value::List(std::move(items))
                                          : Value::Tuple(std::move(items));
    }
    case ExprType::kDict: {
      const auto& e = static_cast<const DictExpr&>(expr);
      ChargeElements(e.items.size() * 2);
      Value dict = Value::Dict();
      for (const auto& [k, v] : e.items) {
        Value key = Eval(*k);
        CheckHashable(key);
        dict.dict().Set(std::move(key), Eval(*v));
      }
      return dict;
    }
  }
  return Value();
}

void Interpreter::EvalArgs(const ArgList& list, CallArgs* out) {
  out->positional.reserve(list.positional.size());
  for (const auto& e : list.positional) out->positional.push_back(Eval(*e));
  if (list.star_args) {
    for (Value& v : Iterate(Eval(*list.star_args))) out->positional.push_back(std::move(v));
  }
  for (const auto& [name, e] : list.keyword) out->keyword.emplace_back(name, Eval(*e));
  if (list.star_kwargs) {
    const Value kw = Eval(*list.star_kwargs);
    if (!kw.is_dict()) ThrowTypeError("argument after ** must be a mapping");
    for (const auto& [k, v] : kw.dict().entries) {
      if (!k.is_string()) ThrowTypeError("keywords must be strings");
      out->keyword.emplace_back(k.str(), v);
    }
  }
}

Value Interpreter::EvalCall(const CallExpr& call) {
  if (call.callee->type == ExprType::kGetAttr) {
    const auto& attr = static_cast<const GetAttrExpr&>(*call.callee);
    const Value obj = Eval(*attr.object);
    CallArgs args;
    EvalArgs(call.args, &args);
    return CallMethod(obj, attr.attr, args);
  }
  const Value callee = Eval(*call.callee);
  CallArgs args;
  EvalArgs(call.args, &args);
  return Call(callee, args);
}

Value Interpreter::EvalFilter(const FilterExpr& f, const Value* block_input) {
  Value operand;
  if (!f.operand) {
    operand = *block_input;
  } else if (block_input != nullptr && f.operand->type == ExprType::kFilter) {
    operand = EvalFilter(static_cast<const FilterExpr&>(*f.operand), block_input);
  } else {
    operand = Eval(*f.operand);
  }
  CallArgs args;
  EvalArgs(f.args, &args);
  if (f.fn == nullptr) RuntimeError("No filter named '" + f.name + "' found.");
  return f.fn(*this, operand, args);
}

bool Interpreter::EvalCompare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq:
      return Equals(a, b);
    case CmpOp::kNe:
      return !Equals(a, b);
    case CmpOp::kLt:
      return CompareOrder("<", a, b);
    case CmpOp::kLe:
      return CompareOrder("<=", a, b);
    case CmpOp::kGt:
      return CompareOrder(">", a, b);
    case CmpOp::kGe:
      return CompareOrder(">=", a, b);
    case CmpOp::kIn:
      return Contains(b, a);
    case CmpOp::kNotIn:
      return !Contains(b, a);
  }
  return false;
}

Value Interpreter::EvalSlice(const Value& obj, const SliceExpr& slice) {
  auto part = [&](const ExprPtr& e) { return e ? Eval(*e) : Value::None(); };
  const Value start = part(slice.start);
  const Value stop = part(slice.stop);
  const Value step = part(slice.step);
  return SliceValue(*this, obj, start, stop, step);
}

Value Interpreter::ApplyFilter(std::string_view name, const Value& v, CallArgs& args) {
  FilterFn fn = FindFilter(name);
  if (fn == nullptr) RuntimeError("No filter named '" + std::string(name) + "'.");
  return fn(*this, v, args);
}

bool Interpreter::ApplyTest(std::string_view name, const Value& v, CallArgs& args) {
  TestFn fn = FindTest(name);
  if (fn == nullptr) RuntimeError("No test named '" + std::string(name) + "'.");
  return fn(*this, v, args);
}

}  // namespace kvforge::chat
