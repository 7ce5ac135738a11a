// server/tool_grammar.cc — see tool_grammar.h.
#include "server/tool_grammar.h"

#include "base/strings.h"
#include "grammar/gbnf_text.h"
#include "grammar/json_schema.h"

namespace kvforge::server {

using grammar::GbnfLiteral;

namespace {

// A literal, or nothing for empty text (GBNF has no empty literal in a sequence to spare).
std::string Lit(const std::string& text) { return text.empty() ? "" : GbnfLiteral(text) + " "; }

}  // namespace

Result<std::string> ToolCallGbnf(chat::ToolCallFormat format, const ToolRequest& req) {
  const chat::ToolCallLayout l = chat::LayoutOf(format);
  std::string rules, alternatives;
  for (size_t i = 0; i < req.tools.size(); ++i) {
    const ToolFunction& t = req.tools[i];
    if (req.choice == ToolChoiceMode::kNamed && t.name != req.named) continue;
    const std::string rule = base::StrFormat("tool-%zu", i);
    // No 'parameters' is OpenAI's "empty parameter list": the arguments are {}.
    std::string args = "\"{}\"";
    if (!t.parameters_json.empty()) {
      auto compiled = grammar::JsonSchemaToGbnfRules(t.parameters_json, rule + "-args");
      if (!compiled.ok())
        return compiled.status().WithContext(base::StrFormat("tools[%zu].function.parameters", i));
      rules += *compiled;
      args = rule + "-args";
    }
    rules += rule + " ::= " + Lit(l.call_begin + t.name + l.name_end) + args + " " +
             Lit(l.call_end) + "\n";
    alternatives += (alternatives.empty() ? "" : " | ") + rule;
  }
  if (alternatives.empty()) return Status::InvalidArgument("tool_choice: no tool to call");
  std::string root = "root ::= " + Lit(l.calls_begin) + "call ";
  if (req.parallel) root += "(" + Lit(l.call_separator) + "call)* ";
  root += Lit(l.calls_end) + "\n";
  return root + "call ::= " + alternatives + "\n" + rules + grammar::JsonPrimitivesGbnf();
}

}  // namespace kvforge::server
