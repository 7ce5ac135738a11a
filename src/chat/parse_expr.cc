// Expression parsing (Jinja2 3.1 precedence) for the Parser declared in parser_impl.h.
#include <algorithm>

#include "chat/parser_impl.h"

namespace kvforge::chat::internal {

ExprPtr Parser::Finish(ExprPtr node) {
  int height = 0;
  auto see = [&](const ExprPtr& child) {
    if (child) height = std::max(height, Height(child.get()));
  };
  auto see_args = [&](const ArgList& args) {
    for (const auto& a : args.positional) see(a);
    for (const auto& kw : args.keyword) see(kw.second);
    see(args.star_args);
    see(args.star_kwargs);
  };
  switch (node->type) {
    case ExprType::kGetAttr:
      see(static_cast<GetAttrExpr*>(node.get())->object);
      break;
    case ExprType::kGetItem: {
      auto* n = static_cast<GetItemExpr*>(node.get());
      see(n->object);
      see(n->key);
      break;
    }
    case ExprType::kSlice: {
      auto* n = static_cast<SliceExpr*>(node.get());
      see(n->start);
      see(n->stop);
      see(n->step);
      break;
    }
    case ExprType::kCall: {
      auto* n = static_cast<CallExpr*>(node.get());
      see(n->callee);
      see_args(n->args);
      break;
    }
    case ExprType::kFilter: {
      auto* n = static_cast<FilterExpr*>(node.get());
      see(n->operand);
      see_args(n->args);
      break;
    }
    case ExprType::kTest: {
      auto* n = static_cast<TestExpr*>(node.get());
      see(n->operand);
      see_args(n->args);
      break;
    }
    case ExprType::kNeg:
    case ExprType::kPos:
    case ExprType::kNot:
      see(static_cast<UnaryExpr*>(node.get())->operand);
      break;
    case ExprType::kBinary:
    case ExprType::kAnd:
    case ExprType::kOr: {
      auto* n = static_cast<BinaryExpr*>(node.get());
      see(n->left);
      see(n->right);
      break;
    }
    case ExprType::kCompare: {
      auto* n = static_cast<CompareExpr*>(node.get());
      see(n->first);
      for (const auto& r : n->rest) see(r.second);
      break;
    }
    case ExprType::kCond: {
      auto* n = static_cast<CondExpr*>(node.get());
      see(n->test);
      see(n->then_expr);
      see(n->else_expr);
      break;
    }
    case ExprType::kList:
    case ExprType::kTuple:
      for (const auto& item : static_cast<SeqExpr*>(node.get())->items) see(item);
      break;
    case ExprType::kDict:
      for (const auto& [k, v] : static_cast<DictExpr*>(node.get())->items) {
        see(k);
        see(v);
      }
      break;
    default:
      break;
  }
  if (height + 1 > max_depth_) {
    FailLimit(
        "expression is nested deeper than max_nesting_depth (" + std::to_string(max_depth_) + ")",
        node->line);
  }
  node->height = height + 1;
  return node;
}

ExprPtr Parser::ParseTuple(bool simplified, bool with_condexpr, const Tags& extra_end,
                           bool explicit_parentheses) {
  const int line = Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ExpectOp(",");
    if (IsTupleEnd(extra_end)) break;
    if (simplified) {
      items.push_back(ParsePrimary());
    } else {
      items.push_back(ParseExpression(with_condexpr));
    }
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) {
      Fail("Expected an expression, got '" + DescribeToken(Cur()) + "'", Cur().line);
    }
  }
  auto tuple = std::make_unique<SeqExpr>(ExprType::kTuple, line);
  tuple->items = std::move(items);
  return Finish(std::move(tuple));
}

bool Parser::IsTupleEnd(const Tags& extra_end) const {
  if (Cur().type == Tok::kVarEnd || Cur().type == Tok::kBlockEnd || IsOp(")")) return true;
  return Cur().type == Tok::kName &&
         std::find(extra_end.begin(), extra_end.end(), Cur().value) != extra_end.end();
}

