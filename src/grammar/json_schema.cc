// json_schema.cc — JSON Schema to GBNF. Each schema becomes a GBNF expression; objects, arrays
// and $ref targets get rules of their own (so recursion through $ref works). The grammar may be
// stricter than the schema (bounded digit runs, days 01-28, declared properties only, full
// tuples), never looser: everything it produces validates.
#include "grammar/json_schema.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "base/strings.h"
#include "grammar/gbnf_text.h"
#include "grammar/regex_gbnf.h"

namespace kvforge::grammar {
namespace {

using json = nlohmann::ordered_json;
using base::StrFormat;

constexpr int kMaxDigits = 16;  // integer digit runs (and the range cap of unbounded integers)

// Primitive rules, defined once in every grammar that uses them.
const char* const kPrimitives = R"(ws ::= " "?
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" (string ":" ws value ("," ws string ":" ws value)*)? "}"
array ::= "[" (value ("," ws value)*)? "]"
date ::= [1-9] [0-9]{3} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])
time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,9})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
uuid ::= [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}
)";

const std::set<std::string> kAnnotations = {
    "title",      "description", "$schema",   "$id",   "$comment",    "examples", "default",
    "deprecated", "readOnly",    "writeOnly", "$defs", "definitions", "strict",   "$anchor"};
const std::set<std::string> kHandled = {"type",
                                        "properties",
                                        "required",
                                        "additionalProperties",
                                        "items",
                                        "prefixItems",
                                        "minItems",
                                        "maxItems",
                                        "minLength",
                                        "maxLength",
                                        "pattern",
                                        "format",
                                        "minimum",
                                        "maximum",
                                        "exclusiveMinimum",
                                        "exclusiveMaximum",
                                        "enum",
                                        "const",
                                        "anyOf",
                                        "oneOf",
                                        "allOf",
                                        "$ref",
                                        "nullable",
                                        "uniqueItems"};

