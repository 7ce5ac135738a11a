// Tests for kvstore::ComputeKvCalc and its text / JSON renderings: every figure quoted in the
// PagedAttention issue, the preset table, variant comparison and error handling.
#include "kvstore/kv_calc.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace kvforge::kvstore {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

KvCalcReport Calc(const std::string& preset, int64_t seq_len, int64_t batch = 1,
                  KvDtype dtype = KvDtype::kF16) {
  const KvModelSpec* spec = FindKvPreset(preset);
  EXPECT_NE(spec, nullptr) << preset;
  KvCalcRequest req;
  req.model = *spec;
  req.seq_len = seq_len;
  req.batch = batch;
  req.dtype = dtype;
  Result<KvCalcReport> r = ComputeKvCalc(req);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

const KvCalcVariant* Variant(const KvCalcReport& r, KvAttention a) {
  for (const KvCalcVariant& v : r.variants) {
    if (v.attention == a) return &v;
  }
  return nullptr;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(KvPresetTest, PublishedShapes) {
  struct Want {
    const char* name;
    int64_t layers, heads, kv_heads, head_dim;
  };
  const Want wants[] = {
      {"llama-2-7b", 32, 32, 32, 128},    {"llama-2-13b", 40, 40, 40, 128},
      {"llama-2-70b", 80, 64, 8, 128},    {"llama-3-8b", 32, 32, 8, 128},
      {"llama-3-70b", 80, 64, 8, 128},    {"mistral-7b", 32, 32, 8, 128},
      {"gemma-2b", 18, 8, 1, 256},        {"falcon-7b", 32, 71, 1, 64},
      {"deepseek-v3", 61, 128, 128, 128},
  };
  for (const Want& w : wants) {
    const KvModelSpec* s = FindKvPreset(w.name);
    ASSERT_NE(s, nullptr) << w.name;
    EXPECT_EQ(s->n_layers, w.layers) << w.name;
    EXPECT_EQ(s->n_heads, w.heads) << w.name;
    EXPECT_EQ(s->n_kv_heads, w.kv_heads) << w.name;
    EXPECT_EQ(s->head_dim, w.head_dim) << w.name;
    EXPECT_TRUE(ValidateKvModelSpec(*s).ok()) << w.name;
  }
  const KvModelSpec* ds = FindKvPreset("DeepSeek-V3");  // case-insensitive
  ASSERT_NE(ds, nullptr);
  EXPECT_EQ(ds->mla_kv_lora_rank, 512);
  EXPECT_EQ(ds->mla_rope_dim, 64);
  EXPECT_EQ(FindKvPreset("gpt-5"), nullptr);
  EXPECT_TRUE(Contains(KvPresetNames(), "falcon-7b"));
  for (const KvModelSpec& s : KvPresets()) EXPECT_TRUE(ValidateKvModelSpec(s).ok()) << s.name;
}

TEST(KvCalcTest, Llama3_70bAt1kAnd128k) {
  KvCalcReport r = Calc("llama-3-70b", 1024);
  EXPECT_EQ(r.model().attention, KvAttention::kGqa);
  EXPECT_EQ(r.model().bytes_per_token, 327680);
  EXPECT_EQ(r.model().kv_cache_bytes, 335544320);  // 0.3125 GiB
  EXPECT_EQ(r.model().kv_cache_bytes * 16, 5 * kGiB);
  EXPECT_EQ(Calc("llama-3-70b", 131072).model().kv_cache_bytes, 40 * kGiB);
}

TEST(KvCalcTest, Llama3_8bBatch16At8kF16AndFp8) {
  KvCalcReport f16 = Calc("llama-3-8b", 8192, 16);
  EXPECT_EQ(f16.model().kv_cache_bytes, 16 * kGiB);
  KvCalcReport fp8 = Calc("llama-3-8b", 8192, 16, KvDtype::kFp8E4M3);
  // 8 GiB in the cache; the per-tensor scales (K and V, f32, 32 layers) are reported apart.
  EXPECT_EQ(fp8.model().kv_cache_bytes, 8 * kGiB);
  EXPECT_EQ(fp8.model().sequence_bytes.code_bytes * 16, 8 * kGiB);
  EXPECT_EQ(fp8.model().fixed_bytes, 256);
  EXPECT_EQ(fp8.model().total_bytes, 8 * kGiB + 256);
  nlohmann::json j = nlohmann::json::parse(FormatKvCalcJson(fp8));
  EXPECT_EQ(j["kv_cache_bytes"].get<int64_t>(), 8 * kGiB);
  EXPECT_EQ(j["kv_fixed_bytes"].get<int64_t>(), 256);
  EXPECT_EQ(j["kv_total_bytes"].get<int64_t>(), 8 * kGiB + 256);
  EXPECT_EQ(j["kv_dtype"], "fp8_e4m3");
  const std::string text = FormatKvCalcText(fp8);
  EXPECT_TRUE(Contains(text, "256 bytes")) << text;
  EXPECT_TRUE(Contains(text, "negligible")) << text;
}

TEST(KvCalcTest, Llama3_70bMhaGqaMqaAt8k) {
  KvCalcReport r = Calc("llama-3-70b", 8192);
  ASSERT_EQ(r.variants.size(), 3u);
  const KvCalcVariant* mha = Variant(r, KvAttention::kMha);
  const KvCalcVariant* gqa = Variant(r, KvAttention::kGqa);
  const KvCalcVariant* mqa = Variant(r, KvAttention::kMqa);
  ASSERT_TRUE(mha && gqa && mqa);
  EXPECT_EQ(mha->kv_heads, 64);
  EXPECT_EQ(mha->kv_cache_bytes, 20 * kGiB);
  EXPECT_EQ(gqa->kv_cache_bytes, 5 * kGiB / 2);
  EXPECT_EQ(mqa->kv_cache_bytes, 5 * kGiB / 16);
  EXPECT_TRUE(gqa->is_model);
  EXPECT_FALSE(mha->is_model);
  EXPECT_DOUBLE_EQ(gqa->ratio_vs_mha, 8.0);
  EXPECT_DOUBLE_EQ(mqa->ratio_vs_mha, 64.0);
}

TEST(KvCalcTest, DeepSeekV3MlaAgainstMhaEquivalent) {
  KvCalcReport r = Calc("deepseek-v3", 4096);
  EXPECT_EQ(r.model().attention, KvAttention::kMla);
  EXPECT_EQ(r.model().values_per_token_per_layer, 576);
  EXPECT_EQ(r.model().bytes_per_token_per_layer, 1152);
  EXPECT_EQ(r.model().bytes_per_token, 61 * 1152);
  EXPECT_EQ(r.model().kv_cache_bytes, 61LL * 4096 * 1152);
  const KvCalcVariant* mha = Variant(r, KvAttention::kMha);
  ASSERT_NE(mha, nullptr);
  EXPECT_EQ(mha->bytes_per_token_per_layer, 65536);  // 128 heads x 128 x 2 (K,V) x 2 bytes
  EXPECT_NEAR(r.model().ratio_vs_mha, 56.9, 0.05);
  EXPECT_DOUBLE_EQ(r.model().ratio_vs_mha, 65536.0 / 1152.0);
  EXPECT_EQ(Variant(r, KvAttention::kGqa), nullptr);  // n_kv_heads == n_heads
  EXPECT_NE(Variant(r, KvAttention::kMqa), nullptr);
  EXPECT_TRUE(Contains(FormatKvCalcText(r), "56.9x less"));
}

TEST(KvCalcTest, NativeMhaAndMqaModels) {
  KvCalcReport l2 = Calc("llama-2-7b", 4096);
  EXPECT_EQ(l2.model().attention, KvAttention::kMha);
  EXPECT_EQ(l2.model().kv_cache_bytes, 2 * kGiB);  // the classic 0.5 MiB per token
  EXPECT_EQ(l2.variants.size(), 2u);               // MHA and MQA
  KvCalcReport falcon = Calc("falcon-7b", 2048);
  EXPECT_EQ(falcon.model().attention, KvAttention::kMqa);
  EXPECT_EQ(falcon.model().bytes_per_token, 32 * 2 * 64 * 2);
  KvCalcReport gemma = Calc("gemma-2b", 8192);
  EXPECT_EQ(gemma.model().bytes_per_token, 18 * 2 * 256 * 2);
}

TEST(KvCalcTest, QuantizedDtypesCountScales) {
  KvCalcReport q8 = Calc("llama-3-8b", 1000, 1, KvDtype::kQ8_0);
  EXPECT_EQ(q8.model().bytes_per_token, 32 * 2 * 1088);
  EXPECT_EQ(q8.model().sequence_bytes.scale_bytes, 32LL * 1000 * 2 * 32 * 2);
  EXPECT_TRUE(Contains(FormatKvCalcText(q8), "per block of 32 values"));
  KvCalcReport int8 = Calc("llama-3-8b", 1000, 1, KvDtype::kInt8);
  EXPECT_EQ(int8.model().bytes_per_token, 32 * 2 * (1024 + 16));
  KvCalcReport kivi = Calc("llama-3-8b", 1000, 2, KvDtype::kKivi2);
  EXPECT_EQ(kivi.request.block_tokens, 32);  // defaulted to the KIVI group
  EXPECT_EQ(kivi.model().bytes_per_token, 32 * 768);
  EXPECT_EQ(kivi.model().kv_cache_bytes, 2LL * 32 * 1154048);
  EXPECT_TRUE(Contains(FormatKvCalcText(kivi), "residual window"));
  // turbo3 at head_dim 128: 3 bits per value + one f16 norm per token per KV head.
  KvCalcReport turbo = Calc("llama-3-8b", 1000, 1, KvDtype::kTurbo3);
  EXPECT_EQ(turbo.model().bytes_per_token, 32 * 2 * (384 + 16));
  EXPECT_EQ(turbo.model().sequence_bytes.scale_bytes, 32LL * 1000 * 2 * 8 * 2);
  EXPECT_TRUE(Contains(FormatKvCalcText(turbo), "f16 norm per token per KV head"));
}

TEST(KvCalcTest, PagedFiguresRoundUpToBlocks) {
  KvCalcReport r = Calc("llama-3-8b", 1000);
  EXPECT_EQ(r.model().blocks_per_sequence, 63);  // ceil(1000 / 16)
  EXPECT_EQ(r.model().paged_kv_cache_bytes, 63LL * 16 * 131072);
  KvCalcRequest req = r.request;
  req.block_tokens = 32;
  Result<KvCalcReport> r32 = ComputeKvCalc(req);
  ASSERT_TRUE(r32.ok());
  EXPECT_EQ(r32->model().blocks_per_sequence, 32);
}

TEST(KvCalcTest, TextShowsGiBMiBAndExactBytes) {
  const std::string text = FormatKvCalcText(Calc("llama-3-70b", 1024));
  EXPECT_TRUE(Contains(text, "0.3125 GiB = 320 MiB (335544320 bytes)")) << text;
  EXPECT_TRUE(Contains(text, "327680 bytes")) << text;
  EXPECT_TRUE(Contains(text, "MHA")) << text;
  EXPECT_TRUE(Contains(text, "GQA *")) << text;
  EXPECT_EQ(FormatGiB(40 * kGiB), "40 GiB = 40960 MiB (42949672960 bytes)");
}

TEST(KvCalcTest, JsonHasIntegerFigures) {
  const std::string json = FormatKvCalcJson(Calc("llama-3-70b", 8192));
  ASSERT_EQ(json.back(), '\n');
  nlohmann::json j = nlohmann::json::parse(json);
  ASSERT_TRUE(j["bytes_per_token"].is_number_integer());
  ASSERT_TRUE(j["kv_cache_bytes"].is_number_integer());
  EXPECT_EQ(j["bytes_per_token"].get<int64_t>(), 327680);
  EXPECT_EQ(j["kv_cache_bytes"].get<int64_t>(), 5 * kGiB / 2);
  EXPECT_EQ(j["kv_dtype"], "f16");
  EXPECT_EQ(j["n_layers"], 80);
  EXPECT_EQ(j["attention"], "GQA");
  ASSERT_EQ(j["variants"].size(), 3u);
  EXPECT_EQ(j["variants"][0]["name"], "MHA");
  EXPECT_EQ(j["variants"][0]["kv_cache_bytes"].get<int64_t>(), 20 * kGiB);
  EXPECT_EQ(j["variants"][2]["kv_cache_bytes"].get<int64_t>(), 5 * kGiB / 16);

  nlohmann::json ds = nlohmann::json::parse(FormatKvCalcJson(Calc("deepseek-v3", 10)));
  EXPECT_EQ(ds["bytes_per_token_per_layer"], 1152);
  EXPECT_EQ(ds["attention"], "MLA");
  KvCalcRequest req;
  req.model = *FindKvPreset("llama-3-8b");
  req.model.name = "we\"ird\\name";
  req.seq_len = 1;
  nlohmann::json weird = nlohmann::json::parse(FormatKvCalcJson(ComputeKvCalc(req).value()));
  EXPECT_EQ(weird["model"], "we\"ird\\name");
}

TEST(KvCalcTest, CustomShapes) {
  KvCalcRequest req;
  req.model.n_layers = 2;
  req.model.n_kv_heads = 4;
  req.model.head_dim = 64;
  req.seq_len = 10;
  Result<KvCalcReport> r = ComputeKvCalc(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->request.model.name, "custom");
  EXPECT_EQ(r->request.model.n_heads, 4);  // assumed MHA
  EXPECT_EQ(r->model().attention, KvAttention::kMha);
  EXPECT_FALSE(r->notes.empty());
  EXPECT_EQ(r->model().kv_cache_bytes, 2 * 2 * 10 * 4 * 64 * 2);

  KvCalcRequest mla;
  mla.model.n_layers = 3;
  mla.model.mla_kv_lora_rank = 256;
  mla.model.mla_rope_dim = 32;
  mla.seq_len = 5;
  Result<KvCalcReport> m = ComputeKvCalc(mla);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->variants.size(), 1u);  // nothing to compare with
  EXPECT_EQ(m->model().kv_cache_bytes, 3 * 5 * 288 * 2);
  EXPECT_DOUBLE_EQ(m->model().ratio_vs_mha, 0.0);
  EXPECT_FALSE(FormatKvCalcText(*m).empty());
}

TEST(KvCalcTest, ContextNote) {
  KvCalcReport r = Calc("llama-2-7b", 8192);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_TRUE(Contains(r.notes[0], "trained context of 4096"));
}

TEST(KvCalcTest, Errors) {
  auto code = [](KvCalcRequest req) { return ComputeKvCalc(req).status().code(); };
  KvCalcRequest good;
  good.model = *FindKvPreset("llama-3-8b");
  good.seq_len = 128;
  ASSERT_TRUE(ComputeKvCalc(good).ok());
  KvCalcRequest r = good;
  r.seq_len = 0;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.batch = -1;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.block_tokens = -16;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.model.n_layers = 0;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.model.head_dim = -1;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.model.n_heads = 12;  // not a multiple of 8 KV heads
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.model.n_heads = 4;  // fewer than KV heads
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.model.mla_kv_lora_rank = 512;  // rope dim missing
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.batch = int64_t{1} << 40;  // 128 KiB/token x 128 x 2^40 overflows int64
  r.seq_len = int64_t{1} << 20;
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
  r = good;
  r.model = *FindKvPreset("deepseek-v3");
  r.dtype = KvDtype::kKivi2;
  EXPECT_EQ(code(r), StatusCode::kUnimplemented);
  r = good;
  r.model.head_dim = 80;
  r.model.n_heads = 32;
  r.dtype = KvDtype::kQ4_0;  // 80 is not a multiple of 32
  EXPECT_EQ(code(r), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvforge::kvstore