ExprPtr Parser::ParseExpression(bool with_condexpr) {
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

ExprPtr Parser::ParseCondExpr() {
  DepthGuard guard(this);
  int line = Cur().line;
  const size_t unknown_mark = unknown_.size();
  ExprPtr expr1 = ParseOr();
  // Everything in a conditional expression is "soft" in Jinja2, including the part before
  // `if` that we have already parsed: forget unknown names found there.
  if (IsName("if")) unknown_.resize(unknown_mark);
  while (SkipName("if")) {
    ++soft_;
    auto cond = std::make_unique<CondExpr>(line);
    cond->test = ParseOr();
    if (SkipName("else")) cond->else_expr = ParseCondExpr();
    --soft_;
    cond->then_expr = std::move(expr1);
    expr1 = Finish(std::move(cond));
    line = Cur().line;
  }
  return expr1;
}

ExprPtr Parser::ParseOr() {
  ExprPtr left = ParseAnd();
  while (IsName("or")) {
    const int line = Cur().line;
    Next();
    left = Finish(std::make_unique<BinaryExpr>(ExprType::kOr, BinOp::kAdd, std::move(left),
                                               ParseAnd(), line));
  }
  return left;
}

ExprPtr Parser::ParseAnd() {
  ExprPtr left = ParseNot();
  while (IsName("and")) {
    const int line = Cur().line;
    Next();
    left = Finish(std::make_unique<BinaryExpr>(ExprType::kAnd, BinOp::kAdd, std::move(left),
                                               ParseNot(), line));
  }
  return left;
}

ExprPtr Parser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(this);
    const int line = Cur().line;
    Next();
    return Finish(std::make_unique<UnaryExpr>(ExprType::kNot, ParseNot(), line));
  }
  return ParseCompare();
}

ExprPtr Parser::ParseCompare() {
  const int line = Cur().line;
  ExprPtr expr = ParseMath1();
  std::vector<std::pair<CmpOp, ExprPtr>> ops;
  while (true) {
    CmpOp op;
    if (Cur().type == Tok::kOp && Cur().value == "==") {
      op = CmpOp::kEq;
    } else if (IsOp("!=")) {
      op = CmpOp::kNe;
    } else if (IsOp("<")) {
      op = CmpOp::kLt;
    } else if (IsOp("<=")) {
      op = CmpOp::kLe;
    } else if (IsOp(">")) {
      op = CmpOp::kGt;
    } else if (IsOp(">=")) {
      op = CmpOp::kGe;
    } else if (IsName("in")) {
      op = CmpOp::kIn;
    } else if (IsName("not") && Look().type == Tok::kName && Look().value == "in") {
      Next();
      op = CmpOp::kNotIn;
    } else {
      break;
    }
    Next();
    ops.emplace_back(op, ParseMath1());
  }
  if (ops.empty()) return expr;
  auto cmp = std::make_unique<CompareExpr>(line);
  cmp->first = std::move(expr);
  cmp->rest = std::move(ops);
  return Finish(std::move(cmp));
}

ExprPtr Parser::Binary(BinOp op, ExprPtr left, ExprPtr right, int line) {
  return Finish(
      std::make_unique<BinaryExpr>(ExprType::kBinary, op, std::move(left), std::move(right), line));
}

ExprPtr Parser::ParseMath1() {
  ExprPtr left = ParseConcat();
  while (IsOp("+") || IsOp("-")) {
    const BinOp op = IsOp("+") ? BinOp::kAdd : BinOp::kSub;
    const int line = Cur().line;
    Next();
    left = Binary(op, std::move(left), ParseConcat(), line);
  }
  return left;
}

ExprPtr Parser::ParseConcat() {
  ExprPtr left = ParseMath2();
  while (IsOp("~")) {
    const int line = Cur().line;
    Next();
    left = Binary(BinOp::kConcat, std::move(left), ParseMath2(), line);
  }
  return left;
}

ExprPtr Parser::ParseMath2() {
  ExprPtr left = ParsePow();
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const std::string op = Cur().value;
    const int line = Cur().line;
    Next();
    const BinOp bop = op == "*"    ? BinOp::kMul
                      : op == "/"  ? BinOp::kDiv
                      : op == "//" ? BinOp::kFloorDiv
                                   : BinOp::kMod;
    left = Binary(bop, std::move(left), ParsePow(), line);
  }
  return left;
}

ExprPtr Parser::ParsePow() {
  ExprPtr left = ParseUnary(true);
  while (IsOp("**")) {
    const int line = Cur().line;
    Next();
    left = Binary(BinOp::kPow, std::move(left), ParseUnary(true), line);
  }
  return left;
}

