// JSON Schema to GBNF: what each keyword admits and refuses, exact integer ranges, and the
// refusals naming keyword and JSON pointer.
#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <string>

#include "grammar/grammar.h"

namespace kvforge::grammar {
namespace {

std::shared_ptr<const Grammar> Compile(const std::string& schema) {
  auto text = JsonSchemaToGbnf(schema);
  EXPECT_TRUE(text.ok()) << schema << ": " << text.status().ToString();
  if (!text.ok()) return nullptr;
  auto g = ParseGbnf(*text);
  EXPECT_TRUE(g.ok()) << *text << "\n" << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

std::string Refused(const std::string& schema, const SchemaLimits& limits = {}) {
  auto text = JsonSchemaToGbnf(schema, limits);
  EXPECT_FALSE(text.ok()) << schema;
  return text.ok() ? "" : text.status().message();
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  auto g = Compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
      "c":{"type":"boolean"}},"required":["b"]})");
  for (const char* ok : {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a": -5, "b": "", "c": true})",
                         R"({"b":"x","c":false})"})
    EXPECT_TRUE(GrammarMatches(*g, ok)) << ok;
  for (const char* bad :
       {R"({})", R"({"a":1})", R"({"b":"x",})", R"({"b":1})", R"({"c":true,"b":"x"})",
        R"({"b":"x","d":1})", R"( {"b":"x"})", R"({"a":01,"b":"x"})"})
    EXPECT_FALSE(GrammarMatches(*g, bad)) << bad;
}

TEST(JsonSchema, ArraysEnumsConstRefsAndAnyOf) {
  auto g = Compile(R"({"$defs":{"node":{"type":"object","properties":{"v":{"enum":[1,"two",null]},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
      "$ref":"#/$defs/node"})");
  EXPECT_TRUE(GrammarMatches(*g, R"({"v":1})"));
  EXPECT_TRUE(GrammarMatches(*g, R"({"v":"two","kids":[{"v":null},{"v":1,"kids":[]}]})"));
  EXPECT_FALSE(GrammarMatches(*g, R"({"v":2})"));
  EXPECT_FALSE(GrammarMatches(*g, R"({"v":1,"kids":[{"v":1},{"v":1},{"v":1}]})"));
  auto t =
      Compile(R"({"type":"array","prefixItems":[{"const":"x"},{"type":"number"}],"items":false})");
  EXPECT_TRUE(GrammarMatches(*t, R"(["x",1.5e3])"));
  EXPECT_FALSE(GrammarMatches(*t, R"(["x",1,2])"));
  auto a = Compile(R"({"anyOf":[{"type":"string","maxLength":2},{"type":"null"}]})");
  EXPECT_TRUE(GrammarMatches(*a, R"("ab")"));
  EXPECT_TRUE(GrammarMatches(*a, "null"));
  EXPECT_FALSE(GrammarMatches(*a, R"("abc")"));
  auto m = Compile(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(GrammarMatches(*m, "[1]"));
  EXPECT_TRUE(GrammarMatches(*m, "[1, 2]"));
  EXPECT_TRUE(GrammarMatches(*m, "[1,2,3]"));
  EXPECT_FALSE(GrammarMatches(*m, "[1,2,3,4]"));
}

