// pyops.h — Python semantics for Values: truthiness, str()/repr(), ==, ordering, len(),
// iteration and `in`, as Jinja2 evaluates them.
//
// Internal to the chat module: these functions throw TemplateException (errors.h) for Python-level
// errors (TypeError for unorderable operands, UndefinedError when ordering an undefined value,
// a limit error past kMaxValueDepth levels of nesting, e.g. a list that contains itself).
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.h"

namespace kvforge::chat {

// Nesting depth past which repr/==/ordering/JSON give up (guards self-referencing containers).
constexpr int kMaxValueDepth = 256;

bool Truthy(const Value& v);
// Python type name: "int", "str", "NoneType", "list", "dict", "Undefined", "Namespace", ...
std::string_view PyTypeName(const Value& v);
// Jinja2's object_type_repr: "dict object", "list object", "None", ... (static storage).
const char* ObjectTypeRepr(const Value& v);

// str(v) as Jinja2 prints it (undefined prints as "", None as "None", True as "True").
void AppendStr(const Value& v, std::string* out);
std::string ToStr(const Value& v);
void AppendRepr(const Value& v, std::string* out, int depth = 0);
std::string Repr(const Value& v);

bool Equals(const Value& a, const Value& b, int depth = 0);
// Python ordering for op in {"<", "<=", ">", ">="}.
bool CompareOrder(std::string_view op, const Value& a, const Value& b, int depth = 0);
// Strict weak "less" used by sort/min/max (same rules as "<").
inline bool Less(const Value& a, const Value& b) { return CompareOrder("<", a, b); }

int64_t Length(const Value& v);
// Snapshot of the items a `for` loop would visit (dict -> keys, str -> characters).
std::vector<Value> Iterate(const Value& v);
// Python `item in container`.
bool Contains(const Value& container, const Value& item);
// TypeError "unhashable type: 'list'" for values that cannot be dict keys.
void CheckHashable(const Value& v);

}  // namespace kvforge::chat
