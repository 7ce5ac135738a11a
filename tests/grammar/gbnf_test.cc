// GBNF parsing and recognition: syntax, errors with positions, limits, and a property test of
// the recognizer against a plain backtracking matcher over random grammars.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace kvforge::grammar {
namespace {

std::shared_ptr<const Grammar> MustParse(const std::string& text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << text;
  return g.ok() ? *g : nullptr;
}

std::string ParseError(const std::string& text, const GrammarLimits& limits = {}) {
  auto g = ParseGbnf(text, limits);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? "" : g.status().message();
}

TEST(Gbnf, LiteralsClassesAndAnyChar) {
  auto g = MustParse(R"(root ::= "ab" [0-9x-z] [^a] . "\x41\u00e9\n\"\\")");
  EXPECT_TRUE(GrammarMatches(*g, "ab5bZA\xC3\xA9\n\"\\"));
  EXPECT_TRUE(GrammarMatches(*g,
                             "abyb\xE2\x82\xAC"
                             "A\xC3\xA9\n\"\\"));
  EXPECT_FALSE(GrammarMatches(*g, "ab5aZA\xC3\xA9\n\"\\"));  // [^a] refuses a
  EXPECT_FALSE(GrammarMatches(*g, "abwbZA\xC3\xA9\n\"\\"));  // w not in [0-9x-z]
  EXPECT_FALSE(GrammarMatches(*g, "ab5bZA\xC3\xA9\n\""));    // short
  EXPECT_TRUE(GrammarViablePrefix(*g, "ab5bZA\xC3"));        // cut inside é
  EXPECT_FALSE(GrammarViablePrefix(*g, "ab5bZA\xC3\xA8"));   // è is not é
}

TEST(Gbnf, CutCharactersMustStillBeAbleToMatch) {
  auto g = MustParse(R"(root ::= "{" [^"]*)");
  EXPECT_FALSE(GrammarViablePrefix(*g, "\xF0"));          // a 4-byte sequence cannot make '{'
  EXPECT_FALSE(GrammarViablePrefix(*g, "{\xF0\x80"));     // only overlong values remain
  EXPECT_TRUE(GrammarViablePrefix(*g, "{\xF0\x9F"));      // U+1F000..: still possible
  EXPECT_FALSE(GrammarViablePrefix(*g, "{\xF4\x90"));     // above U+10FFFF
}

TEST(Gbnf, RepetitionsGroupsAndRuleOrder) {
  auto g = MustParse(
      "# a comment\n"
      "root ::= item (\",\" item){0,2} tail?\n"
      "tail ::= \"!\"+ | \"?\"*   # trailing comment\n"
      "item ::= [a-c]{2,3}\n");
  for (const char* ok : {"ab", "abc,ca", "ab,abc,cc!!", "aa?", "aa???", "ab,ab,ab"})
    EXPECT_TRUE(GrammarMatches(*g, ok)) << ok;
  for (const char* bad : {"a", "abcd", "ab,ab,ab,ab", "ab!?", "ab,", ""})
    EXPECT_FALSE(GrammarMatches(*g, bad)) << bad;
}

TEST(Gbnf, MultiLineAlternativesAndEmpty) {
  auto g = MustParse(
      "root ::= (\n"
      "    \"x\"\n"
      "  | \"y\" opt\n"
      ")\n"
      "opt ::= \"z\" |\n");
  EXPECT_TRUE(GrammarMatches(*g, "x"));
  EXPECT_TRUE(GrammarMatches(*g, "y"));
  EXPECT_TRUE(GrammarMatches(*g, "yz"));
  EXPECT_FALSE(GrammarMatches(*g, "xz"));
}

TEST(Gbnf, RecursionAndNullableLoops) {
  auto g = MustParse(R"g(root ::= "(" root ")" | "" )g");
  EXPECT_TRUE(GrammarMatches(*g, "((()))"));
  EXPECT_FALSE(GrammarMatches(*g, "(()"));
  // A repeated nullable item is a loop of tail references: allowed, and terminates.
  auto loop = MustParse(R"(root ::= ("a"?)* "b")");
  EXPECT_TRUE(GrammarMatches(*loop, "aab"));
  EXPECT_TRUE(GrammarMatches(*loop, "b"));
  EXPECT_FALSE(GrammarMatches(*loop, "ba"));
}

TEST(Gbnf, ErrorsNamePositions) {
  EXPECT_NE(ParseError("root ::= \"a\"\nx ::= [z-a]").find("line 2, column 10"), std::string::npos);
  EXPECT_NE(ParseError("root ::= missing").find("'missing' is used but not defined"),
            std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(ParseError("a ::= \"x\"").find("no 'root'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(ParseError("root ::= [abc").find("unterminated character class"), std::string::npos);
  EXPECT_NE(ParseError("root ::= (\"a\"").find("unclosed '('"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\")").find("unmatched ')'"), std::string::npos);
  EXPECT_NE(ParseError("root ::= * \"a\"").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"a\"**").find("repetition of a repetition"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"\\xZZ\"").find("hex digits"), std::string::npos);
  EXPECT_NE(ParseError("root ::= \"\xC3\"").find("UTF-8"), std::string::npos);
  EXPECT_NE(ParseError("root = \"a\"").find("'::='"), std::string::npos);
}

TEST(Gbnf, LeftRecursionIsRefused) {
  EXPECT_NE(ParseError("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(ParseError("root ::= x \"a\"\nx ::= y\ny ::= \"\" | root").find("left-recursive"),
            std::string::npos);
}

TEST(Gbnf, LimitsAreNamed) {
  GrammarLimits small;
  small.max_repeat = 10;
  EXPECT_NE(ParseError("root ::= \"a\"{11}", small).find("max_repeat"), std::string::npos);
  small.max_text_bytes = 8;
  EXPECT_NE(ParseError("root ::= \"abc\"", small).find("max_text_bytes"), std::string::npos);
  GrammarLimits few_rules;
  few_rules.max_rules = 2;
  EXPECT_NE(ParseError("root ::= a b\na ::= \"x\"\nb ::= \"y\"", few_rules).find("max_rules"),
            std::string::npos);
  GrammarLimits few_elements;
  few_elements.max_elements = 100;
  EXPECT_NE(ParseError("root ::= (\"ab\"{50}){50}", few_elements).find("max_elements"),
            std::string::npos);
}

// ---- Property test: the recognizer against a backtracking matcher over the same random AST.

struct Node {
  enum Kind { kChar, kClass, kRef, kSeq, kAlt, kRepeat } kind = kChar;
  char c = 'a';
  std::string cls;  // kClass: members; negated if it starts with '^'
  int rule = 0;
  std::vector<Node> kids;
  int min = 0, max = -1;
};

struct RandomGrammar {
  std::vector<Node> rules;  // rule i may refer only to rules > i: no left recursion by build

  std::string ToGbnf() const {
    std::string out;
    for (size_t i = 0; i < rules.size(); ++i)
      out += "r" + std::to_string(i) + " ::= " + Print(rules[i]) + "\n";
    out += "root ::= r0\n";
    return out;
  }
  static std::string Print(const Node& n) {
    switch (n.kind) {
      case Node::kChar:
        return std::string("\"") + n.c + "\"";
      case Node::kClass:
        return "[" + n.cls + "]";
      case Node::kRef:
        return "r" + std::to_string(n.rule);
      case Node::kSeq: {
        std::string s = "(";
        for (const Node& k : n.kids) s += Print(k) + " ";
        return s + "\"\")";
      }
      case Node::kAlt: {
        std::string s = "(";
        for (size_t i = 0; i < n.kids.size(); ++i) s += (i ? " | " : "") + Print(n.kids[i]);
        return s + ")";
      }
      case Node::kRepeat: {
        std::string s = "(" + Print(n.kids[0]) + ")";
        if (n.min == 0 && n.max < 0) return s + "*";
        if (n.min == 1 && n.max < 0) return s + "+";
        if (n.min == 0 && n.max == 1) return s + "?";
        return s + "{" + std::to_string(n.min) + "," + (n.max < 0 ? "" : std::to_string(n.max)) +
               "}";
      }
    }
    return "";
  }

  // Every end position of a match of `n` starting at `start`.
  std::set<size_t> Ends(const Node& n, const std::string& s, size_t start) const {
    std::set<size_t> out;
    switch (n.kind) {
      case Node::kChar:
        if (start < s.size() && s[start] == n.c) out.insert(start + 1);
        break;
      case Node::kClass: {
        if (start >= s.size()) break;
        const bool neg = n.cls[0] == '^';
        const bool in = n.cls.find(s[start], neg ? 1 : 0) != std::string::npos;
        if (in != neg) out.insert(start + 1);
        break;
      }
      case Node::kRef:
        return Ends(rules[static_cast<size_t>(n.rule)], s, start);
      case Node::kSeq: {
        std::set<size_t> cur{start};
        for (const Node& k : n.kids) {
          std::set<size_t> next;
          for (size_t p : cur) {
            auto e = Ends(k, s, p);
            next.insert(e.begin(), e.end());
          }
          cur.swap(next);
        }
        return cur;
      }
      case Node::kAlt:
        for (const Node& k : n.kids) {
          auto e = Ends(k, s, start);
          out.insert(e.begin(), e.end());
        }
        break;
      case Node::kRepeat: {
        std::set<size_t> cur{start};
        for (int i = 0; i < n.min; ++i) {
          std::set<size_t> next;
          for (size_t p : cur) {
            auto e = Ends(n.kids[0], s, p);
            next.insert(e.begin(), e.end());
          }
          cur.swap(next);
        }
        out = cur;
        const int extra = n.max < 0 ? static_cast<int>(s.size()) + 1 : n.max - n.min;
        for (int i = 0; i < extra && !cur.empty(); ++i) {
          std::set<size_t> next;
          for (size_t p : cur) {
            auto e = Ends(n.kids[0], s, p);
            for (size_t q : e)
              if (!out.count(q) || n.max >= 0) next.insert(q);
          }
          out.insert(next.begin(), next.end());
          cur.swap(next);
        }
        break;
      }
    }
    return out;
  }
  bool Matches(const std::string& s) const { return Ends(rules[0], s, 0).count(s.size()) > 0; }
};

Node RandomNode(std::mt19937& rng, int rule, int num_rules, int depth) {
  std::uniform_int_distribution<int> pick(0, depth > 2 ? 2 : 6);
  Node n;
  switch (pick(rng)) {
    case 0:
      n.kind = Node::kChar;
      n.c = "abc"[rng() % 3];
      break;
    case 1:
      n.kind = Node::kClass;
      n.cls = std::vector<std::string>{"ab", "^a", "bc", "^bc"}[rng() % 4];
      break;
    case 2:
      if (rule + 1 < num_rules) {
        n.kind = Node::kRef;
        n.rule = rule + 1 + static_cast<int>(rng() % static_cast<unsigned>(num_rules - rule - 1));
      } else {
        n.kind = Node::kChar;
        n.c = "abc"[rng() % 3];
      }
      break;
    case 3:
    case 4: {
      n.kind = pick(rng) % 2 ? Node::kSeq : Node::kAlt;
      const int k = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < k; ++i) n.kids.push_back(RandomNode(rng, rule, num_rules, depth + 1));
      break;
    }
    default: {
      n.kind = Node::kRepeat;
      n.kids.push_back(RandomNode(rng, rule, num_rules, depth + 1));
      const int form = static_cast<int>(rng() % 5);
      if (form == 0) n.min = 0, n.max = -1;
      if (form == 1) n.min = 1, n.max = -1;
      if (form == 2) n.min = 0, n.max = 1;
      if (form == 3) n.min = 1, n.max = 2;
      if (form == 4) n.min = 2, n.max = -1;
    }
  }
  return n;
}

TEST(Gbnf, RecognizerAgreesWithBacktrackingMatcher) {
  std::mt19937 rng(12345);
  std::vector<std::string> strings{""};
  for (size_t len = 1; len <= 5; ++len) {
    const size_t before = strings.size();
    for (size_t i = 0; i < before; ++i)
      if (strings[i].size() == len - 1)
        for (char c : std::string("abc")) strings.push_back(strings[i] + c);
  }
  int matched = 0;
  for (int trial = 0; trial < 300; ++trial) {
    RandomGrammar rg;
    const int num_rules = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < num_rules; ++r) rg.rules.push_back(RandomNode(rng, r, num_rules, 0));
    const std::string text = rg.ToGbnf();
    auto g = ParseGbnf(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString() << "\n" << text;
    for (const std::string& s : strings) {
      const bool want = rg.Matches(s);
      ASSERT_EQ(GrammarMatches(**g, s), want) << "grammar:\n" << text << "string: '" << s << "'";
      matched += want;
      if (want) {
        for (size_t cut = 0; cut <= s.size(); ++cut)
          ASSERT_TRUE(GrammarViablePrefix(**g, s.substr(0, cut))) << text << s << " cut " << cut;
      }
    }
  }
  EXPECT_GT(matched, 1000);  // the generator makes grammars that accept something
}

}  // namespace
}  // namespace kvforge::grammar
