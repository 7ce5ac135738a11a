// parser_impl.h — internal: the recursive-descent Parser class shared by parser.cc (statements)
// and parse_expr.cc (expressions). Not part of the module's API; see parser.h.
// Invariants: every expression node is built through Finish(), so Expr::height is exact and never
// exceeds max_nesting_depth; DepthGuard bounds the parser's own recursion the same way; unknown
// filter/test names outside "soft" (if/inline-if) code are collected and reported after parsing.
// Thread-safety: a Parser is used by one thread for one parse.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/errors.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace kvforge::chat::internal {

using Tags = std::vector<std::string_view>;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const ParseOptions& options)
      : tokens_(std::move(tokens)), max_depth_(options.max_nesting_depth) {}

  std::unique_ptr<Template> Run();

 private:
  // ---- token helpers ----
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  void Next();
  bool IsOp(std::string_view op) const { return Cur().type == Tok::kOp && Cur().value == op; }
  bool IsName(std::string_view name) const;
  bool SkipOp(std::string_view op);
  bool SkipName(std::string_view name);
  [[noreturn]] void Fail(const std::string& message, int line, const char* type = nullptr) const;
  [[noreturn]] void FailLimit(const std::string& message, int line) const;
  [[noreturn]] void Unexpected(const std::string& expected) const;
  void ExpectOp(std::string_view op);
  std::string ExpectName();
  void ExpectName(std::string_view name);
  void ExpectBlockEnd();

  // Guards recursion in the parser itself.
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : parser(p) {
      if (++parser->depth_ > parser->max_depth_) {
        parser->FailLimit("template is nested deeper than max_nesting_depth (" +
                              std::to_string(parser->max_depth_) + ")",
                          parser->Cur().line);
      }
    }
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };

  int Slot(const std::string& name);

  // Every node passes through here so its height is known; deep expression trees are rejected
  // before evaluation could recurse too far.
  ExprPtr Finish(ExprPtr node);
  static int Height(const Expr* e) { return e->height; }

  // ---- statements ----
  Body Subparse(const Tags& end_tags);
  std::string LookingFor(const Tags& tags) const;
  [[noreturn]] void FailEof(const Tags& tags) const;
  StmtPtr ParseStatement();

  // Parses a body ending at one of `tags`, tracking the block for error messages.
  Body Block(const std::string& name, const Tags& tags);
  StmtPtr ParseScope(const char* end_tag);
  StmtPtr ParseFor();
  StmtPtr ParseIf();
  StmtPtr ParseSet();
  void ParseSignature(MacroStmt* macro);
  void ParseMacroBody(MacroStmt* macro, const char* block, const char* end_tag);
  StmtPtr ParseMacro();
  StmtPtr ParseCallBlock();
  StmtPtr ParseFilterBlock();
  StmtPtr ParseWith();

  // name | name.attr (with_namespace) | tuple of names, possibly parenthesised.
  Target ParseAssignTarget(bool with_namespace, const Tags& extra_end);
  bool IsTargetEnd(const Tags& extra_end) const;
  Target ParseTargetPrimary();

  // ---- expressions ----
  bool IsTupleEnd(const Tags& extra_end) const;
  ExprPtr ParseTuple(bool simplified, bool with_condexpr, const Tags& extra_end,
                     bool explicit_parentheses);
  ExprPtr ParseExpression(bool with_condexpr);
  ExprPtr ParseCondExpr();
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr Binary(BinOp op, ExprPtr left, ExprPtr right, int line);
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParseList();
  ExprPtr ParseDict();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseFilterExpr(ExprPtr node);
  ExprPtr ParseSubscript(ExprPtr node);
  ExprPtr ParseSubscribed();
  void ParseCallArgs(ArgList* args);
  ExprPtr ParseCall(ExprPtr node);
  ExprPtr ParseFilter(ExprPtr node, bool start_inline);
  ExprPtr ParseTest(ExprPtr node);
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  std::unordered_map<std::string, int> slots_;
  std::vector<std::string> symbols_;
  int depth_ = 0;
  int max_depth_;
  int loop_depth_ = 0;
  int soft_ = 0;
  std::vector<MacroStmt*> macros_;
  std::vector<std::pair<std::string, int>> unknown_;  // unknown filters/tests outside soft code
  std::vector<std::string> stack_;
  std::vector<Tags> open_tags_;
};

}  // namespace kvforge::chat::internal
