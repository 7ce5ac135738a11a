// Generation behaviour: sampling determinism, stop strings, limits and bad requests.
#include <gtest/gtest.h>

#include "kvforge/engine.h"

namespace kvforge {
namespace {

std::unique_ptr<Engine> Embedded() {
  EngineConfig o;
  o.max_model_len = 256;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok());
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(GenerateTest, SameSeedSameOutputDifferentSeedDiffers) {
  auto e = Embedded();
  ASSERT_NE(e, nullptr);
  const auto ids = *e->Tokenize("Once upon a time", true, false);
  SamplingParams p;
  p.temperature = 1.0f;
  p.max_tokens = 40;
  p.seed = 42;
  auto a = e->Generate(ids, p);
  auto b = e->Generate(ids, p);
  p.seed = 43;
  auto c = e->Generate(ids, p);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
}

TEST(GenerateTest, StopStringEndsGenerationAndIsNotReturned) {
  auto e = Embedded();
  ASSERT_NE(e, nullptr);
  const auto ids = *e->Tokenize("Once upon a time", true, false);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 64;
  p.stop = {"Lily"};
  std::string streamed;
  auto r = e->Generate(ids, p, [&](int32_t, const std::string& piece) {
    streamed += piece;
    return true;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kStop);
  EXPECT_EQ(r->text, ", there was a little girl named ");
  EXPECT_EQ(streamed, r->text);  // nothing of the stop string leaked into the stream
}

TEST(GenerateTest, MaxTokensAndCallbackCancel) {
  auto e = Embedded();
  ASSERT_NE(e, nullptr);
  const auto ids = *e->Tokenize("Once upon a time", true, false);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 5;
  auto r = e->Generate(ids, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens.size(), 5u);
  EXPECT_EQ(r->finish, FinishReason::kLength);
  p.max_tokens = 50;
  int calls = 0;
  r = e->Generate(ids, p, [&](int32_t, const std::string&) { return ++calls < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish, FinishReason::kAbort);
  EXPECT_EQ(calls, 3);
}

TEST(GenerateTest, RequestsBeyondContextOrCapacityAreRejected) {
  EngineConfig o;
  o.max_model_len = 24;
  auto e = Engine::Create(o);
  ASSERT_TRUE(e.ok());
  const auto ids = *(*e)->Tokenize("Once upon a time", true, false);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 1000;
  auto r = (*e)->Generate(ids, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("context holds 24"), std::string::npos) << r.error().message();
  p.max_tokens = 24 - static_cast<int>(ids.size());
  r = (*e)->Generate(ids, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(ids.size() + r->tokens.size(), 24u);
  // A KV budget of 1 block (16 tokens) cannot hold 24 tokens: a clear capacity error.
  o.kv_cache_memory_bytes = 16 * 640;  // 640 bytes per token (f16, stories260K)
  auto small = Engine::Create(o);
  ASSERT_TRUE(small.ok()) << small.error().ToString();
  r = (*small)->Generate(ids, p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kResourceExhausted);
  o.kv_cache_memory_bytes = 100;  // less than one block
  EXPECT_EQ(Engine::Create(o).error().code(), StatusCode::kResourceExhausted);
}

TEST(GenerateTest, BadRequestsGetClearErrors) {
  auto e = Embedded();
  ASSERT_NE(e, nullptr);
  SamplingParams p;
  EXPECT_EQ(e->Generate({}, p).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Generate({1, 99999}, p).error().code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> too_long(300, 5);
  EXPECT_EQ(e->Generate(too_long, p).error().code(), StatusCode::kInvalidArgument);
  p.temperature = -1;
  EXPECT_EQ(e->Generate({1, 5}, p).error().code(), StatusCode::kInvalidArgument);
  p = SamplingParams();
  p.top_p = 0;
  EXPECT_EQ(e->Generate({1, 5}, p).error().code(), StatusCode::kInvalidArgument);
  p = SamplingParams();
  p.max_tokens = -3;
  EXPECT_EQ(e->Generate({1, 5}, p).error().code(), StatusCode::kInvalidArgument);
}

TEST(EngineTest, MissingOrCorruptModelIsAnError) {
  EngineConfig o;
  o.model = "/nonexistent/model.gguf";
  auto e = Engine::Create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message().find("/nonexistent/model.gguf"), std::string::npos);
  o.model = "/dev/null";
  EXPECT_FALSE(Engine::Create(o).ok());
  o.model = "";
  o.block_size = 0;
  EXPECT_EQ(Engine::Create(o).error().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvforge
