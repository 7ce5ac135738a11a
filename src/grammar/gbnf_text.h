// grammar/gbnf_text.h — small helpers for writing GBNF text (llama.cpp's grammar syntax): quoted
// literals and character-class members with every special character escaped. The JSON Schema,
// regex and choice compilers build grammars as text through these, so the one parser
// (gbnf_parser.cc) is the only reader of grammars.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvforge::grammar {

// `text` (UTF-8) as a GBNF string literal, quotes included: "a\"b\n".
std::string GbnfLiteral(std::string_view text);
// One code point as it may stand inside [...] (escapes ], [, ^, -, \ and control characters).
std::string GbnfClassChar(uint32_t code_point);
// A rule name made of [a-zA-Z0-9-] from any text (other bytes become '-'); never empty.
std::string GbnfRuleName(std::string_view text);

}  // namespace kvforge::grammar
