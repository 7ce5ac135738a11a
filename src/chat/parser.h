// parser.h — turns template source into the AST (ast.h), following Jinja2's grammar.
//
// Supported statements: if/elif/else, for (with else, inline `if` filter, `recursive`), set (with
// tuple unpacking, namespace attributes, block form with filters), macro, call, filter, with,
// break/continue, raw (lexer), print, and Hugging Face's {% generation %} (renders its body).
// Operator precedence, tuple rules, test/filter syntax and the "unknown filter inside an if is a
// render-time error" rule match Jinja2 3.1. extends/include/import/block are rejected: chat
// templates are single files and the sandbox has no loader.
// Errors throw TemplateException("TemplateSyntaxError" or "TemplateAssertionError", "... (line
// N)"). Thread-safety: ParseTemplate is a pure function.
#pragma once

#include <memory>
#include <string_view>

#include "chat/ast.h"

namespace kvforge::chat {

struct ParseOptions {
  int max_nesting_depth = 100;  // combined nesting of blocks and expressions
};

std::unique_ptr<Template> ParseTemplate(std::string_view source, const ParseOptions& options);

// Filter and test lookup used by the parser (defined in filters.cc / jinja_tests.cc).
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);

}  // namespace kvforge::chat
