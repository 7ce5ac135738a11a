// Special-token text with special parsing off, for every vocabulary in tests/data: the text of a
// token the GGUF marks control, unknown or user-defined never yields that token's id, except
// where llama.cpp b10573's rules say it does: a token that is user-defined after llama.cpp's
// load-time retyping is matched as a whole string even with parsing off
// (tokenizer_st_partition), and nothing else is reachable through the sub-word encoders.
// The retyping is written out here from llama.cpp's source (src/llama-vocab.cpp: end-of-
// generation and FIM texts become control), not derived from kvforge's own code.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "gguf/gguf_reader.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::tokenizer {
namespace {

struct Case {
  std::string vocab;
  std::set<TokenId> retyped_to_control;  // by llama.cpp at load (GGUF says otherwise)
};

// Phi-3 "</s>" (user-defined in the GGUF) is on llama.cpp's end-of-generation text list;
// deepseek-coder's FIM hole/begin/end are found by text; Gemma 4 "<|tool_response>"; Aquila's
// "<|endoftext|>" and Qwen's "</s>" are normal in the GGUF.
const std::vector<Case> kCases = {
    {"llama-spm", {}},    {"phi-3", {2}},      {"baichuan", {}},
    {"aquila", {0}},      {"command-r", {}},   {"deepseek-coder", {32015, 32016, 32017}},
    {"deepseek-llm", {}}, {"falcon", {}},      {"gemma-4", {50}},
    {"gpt-2", {}},        {"gpt-neox", {}},    {"llama-bpe", {}},
    {"mpt", {}},          {"qwen2", {128247}}, {"qwen35", {128247}},
    {"refact", {}},       {"starcoder", {}}};

constexpr int64_t kUnknown = 2, kControl = 3, kUserDefined = 4;

class SpecialTextTest : public ::testing::TestWithParam<Case> {};

TEST_P(SpecialTextTest, TextOfSpecialTokensStaysTextUnlessUserDefined) {
  const Case& c = GetParam();
  auto file = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/tokenizer-tests/ggml-vocab-" +
                                   c.vocab + ".gguf");
  ASSERT_TRUE(file.ok()) << file.error().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.error().ToString();
  auto types = (*file)->GetArray("tokenizer.ggml.token_type", gguf::ValueType::kI32);
  ASSERT_TRUE(types.ok());
  auto texts = (*file)->GetArray("tokenizer.ggml.tokens", gguf::ValueType::kString);
  ASSERT_TRUE(texts.ok());
  int checked = 0, own_id = 0;
  for (size_t i = 0; i < (*texts)->strings.size(); ++i) {
    const TokenId id = static_cast<TokenId>(i);
    const int64_t raw = gguf::GgufFile::ArrayInt(**types, i);
    const bool retyped = c.retyped_to_control.count(id) > 0;
    if (raw != kUnknown && raw != kControl && raw != kUserDefined && !retyped) continue;
    const std::string text((*texts)->strings[i]);
    if (text.empty()) continue;
    ++checked;
    const std::vector<TokenId> ids = (*tok)->Encode(text, false, /*parse_special=*/false);
    if (raw == kUserDefined && !retyped) {
      ++own_id;
      EXPECT_EQ(ids, std::vector<TokenId>{id})
          << c.vocab << " user-defined " << id << " '" << text << "'";
    } else {
      EXPECT_EQ(std::count(ids.begin(), ids.end(), id), 0)
          << c.vocab << " token " << id << " '" << text << "' (GGUF type " << raw << ")";
    }
  }
  EXPECT_GT(checked, 0) << c.vocab;
  std::printf("[ special  ] %-15s %d special texts, %d user-defined kept whole\n", c.vocab.c_str(),
              checked, own_id);
}

// The reported case, spelled out: "<s>" and "</s>" in one string stay text in Phi-3.
TEST(SpecialTextTest, Phi3EndOfSequenceTextIsPlainTextWithParsingOff) {
  auto file = gguf::GgufFile::Open(kvforge::testing::SharedDir() +
                                   "/tokenizer-tests/ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(file.ok());
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  const std::vector<TokenId> off = (*tok)->Encode("<s>Hi</s>", false, false);
  EXPECT_EQ(std::count(off.begin(), off.end(), 1), 0);
  EXPECT_EQ(std::count(off.begin(), off.end(), 2), 0);
  // llama.cpp b10573: [529 "<", 29879 "s", 29958 ">", 18567 "Hi", 829 "</", 29879, 29958].
  EXPECT_EQ(off, (std::vector<TokenId>{529, 29879, 29958, 18567, 829, 29879, 29958}));
  const std::vector<TokenId> on = (*tok)->Encode("<s>Hi</s>", false, true);
  EXPECT_EQ(on.front(), 1);
  EXPECT_EQ(on.back(), 2);
}

INSTANTIATE_TEST_SUITE_P(AllVocabs, SpecialTextTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string n = i.param.vocab;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace kvforge::tokenizer
