// grammar/json_schema.h — JSON Schema to GBNF: the grammar of exactly the JSON texts the schema
// accepts (for the keywords listed in docs/structured_outputs.md), laid out compactly (no
// whitespace between tokens except one optional space after ':' and ','), so a small model has
// few ways to go wrong. Keywords that cannot be compiled are refused, never ignored.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvforge/status.h"

namespace kvforge::grammar {

struct SchemaLimits {
  int32_t max_depth = 32;          // nesting of schemas (properties, items, anyOf, $ref chains)
  int32_t max_enum_values = 1024;  // values of one enum
  int32_t max_properties = 512;    // properties of one object schema
  int64_t max_grammar_bytes = 1 << 20;  // size of the GBNF text produced
  int32_t max_repeat = 1024;            // minItems/maxItems/minLength/maxLength bounds expanded
};

// `schema_json`: a JSON Schema document (an object, or `true` for any JSON value).
// Errors: InvalidArgument naming the keyword and its JSON pointer ("/properties/a/minimum: ...")
// for malformed schemas, unsupported keywords and exceeded limits (naming the limit).
Result<std::string> JsonSchemaToGbnf(std::string_view schema_json, const SchemaLimits& limits = {});

// The same as rules to embed in a larger grammar: the schema's rule is named `rule_name` (letters,
// digits and '-'), its helper rules `rule_name-s0`, `rule_name-s1`, ...; they refer to the shared
// primitive rules (ws, string, value, object, date, ...) of JsonPrimitivesGbnf(), which the
// larger grammar includes once.
Result<std::string> JsonSchemaToGbnfRules(std::string_view schema_json, std::string_view rule_name,
                                          const SchemaLimits& limits = {});
std::string JsonPrimitivesGbnf();

// The grammar of any JSON object (OpenAI's response_format json_object).
std::string JsonObjectGbnf();

}  // namespace kvforge::grammar
