// json.h — JSON <-> Value, with the semantics chat templates expect.
//
// ParseJson reads RFC 8259 JSON (plus Python's NaN/Infinity/-Infinity extensions, like json.loads)
// into Values: objects become insertion-ordered dicts (a repeated key keeps its first position and
// last value), integers that fit int64 become ints, other numbers floats. All escapes are decoded,
// including UTF-16 surrogate pairs; a lone surrogate decodes to U+FFFD. Input must be valid UTF-8.
// Errors name the line and column. The result is frozen (see value.h) unless options say otherwise.
//
// ToJson writes Python's json.dumps(x, ensure_ascii=False) by default — the `tojson` filter as
// Hugging Face overrides it: no HTML escaping, keys in insertion order, ", " / ": " separators,
// optional indent (newlines then the indent string per level, "," item separator), non-ASCII kept
// as is, floats as Python repr (NaN/Infinity for non-finite values).
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat/value.h"
#include "kvforge/status.h"

namespace kvforge::chat {

struct JsonParseOptions {
  int max_depth = 256;  // nesting of arrays/objects
  bool freeze = true;   // mark the result immutable (what ChatTemplate::Render wants)
};

Result<Value> ParseJson(std::string_view text, const JsonParseOptions& options = {});

struct JsonDumpOptions {
  std::optional<std::string> indent;  // per-level indent string; nullopt = single line
  // Python's defaults: ", " without indent, "," with indent.
  std::optional<std::string> item_separator;
  std::string key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};

// Fails (TypeError-style message) for undefined values, namespaces, macros and other objects that
// json.dumps cannot serialise, and for keys that are not str/int/float/bool/None.
Result<std::string> ToJson(const Value& value, const JsonDumpOptions& options = {});

// Internal (throws TemplateException): appends the JSON text of `value` to `out`.
void AppendJson(const Value& value, const JsonDumpOptions& options, std::string* out);

}  // namespace kvforge::chat
