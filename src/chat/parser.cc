#include "chat/parser.h"

#include <algorithm>

#include "chat/parser_impl.h"

namespace kvforge::chat {
namespace internal {

std::unique_ptr<Template> Parser::Run() {
  auto tmpl = std::make_unique<Template>();
  tmpl->body = Subparse({});
  // Like Jinja2, unknown filters/tests are reported after a successful parse (compile time).
  if (!unknown_.empty()) {
    Fail(unknown_.front().first, unknown_.front().second, "TemplateAssertionError");
  }
  tmpl->symbols = std::move(symbols_);
  tmpl->slot_of = slots_;
  auto it = slots_.find("loop");
  if (it != slots_.end()) tmpl->loop_slot = it->second;
  return tmpl;
}

void Parser::Next() {
  if (pos_ + 1 < tokens_.size()) ++pos_;
}

bool Parser::IsName(std::string_view name) const {
  return Cur().type == Tok::kName && Cur().value == name;
}

bool Parser::SkipOp(std::string_view op) {
  if (!IsOp(op)) return false;
  Next();
  return true;
}

bool Parser::SkipName(std::string_view name) {
  if (!IsName(name)) return false;
  Next();
  return true;
}

void Parser::Fail(const std::string& message, int line, const char* type) const {
  throw TemplateException(type ? type : "TemplateSyntaxError",
                          message + " (line " + std::to_string(line) + ")");
}

void Parser::FailLimit(const std::string& message, int line) const {
  ThrowLimit(message + " (line " + std::to_string(line) + ")");
}

void Parser::Unexpected(const std::string& expected) const {
  Fail("expected " + expected + ", got '" + DescribeToken(Cur()) + "'", Cur().line);
}

void Parser::ExpectOp(std::string_view op) {
  if (!SkipOp(op)) Unexpected("'" + std::string(op) + "'");
}

std::string Parser::ExpectName() {
  if (Cur().type != Tok::kName) Unexpected("name");
  std::string name = Cur().value;
  Next();
  return name;
}

void Parser::ExpectName(std::string_view name) {
  if (!SkipName(name)) Unexpected("'" + std::string(name) + "'");
}

void Parser::ExpectBlockEnd() {
  if (Cur().type != Tok::kBlockEnd) Unexpected("end of statement block");
  Next();
}

int Parser::Slot(const std::string& name) {
  auto [it, inserted] = slots_.emplace(name, static_cast<int>(symbols_.size()));
  if (inserted) symbols_.push_back(name);
  return it->second;
}

Body Parser::Subparse(const Tags& end_tags) {
  Body body;
  while (true) {
    const Token& tok = Cur();
    switch (tok.type) {
      case Tok::kText:
        body.push_back(std::make_unique<TextStmt>(tok.value, tok.line));
        Next();
        break;
      case Tok::kVarBegin: {
        const int line = tok.line;
        Next();
        ExprPtr expr = ParseTuple(false, true, {}, false);
        if (Cur().type != Tok::kVarEnd) Unexpected("end of print statement");
        Next();
        body.push_back(std::make_unique<OutputStmt>(std::move(expr), line));
        break;
      }
      case Tok::kBlockBegin: {
        Next();
        if (Cur().type == Tok::kName &&
            std::find(end_tags.begin(), end_tags.end(), Cur().value) != end_tags.end()) {
          return body;
        }
        body.push_back(ParseStatement());
        break;
      }
      case Tok::kEof:
        if (!end_tags.empty()) FailEof(end_tags);
        return body;
      default:
        Unexpected("template data or a tag");
    }
  }
}

std::string Parser::LookingFor(const Tags& tags) const {
  std::string s = "Jinja was looking for the following tags: ";
  for (size_t i = 0; i < tags.size(); ++i) {
    if (i > 0) s += i + 1 == tags.size() ? " or " : ", ";
    s += "'" + std::string(tags[i]) + "'";
  }
  s += ".";
  if (!stack_.empty())
    s += " The innermost block that needs to be closed is '" + stack_.back() + "'.";
  return s;
}

void Parser::FailEof(const Tags& tags) const {
  Fail("Unexpected end of template. " + LookingFor(tags), Cur().line);
}

StmtPtr Parser::ParseStatement() {
  DepthGuard guard(this);
  if (Cur().type != Tok::kName) Unexpected("tag name");
  const std::string tag = Cur().value;
  const int line = Cur().line;
  if (tag == "for") return ParseFor();
  if (tag == "if") return ParseIf();
  if (tag == "set") return ParseSet();
  if (tag == "macro") return ParseMacro();
  if (tag == "call") return ParseCallBlock();
  if (tag == "filter") return ParseFilterBlock();
  if (tag == "with") return ParseWith();
  if (tag == "generation") return ParseScope("endgeneration");
  if (tag == "print") {  // {% print a, b %} prints each expression
    Next();
    auto scope = std::make_unique<ScopeStmt>(line);
    while (Cur().type != Tok::kBlockEnd) {
      if (!scope->body.empty()) ExpectOp(",");
      scope->body.push_back(std::make_unique<OutputStmt>(ParseExpression(true), line));
    }
    ExpectBlockEnd();
    return scope;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) Fail("'" + tag + "' outside loop", line);
    Next();
    ExpectBlockEnd();
    return std::make_unique<Stmt>(tag == "break" ? StmtType::kBreak : StmtType::kContinue, line);
  }
  if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "block" ||
      tag == "autoescape") {
    Fail("tag '" + tag + "' is not supported in chat templates", line);
  }
  std::string message = "Encountered unknown tag '" + tag + "'.";
  if (!open_tags_.empty()) message += " " + LookingFor(open_tags_.back());
  Fail(message, line);
}

Body Parser::Block(const std::string& name, const Tags& tags) {
  stack_.push_back(name);
  open_tags_.push_back(tags);
  Body body = Subparse(tags);
  open_tags_.pop_back();
  stack_.pop_back();
  return body;
}

StmtPtr Parser::ParseScope(const char* end_tag) {
  auto stmt = std::make_unique<ScopeStmt>(Cur().line);
  const std::string name = Cur().value;
  Next();
  ExpectBlockEnd();
  stmt->body = Block(name, {end_tag});
  Next();
  ExpectBlockEnd();
  return stmt;
}

StmtPtr Parser::ParseFor() {
  auto stmt = std::make_unique<ForStmt>(Cur().line);
  Next();
  const int saved_soft = soft_;
  soft_ = 0;
  stmt->target = ParseAssignTarget(false, {"in"});
  soft_ = saved_soft;
  ExpectName("in");
  stmt->iter = ParseTuple(false, false, {"recursive"}, false);
  soft_ = 0;
  if (SkipName("if")) stmt->filter = ParseExpression(true);
  stmt->recursive = SkipName("recursive");
  ExpectBlockEnd();
  stmt->loop_slot = Slot("loop");
  ++loop_depth_;
  stmt->body = Block("for", {"endfor", "else"});
  --loop_depth_;
  if (SkipName("else")) {
    ExpectBlockEnd();
    stmt->else_body = Block("for", {"endfor"});
  }
  Next();  // endfor
  ExpectBlockEnd();
  soft_ = saved_soft;
  return stmt;
}

StmtPtr Parser::ParseIf() {
  auto stmt = std::make_unique<IfStmt>(Cur().line);
  Next();
  ++soft_;
  ExprPtr test = ParseTuple(false, false, {}, false);
  while (true) {
    ExpectBlockEnd();
    Body body = Block("if", {"elif", "else", "endif"});
    stmt->branches.emplace_back(std::move(test), std::move(body));
    if (SkipName("elif")) {
      test = ParseTuple(false, false, {}, false);
      continue;
    }
    if (SkipName("else")) {
      ExpectBlockEnd();
      stmt->else_body = Block("if", {"endif"});
    }
    Next();  // endif
    ExpectBlockEnd();
    break;
  }
  --soft_;
  return stmt;
}

StmtPtr Parser::ParseSet() {
  const int line = Cur().line;
  Next();
  Target target = ParseAssignTarget(true, {});
  if (SkipOp("=")) {
    auto stmt = std::make_unique<SetStmt>(line);
    stmt->target = std::move(target);
    stmt->value = ParseTuple(false, true, {}, false);
    ExpectBlockEnd();
    return stmt;
  }
  if (target.kind != Target::Kind::kName) Unexpected("'='");
  auto stmt = std::make_unique<SetBlockStmt>(line);
  stmt->target = std::move(target);
  const int saved_soft = soft_;
  soft_ = 0;
  if (IsOp("|")) stmt->filter = ParseFilter(nullptr, false);
  ExpectBlockEnd();
  stmt->body = Block("set", {"endset"});
  Next();
  ExpectBlockEnd();
  soft_ = saved_soft;
  return stmt;
}

void Parser::ParseSignature(MacroStmt* macro) {
  ExpectOp("(");
  bool seen_default = false;
  while (!IsOp(")")) {
    if (!macro->params.empty()) ExpectOp(",");
    if (IsOp(")")) break;
    MacroParam param;
    param.name = ExpectName();
    param.slot = Slot(param.name);
    if (SkipOp("=")) {
      param.default_value = ParseExpression(true);
      seen_default = true;
    } else if (seen_default) {
      Fail("non-default argument follows default argument", Cur().line);
    }
    macro->params.push_back(std::move(param));
  }
  ExpectOp(")");
}

