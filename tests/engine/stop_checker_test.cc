// The one end-of-sequence rule (engine/stop_checker.h) and both engines reporting it with the
// same names: an end-of-generation token or a stop id ends with "stop" in Engine and LLM alike.
#include "engine/stop_checker.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/gguf_reader.h"
#include "kvforge/engine.h"
#include "kvforge/llm.h"
#include "support/test_paths.h"

namespace kvforge {
namespace {

std::unique_ptr<tokenizer::Tokenizer> StoriesTokenizer() {
  auto f = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/models/stories260K.gguf");
  EXPECT_TRUE(f.ok());
  if (!f.ok()) return nullptr;
  auto t = tokenizer::Tokenizer::FromGguf(**f);
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(StopCheckerTest, NamesAreOpenAis) {
  EXPECT_STREQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_STREQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_STREQ(FinishReasonName(FinishReason::kAbort), "abort");
}

TEST(StopCheckerTest, EndOfGenerationAndStopIdsEndWithStopAndAreDropped) {
  auto tok = StoriesTokenizer();
  ASSERT_NE(tok, nullptr);
  const int32_t eos = tok->eos();
  const int32_t a = tok->Encode("a", false, false).at(0);
  SamplingParams p;
  p.max_tokens = 10;
  p.stop_token_ids = {a};
  for (int32_t id : {eos, a}) {
    engine::StopChecker stop(*tok, p);
    const engine::TokenOutcome out = stop.Accept(id, 0);
    EXPECT_FALSE(out.keep_token) << id;
    EXPECT_TRUE(out.finished) << id;
    EXPECT_EQ(out.reason, FinishReason::kStop) << id;
  }
  p.ignore_eos = true;
  engine::StopChecker stop(*tok, p);
  EXPECT_TRUE(stop.Accept(eos, 0).keep_token);
}

TEST(StopCheckerTest, StopStringCutsTheTextAndMaxTokensEndsWithLengthAndFlushes) {
  auto tok = StoriesTokenizer();
  ASSERT_NE(tok, nullptr);
  const auto ids = tok->Encode("Once upon a time", false, false);
  ASSERT_GE(ids.size(), 3u);
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = {"upon"};
  engine::StopChecker stop(*tok, p);
  std::string text;
  engine::TokenOutcome out;
  for (size_t i = 0; i < ids.size() && !out.finished; ++i) {
    out = stop.Accept(ids[i], static_cast<int32_t>(i));
    text += out.text;
  }
  EXPECT_TRUE(out.finished);
  EXPECT_EQ(out.reason, FinishReason::kStop);
  EXPECT_EQ(text.find("upon"), std::string::npos) << text;
  EXPECT_EQ(stop.matched_stop(), "upon");

  // Two stop strings completing at once: the one that cuts the text first is the one reported.
  p.stop = {"pon", "Once u"};
  engine::StopChecker both(*tok, p);
  out = {};
  for (size_t i = 0; i < ids.size() && !out.finished; ++i)
    out = both.Accept(ids[i], static_cast<int32_t>(i));
  EXPECT_TRUE(out.finished);
  EXPECT_EQ(both.matched_stop(), "Once u");
  const std::string whole = tok->Decode(ids);
  EXPECT_EQ(both.text(), whole.substr(0, whole.find("Once u")));

  p.stop = {"Once upon a time, there"};  // held back to the end, then flushed by "length"
  p.max_tokens = static_cast<int32_t>(ids.size());
  engine::StopChecker held(*tok, p);
  text.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    out = held.Accept(ids[i], static_cast<int32_t>(i));
    text += out.text;
    EXPECT_EQ(out.finished, i + 1 == ids.size());
  }
  EXPECT_EQ(out.reason, FinishReason::kLength);
  EXPECT_EQ(held.matched_stop(), "");
  EXPECT_EQ(text, held.text());
  EXPECT_EQ(text, tok->Decode(ids));
}

// Both engines apply the same rule: a stop token id (the path an end-of-generation token takes
// too; stories260K never emits its EOS, it separates stories with BOS) ends the sequence with
// "stop" at its first occurrence, the id itself dropped, the same tokens and text in each.
TEST(StopCheckerTest, BothEnginesStopAtTheSameTokenWithTheSameName) {
  auto engine = Engine::Create(EngineConfig{});
  ASSERT_TRUE(engine.ok()) << engine.error().ToString();
  const auto prompt = *(*engine)->Tokenize("Once upon a time", true, false);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 24;
  auto free_run = (*engine)->Generate(prompt, p);
  ASSERT_TRUE(free_run.ok());
  ASSERT_EQ(free_run->tokens.size(), 24u);
  EXPECT_EQ(free_run->finish, FinishReason::kLength);
  const int32_t stop_id = free_run->tokens[12];
  const size_t first =
      static_cast<size_t>(std::find(free_run->tokens.begin(), free_run->tokens.end(), stop_id) -
                          free_run->tokens.begin());
  p.stop_token_ids = {stop_id};
  auto single = (*engine)->Generate(prompt, p);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->finish, FinishReason::kStop);
  EXPECT_EQ(single->tokens,
            std::vector<int32_t>(free_run->tokens.begin(),
                                 free_run->tokens.begin() + static_cast<long>(first)));

  LLM llm(EngineConfig{});
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  for (int32_t max_tokens : {24, 6}) {  // "stop", then "length" before the stop id
    p.max_tokens = max_tokens;
    auto one = (*engine)->Generate(prompt, p);
    auto batched = llm.generate(std::vector<std::vector<int32_t>>{prompt}, p);
    ASSERT_TRUE(one.ok());
    ASSERT_TRUE(batched.ok());
    const CompletionOutput& c = (*batched)[0].outputs.at(0);
    EXPECT_EQ(c.finish_reason, FinishReasonName(one->finish)) << max_tokens;
    EXPECT_EQ(c.token_ids, one->tokens) << max_tokens;
    EXPECT_EQ(c.text, one->text) << max_tokens;
  }
}

// The batched engine tells which stop string ended a sequence (the Anthropic API's stop_sequence);
// an end by length, or by no stop string, reports none.
TEST(StopCheckerTest, TheBatchedEngineReportsTheStopStringThatEnded) {
  LLM llm(EngineConfig{});
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 24;
  auto free_run = llm.generate(std::vector<std::string>{"Once upon a time"}, p);
  ASSERT_TRUE(free_run.ok());
  const CompletionOutput& whole = (*free_run)[0].outputs.at(0);
  EXPECT_EQ(whole.stop_string, "");
  ASSERT_GE(whole.text.size(), 20u);
  const std::string stop = whole.text.substr(10, 4);
  p.stop = {"#never#", stop};
  auto cut = llm.generate(std::vector<std::string>{"Once upon a time"}, p);
  ASSERT_TRUE(cut.ok());
  const CompletionOutput& c = (*cut)[0].outputs.at(0);
  EXPECT_EQ(c.finish_reason, "stop");
  EXPECT_EQ(c.stop_string, stop);
  EXPECT_EQ(c.text, whole.text.substr(0, whole.text.find(stop)));
}

}  // namespace
}  // namespace kvforge
