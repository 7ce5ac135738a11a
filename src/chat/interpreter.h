// interpreter.h — renders a parsed Template (ast.h) with Jinja2 semantics.
//
// One Interpreter renders once: it owns the per-render state (variable frames, output buffer,
// step/iteration counters, the fixed "now" for strftime_now) and is discarded afterwards. The
// Template it reads is shared and never modified. Scoping follows Jinja2: `for` bodies, macro
// calls, `with` and block-set bodies get their own frame; `if` does not; names are looked up
// through the enclosing frames, then the render's globals (messages, bos_token, range, ...).
//
// Internal to the chat module: evaluation throws TemplateException (errors.h) for template errors
// and limit hits; ChatTemplate::Render converts them to Status. Containers the template mutates
// are remembered and emptied when the render ends, so reference cycles built by a template
// (ns.self = ns) cannot leak.
// Thread-safety: an Interpreter is confined to one thread; many may render one Template at once.
#pragma once

#include <ctime>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/limits.h"
#include "chat/value.h"

namespace kvforge::chat {

// Evaluated call arguments.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Python-style parameter binding for builtins: binds positionals then keywords to `params` and
// raises TypeError for unknown keywords, duplicates or too many positionals.
class ArgBinder {
 public:
  ArgBinder(const CallArgs& args, std::string_view function,
            std::initializer_list<std::string_view> params);
  bool has(size_t i) const { return i < slots_.size() && slots_[i] != nullptr; }
  const Value& operator[](size_t i) const;  // undefined when not given
  Value get(size_t i, Value fallback) const { return has(i) ? *slots_[i] : std::move(fallback); }

 private:
  std::vector<const Value*> slots_;
};

// A variable scope. The root frame is dense (indexed by slot); inner frames are short lists.
struct Frame {
  explicit Frame(std::shared_ptr<Frame> p) : parent(std::move(p)) {}
  Value* Find(int slot) {
    for (auto& entry : vars) {
      if (entry.first == slot) return &entry.second;
    }
    return nullptr;
  }
  void Set(int slot, Value v);
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<int, Value>> vars;
};

// Builtin global functions.
enum class Builtin : uint8_t {
  kRange,
  kDict,
  kNamespace,
  kRaiseException,
  kStrftimeNow,
  kCycler,
  kJoiner
};

class BuiltinObject : public Object {
 public:
  explicit BuiltinObject(Builtin b) : builtin(b) {}
  ObjectKind object_kind() const override { return ObjectKind::kBuiltin; }
  std::string_view type_name() const override { return "builtin_function_or_method"; }
  std::string Repr() const override;
  Builtin builtin;
};

class MacroObject : public Object {
 public:
  MacroObject(const MacroStmt* d, std::shared_ptr<Frame> c) : def(d), closure(std::move(c)) {}
  ObjectKind object_kind() const override { return ObjectKind::kMacro; }
  std::string_view type_name() const override { return "Macro"; }
  std::string Repr() const override { return "<Macro '" + def->name + "'>"; }
  const MacroStmt* def;
  std::shared_ptr<Frame> closure;
};

// `obj.method` referenced without being called directly.
class BoundMethod : public Object {
 public:
  BoundMethod(Value r, std::string n) : receiver(std::move(r)), name(std::move(n)) {}
  ObjectKind object_kind() const override { return ObjectKind::kBoundMethod; }
  std::string_view type_name() const override { return "builtin_function_or_method"; }
  std::string Repr() const override;
  Value receiver;
  std::string name;
};

class LoopObject : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kLoop; }
  std::string_view type_name() const override { return "LoopContext"; }
  std::string Repr() const override;
  bool callable() const override { return stmt != nullptr && stmt->recursive; }
  std::vector<Value> items;
  int64_t index0 = 0;
  int depth0 = 0;
  bool changed_seen = false;
  Value last_changed;
  const ForStmt* stmt = nullptr;
  std::shared_ptr<Frame> outer;  // frame the loop runs in (for recursive calls)
};

class CyclerObject : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kCycler; }
  std::string_view type_name() const override { return "Cycler"; }
  std::string Repr() const override { return "<Cycler>"; }
  bool callable() const override { return false; }
  std::vector<Value> items;
  size_t pos = 0;
};

class JoinerObject : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kJoiner; }
  std::string_view type_name() const override { return "Joiner"; }
  std::string Repr() const override { return "<Joiner>"; }
  Value sep;
  bool used = false;
};

// Everything a render needs besides the template.
struct RenderEnv {
  std::vector<std::pair<std::string, Value>> globals;  // name -> value (already frozen)
  std::tm now{};                                       // for strftime_now
};

class Interpreter {
 public:
  Interpreter(const Template& tmpl, const Limits& limits, const RenderEnv& env);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders the whole template; throws TemplateException.
  std::string Render();

