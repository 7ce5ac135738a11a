// lexer.h — splits a Jinja2 template into tokens, applying whitespace control.
//
// Behaves like Jinja2's lexer configured as Hugging Face renders chat templates: trim_blocks
// (the first newline after a block or comment tag is dropped), lstrip_blocks (spaces and tabs from
// the start of a line up to a block or comment tag are dropped), `-` strips all whitespace on that
// side of a tag, `+` disables trim/lstrip for that side, `{% raw %}` copies text verbatim, newlines
// are normalised to "\n" and a single trailing newline of the template is removed
// (keep_trailing_newline=False). Comments produce no tokens.
// Errors throw TemplateException("TemplateSyntaxError", "... (line N)"); callers convert them.
// Thread-safety: Lex is a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvforge::chat {

enum class Tok : uint8_t {
  kText,        // template data (value = the text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier (value)
  kString,      // string literal (value = decoded contents)
  kInt,         // integer literal (int_value)
  kFloat,       // float literal (float_value)
  kOp,          // operator or punctuation (value, e.g. "//", "(", "|")
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws TemplateException on malformed input (unterminated tags, comments or strings,
// unbalanced brackets, unknown characters).
std::vector<Token> Lex(std::string_view source);

// Human-readable token description for error messages ("end of print statement", "'('").
std::string DescribeToken(const Token& token);

}  // namespace kvforge::chat
