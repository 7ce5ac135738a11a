// Token masks: the cached, context-split mask equals a brute-force check of every token, along
// random walks through grammars deep enough to run past the cached context.
#include "grammar/token_mask.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace kvforge::grammar {
namespace {

// A vocabulary with single bytes, multi-byte pieces, pieces that cut a UTF-8 character
// ("\xC3" then "\xA9" is é), and an excluded control token.
std::shared_ptr<const TokenTrie> TestVocab(std::vector<std::string>* pieces_out) {
  std::vector<std::string> pieces = {
      "<eos>", "{",    "}",        "[",     "]",      ",",   ":",      "\"", "a",   "b",   "1",
      "2",     " ",    "ab",       "\"a",   "\",",    "\"}", "}}",     "]]", ",\"", "{\"", "12",
      "\xC3",  "\xA9", "\xC3\xA9", "a\xC3", "\xA9\"", "",    "\"a\":", "[[", "1,",  "}]",  "ba"};
  std::vector<bool> excluded(pieces.size(), false);
  excluded[0] = true;
  *pieces_out = pieces;
  return std::make_shared<TokenTrie>(pieces, excluded);
}

TokenBitset BruteForce(const GrammarMatcher& m, const TokenTrie& trie) {
  TokenBitset bits((static_cast<size_t>(trie.vocab_size()) + 63) / 64, 0);
  for (int32_t id = 0; id < trie.vocab_size(); ++id) {
    GrammarMatcher copy = m;
    if (copy.AcceptToken(id)) bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  }
  return bits;
}

bool Has(const TokenBitset& b, int32_t id) {
  return (b[static_cast<size_t>(id) / 64] >> (id % 64)) & 1;
}

void RandomWalks(const std::string& gbnf, int walks, int steps, size_t context_frames) {
  auto g = ParseGbnf(gbnf);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<std::string> pieces;
  auto trie = TestVocab(&pieces);
  auto masker = std::make_shared<GrammarMasker>(*g, trie, context_frames);
  std::mt19937 rng(7);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(masker);
    std::string text;
    for (int s = 0; s < steps; ++s) {
      TokenBitset mask;
      m.AllowedTokens(&mask);
      const TokenBitset want = BruteForce(m, *trie);
      ASSERT_EQ(mask, want) << "after '" << text << "'";
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < trie->vocab_size(); ++id)
        if (Has(mask, id)) allowed.push_back(id);
      if (allowed.empty()) {
        EXPECT_TRUE(m.CanEnd()) << "dead end after '" << text << "'";
        break;
      }
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.AcceptToken(pick));
      text += pieces[static_cast<size_t>(pick)];
      EXPECT_TRUE(GrammarViablePrefix(**g, text)) << text;
      if (m.CanEnd()) {
        EXPECT_TRUE(GrammarMatches(**g, text)) << text;
      }
    }
  }
}

TEST(TokenMask, FlatGrammarMatchesBruteForce) {
  for (size_t frames : {1, 2, 4})
    RandomWalks(R"(root ::= ("a" | "b" | "1")* "\"")", 20, 12, frames);
}

TEST(TokenMask, NestedJsonLikeGrammarMatchesBruteForce) {
  // Nesting puts far more than kContextFrames frames on the stack, so most masks need the
  // escape walks below the cached context (1 and 2 frames: nearly every mask).
  for (size_t frames : {1, 2, 3, 4})
    RandomWalks(
        "root ::= value\n"
        "value ::= obj | arr | str | num\n"
        "obj ::= \"{\" (str \":\" \" \"? value (\",\" str \":\" value)*)? \"}\"\n"
        "arr ::= \"[\" (value (\",\" \" \"? value)*)? \"]\"\n"
        "str ::= \"\\\"\" [a-b\\u00e9]* \"\\\"\"\n"
        "num ::= [1-2]+\n",
        60, 30, frames);
}

TEST(TokenMask, CutCharacterIsHeldAcrossTokens) {
  auto g = ParseGbnf(R"(root ::= "a" "é"+ "\"")");
  ASSERT_TRUE(g.ok());
  std::vector<std::string> pieces;
  auto trie = TestVocab(&pieces);
  GrammarMatcher m(std::make_shared<GrammarMasker>(*g, trie));
  ASSERT_TRUE(m.AcceptToken(25));  // "a\xC3": é cut in half
  EXPECT_FALSE(m.CanEnd());
  TokenBitset mask;
  m.AllowedTokens(&mask);
  EXPECT_TRUE(Has(mask, 23));   // "\xA9" completes é
  EXPECT_TRUE(Has(mask, 26));   // "\xA9\"" completes é and the string
  EXPECT_FALSE(Has(mask, 24));  // a whole é cannot start inside one
  EXPECT_FALSE(Has(mask, 7));
  EXPECT_FALSE(m.AcceptToken(22));
  ASSERT_TRUE(m.AcceptToken(26));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(m.MustEnd());
  m.AllowedTokens(&mask);
  for (uint64_t word : mask) EXPECT_EQ(word, 0u);
}

TEST(TokenMask, ExcludedAndEmptyTokensAreNeverAllowed) {
  auto g = ParseGbnf(R"(root ::= .*)");
  ASSERT_TRUE(g.ok());
  std::vector<std::string> pieces;
  auto trie = TestVocab(&pieces);
  GrammarMatcher m(std::make_shared<GrammarMasker>(*g, trie));
  TokenBitset mask;
  m.AllowedTokens(&mask);
  EXPECT_FALSE(Has(mask, 0));   // control token
  EXPECT_FALSE(Has(mask, 27));  // empty piece
  EXPECT_TRUE(Has(mask, 24));
  EXPECT_FALSE(Has(mask, 23));  // a lone continuation byte is not UTF-8
  EXPECT_FALSE(m.AcceptToken(0));
}

}  // namespace
}  // namespace kvforge::grammar
