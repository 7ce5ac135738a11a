// grammar/regex_gbnf.h — a regular expression to GBNF: the grammar of the strings the whole
// pattern matches (full match, as vLLM's guided_regex). Supported: literals, escapes (\n \t \r
// \f \v \0 \xHH \uHHHH \\ \. ...), classes [a-z] [^...] with \d \w \s inside, the shorthands \d
// \D \w \W \s \S, '.', groups ( ) and (?: ), named groups (?<n> ), alternation |, quantifiers
// * + ? {m} {m,} {m,n} and their lazy/possessive forms (same language), ^ at the start and $ at
// the end. Refused with the position: backreferences, lookaround, other anchors (\b, mid-pattern
// ^/$), inline flags.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvforge/status.h"

namespace kvforge::grammar {

struct RegexLimits {
  int64_t max_pattern_bytes = 4096;
  int32_t max_repeat = 1024;  // largest m or n of {m,n}
  int32_t max_nesting = 64;   // depth of groups
};

// Errors: InvalidArgument "regex at offset N: ..." for bad or unsupported syntax, and naming the
// limit when one is exceeded.
Result<std::string> RegexToGbnf(std::string_view pattern, const RegexLimits& limits = {});

// The same as rules to embed in a larger grammar: the pattern's rule is named `rule_name`, its
// helper rules `rule_name-1`, `rule_name-2`, ... With `inside_json_string`, the strings are the
// pattern's matches written as the inside of a JSON string: a matched '"', '\' or control
// character appears as its JSON escape (\", \\, \n, \u0001, ...), so the JSON text decodes
// to a full match of the pattern.
Result<std::string> RegexToGbnfRules(std::string_view pattern, std::string_view rule_name,
                                     bool inside_json_string, const RegexLimits& limits = {});

}  // namespace kvforge::grammar
