// Model loading: hyper-parameters read from GGUF and clear errors for inconsistent models.
#include "model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/model_config_mla.h"
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

// deepseek2 (issue #18): the MLA, MoE and YaRN hyper-parameters of the three fixtures as their
// SOURCES.md and llama.cpp's load log state them.
Result<ModelConfig> ReadConfig(const std::string& model) {
  auto f = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/models/" + model);
  if (!f.ok()) return f.error();
  return ModelConfig::FromGguf(**f);
}

TEST(ModelConfigTest, Deepseek2DenseMla) {
  auto c = ReadConfig("tiny-random-deepseek2.gguf");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_TRUE(c->traits->mla);
  EXPECT_FALSE(c->rope_neox);  // adjacent pairs
  EXPECT_EQ(c->n_head_kv, 1);
  EXPECT_EQ(c->head_dim, 48);  // the latent row: 32 + 16
  EXPECT_EQ(c->mla.kv_lora_rank, 32);
  EXPECT_EQ(c->mla.q_lora_rank, 32);
  EXPECT_EQ(c->mla.nope_dim, 24);
  EXPECT_EQ(c->mla.rope_dim, 16);
  EXPECT_EQ(c->mla.v_head_dim, 24);
  EXPECT_NEAR(c->mla.attn_scale, 1.0 / std::sqrt(40.0), 1e-7);
  EXPECT_EQ(c->moe.n_expert, 0);
  EXPECT_FALSE(c->moe.IsMoeLayer(1));
  EXPECT_TRUE(c->rope_freq_factors.empty());
}

TEST(ModelConfigTest, Deepseek2V3StyleMoe) {
  auto c = ReadConfig("tiny-random-deepseek2-moe.gguf");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  const MoeConfig& m = c->moe;
  EXPECT_EQ(m.n_expert, 8);
  EXPECT_EQ(m.n_expert_used, 2);
  EXPECT_EQ(m.n_shared, 1);
  EXPECT_EQ(m.n_ff_expert, 32);
  EXPECT_EQ(m.leading_dense, 1);
  EXPECT_EQ(m.gating, ExpertGating::kSigmoid);
  EXPECT_TRUE(m.weights_norm);
  EXPECT_FLOAT_EQ(m.weights_scale, 2.5f);
  EXPECT_EQ(m.n_group, 4);
  EXPECT_EQ(m.n_group_used, 2);
  EXPECT_FALSE(m.IsMoeLayer(0));
  EXPECT_TRUE(m.IsMoeLayer(2));
}

TEST(ModelConfigTest, Deepseek2LiteYarn) {
  auto c = ReadConfig("tiny-random-deepseek2-lite.gguf");
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->mla.q_lora_rank, 0);
  EXPECT_EQ(c->moe.gating, ExpertGating::kSoftmax);
  EXPECT_EQ(c->moe.n_shared, 2);
  EXPECT_FALSE(c->moe.weights_norm);
  // SOURCES.md: pair i turns at theta_i (r_i + (1 - r_i) / 4), r = 1, 2/3, 1/3, 0, 0, ...; the
  // attention scale is (1 + 0.0707 ln 4)^2 / sqrt(40) = 0.19063.
  ASSERT_EQ(c->rope_freq_factors.size(), 8u);
  const double r[8] = {1, 2.0 / 3, 1.0 / 3, 0, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(1.0 / c->rope_freq_factors[static_cast<size_t>(i)], r[i] + (1 - r[i]) / 4, 1e-6)
        << i;
  EXPECT_FLOAT_EQ(c->rope_freq_scale, 1.0f);
  EXPECT_NEAR(c->mla.attn_scale, 0.19063, 1e-5);
}

TEST(ModelConfigTest, YarnFactorsEndpoints) {
  // No scaling: every factor is 1. A long original context moves the ramp to higher dims.
  for (float f : YarnFreqFactors(64, 10000.0f, 1.0, 4096)) EXPECT_FLOAT_EQ(f, 1.0f);
  const std::vector<float> v3 = YarnFreqFactors(64, 10000.0f, 40.0, 4096);
  EXPECT_FLOAT_EQ(v3.front(), 1.0f);  // the fastest pairs extrapolate
  EXPECT_FLOAT_EQ(v3.back(), 40.0f);  // the slowest interpolate by the full factor
  for (size_t i = 1; i < v3.size(); ++i) EXPECT_GE(v3[i], v3[i - 1]);
}

TEST(ModelConfigTest, Deepseek2LoadsEveryForm) {
  for (const char* m : {"tiny-random-deepseek2.gguf", "tiny-random-deepseek2-moe.gguf",
                        "tiny-random-deepseek2-lite.gguf"}) {
    auto model = Model::Load(kvforge::testing::SharedDir() + "/models/" + m);
    ASSERT_TRUE(model.ok()) << model.error().ToString();
    const ModelWeights& w = (*model)->weights();
    EXPECT_TRUE(w.tied_output) << m;
    EXPECT_GT(w.layers[0].mla.wk_b.rows, 0) << m;
    EXPECT_EQ((*model)->config().mla.q_lora_rank > 0, w.layers[0].mla.wq_a.rows > 0) << m;
  }
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