  // ---- services for filters, tests and methods ----
  const Limits& limits() const { return limits_; }
  const std::tm& now() const { return env_.now; }
  // Counts `n` work steps against Limits::max_steps.
  void Tick(uint64_t n = 1) {
    steps_ += n;
    if (steps_ > limits_.max_steps) StepLimit();
  }
  // Checks a string about to be built and charges for its bytes.
  void ChargeString(size_t bytes);
  // Checks a collection about to be built and charges for its elements.
  void ChargeElements(size_t count);
  // Records a container the template mutated (see header comment).
  void NoteMutation(const Value& container);

  Value GetAttr(const Value& obj, const Value& name);
  Value GetAttr(const Value& obj, std::string_view name);
  Value GetItem(const Value& obj, const Value& key);
  Value Call(const Value& callee, CallArgs& args);
  // obj.name(args) with Python/Jinja2 attribute precedence.
  Value CallMethod(const Value& obj, const Value& name, CallArgs& args);
  // Applies the filter/test called `name` (for map/select/reject); errors if unknown.
  Value ApplyFilter(std::string_view name, const Value& v, CallArgs& args);
  bool ApplyTest(std::string_view name, const Value& v, CallArgs& args);

 private:
  enum class Flow : uint8_t { kNormal, kBreak, kContinue };

  // Installs a frame / an output buffer for the lifetime of the object.
  class FrameSwap {
   public:
    FrameSwap(std::shared_ptr<Frame>* slot, std::shared_ptr<Frame> frame)
        : slot_(slot), saved_(std::move(*slot)) {
      *slot_ = std::move(frame);
    }
    ~FrameSwap() { *slot_ = std::move(saved_); }

   private:
    std::shared_ptr<Frame>* slot_;
    std::shared_ptr<Frame> saved_;
  };
  class OutputSwap {
   public:
    OutputSwap(std::string** slot, std::string* buffer) : slot_(slot), saved_(*slot) {
      *slot_ = buffer;
    }
    ~OutputSwap() { *slot_ = saved_; }

   private:
    std::string** slot_;
    std::string* saved_;
  };

  struct DepthGuard {
    explicit DepthGuard(Interpreter* in);
    ~DepthGuard() { --in->depth_; }
    Interpreter* in;
  };

  [[noreturn]] void StepLimit();
  Value Lookup(int slot, const Value& name) const;
  void Assign(const Target& target, Value value);
  void Write(std::string_view text);

  Flow ExecBody(const Body& body);
  Flow Exec(const Stmt& stmt);
  void RunLoop(const ForStmt& stmt, const Value& iterable, int depth0,
               std::shared_ptr<Frame> outer);
  std::string Capture(const Body& body, std::shared_ptr<Frame> frame);

  Value Eval(const Expr& expr);
  Value EvalCall(const CallExpr& call);
  void EvalArgs(const ArgList& list, CallArgs* out);
  Value EvalFilter(const FilterExpr& f, const Value* block_input);
  bool EvalCompare(CmpOp op, const Value& a, const Value& b);
  Value EvalSlice(const Value& obj, const SliceExpr& slice);

  Value CallMacro(const MacroObject& macro, CallArgs& args, const Value& caller);
  Value CallBuiltin(Builtin builtin, CallArgs& args);
  Value CallLoop(LoopObject& loop, CallArgs& args);
  Value LoopAttr(const LoopObject& loop, std::string_view name);

  const Template& tmpl_;
  const Limits& limits_;
  const RenderEnv& env_;
  std::vector<Value> root_;        // slot -> value (globals, then top-level sets)
  std::vector<uint8_t> root_set_;  // slot has a value
  std::shared_ptr<Frame> frame_;   // innermost frame; null at top level
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  uint64_t iterations_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
  void NoteFrame(const std::shared_ptr<Frame>& frame);
  void BreakCycles();
  enum class Held : uint8_t { kList, kDict, kFrame };
  std::vector<std::pair<std::weak_ptr<void>, Held>> mutated_;
  size_t mutated_compact_at_ = 1024;
};

// Implemented in operators.cc.
Value BinaryOperation(Interpreter& in, BinOp op, const Value& a, const Value& b);
Value Negate(const Value& v);
// markupsafe.escape of a value's str().
std::string HtmlEscape(std::string_view s);
// Python slicing of str/list/tuple; other kinds give an undefined value.
Value SliceValue(Interpreter& in, const Value& obj, const Value& start, const Value& stop,
                 const Value& step);

// Implemented in methods.cc: str/list/dict methods. Returns false if `obj` has no such method.
bool HasMethod(const Value& obj, std::string_view name);
bool CallBuiltinMethod(Interpreter& in, const Value& obj, std::string_view name, CallArgs& args,
                       Value* result);

// Implemented in format.cc: `fmt % args` and str.format.
std::string PercentFormat(Interpreter& in, std::string_view fmt, const Value& args);
std::string BraceFormat(Interpreter& in, std::string_view fmt, const CallArgs& args);

}  // namespace kvforge::chat