ExprPtr Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(this);
  const int line = Cur().line;
  ExprPtr node;
  if (IsOp("-")) {
    Next();
    node = Finish(std::make_unique<UnaryExpr>(ExprType::kNeg, ParseUnary(false), line));
  } else if (IsOp("+")) {
    Next();
    node = Finish(std::make_unique<UnaryExpr>(ExprType::kPos, ParseUnary(false), line));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  if (with_filter) node = ParseFilterExpr(std::move(node));
  return node;
}

ExprPtr Parser::ParsePrimary() {
  DepthGuard guard(this);
  const Token& tok = Cur();
  const int line = tok.line;
  switch (tok.type) {
    case Tok::kName: {
      const std::string& v = tok.value;
      ExprPtr node;
      if (v == "true" || v == "True") {
        node = std::make_unique<ConstExpr>(Value::Bool(true), line);
      } else if (v == "false" || v == "False") {
        node = std::make_unique<ConstExpr>(Value::Bool(false), line);
      } else if (v == "none" || v == "None") {
        node = std::make_unique<ConstExpr>(Value::None(), line);
      } else {
        // Like Jinja2's undeclared-name scan, a use inside a nested macro counts for every
        // enclosing macro too.
        for (MacroStmt* macro : macros_) {
          if (v == "caller") macro->uses_caller = true;
          if (v == "varargs") macro->uses_varargs = true;
          if (v == "kwargs") macro->uses_kwargs = true;
        }
        node = std::make_unique<NameExpr>(Slot(v), Value::Str(v), line);
      }
      Next();
      return Finish(std::move(node));
    }
    case Tok::kString: {
      std::string s = tok.value;
      Next();
      while (Cur().type == Tok::kString) {
        s += Cur().value;
        Next();
      }
      return Finish(std::make_unique<ConstExpr>(Value::Str(std::move(s)), line));
    }
    case Tok::kInt: {
      auto node = std::make_unique<ConstExpr>(Value::Int(tok.int_value), line);
      Next();
      return Finish(std::move(node));
    }
    case Tok::kFloat: {
      auto node = std::make_unique<ConstExpr>(Value::Float(tok.float_value), line);
      Next();
      return Finish(std::move(node));
    }
    case Tok::kOp:
      if (tok.value == "(") {
        Next();
        ExprPtr inner = ParseTuple(false, true, {}, true);
        ExpectOp(")");
        return inner;
      }
      if (tok.value == "[") return ParseList();
      if (tok.value == "{") return ParseDict();
      break;
    default:
      break;
  }
  Fail("unexpected '" + DescribeToken(tok) + "'", line);
}

ExprPtr Parser::ParseList() {
  auto list = std::make_unique<SeqExpr>(ExprType::kList, Cur().line);
  ExpectOp("[");
  while (!IsOp("]")) {
    if (!list->items.empty()) ExpectOp(",");
    if (IsOp("]")) break;
    list->items.push_back(ParseExpression(true));
  }
  ExpectOp("]");
  return Finish(std::move(list));
}

ExprPtr Parser::ParseDict() {
  auto dict = std::make_unique<DictExpr>(Cur().line);
  ExpectOp("{");
  while (!IsOp("}")) {
    if (!dict->items.empty()) ExpectOp(",");
    if (IsOp("}")) break;
    ExprPtr key = ParseExpression(true);
    ExpectOp(":");
    dict->items.emplace_back(std::move(key), ParseExpression(true));
  }
  ExpectOp("}");
  return Finish(std::move(dict));
}

