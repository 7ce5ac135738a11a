// SentencePiece-style tokenizer: exact against llama.cpp's vocab test vectors, plus
// special-token handling, detokenization and streaming.
#include <gtest/gtest.h>

#include <random>

#include "gguf/gguf_reader.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_vectors.h"

namespace kvforge::tokenizer {
namespace {

std::unique_ptr<gguf::GgufFile> OpenShared(const std::string& rel) {
  auto f = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/" + rel);
  EXPECT_TRUE(f.ok()) << f.error().ToString();
  return f.ok() ? std::move(*f) : nullptr;
}

std::unique_ptr<Tokenizer> Load(const std::string& rel) {
  auto f = OpenShared(rel);
  if (!f) return nullptr;
  auto t = Tokenizer::FromGguf(*f);
  EXPECT_TRUE(t.ok()) << t.error().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

class SpmVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmVectorsTest, MatchesLlamaCppVectors) {
  const std::string rel = "tokenizer-tests/" + GetParam();
  auto tok = Load(rel);
  ASSERT_NE(tok, nullptr);
  const auto cases = kvforge::testing::LoadVocabCases(kvforge::testing::SharedDir() + "/" + rel);
  ASSERT_GE(cases.size(), 40u);
  int failures = 0;
  for (const auto& c : cases) {
    const auto ids = tok->Encode(c.input, /*add_special=*/false, /*parse_special=*/false);
    const std::vector<int> got(ids.begin(), ids.end());
    if (got != c.expected) ++failures;
    EXPECT_EQ(got, c.expected) << "input: '" << c.input << "'";
    // Decoding gives back the text (with the SentencePiece leading space when the input had none).
    std::string dec = tok->Decode(ids);
    if (!c.input.empty() && tok->vocab().add_space_prefix && !dec.empty() && dec[0] == ' ')
      dec.erase(0, 1);
    EXPECT_EQ(dec, c.input);
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, SpmVectorsTest,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"));

TEST(SpmTokenizerTest, StoriesPromptIdsMatchLlamaCpp) {
  auto tok = Load("models/stories260K.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Encode("Once upon a time", true, false),
            (std::vector<TokenId>{1, 403, 407, 261, 378}));
  EXPECT_TRUE(tok->Encode("", false, false).empty());
  EXPECT_EQ(tok->Encode("", true, false), (std::vector<TokenId>{1}));
}

TEST(SpmTokenizerTest, SpecialTokensParsedOnlyWhenAsked) {
  auto tok = Load("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  const auto parsed = tok->Encode("<s>Hi</s>", false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), tok->bos());
  EXPECT_EQ(parsed.back(), tok->eos());
  const auto plain = tok->Encode("<s>Hi</s>", false, false);
  for (TokenId id : plain) {
    EXPECT_NE(id, tok->bos());
    EXPECT_NE(id, tok->eos());
  }
  EXPECT_EQ(tok->Decode(plain), " <s>Hi</s>");
  // Control tokens render as nothing unless asked.
  EXPECT_EQ(tok->TokenToPiece(tok->bos()), "");
  EXPECT_EQ(tok->TokenToPiece(tok->bos(), true), "<s>");
}

TEST(SpmTokenizerTest, ByteFallbackRoundTripsAnyBytes) {
  auto tok = Load("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  std::string all;
  for (int b = 1; b < 256; ++b) all.push_back(static_cast<char>(b));
  const auto ids = tok->Encode(all, false, false);
  std::string dec = tok->Decode(ids);
  ASSERT_FALSE(dec.empty());
  EXPECT_EQ(dec.substr(1), all);
}

TEST(StreamDecoderTest, HoldsBackIncompleteUtf8) {
  auto tok = Load("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  // "é" (C3 A9) as two byte tokens: nothing is emitted until the character is complete.
  const TokenId c3 = tok->vocab().byte_tokens[0xC3], a9 = tok->vocab().byte_tokens[0xA9];
  ASSERT_NE(c3, kNoToken);
  StreamDecoder d(*tok);
  EXPECT_EQ(d.Push(c3), "");
  EXPECT_EQ(d.Push(a9), "\xC3\xA9");
  EXPECT_EQ(d.Push(c3), "");
  EXPECT_EQ(d.Finish(), "\xC3");
}

TEST(StreamDecoderTest, RandomUnicodeRoundTripsThroughStream) {
  auto tok = Load("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  std::mt19937 rng(7);
  const char32_t ranges[][2] = {
      {0x20, 0x7E}, {0xA0, 0x24F}, {0x370, 0x3FF}, {0x4E00, 0x4FFF}, {0x1F600, 0x1F64F}};
  for (int iter = 0; iter < 200; ++iter) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) {
      const auto& r = ranges[rng() % 5];
      char32_t cp = r[0] + rng() % (r[1] - r[0] + 1);
      if (cp < 0x80)
        text.push_back(static_cast<char>(cp));
      else if (cp < 0x800) {
        text.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else if (cp < 0x10000) {
        text.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        text.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      } else {
        text.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        text.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        text.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        text.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    }
    const auto ids = tok->Encode(text, false, false);
    StreamDecoder d(*tok);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string piece = d.Push(id);
      EXPECT_EQ(CompleteUtf8Prefix(piece), piece.size());  // never a split character
      streamed += piece;
    }
    streamed += d.Finish();
    EXPECT_EQ(streamed, " " + text);
  }
}

TEST(SpmTokenizerTest, AdversarialInputsAreHandled) {
  auto tok = Load("tokenizer-tests/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(tok, nullptr);
  const std::string run(20000, 'a');
  EXPECT_FALSE(tok->Encode(run, false, false).empty());
  std::string invalid = "\xFF\xFE\xC3(\xE2\x82";
  const auto ids = tok->Encode(invalid, false, false);
  EXPECT_EQ(tok->Decode(ids).substr(1), invalid);
}

}  // namespace
}  // namespace kvforge::tokenizer
