// Model loading: hyper-parameters read from GGUF and clear errors for inconsistent models.
#include "model/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "support/test_paths.h"

namespace kvforge::model {
namespace {

TEST(ModelConfigTest, StoriesHyperParameters) {
  auto f = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/models/stories260K.gguf");
  ASSERT_TRUE(f.ok());
  auto c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->n_embd, 64);
  EXPECT_EQ(c->n_layer, 5);
  EXPECT_EQ(c->n_head, 8);
  EXPECT_EQ(c->n_head_kv, 4);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->n_ff, 172);
  EXPECT_EQ(c->n_vocab, 512);
  EXPECT_EQ(c->n_ctx_train, 512);
  EXPECT_FALSE(c->rope_neox);
  EXPECT_EQ(c->kv_dim(), 32);
}

TEST(ModelConfigTest, Qwen2UsesNeoxRopeAndBiases) {
  auto f = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/models/tiny-random-qwen2.gguf");
  ASSERT_TRUE(f.ok());
  auto c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_TRUE(c->rope_neox);
  EXPECT_TRUE(c->traits->qkv_bias);
  EXPECT_EQ(c->n_head, 4);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_FLOAT_EQ(c->rope_freq_base, 1e6f);
}

Status LoadWith(void (*edit)(gguf::GgufWriter*)) {
  gguf::GgufWriter w;
  edit(&w);
  const std::string p = (std::filesystem::temp_directory_path() / "kvf_cfg_test.gguf").string();
  KVF_RETURN_IF_ERROR(w.WriteFile(p));
  auto m = Model::Load(p);
  return m.ok() ? Status::Ok() : m.error();
}

TEST(ModelConfigTest, ClearErrorsForBadModels) {
  Status s = LoadWith([](gguf::GgufWriter* w) { w->SetString("general.architecture", "mamba"); });
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("mamba"), std::string::npos);
  s = LoadWith([](gguf::GgufWriter* w) { w->SetString("general.architecture", "llama"); });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("llama.embedding_length"), std::string::npos);
  s = LoadWith([](gguf::GgufWriter* w) {
    w->SetString("general.architecture", "llama");
    w->SetU32("llama.embedding_length", 64);
    w->SetU32("llama.block_count", 1);
    w->SetU32("llama.feed_forward_length", 128);
    w->SetU32("llama.attention.head_count", 6);
    w->SetU32("llama.attention.head_count_kv", 4);
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("multiple"), std::string::npos);
  s = LoadWith([](gguf::GgufWriter* w) {
    w->SetString("general.architecture", "llama");
    w->SetU32("llama.embedding_length", 64);
    w->SetU32("llama.block_count", 1);
    w->SetU32("llama.feed_forward_length", 128);
    w->SetU32("llama.attention.head_count", 4);
    w->SetStringArray("tokenizer.ggml.tokens", {"a", "b"});
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);  // token_embd.weight missing
  EXPECT_NE(s.message().find("token_embd.weight"), std::string::npos);
  s = LoadWith([](gguf::GgufWriter* w) {
    w->SetString("general.architecture", "llama");
    w->SetString("llama.embedding_length", "sixty-four");
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvforge::model