ExprPtr Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".") || IsOp("[")) {
      node = ParseSubscript(std::move(node));
    } else if (IsOp("(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      node = ParseFilter(std::move(node), false);
    } else if (IsName("is")) {
      node = ParseTest(std::move(node));
    } else if (IsOp("(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseSubscript(ExprPtr node) {
  const int line = Cur().line;
  if (SkipOp(".")) {
    if (Cur().type == Tok::kName) {
      Value attr = Value::Str(Cur().value);
      Next();
      return Finish(std::make_unique<GetAttrExpr>(std::move(node), std::move(attr), line));
    }
    if (Cur().type == Tok::kInt) {
      auto key = std::make_unique<ConstExpr>(Value::Int(Cur().int_value), line);
      Next();
      return Finish(std::make_unique<GetItemExpr>(std::move(node), std::move(key), line));
    }
    Unexpected("name or number");
  }
  ExpectOp("[");
  std::vector<ExprPtr> args;
  while (!IsOp("]")) {
    if (!args.empty()) {
      ExpectOp(",");
      if (IsOp("]")) break;
    }
    args.push_back(ParseSubscribed());
  }
  ExpectOp("]");
  if (args.empty()) Fail("expected a subscript", line);
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<SeqExpr>(ExprType::kTuple, line);
    tuple->items = std::move(args);
    key = Finish(std::move(tuple));
  }
  return Finish(std::make_unique<GetItemExpr>(std::move(node), std::move(key), line));
}

ExprPtr Parser::ParseSubscribed() {
  const int line = Cur().line;
  auto slice = std::make_unique<SliceExpr>(line);
  if (SkipOp(":")) {
    // start omitted
  } else {
    ExprPtr node = ParseExpression(true);
    if (!SkipOp(":")) return node;
    slice->start = std::move(node);
  }
  if (!IsOp(":") && !IsOp("]") && !IsOp(",")) slice->stop = ParseExpression(true);
  if (SkipOp(":")) {
    if (!IsOp("]") && !IsOp(",")) slice->step = ParseExpression(true);
  }
  return Finish(std::move(slice));
}

void Parser::ParseCallArgs(ArgList* args) {
  const int line = Cur().line;
  ExpectOp("(");
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) Fail("invalid syntax for function call expression", line);
  };
  while (!IsOp(")")) {
    if (require_comma) {
      ExpectOp(",");
      if (IsOp(")")) break;
    }
    if (SkipOp("*")) {
      ensure(!args->star_args && !args->star_kwargs);
      args->star_args = ParseExpression(true);
    } else if (SkipOp("**")) {
      ensure(!args->star_kwargs);
      args->star_kwargs = ParseExpression(true);
    } else if (Cur().type == Tok::kName && Look().type == Tok::kOp && Look().value == "=") {
      ensure(!args->star_kwargs);
      std::string key = Cur().value;
      Next();
      Next();
      args->keyword.emplace_back(std::move(key), ParseExpression(true));
    } else {
      ensure(!args->star_args && !args->star_kwargs && args->keyword.empty());
      args->positional.push_back(ParseExpression(true));
    }
    require_comma = true;
  }
  ExpectOp(")");
}

ExprPtr Parser::ParseCall(ExprPtr node) {
  auto call = std::make_unique<CallExpr>(std::move(node), Cur().line);
  ParseCallArgs(&call->args);
  return Finish(std::move(call));
}

ExprPtr Parser::ParseFilter(ExprPtr node, bool start_inline) {
  while (IsOp("|") || start_inline) {
    if (!start_inline) Next();
    start_inline = false;
    auto filter = std::make_unique<FilterExpr>(Cur().line);
    filter->name = ExpectName();
    while (SkipOp(".")) filter->name += "." + ExpectName();
    filter->fn = FindFilter(filter->name);
    if (filter->fn == nullptr && soft_ == 0) {
      unknown_.emplace_back("No filter named '" + filter->name + "'.", filter->line);
    }
    if (IsOp("(")) ParseCallArgs(&filter->args);
    filter->operand = std::move(node);
    node = Finish(std::move(filter));
  }
  return node;
}

ExprPtr Parser::ParseTest(ExprPtr node) {
  auto test = std::make_unique<TestExpr>(Cur().line);
  Next();  // is
  bool negated = SkipName("not");
  test->name = ExpectName();
  while (SkipOp(".")) test->name += "." + ExpectName();
  test->fn = FindTest(test->name);
  if (test->fn == nullptr && soft_ == 0) {
    unknown_.emplace_back("No test named '" + test->name + "'.", test->line);
  }
  const Token& tok = Cur();
  if (IsOp("(")) {
    ParseCallArgs(&test->args);
  } else if ((tok.type == Tok::kName || tok.type == Tok::kString || tok.type == Tok::kInt ||
              tok.type == Tok::kFloat || IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) Fail("You cannot chain multiple tests with is", tok.line);
    test->args.positional.push_back(ParsePostfix(ParsePrimary()));
  }
  const int line = test->line;
  test->operand = std::move(node);
  ExprPtr result = Finish(std::move(test));
  if (negated)
    result = Finish(std::make_unique<UnaryExpr>(ExprType::kNot, std::move(result), line));
  return result;
}

}  // namespace kvforge::chat::internal