void Parser::ParseMacroBody(MacroStmt* macro, const char* block, const char* end_tag) {
  const int saved_loop = loop_depth_;
  const int saved_soft = soft_;
  loop_depth_ = 0;
  soft_ = 0;
  macros_.push_back(macro);
  macro->body = Block(block, {end_tag});
  macros_.pop_back();
  loop_depth_ = saved_loop;
  soft_ = saved_soft;
  macro->caller_slot = Slot("caller");
  macro->varargs_slot = Slot("varargs");
  macro->kwargs_slot = Slot("kwargs");
  Next();
  ExpectBlockEnd();
}

StmtPtr Parser::ParseMacro() {
  auto stmt = std::make_unique<MacroStmt>(Cur().line);
  Next();
  stmt->name = ExpectName();
  stmt->slot = Slot(stmt->name);
  ParseSignature(stmt.get());
  ExpectBlockEnd();
  ParseMacroBody(stmt.get(), "macro", "endmacro");
  return stmt;
}

StmtPtr Parser::ParseCallBlock() {
  auto stmt = std::make_unique<CallBlockStmt>(Cur().line);
  Next();
  stmt->caller = std::make_unique<MacroStmt>(stmt->line);
  stmt->caller->name = "caller";
  if (IsOp("(")) ParseSignature(stmt->caller.get());
  stmt->call = ParseExpression(true);
  if (stmt->call->type != ExprType::kCall) Fail("expected call", stmt->line);
  ExpectBlockEnd();
  ParseMacroBody(stmt->caller.get(), "call", "endcall");
  return stmt;
}

StmtPtr Parser::ParseFilterBlock() {
  auto stmt = std::make_unique<FilterBlockStmt>(Cur().line);
  Next();
  const int saved_soft = soft_;
  soft_ = 0;
  stmt->filter = ParseFilter(nullptr, true);
  ExpectBlockEnd();
  stmt->body = Block("filter", {"endfilter"});
  Next();
  ExpectBlockEnd();
  soft_ = saved_soft;
  return stmt;
}

StmtPtr Parser::ParseWith() {
  auto stmt = std::make_unique<WithStmt>(Cur().line);
  Next();
  const int saved_soft = soft_;
  soft_ = 0;
  while (Cur().type != Tok::kBlockEnd) {
    if (!stmt->assigns.empty()) ExpectOp(",");
    Target target = ParseAssignTarget(false, {});
    ExpectOp("=");
    stmt->assigns.emplace_back(std::move(target), ParseExpression(true));
  }
  ExpectBlockEnd();
  stmt->body = Block("with", {"endwith"});
  Next();
  ExpectBlockEnd();
  soft_ = saved_soft;
  return stmt;
}

Target Parser::ParseAssignTarget(bool with_namespace, const Tags& extra_end) {
  if (with_namespace && Cur().type == Tok::kName && Look().type == Tok::kOp &&
      Look().value == ".") {
    Target t;
    t.kind = Target::Kind::kAttr;
    t.name = ExpectName();
    t.slot = Slot(t.name);
    Next();  // .
    t.attr = ExpectName();
    return t;
  }
  std::vector<Target> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ExpectOp(",");
    if (IsTargetEnd(extra_end)) break;
    items.push_back(ParseTargetPrimary());
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (items.empty()) Unexpected("assignment target");
  if (!is_tuple) return std::move(items[0]);
  Target t;
  t.kind = Target::Kind::kTuple;
  t.items = std::move(items);
  return t;
}

bool Parser::IsTargetEnd(const Tags& extra_end) const {
  if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd || IsOp(")") || IsOp("=")) {
    return true;
  }
  return Cur().type == Tok::kName &&
         std::find(extra_end.begin(), extra_end.end(), Cur().value) != extra_end.end();
}

Target Parser::ParseTargetPrimary() {
  DepthGuard guard(this);
  if (SkipOp("(")) {
    Target t = ParseAssignTarget(false, {});
    ExpectOp(")");
    return t;
  }
  if (Cur().type != Tok::kName) Unexpected("name");
  const std::string& v = Cur().value;
  if (v == "true" || v == "false" || v == "True" || v == "False" || v == "none" || v == "None") {
    Fail("can't assign to 'const'", Cur().line);
  }
  Target t;
  t.kind = Target::Kind::kName;
  t.name = ExpectName();
  t.slot = Slot(t.name);
  return t;
}

}  // namespace internal

std::unique_ptr<Template> ParseTemplate(std::string_view source, const ParseOptions& options) {
  return internal::Parser(Lex(source), options).Run();
}

}  // namespace kvforge::chat
