// ast.h — the parsed form of a chat template: expression and statement nodes.
//
// Built once by Parse (parser.h) and then only read: rendering never mutates the tree, so one
// Template can be rendered from many threads at once. Variable names are resolved to dense slot
// numbers at parse time (Template::symbols); filters and tests are resolved to function pointers
// (null when the name is unknown and Jinja2 would defer the error to render time).
// Thread-safety: immutable after parsing.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace kvforge::chat {

class Interpreter;
struct CallArgs;

// A filter receives the operand and the call's arguments; a test returns its verdict.
using FilterFn = Value (*)(Interpreter& in, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Interpreter& in, const Value& operand, CallArgs& args);

enum class ExprType : uint8_t {
  kConst,
  kName,
  kGetAttr,
  kGetItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNeg,
  kPos,
  kNot,
  kBinary,
  kAnd,
  kOr,
  kCompare,
  kCond,
  kList,
  kTuple,
  kDict,
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr {
  Expr(ExprType t, int l) : type(t), line(l) {}
  virtual ~Expr() = default;
  ExprType type;
  int line;
  int height = 1;  // longest path to a leaf, bounded by ParseOptions::max_nesting_depth
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
  ConstExpr(Value v, int l) : Expr(ExprType::kConst, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(int s, Value n, int l) : Expr(ExprType::kName, l), slot(s), name(std::move(n)) {}
  int slot;
  Value name;  // string value, shared with undefined values that mention it
};

struct GetAttrExpr : Expr {
  GetAttrExpr(ExprPtr o, Value a, int l)
      : Expr(ExprType::kGetAttr, l), object(std::move(o)), attr(std::move(a)) {}
  ExprPtr object;
  Value attr;  // string value
};

struct GetItemExpr : Expr {
  GetItemExpr(ExprPtr o, ExprPtr k, int l)
      : Expr(ExprType::kGetItem, l), object(std::move(o)), key(std::move(k)) {}
  ExprPtr object;
  ExprPtr key;  // may be a SliceExpr
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(ExprType::kSlice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

// Arguments as written at a call site.
struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // *args
  ExprPtr star_kwargs;  // **kwargs
};

struct CallExpr : Expr {
  CallExpr(ExprPtr c, int l) : Expr(ExprType::kCall, l), callee(std::move(c)) {}
  ExprPtr callee;
  ArgList args;
};

struct FilterExpr : Expr {
  explicit FilterExpr(int l) : Expr(ExprType::kFilter, l) {}
  ExprPtr operand;  // null inside {% filter %} / {% set x | f %}: the block's output is used
  std::string name;
  FilterFn fn = nullptr;  // null: unknown filter, error when evaluated
  ArgList args;
};

struct TestExpr : Expr {
  explicit TestExpr(int l) : Expr(ExprType::kTest, l) {}
  ExprPtr operand;
  std::string name;
  TestFn fn = nullptr;  // null: unknown test, error when evaluated
  ArgList args;
};

struct UnaryExpr : Expr {
  UnaryExpr(ExprType t, ExprPtr o, int l) : Expr(t, l), operand(std::move(o)) {}
  ExprPtr operand;
};

struct BinaryExpr : Expr {
  BinaryExpr(ExprType t, BinOp o, ExprPtr a, ExprPtr b, int l)
      : Expr(t, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinOp op;  // for kBinary only
  ExprPtr left, right;
};

struct CompareExpr : Expr {
  explicit CompareExpr(int l) : Expr(ExprType::kCompare, l) {}
  ExprPtr first;
  std::vector<std::pair<CmpOp, ExprPtr>> rest;
};

struct CondExpr : Expr {
  explicit CondExpr(int l) : Expr(ExprType::kCond, l) {}
  ExprPtr test, then_expr, else_expr;  // else_expr may be null
};

struct SeqExpr : Expr {  // list or tuple literal
  SeqExpr(ExprType t, int l) : Expr(t, l) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprType::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// Assignment targets: a name, a (nested) tuple of names, or namespace.attr.
struct Target {
  enum class Kind : uint8_t { kName, kTuple, kAttr };
  Kind kind = Kind::kName;
  int slot = -1;
  std::string name;           // kName: variable; kAttr: namespace variable
  std::string attr;           // kAttr
  std::vector<Target> items;  // kTuple
};

enum class StmtType : uint8_t {
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kScope,  // {% generation %} and other blocks that just render their body
};

struct Stmt {
  Stmt(StmtType t, int l) : type(t), line(l) {}
  virtual ~Stmt() = default;
  StmtType type;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(std::string t, int l) : Stmt(StmtType::kText, l), text(std::move(t)) {}
  std::string text;
};

struct OutputStmt : Stmt {
  OutputStmt(ExprPtr e, int l) : Stmt(StmtType::kOutput, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtType::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif ...
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtType::kFor, l) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // {% for x in xs if cond %}
  Body body;
  Body else_body;
  bool recursive = false;
  int loop_slot = -1;  // slot of the name `loop`
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(StmtType::kSet, l) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(StmtType::kSetBlock, l) {}
  Target target;
  ExprPtr filter;  // FilterExpr chain whose innermost operand is null; may be null
  Body body;
};

struct MacroParam {
  std::string name;
  int slot = -1;
  ExprPtr default_value;  // may be null
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(StmtType::kMacro, l) {}
  std::string name;
  int slot = -1;
  std::vector<MacroParam> params;
  Body body;
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
  int caller_slot = -1, varargs_slot = -1, kwargs_slot = -1;
};

struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(int l) : Stmt(StmtType::kCallBlock, l) {}
  ExprPtr call;                       // a CallExpr
  std::unique_ptr<MacroStmt> caller;  // the block body as an anonymous macro named "caller"
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtType::kFilterBlock, l) {}
  ExprPtr filter;  // FilterExpr chain whose innermost operand is null
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(StmtType::kWith, l) {}
  std::vector<std::pair<Target, ExprPtr>> assigns;
  Body body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(int l) : Stmt(StmtType::kScope, l) {}
  Body body;
};

struct Template {
  Body body;
  std::vector<std::string> symbols;              // slot -> variable name
  std::unordered_map<std::string, int> slot_of;  // variable name -> slot
  int loop_slot = -1;                            // slot of `loop`, if referenced
};

}  // namespace kvforge::chat