TEST(JsonSchema, StringsFormatsAndPatterns) {
  auto d = Compile(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(GrammarMatches(*d, R"("2024-12-06T13:07:00Z")"));
  EXPECT_TRUE(GrammarMatches(*d, R"("2024-01-28T23:59:59.5+02:00")"));
  EXPECT_FALSE(GrammarMatches(*d, R"("2024-13-06T13:07:00Z")"));
  auto u = Compile(R"({"format":"uuid"})");
  EXPECT_TRUE(GrammarMatches(*u, R"("123e4567-e89b-12d3-a456-426614174000")"));
  auto p = Compile(R"({"type":"string","pattern":"^[a-z]+\"?$"})");
  EXPECT_TRUE(GrammarMatches(*p, R"("abc")"));
  EXPECT_TRUE(GrammarMatches(*p, R"("abc\"")"));
  EXPECT_FALSE(GrammarMatches(*p, R"("ab1")"));
  auto esc = Compile(R"({"type":"string"})");
  EXPECT_TRUE(GrammarMatches(*esc, R"("a\"b\\c\u00e9\n")"));
  EXPECT_FALSE(GrammarMatches(*esc, "\"a\nb\""));
}

TEST(JsonSchema, IntegerRangesAreExact) {
  const std::pair<const char*, std::pair<long, long>> cases[] = {
      {R"({"type":"integer","minimum":-37,"maximum":105})", {-37, 105}},
      {R"({"type":"integer","minimum":7,"maximum":7})", {7, 7}},
      {R"({"type":"integer","exclusiveMinimum":-1,"exclusiveMaximum":1000})", {0, 999}},
      {R"({"type":"integer","minimum":-1000,"maximum":-99})", {-1000, -99}},
      {R"({"type":"integer","minimum":95})", {95, 1L << 40}},
      {R"({"type":"integer","maximum":-3})", {-(1L << 40), -3}},
  };
  for (const auto& [schema, range] : cases) {
    auto g = Compile(schema);
    ASSERT_NE(g, nullptr);
    for (long v = -1200; v <= 1200; ++v) {
      const bool want = v >= range.first && v <= range.second;
      ASSERT_EQ(GrammarMatches(*g, std::to_string(v)), want) << schema << " value " << v;
    }
    EXPECT_FALSE(GrammarMatches(*g, "-0"));
  }
}

TEST(JsonSchema, RefusalsNameKeywordAndPointer) {
  EXPECT_NE(Refused(R"({"properties":{"a":{"multipleOf":2}}})").find("/properties/a/multipleOf"),
            std::string::npos);
  EXPECT_NE(Refused(R"({"type":"array","uniqueItems":true})").find("uniqueItems"),
            std::string::npos);
  EXPECT_NE(Refused(R"({"format":"email"})").find("email"), std::string::npos);
  EXPECT_NE(Refused(R"({"type":"number","maximum":3})").find("use type integer"),
            std::string::npos);
  EXPECT_NE(Refused(R"({"$ref":"http://x/y"})").find("local"), std::string::npos);
  EXPECT_NE(Refused(R"({"$ref":"#/nowhere"})").find("points at nothing"), std::string::npos);
  EXPECT_NE(Refused("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(Refused(R"({"type":"integer","minimum":5,"maximum":1})").find("no value"),
            std::string::npos);
  SchemaLimits small;
  small.max_depth = 2;
  EXPECT_NE(Refused(R"({"items":{"items":{"items":{"items":{}}}}})", small).find("max_depth"),
            std::string::npos);
  small = {};
  small.max_enum_values = 2;
  EXPECT_NE(Refused(R"({"enum":[1,2,3]})", small).find("max_enum_values"), std::string::npos);
  small = {};
  small.max_grammar_bytes = 100;
  EXPECT_NE(Refused(R"({"type":"string"})", small).find("max_grammar_bytes"), std::string::npos);
}

TEST(JsonSchema, AllOfMergesObjects) {
  auto g = Compile(R"({"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},
      {"properties":{"b":{"const":true}},"required":["b"]}]})");
  EXPECT_TRUE(GrammarMatches(*g, R"({"a":1,"b":true})"));
  EXPECT_FALSE(GrammarMatches(*g, R"({"a":1})"));
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  auto g = ParseGbnf(JsonObjectGbnf());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(GrammarMatches(**g, R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_TRUE(GrammarMatches(**g, "{}"));
  EXPECT_FALSE(GrammarMatches(**g, "[]"));
}

}  // namespace
}  // namespace kvforge::grammar
