// JSON parsing and serialisation of Values (messages arrive as JSON; tojson writes it).
#include "chat/json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "chat/pyops.h"

namespace kvforge::chat {
namespace {

Value Parse(std::string_view text) {
  Result<Value> v = ParseJson(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : Value();
}

std::string Dump(const Value& v, const JsonDumpOptions& options = {}) {
  Result<std::string> s = ToJson(v, options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : "";
}

std::string ParseError(std::string_view text) {
  Result<Value> v = ParseJson(text);
  EXPECT_FALSE(v.ok()) << text;
  return v.ok() ? "" : v.status().message();
}

TEST(ChatJson, ParsesAllKinds) {
  const Value v = Parse(R"( {"s": "x", "i": -42, "f": 2.5, "e": 1e3, "t": true, "n": null,
                             "l": [1, [2, []], {}], "o": {"k": "v"}} )");
  ASSERT_TRUE(v.is_dict());
  const DictRep& d = v.dict();
  EXPECT_EQ(d.FindStr("s")->str(), "x");
  EXPECT_TRUE(d.FindStr("i")->is_int());
  EXPECT_EQ(d.FindStr("i")->int_value(), -42);
  EXPECT_TRUE(d.FindStr("f")->is_float());
  EXPECT_TRUE(d.FindStr("e")->is_float());
  EXPECT_EQ(d.FindStr("e")->float_value(), 1000.0);
  EXPECT_TRUE(d.FindStr("t")->is_bool());
  EXPECT_TRUE(d.FindStr("n")->is_none());
  EXPECT_EQ(Repr(*d.FindStr("l")), "[1, [2, []], {}]");
  EXPECT_EQ(Repr(v),
            "{'s': 'x', 'i': -42, 'f': 2.5, 'e': 1000.0, 't': True, 'n': None, 'l': [1, [2, []], "
            "{}], 'o': {'k': 'v'}}");
}

TEST(ChatJson, KeepsKeyOrderAndLastDuplicate) {
  const Value v = Parse(R"({"b": 1, "a": 2, "b": 3})");
  EXPECT_EQ(Repr(v), "{'b': 3, 'a': 2}");
}

TEST(ChatJson, DecodesEscapesAndSurrogatePairs) {
  EXPECT_EQ(Parse(R"("a\"b\\c\/d\b\f\n\r\t")").str(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(Parse(R"("\u00e9\u732b")").str(), "é猫");
  EXPECT_EQ(Parse(R"("\ud83d\udc31")").str(), "🐱");
  EXPECT_EQ(Parse(R"("\uD83D\uDC31")").str(), "🐱");
  // Lone surrogates cannot be represented in UTF-8: they decode to U+FFFD.
  EXPECT_EQ(Parse(R"("\ud83d")").str(), "\xEF\xBF\xBD");
  EXPECT_EQ(Parse(R"("\udc31x")").str(), "\xEF\xBF\xBDx");
  EXPECT_EQ(Parse(R"("\ud83d\u0041")").str(),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(Parse("\"raw 猫 🐱\"").str(), "raw 猫 🐱");
}

TEST(ChatJson, NumbersLikePython) {
  EXPECT_TRUE(Parse("9223372036854775807").is_int());
  const Value big = Parse("9223372036854775808");  // past int64: becomes a float
  EXPECT_TRUE(big.is_float());
  EXPECT_EQ(Parse("-0").int_value(), 0);
  EXPECT_TRUE(std::isinf(Parse("1e400").float_value()));
  EXPECT_TRUE(std::isnan(Parse("NaN").float_value()));
  EXPECT_EQ(Parse("-Infinity").float_value(), -HUGE_VAL);
}

TEST(ChatJson, ClearErrors) {
  EXPECT_EQ(ParseError(R"({"a": 1,})"),
            "invalid JSON at line 1 column 9: expected a property name in double quotes");
  EXPECT_EQ(ParseError("[1, 2,]"), "invalid JSON at line 1 column 7: trailing comma in array");
  EXPECT_EQ(ParseError("{\"a\"\n  1}"),
            "invalid JSON at line 2 column 3: expected ':' after an object key");
  EXPECT_EQ(ParseError("\"abc"), "invalid JSON at line 1 column 1: unterminated string");
  EXPECT_EQ(ParseError(R"("\x")"),
            "invalid JSON at line 1 column 2: invalid escape '\\x' in string");
  EXPECT_EQ(ParseError(R"("\u12G4")"),
            "invalid JSON at line 1 column 4: invalid \\u escape: expected 4 hex digits");
  EXPECT_EQ(ParseError("\"a\tb\""),
            "invalid JSON at line 1 column 3: invalid control character in string");
  EXPECT_EQ(ParseError("012"),
            "invalid JSON at line 1 column 1: invalid number: leading zeros are not allowed");
  EXPECT_EQ(ParseError("1.e5"),
            "invalid JSON at line 1 column 3: invalid number: expected a digit after '.'");
  EXPECT_EQ(ParseError("[1] x"),
            "invalid JSON at line 1 column 5: unexpected data after the JSON value");
  EXPECT_EQ(ParseError(""),
            "invalid JSON at line 1 column 1: unexpected end of input, expected a value");
  EXPECT_EQ(ParseError("tru"),
            "invalid JSON at line 1 column 1: unexpected character 't', expected a value");
  EXPECT_EQ(ParseError("[1 2]"), "invalid JSON at line 1 column 4: expected ',' or ']' in array");
  EXPECT_EQ(ParseError("\"\xff\""), "invalid JSON at line 1 column 2: input is not valid UTF-8");
  EXPECT_EQ(ParseError("\"\xed\xa0\x80\""),
            "invalid JSON at line 1 column 2: input is not valid UTF-8");
  EXPECT_EQ(ParseError("{'a': 1}"),
            "invalid JSON at line 1 column 2: expected a property name in double quotes");
}

TEST(ChatJson, DepthLimit) {
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  EXPECT_NE(ParseError(deep).find("nesting too deep"), std::string::npos);
  JsonParseOptions options;
  options.max_depth = 1000;
  EXPECT_TRUE(ParseJson(deep, options).ok());
  const std::string very_deep = std::string(100000, '[');
  EXPECT_FALSE(ParseJson(very_deep).ok());
}

TEST(ChatJson, ResultIsFrozenUnlessAskedOtherwise) {
  EXPECT_TRUE(Parse("[[1]]").list().frozen);
  EXPECT_TRUE(Parse("[[1]]").list().items[0].list().frozen);
  JsonParseOptions options;
  options.freeze = false;
  EXPECT_FALSE(ParseJson("[1]", options)->list().frozen);
}

TEST(ChatJson, DumpsLikePythonJsonDumps) {
  const Value v = Parse(R"({"a": [1, 2.5, null, true, "é\n\"\\"], "b": {}})");
  EXPECT_EQ(Dump(v), R"({"a": [1, 2.5, null, true, "é\n\"\\"], "b": {}})");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(Dump(v, ascii), R"({"a": [1, 2.5, null, true, "\u00e9\n\"\\"], "b": {}})");
  JsonDumpOptions indent;
  indent.indent = "  ";
  EXPECT_EQ(Dump(v, indent),
            "{\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true,\n    \"é\\n\\\"\\\\\"\n  ],\n"
            "  \"b\": {}\n}");
  EXPECT_EQ(Dump(Parse("[1e16, 1e-7, 0.1, -0.0, 123456789012345678]")),
            "[1e+16, 1e-07, 0.1, -0.0, 123456789012345678]");
  EXPECT_EQ(Dump(Value::Str("ctrl\x01\x1f\x7f")), "\"ctrl\\u0001\\u001f\x7f\"");
  EXPECT_EQ(Dump(Value::Str("ctrl\x01\x1f\x7f"), ascii), "\"ctrl\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(Dump(Value::Str("🐱"), ascii), "\"\\ud83d\\udc31\"");
  JsonDumpOptions compact;
  compact.item_separator = ",";
  compact.key_separator = ":";
  EXPECT_EQ(Dump(Parse(R"({"a": [1, 2]})"), compact), R"({"a":[1,2]})");
  JsonDumpOptions sorted;
  sorted.sort_keys = true;
  EXPECT_EQ(Dump(Parse(R"({"b": 1, "a": {"d": 1, "c": 2}})"), sorted),
            R"({"a": {"c": 2, "d": 1}, "b": 1})");
}

TEST(ChatJson, DumpRejectsWhatPythonRejects) {
  EXPECT_EQ(ToJson(Value()).status().message(),
            "TypeError: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(ToJson(Value::Namespace()).status().message(),
            "TypeError: Object of type Namespace is not JSON serializable");
  Value self = Value::List();
  self.list().items.push_back(self);  // a cycle
  EXPECT_FALSE(ToJson(self).ok());
  self.list().items.clear();  // break it again
}

// Random documents: nlohmann (reference) and kvforge must agree on what they mean.
nlohmann::json RandomJson(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 4 ? 4 : 6);
  switch (kind(rng)) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng()) - (1ll << 31);
    case 3:
      return static_cast<double>(rng() % 100000) / 64.0;
    case 4: {
      std::string s;
      const char* pieces[] = {"a", "Z", " ", "\n", "\"", "\\", "é", "猫", "🐱", "\x01", "/"};
      for (int i = static_cast<int>(rng() % 8); i > 0; --i) s += pieces[rng() % 11];
      return s;
    }
    case 5: {
      nlohmann::json a = nlohmann::json::array();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i) a.push_back(RandomJson(rng, depth + 1));
      return a;
    }
    default: {
      nlohmann::json o = nlohmann::json::object();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i) {
        o["k" + std::to_string(rng() % 10)] = RandomJson(rng, depth + 1);
      }
      return o;
    }
  }
}

TEST(ChatJson, RoundTripAgreesWithNlohmann) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 500; ++i) {
    const nlohmann::json ref = RandomJson(rng, 0);
    const std::string text = ref.dump();
    Result<Value> v = ParseJson(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status().ToString();
    Result<std::string> back = ToJson(*v);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(nlohmann::json::parse(*back), ref) << text << " vs " << *back;
  }
}

}  // namespace
}  // namespace kvforge::chat