std::string Escaped(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

int64_t Pow10(size_t n) {
  int64_t v = 1;
  for (size_t i = 0; i < n; ++i) v *= 10;
  return v;
}

// Digit strings from lo to hi (same length, no sign) as a GBNF expression.
std::string SameLengthRange(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return GbnfLiteral(lo);
  const size_t rest = lo.size() - 1;
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  auto digits = [](char a, char b) {
    return a == b ? GbnfLiteral(std::string(1, a)) : "[" + std::string(1, a) + "-" + b + "]";
  };
  auto any = [&](size_t n) { return n == 0 ? std::string() : " [0-9]{" + std::to_string(n) + "}"; };
  if (lo[0] == hi[0]) return GbnfLiteral(lo.substr(0, 1)) + " " + SameLengthRange(lo_rest, hi_rest);
  const bool lo_full = lo_rest == std::string(rest, '0');
  const bool hi_full = hi_rest == std::string(rest, '9');
  std::vector<std::string> alts;
  char first_mid = lo[0], last_mid = hi[0];
  if (!lo_full) {
    alts.push_back(GbnfLiteral(lo.substr(0, 1)) + " (" +
                   SameLengthRange(lo_rest, std::string(rest, '9')) + ")");
    ++first_mid;
  }
  if (!hi_full) --last_mid;
  if (first_mid <= last_mid) alts.push_back(digits(first_mid, last_mid) + any(rest));
  if (!hi_full)
    alts.push_back(GbnfLiteral(hi.substr(0, 1)) + " (" +
                   SameLengthRange(std::string(rest, '0'), hi_rest) + ")");
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return alts.size() == 1 ? out : "(" + out + ")";
}

// Non-negative integers in [lo, hi] written without leading zeros.
std::string NonNegativeRange(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  const std::string lo_s = std::to_string(lo), hi_s = std::to_string(hi);
  for (size_t len = lo_s.size(); len <= hi_s.size(); ++len) {
    const int64_t len_lo = len == 1 ? 0 : Pow10(len - 1);
    const int64_t len_hi = Pow10(len) - 1;
    const int64_t a = std::max(lo, len_lo), b = std::min(hi, len_hi);
    if (a > b) continue;
    alts.push_back(SameLengthRange(std::to_string(a), std::to_string(b)));
  }
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return "(" + out + ")";
}

class SchemaCompiler {
 public:
  // Generated rules are named `prefix` + "s" + N, so grammars of several schemas can share one
  // GBNF text.
  SchemaCompiler(json root, const SchemaLimits& limits, std::string prefix)
      : root_(std::move(root)), limits_(limits), prefix_(std::move(prefix)) {}

  // The schema's rule named `rule_name`, its helper rules, and the primitives when asked.
  Result<std::string> Compile(const std::string& rule_name, bool with_primitives) {
    KVF_ASSIGN_OR_RETURN(std::string expr, Visit(root_, "", 0));
    std::string out = rule_name + " ::= " + expr + "\n" + (with_primitives ? kPrimitives : "");
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    if (static_cast<int64_t>(out.size()) > limits_.max_grammar_bytes)
      return Status::InvalidArgument(
          StrFormat("the schema's grammar is %zu bytes, above max_grammar_bytes (%lld)", out.size(),
                    static_cast<long long>(limits_.max_grammar_bytes)));
    return out;
  }

 private:
  static Status Fail(const std::string& ptr, const std::string& what) {
    return Status::InvalidArgument((ptr.empty() ? std::string("/") : ptr) + ": " + what);
  }
  std::string NewRule(const std::string& body) {
    const std::string name = prefix_ + "s" + std::to_string(next_rule_++);
    rules_[name] = body;
    return name;
  }

  Result<std::string> Visit(const json& s, const std::string& ptr, int depth) {
    if (depth > limits_.max_depth)
      return Fail(ptr, StrFormat("schema nests deeper than max_depth (%d)", limits_.max_depth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Fail(ptr, "the schema false matches nothing");
      return std::string("value");
    }
    if (!s.is_object()) return Fail(ptr, "a schema must be an object or a boolean");
    for (const auto& item : s.items()) {
      if (kAnnotations.count(item.key()) || kHandled.count(item.key())) continue;
      return Fail(ptr + "/" + Escaped(item.key()), "keyword '" + item.key() + "' is not supported");
    }
    KVF_ASSIGN_OR_RETURN(std::string expr, VisitConstraints(s, ptr, depth));
    if (s.contains("nullable") && s["nullable"] == true) return "(" + expr + " | null)";
    return expr;
  }

  Result<std::string> VisitConstraints(const json& s, const std::string& ptr, int depth) {
    if (s.contains("$ref")) return Ref(s, ptr, depth);
    if (s.contains("const")) return GbnfLiteral(s["const"].dump());
    if (s.contains("enum")) return Enum(s["enum"], ptr + "/enum");
    for (const char* key : {"anyOf", "oneOf"}) {
      // oneOf is compiled as anyOf: exclusivity is not enforced (a text matching two branches
      // of a oneOf would not validate; write disjoint branches).
      if (s.contains(key)) return AnyOf(s[key], ptr + "/" + key, depth);
    }
    if (s.contains("allOf")) return AllOf(s, ptr, depth);
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) return Typed(t.get<std::string>(), s, ptr, depth);
      if (!t.is_array() || t.empty()) return Fail(ptr + "/type", "must be a type name or a list");
      std::string out = "(";
      for (size_t i = 0; i < t.size(); ++i) {
        if (!t[i].is_string()) return Fail(ptr + "/type", "must list type names");
        KVF_ASSIGN_OR_RETURN(std::string e, Typed(t[i].get<std::string>(), s, ptr, depth));
        out += (i ? " | " : "") + e;
      }
      return out + ")";
    }
    // No type: inferred from the keywords that need one.
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) return Typed("object", s, ptr, depth);
    for (const char* k : {"items", "prefixItems", "minItems", "maxItems"})
      if (s.contains(k)) return Typed("array", s, ptr, depth);
    for (const char* k : {"minLength", "maxLength", "pattern", "format"})
      if (s.contains(k)) return Typed("string", s, ptr, depth);
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return Typed("number", s, ptr, depth);
    return std::string("value");
  }

  Result<std::string> Ref(const json& s, const std::string& ptr, int depth) {
    const json& r = s["$ref"];
    if (!r.is_string()) return Fail(ptr + "/$ref", "must be a string");
    const std::string ref = r.get<std::string>();
    if (ref.empty() || ref[0] != '#')
      return Fail(ptr + "/$ref", "only local references (#/...) are supported, not '" + ref + "'");
    if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) return it->second;
    json::json_pointer jp;
    try {
      jp = json::json_pointer(ref.substr(1));
    } catch (const std::exception& e) {
      return Fail(ptr + "/$ref", std::string("bad JSON pointer: ") + e.what());
    }
    if (!root_.contains(jp)) return Fail(ptr + "/$ref", "'" + ref + "' points at nothing");
    const std::string name = prefix_ + "s" + std::to_string(next_rule_++);
    ref_rules_[ref] = name;  // before visiting: a recursive reference finds the rule
    KVF_ASSIGN_OR_RETURN(std::string body, Visit(root_.at(jp), ref.substr(1), depth + 1));
    rules_[name] = body;
    return name;
  }

  Result<std::string> Enum(const json& values, const std::string& ptr) {
    if (!values.is_array() || values.empty()) return Fail(ptr, "must be a non-empty array");
    if (static_cast<int64_t>(values.size()) > limits_.max_enum_values)
      return Fail(ptr, StrFormat("%zu values, above max_enum_values (%d)", values.size(),
                                 limits_.max_enum_values));
    std::string out = "(";
    for (size_t i = 0; i < values.size(); ++i)
      out += (i ? " | " : "") + GbnfLiteral(values[i].dump());
    return out + ")";
  }

  Result<std::string> AnyOf(const json& branches, const std::string& ptr, int depth) {
    if (!branches.is_array() || branches.empty()) return Fail(ptr, "must be a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < branches.size(); ++i) {
      KVF_ASSIGN_OR_RETURN(std::string e,
                           Visit(branches[i], ptr + "/" + std::to_string(i), depth + 1));
      out += (i ? " | " : "") + e;
    }
    return out + ")";
  }

  // allOf of object schemas: their properties and required lists merged into one object.
  Result<std::string> AllOf(const json& s, const std::string& ptr, int depth) {
    const json& parts = s["allOf"];
    if (!parts.is_array() || parts.empty())
      return Fail(ptr + "/allOf", "must be a non-empty array");
    if (parts.size() == 1 && s.size() == 1) return Visit(parts[0], ptr + "/allOf/0", depth + 1);
    json merged = s;
    merged.erase("allOf");
    for (size_t i = 0; i < parts.size(); ++i) {
      const json& p = parts[i];
      const std::string where = ptr + "/allOf/" + std::to_string(i);
      if (!p.is_object()) return Fail(where, "allOf can merge only object schemas");
      for (const auto& item : p.items()) {
        const std::string& k = item.key();
        if (kAnnotations.count(k)) continue;
        if (k == "type" && item.value() == "object") {
          merged["type"] = "object";
        } else if (k == "properties" && item.value().is_object()) {
          for (const auto& prop : item.value().items()) {
            if (merged["properties"].contains(prop.key()))
              return Fail(where + "/properties/" + Escaped(prop.key()),
                          "allOf branches both define this property");
            merged["properties"][prop.key()] = prop.value();
          }
        } else if (k == "required" && item.value().is_array()) {
          for (const json& r : item.value()) merged["required"].push_back(r);
        } else if (k == "additionalProperties" && item.value() == false) {
          merged["additionalProperties"] = false;
        } else {
          return Fail(where + "/" + Escaped(k),
                      "allOf can merge only properties, required, "
                      "type object and additionalProperties false");
        }
      }
    }
    if (merged.contains("type") && merged["type"] != "object")
      return Fail(ptr + "/allOf", "allOf can merge only object schemas");
    return Visit(merged, ptr, depth + 1);
  }

  Result<std::string> Typed(const std::string& type, const json& s, const std::string& ptr,
                            int depth) {
    if (type == "string") return String(s, ptr);
    if (type == "integer") return Integer(s, ptr);
    if (type == "number") return Number(s, ptr);
    if (type == "boolean") return std::string("boolean");
    if (type == "null") return std::string("null");
    if (type == "object") return Object(s, ptr, depth);
    if (type == "array") return Array(s, ptr, depth);
    return Fail(ptr + "/type", "unknown type '" + type + "'");
  }

  Result<int64_t> Count(const json& s, const char* key, const std::string& ptr, int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return Fail(ptr + "/" + key, "must be a non-negative integer");
    if (v.get<int64_t>() > limits_.max_repeat)
      return Fail(ptr + "/" + key, StrFormat("above max_repeat (%d)", limits_.max_repeat));
    return v.get<int64_t>();
  }

  Result<std::string> String(const json& s, const std::string& ptr) {
    KVF_ASSIGN_OR_RETURN(int64_t min_len, Count(s, "minLength", ptr, 0));
    KVF_ASSIGN_OR_RETURN(int64_t max_len, Count(s, "maxLength", ptr, -1));
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (max_len >= 0 && max_len < min_len) return Fail(ptr + "/maxLength", "below minLength");
    if (s.contains("format")) {
      if (lengths || s.contains("pattern"))
        return Fail(ptr + "/format",
                    "format with minLength, maxLength or pattern is not supported");
      const json& f = s["format"];
      const std::string name = f.is_string() ? f.get<std::string>() : "";
      if (name == "date" || name == "time" || name == "uuid")
        return "\"\\\"\" " + name + " \"\\\"\"";
      if (name == "date-time") return std::string("\"\\\"\" date \"T\" time \"\\\"\"");
      return Fail(ptr + "/format", "format '" + name +
                                       "' is not supported (date, time, "
                                       "date-time, uuid)");
    }
    if (s.contains("pattern")) {
      if (lengths)
        return Fail(ptr + "/pattern", "pattern with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) return Fail(ptr + "/pattern", "must be a string");
      const std::string name = prefix_ + "s" + std::to_string(next_rule_++);
      auto rules = RegexToGbnfRules(s["pattern"].get<std::string>(), name, true);
      if (!rules.ok()) return Fail(ptr + "/pattern", rules.status().message());
      pattern_rules_ += *rules;
      rules_[name + "-p"] = "\"\\\"\" " + name + " \"\\\"\"";
      return name + "-p";
    }
    if (!lengths) return std::string("string");
    return "\"\\\"\" char{" + std::to_string(min_len) + "," +
           (max_len >= 0 ? std::to_string(max_len) : "") + "} \"\\\"\"";
  }

  // A bound of an integer schema, rounded inwards; false when absent.
  Result<bool> Bound(const json& s, const char* key, bool lower, bool exclusive,
                     const std::string& ptr, int64_t* out) {
    if (!s.contains(key)) return false;
    const json& v = s[key];
    if (v.is_boolean()) return false;  // draft 4's exclusive flags, read with their bound
    if (!v.is_number()) return Fail(ptr + "/" + key, "must be a number");
    const auto cap = static_cast<double>(Pow10(kMaxDigits) - 1);
    double d = std::clamp(v.get<double>(), -cap, cap);
    bool excl = exclusive;
    const char* flag = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    if (!exclusive && s.contains(flag) && s[flag] == true) excl = true;
    if (lower) {
      d = excl ? std::floor(d) + 1 : std::ceil(d);
    } else {
      d = excl ? std::ceil(d) - 1 : std::floor(d);
    }
    const int64_t c = Pow10(kMaxDigits) - 1;
    *out = std::clamp(static_cast<int64_t>(d), -c, c);
    return true;
  }

  Result<std::string> Integer(const json& s, const std::string& ptr) {
    const int64_t cap = Pow10(kMaxDigits) - 1;
    int64_t lo = -cap, hi = cap, v = 0;
    bool bounded = false;
    for (const auto& [key, lower, excl] :
         {std::tuple{"minimum", true, false}, std::tuple{"exclusiveMinimum", true, true},
          std::tuple{"maximum", false, false}, std::tuple{"exclusiveMaximum", false, true}}) {
      KVF_ASSIGN_OR_RETURN(bool given, Bound(s, key, lower, excl, ptr, &v));
      if (!given) continue;
      bounded = true;
      if (lower) lo = std::max(lo, v);
      if (!lower) hi = std::min(hi, v);
    }
    if (!bounded) return std::string("integer");
    if (lo > hi) return Fail(ptr, "the integer bounds leave no value");
    std::vector<std::string> alts;
    if (lo < 0) {
      // Negative part: "-" then the magnitudes from max(1, -hi) to -lo.
      const int64_t mag_lo = std::max<int64_t>(1, hi < 0 ? -hi : 1), mag_hi = -lo;
      alts.push_back("\"-\" " + NonNegativeRange(mag_lo, mag_hi));
    }
    if (hi >= 0) alts.push_back(NonNegativeRange(std::max<int64_t>(0, lo), hi));
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return "(" + out + ")";
  }

  Result<std::string> Number(const json& s, const std::string& ptr) {
    const bool has_min = s.contains("minimum"), others = s.contains("maximum") ||
                                                         s.contains("exclusiveMinimum") ||
                                                         s.contains("exclusiveMaximum");
    if (!has_min && !others) return std::string("number");
    if (has_min && !others && s["minimum"].is_number() && s["minimum"].get<double>() == 0)
      return std::string(
          R"(("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?)");
    return Fail(ptr, "bounds on type number are supported only as minimum 0; use type integer");
  }

  Result<std::string> Object(const json& s, const std::string& ptr, int depth) {
    struct Prop {
      std::string key_text;  // the JSON key, quoted, as a GBNF literal
      std::string value;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Fail(ptr + "/required", "must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return Fail(ptr + "/required", "must list strings");
        required.insert(r.get<std::string>());
      }
    }
    std::set<std::string> declared;
    if (s.contains("properties")) {
      const json& p = s["properties"];
      if (!p.is_object()) return Fail(ptr + "/properties", "must be an object");
      if (static_cast<int64_t>(p.size()) > limits_.max_properties)
        return Fail(ptr + "/properties", StrFormat("%zu properties, above max_properties (%d)",
                                                   p.size(), limits_.max_properties));
      for (const auto& item : p.items()) {
        KVF_ASSIGN_OR_RETURN(
            std::string v,
            Visit(item.value(), ptr + "/properties/" + Escaped(item.key()), depth + 1));
        declared.insert(item.key());
        props.push_back({GbnfLiteral(json(item.key()).dump()), v, required.count(item.key()) > 0});
      }
    }
    for (const std::string& r : required)  // required but not declared: any value
      if (!declared.count(r)) props.push_back({GbnfLiteral(json(r).dump()), "value", true});
    if (props.empty()) {
      // Only additional properties: a generic object of values of that schema, or none.
      const json* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
      if (ap != nullptr && *ap == false) return std::string(R"("{" "}")");
      std::string v = "value";
      if (ap != nullptr && !ap->is_boolean()) {
        KVF_ASSIGN_OR_RETURN(v, Visit(*ap, ptr + "/additionalProperties", depth + 1));
      }
      return NewRule("\"{\" (string \":\" ws " + v + " (\",\" ws string \":\" ws " + v +
                     ")*)? \"}\"");
    }
    // Declared properties in their order; optional ones may be left out. rest[i][c]: the
    // properties from i on, c: whether one was already written (a comma is needed).
    const size_t n = props.size();
    std::vector<std::array<std::string, 2>> rest(n + 1);
    for (size_t i = n + 1; i-- > 0;) {
      for (int comma = 0; comma < 2; ++comma) {
        std::vector<std::string> alts;
        for (size_t j = i; j < n; ++j) {
          std::string alt = comma ? "\",\" ws " : "";
          alt += props[j].key_text + " \":\" ws " + props[j].value;
          if (j + 1 <= n && !rest[j + 1][1].empty()) alt += " " + rest[j + 1][1];
          alts.push_back(alt);
          if (props[j].required) break;  // a required property cannot be skipped
        }
        bool all_optional = true;
        for (size_t j = i; j < n; ++j) all_optional = all_optional && !props[j].required;
        if (all_optional) alts.push_back("\"\"");
        std::string body;
        for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
        rest[i][comma] = (alts.size() == 1 && alts[0] == "\"\"") ? "" : NewRule(body);
      }
    }
    return NewRule("\"{\" " + (rest[0][0].empty() ? std::string() : rest[0][0] + " ") + "\"}\"");
  }

  Result<std::string> Array(const json& s, const std::string& ptr, int depth) {
    if (s.contains("uniqueItems") && s["uniqueItems"] != false)
      return Fail(ptr + "/uniqueItems", "uniqueItems true is not supported");
    KVF_ASSIGN_OR_RETURN(int64_t min_items, Count(s, "minItems", ptr, 0));
    KVF_ASSIGN_OR_RETURN(int64_t max_items, Count(s, "maxItems", ptr, -1));
    if (max_items >= 0 && max_items < min_items) return Fail(ptr + "/maxItems", "below minItems");
    std::vector<std::string> tuple;
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) return Fail(ptr + "/prefixItems", "must be an array");
      for (size_t i = 0; i < p.size(); ++i) {
        KVF_ASSIGN_OR_RETURN(std::string e,
                             Visit(p[i], ptr + "/prefixItems/" + std::to_string(i), depth + 1));
        tuple.push_back(e);
      }
    }
    std::string item = "value";
    bool no_more = false;
    if (s.contains("items")) {
      if (s["items"] == false) {
        no_more = true;
      } else {
        KVF_ASSIGN_OR_RETURN(item, Visit(s["items"], ptr + "/items", depth + 1));
      }
    }
    const auto k = static_cast<int64_t>(tuple.size());
    if (max_items >= 0 && max_items < k)
      return Fail(ptr + "/maxItems", "fewer than the prefixItems (the grammar writes all of them)");
    // The whole tuple, then extra items of `item` between these counts.
    const int64_t extra_min = std::max<int64_t>(0, min_items - k);
    const int64_t extra_max = no_more ? 0 : (max_items >= 0 ? max_items - k : -1);
    if (extra_max >= 0 && extra_min > extra_max)
      return Fail(ptr + "/minItems", "needs more items than allowed");
    std::string body = "\"[\"";
    for (int64_t i = 0; i < k; ++i)
      body += (i ? " \",\" ws " : " ") + tuple[static_cast<size_t>(i)];
    if (extra_max != 0) {
      const std::string sep_item = "\",\" ws " + item;
      auto reps = [&](int64_t lo, int64_t hi) {
        return "(" + sep_item + "){" + std::to_string(lo) + "," +
               (hi >= 0 ? std::to_string(hi) : "") + "}";
      };
      if (k > 0) {
        body += " " + reps(extra_min, extra_max);
      } else if (extra_min > 0) {
        body += " " + item + " " + reps(extra_min - 1, extra_max >= 0 ? extra_max - 1 : -1);
      } else {
        body += " (" + item + " " + reps(0, extra_max >= 0 ? extra_max - 1 : -1) + ")?";
      }
    }
    return NewRule(body + " \"]\"");
  }

  json root_;
  SchemaLimits limits_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> ref_rules_;
  std::string prefix_;
  std::string pattern_rules_;
  int next_rule_ = 0;

 public:
  const std::string& pattern_rules() const { return pattern_rules_; }
};

}  // namespace

namespace {

Result<std::string> CompileSchema(std::string_view schema_json, const std::string& rule_name,
                                  bool with_primitives, const SchemaLimits& limits) {
  json schema;
  try {
    schema = json::parse(schema_json.begin(), schema_json.end());
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("the schema is not valid JSON: ") + e.what());
  }
  SchemaCompiler compiler(std::move(schema), limits,
                          rule_name == "root" ? std::string() : rule_name + "-");
  KVF_ASSIGN_OR_RETURN(std::string text, compiler.Compile(rule_name, with_primitives));
  return text + compiler.pattern_rules();
}

}  // namespace

Result<std::string> JsonSchemaToGbnf(std::string_view schema_json, const SchemaLimits& limits) {
  return CompileSchema(schema_json, "root", /*with_primitives=*/true, limits);
}

Result<std::string> JsonSchemaToGbnfRules(std::string_view schema_json, std::string_view rule_name,
                                          const SchemaLimits& limits) {
  return CompileSchema(schema_json, std::string(rule_name), /*with_primitives=*/false, limits);
}

std::string JsonPrimitivesGbnf() { return kPrimitives; }

std::string JsonObjectGbnf() { return std::string("root ::= object\n") + kPrimitives; }

}  // namespace kvforge::grammar
