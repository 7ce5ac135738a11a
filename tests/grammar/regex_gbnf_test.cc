// Regex and choice to GBNF: the compiled grammar's language equals std::regex's (full match) on
// random patterns and strings; JSON-string mode; refusals with offsets; limits.
#include "grammar/regex_gbnf.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>

#include "grammar/choice_gbnf.h"
#include "grammar/grammar.h"

namespace kvforge::grammar {
namespace {

std::shared_ptr<const Grammar> Compile(const std::string& pattern) {
  auto text = RegexToGbnf(pattern);
  EXPECT_TRUE(text.ok()) << pattern << ": " << text.status().ToString();
  if (!text.ok()) return nullptr;
  auto g = ParseGbnf(*text);
  EXPECT_TRUE(g.ok()) << pattern << " -> " << *text << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

std::string RefusedMessage(const std::string& pattern, const RegexLimits& limits = {}) {
  auto text = RegexToGbnf(pattern, limits);
  EXPECT_FALSE(text.ok()) << pattern;
  return text.ok() ? "" : text.status().message();
}

std::string RandomPattern(std::mt19937& rng, int depth) {
  static const char* atoms[] = {"a", "b", "c", "[ab]", "[^a]", "\\d", ".", "[a-c]", "\\w"};
  static const char* quants[] = {"", "", "*", "+", "?", "{2}", "{1,2}", "{0,}", "*?"};
  std::string out;
  const int n = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) {
    std::string atom;
    if (depth < 2 && rng() % 4 == 0) {
      atom = "(" + RandomPattern(rng, depth + 1) +
             (rng() % 2 ? "|" + RandomPattern(rng, depth + 1) : "") + ")";
    } else {
      atom = atoms[rng() % std::size(atoms)];
    }
    out += atom + quants[rng() % std::size(quants)];
  }
  return out;
}

TEST(RegexGbnf, AgreesWithStdRegexOnRandomPatterns) {
  std::mt19937 rng(2024);
  const std::string alphabet = "abc1 ";
  int matched = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::string pattern = RandomPattern(rng, 0);
    auto g = Compile(pattern);
    ASSERT_NE(g, nullptr);
    const std::regex re(pattern, std::regex::ECMAScript);
    for (int k = 0; k < 40; ++k) {
      std::string s;
      const size_t len = rng() % 6;
      for (size_t i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
      const bool want = std::regex_match(s, re);
      matched += want;
      ASSERT_EQ(GrammarMatches(*g, s), want) << "pattern " << pattern << " string '" << s << "'";
    }
  }
  EXPECT_GT(matched, 300);
}

TEST(RegexGbnf, EscapesClassesAndAnchors) {
  auto g = Compile(R"(^\d{3}-[A-Z][a-z]+\.\s\x41\u00e9[\]\-x](?:ab|cd)*(?<n>z)?$)");
  EXPECT_TRUE(GrammarMatches(*g, "123-Abc. A\xC3\xA9]abcdz"));
  EXPECT_TRUE(GrammarMatches(*g,
                             "999-Zz.\t"
                             "A\xC3\xA9-"));
  EXPECT_FALSE(GrammarMatches(*g, "12-Abc. A\xC3\xA9]"));
  EXPECT_FALSE(GrammarMatches(*g, "123-abc. A\xC3\xA9]"));
  auto brace = Compile("a{b}");  // not a quantifier: literal braces
  EXPECT_TRUE(GrammarMatches(*brace, "a{b}"));
}

TEST(RegexGbnf, JsonStringModeWritesEscapes) {
  auto rules = RegexToGbnfRules("a\"b\\\\c\\n[\"x]", "pat", true);
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  auto g = ParseGbnf("root ::= pat\n" + *rules);
  ASSERT_TRUE(g.ok()) << g.status().ToString() << *rules;
  EXPECT_TRUE(GrammarMatches(**g, "a\\\"b\\\\c\\n\\\""));
  EXPECT_TRUE(GrammarMatches(**g, "a\\\"b\\\\c\\nx"));
  EXPECT_FALSE(GrammarMatches(**g, "a\"b\\c\n\""));  // raw forms are not JSON
  auto dot = RegexToGbnfRules(".", "d", true);
  ASSERT_TRUE(dot.ok());
  auto gd = ParseGbnf("root ::= d\n" + *dot);
  ASSERT_TRUE(gd.ok());
  EXPECT_TRUE(GrammarMatches(**gd, "\\t"));
  EXPECT_TRUE(GrammarMatches(**gd, "\\u0001"));
  EXPECT_FALSE(GrammarMatches(**gd, "\\n"));  // '.' excludes the newline
  EXPECT_FALSE(GrammarMatches(**gd, "\x01"));
}

TEST(RegexGbnf, RefusalsNameTheirOffset) {
  EXPECT_NE(RefusedMessage("ab(?=c)").find("offset 2"), std::string::npos);
  EXPECT_NE(RefusedMessage("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(RefusedMessage("a\\bc").find("\\b"), std::string::npos);
  EXPECT_NE(RefusedMessage("a|^b").find("anchors"), std::string::npos);
  EXPECT_NE(RefusedMessage("(ab").find("unclosed"), std::string::npos);
  EXPECT_NE(RefusedMessage("ab)").find("unmatched"), std::string::npos);
  EXPECT_NE(RefusedMessage("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(RefusedMessage("[z-a]").find("out of order"), std::string::npos);
  EXPECT_NE(RefusedMessage("a*+").find("possessive"), std::string::npos);
  EXPECT_NE(RefusedMessage("(?i)a").find("inline flags"), std::string::npos);
  EXPECT_NE(RefusedMessage("a{3,1}").find("n < m"), std::string::npos);
  RegexLimits small;
  small.max_repeat = 5;
  EXPECT_NE(RefusedMessage("a{6}", small).find("max_repeat"), std::string::npos);
  small.max_pattern_bytes = 3;
  EXPECT_NE(RefusedMessage("abcd", small).find("max_pattern_bytes"), std::string::npos);
  RegexLimits shallow;
  shallow.max_nesting = 2;
  EXPECT_NE(RefusedMessage("((((a))))", shallow).find("max_nesting"), std::string::npos);
}

TEST(ChoiceGbnf, ExactlyOneOfTheStrings) {
  auto text = ChoiceToGbnf({"yes", "no", "", "say \"hi\"\n"});
  ASSERT_TRUE(text.ok());
  auto g = ParseGbnf(*text);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const char* ok : {"yes", "no", "", "say \"hi\"\n"})
    EXPECT_TRUE(GrammarMatches(**g, ok)) << ok;
  for (const char* bad : {"ye", "yesno", "No"}) EXPECT_FALSE(GrammarMatches(**g, bad)) << bad;
  EXPECT_FALSE(ChoiceToGbnf({}).ok());
  EXPECT_NE(ChoiceToGbnf({"a", "b"}, 1).status().message().find("max_choices"), std::string::npos);
  EXPECT_FALSE(ChoiceToGbnf({"\xC3"}).ok());
}

}  // namespace
}  // namespace kvforge::grammar
