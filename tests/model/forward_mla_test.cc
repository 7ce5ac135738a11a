// deepseek2 (MLA + MoE) against the double-precision naive-form oracle (tests/support), on the
// three shared fixtures: both attention paths, any chunking, the latent cache in several dtypes,
// the legacy fused attn_kv_b form, and the MoE routing's properties on random logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"
#include "model/moe_routing.h"
#include "model/random_model.h"
#include "support/reference_deepseek2.h"
#include "support/test_paths.h"

namespace kvforge::model {
namespace {

std::string Fixture(const std::string& name) {
  return kvforge::testing::SharedDir() + "/models/tiny-random-" + name + ".gguf";
}

struct Run {
  std::unique_ptr<Model> model;
  std::unique_ptr<kvstore::PagedKvCache> kv;
  Workspace ws;
  kernels::ThreadPool pool{2};
};

std::unique_ptr<Run> MakeRun(const std::string& path,
                             kvquant::KvDtype dtype = kvquant::KvDtype::kF32) {
  auto r = std::make_unique<Run>();
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.error().ToString();
  if (!m.ok()) return nullptr;
  r->model = std::move(*m);
  const ModelConfig& c = r->model->config();
  kvstore::PagedKvCacheConfig kc;
  kc.store.n_layer = static_cast<int32_t>(c.n_layer);
  kc.store.n_kv_head = static_cast<int32_t>(c.n_head_kv);
  kc.store.head_dim = static_cast<int32_t>(c.head_dim);
  kc.store.latent_rank = static_cast<int32_t>(c.mla.kv_lora_rank);
  kc.store.block_tokens = 16;
  kc.store.num_blocks = 32;
  kc.store.k_dtype = kc.store.v_dtype = dtype;
  auto kv = kvstore::PagedKvCache::Create(kc);
  EXPECT_TRUE(kv.ok()) << kv.error().ToString();
  if (!kv.ok()) return nullptr;
  r->kv = std::move(*kv);
  return r;
}

// All-token logits for `tokens` fed in chunks of `chunk`, on the given MLA path.
std::vector<float> Logits(Run& r, const std::vector<int32_t>& tokens, int64_t chunk,
                          MlaAttention path) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t V = r.model->config().n_vocab;
  r.kv->Free(0);
  EXPECT_TRUE(r.kv->AddSequence(0, n));
  std::vector<float> all(static_cast<size_t>(n * V)), logits;
  for (int64_t b = 0; b < n; b += chunk) {
    const int64_t e = std::min(n, b + chunk);
    Batch batch;
    batch.mla = path;
    batch.tokens.assign(tokens.begin() + b, tokens.begin() + e);
    batch.seqs.push_back({0, b, 0, e - b, true, true});
    Status s = r.model->Forward(batch, *r.kv, r.ws, r.pool, &logits);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::copy(logits.begin(), logits.end(), all.begin() + b * V);
  }
  return all;
}

std::vector<int32_t> RandomTokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(259 + rng() % 253);  // the fixtures' live rows
  return t;
}

double MaxRelError(const std::vector<float>& got, const std::vector<std::vector<double>>& want) {
  double max_abs = 0, max_diff = 0;
  const size_t V = want[0].size();
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < V; ++j) {
      max_abs = std::max(max_abs, std::fabs(want[i][j]));
      max_diff = std::max(max_diff, std::fabs(want[i][j] - got[i * V + j]));
    }
  return max_diff / std::max(max_abs, 1e-9);
}

class MlaForward : public ::testing::TestWithParam<std::string> {};

// Absorbed, naive and auto, in one chunk, token by token and in uneven chunks: every form equals
// the f64 oracle to f32 rounding.
TEST_P(MlaForward, BothPathsEveryChunkingMatchTheOracle) {
  auto run = MakeRun(Fixture(GetParam()));
  ASSERT_NE(run, nullptr);
  auto oracle = kvforge::testing::ReferenceDeepseek2::Load(Fixture(GetParam()));
  ASSERT_TRUE(oracle.ok()) << oracle.error().ToString();
  const auto tokens = RandomTokens(70, 5);
  const auto want = (*oracle)->Logits(tokens);
  for (MlaAttention path : {MlaAttention::kAbsorbed, MlaAttention::kNaive, MlaAttention::kAuto})
    for (int64_t chunk : {70, 1, 23}) {
      const auto got = Logits(*run, tokens, chunk, path);
      EXPECT_LT(MaxRelError(got, want), 2e-5)
          << GetParam() << " path " << static_cast<int>(path) << " chunk " << chunk;
    }
}

// Latent caches in reduced precision: both paths read the same decoded latents, so they agree
// tightly with each other; f16 also stays near f32. (Lower precisions move the routing of the
// MoE fixtures, which is discontinuous, so only the paths' agreement is asserted for them.)
TEST_P(MlaForward, LatentCacheDtypesAgreeAcrossPaths) {
  const auto tokens = RandomTokens(40, 9);
  auto f32 = MakeRun(Fixture(GetParam()));
  ASSERT_NE(f32, nullptr);
  const auto want = Logits(*f32, tokens, 40, MlaAttention::kAuto);
  const size_t V = static_cast<size_t>(f32->model->config().n_vocab);
  auto rows = [&](const std::vector<float>& flat) {
    std::vector<std::vector<double>> r(40);
    for (size_t i = 0; i < 40; ++i) r[i].assign(flat.begin() + i * V, flat.begin() + (i + 1) * V);
    return r;
  };
  for (kvquant::KvDtype d : {kvquant::KvDtype::kF16, kvquant::KvDtype::kBf16,
                             kvquant::KvDtype::kFp8E4M3, kvquant::KvDtype::kInt8}) {
    auto run = MakeRun(Fixture(GetParam()), d);
    ASSERT_NE(run, nullptr);
    const auto absorbed = Logits(*run, tokens, 13, MlaAttention::kAbsorbed);
    const auto naive = Logits(*run, tokens, 13, MlaAttention::kNaive);
    EXPECT_LT(MaxRelError(absorbed, rows(naive)), 5e-4)
        << GetParam() << " " << kvquant::KvDtypeName(d);
    if (d == kvquant::KvDtype::kF16) {
      EXPECT_LT(MaxRelError(absorbed, rows(want)), 5e-3) << GetParam();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Deepseek2, MlaForward,
                         ::testing::Values("deepseek2", "deepseek2-moe", "deepseek2-lite"));

// Two sequences in one step, one long prefill chunk (naive under auto) and one decode token
// (absorbed): each equals its own run alone.
TEST(MlaForwardMixed, AutoMixesPathsInOneStep) {
  auto run = MakeRun(Fixture("deepseek2-moe"));
  ASSERT_NE(run, nullptr);
  const ModelConfig& c = run->model->config();
  EXPECT_EQ(ChooseMlaPath(c.mla, c.n_head, 1, 500), MlaAttention::kAbsorbed);
  EXPECT_EQ(ChooseMlaPath(c.mla, c.n_head, 64, 64), MlaAttention::kNaive);
  const auto a = RandomTokens(40, 1), b = RandomTokens(21, 2);
  const int64_t V = c.n_vocab;
  const auto alone_a = Logits(*run, a, 40, MlaAttention::kAbsorbed);
  const auto alone_b = Logits(*run, b, 21, MlaAttention::kAbsorbed);
  run->kv->Free(0);
  ASSERT_TRUE(run->kv->AddSequence(0, 40));
  ASSERT_TRUE(run->kv->AddSequence(1, 21));
  std::vector<float> logits;
  {  // b's first 20 tokens
    Batch batch;
    batch.tokens.assign(b.begin(), b.begin() + 20);
    batch.seqs.push_back({1, 0, 0, 20, false, true});
    ASSERT_TRUE(run->model->Forward(batch, *run->kv, run->ws, run->pool, &logits).ok());
  }
  Batch batch;  // a's 40-token prefill with b's last token
  batch.tokens = a;
  batch.tokens.push_back(b[20]);
  batch.seqs.push_back({0, 0, 0, 40, false, true});
  batch.seqs.push_back({1, 20, 40, 1, false, true});
  ASSERT_TRUE(run->model->Forward(batch, *run->kv, run->ws, run->pool, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<size_t>(2 * V));
  for (int64_t j = 0; j < V; ++j) {
    EXPECT_NEAR(logits[j], alone_a[39 * V + j], 1e-4);
    EXPECT_NEAR(logits[V + j], alone_b[20 * V + j], 1e-4);
  }
}

// The engine's mla_attention setting (Model::SetMlaAttention) is what a batch that leaves the
// form to auto runs: forced naive or absorbed, long chunk or single token, bit for bit the same
// logits as the batch asking for that form itself; and the two forced forms differ only by f32
// rounding.
TEST(MlaForwardDefault, TheModelSettingGovernsAutoBatches) {
  auto run = MakeRun(Fixture("deepseek2-lite"));
  ASSERT_NE(run, nullptr);
  const auto tokens = RandomTokens(37, 5);
  for (int64_t chunk : {int64_t{1}, int64_t{37}}) {
    std::vector<float> forced[2];
    const MlaAttention forms[2] = {MlaAttention::kAbsorbed, MlaAttention::kNaive};
    for (int i = 0; i < 2; ++i) {
      run->model->SetMlaAttention(MlaAttention::kAuto);
      forced[i] = Logits(*run, tokens, chunk, forms[i]);
      run->model->SetMlaAttention(forms[i]);
      const auto by_setting = Logits(*run, tokens, chunk, MlaAttention::kAuto);
      EXPECT_EQ(by_setting, forced[i]) << "chunk " << chunk << " form " << i;
    }
    double max_diff = 0, max_abs = 0;
    for (size_t j = 0; j < forced[0].size(); ++j) {
      max_diff = std::max(max_diff, double{std::fabs(forced[0][j] - forced[1][j])});
      max_abs = std::max(max_abs, double{std::fabs(forced[0][j])});
    }
    // The two forms sum in different orders, and f32 rounding through the layers grows with the
    // logits (up to ~50 here): 4e-6 of the largest, at least 1e-4 (AVX2 kernels: under 1e-4;
    // AVX-512: 1.2e-4).
    EXPECT_LT(max_diff, std::max(1e-4, 4e-6 * max_abs))
        << "chunk " << chunk << ", |logit| <= " << max_abs;
  }
  run->model->SetMlaAttention(MlaAttention::kAuto);
}

// A lone decode token of a one-KV-head model is split over query heads (attention_tasks.cc) so
// both cores work; the same token decoded beside three others is not. Both give the same logits
// and the same observed attention weights (an eviction policy's statistics).
TEST(MlaForwardSplit, SplitQueryHeadsGiveTheSameLogitsAndObservedWeights) {
  auto run = MakeRun(Fixture("deepseek2-moe"));
  ASSERT_NE(run, nullptr);
  const ModelConfig& c = run->model->config();
  const int64_t V = c.n_vocab, kPrompt = 20, kSlots = kPrompt + 1;
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 4; ++i) prompts.push_back(RandomTokens(kPrompt + 1, 10 + i));
  // Prefills `n_seqs` sequences, then decodes their last token in one step, observing sequence
  // 0: its logits and observed rows [layers][slots].
  auto decode = [&](int n_seqs, std::vector<float>* logits0, std::vector<float>* observed) {
    for (int64_t sq = 0; sq < 4; ++sq) run->kv->Free(sq);
    std::vector<float> logits;
    for (int64_t sq = 0; sq < n_seqs; ++sq) {
      ASSERT_TRUE(run->kv->AddSequence(sq, kSlots));
      Batch b;
      b.tokens.assign(prompts[sq].begin(), prompts[sq].begin() + kPrompt);
      b.seqs.push_back({sq, 0, 0, kPrompt, false, true});
      ASSERT_TRUE(run->model->Forward(b, *run->kv, run->ws, run->pool, &logits).ok());
    }
    observed->assign(static_cast<size_t>(c.n_layer * kSlots), 0.0f);
    Batch b;
    b.mla = MlaAttention::kAbsorbed;
    for (int64_t sq = 0; sq < n_seqs; ++sq) {
      b.tokens.push_back(prompts[sq][kPrompt]);
      b.seqs.push_back({sq, kPrompt, sq, 1, false, true});
    }
    b.seqs[0].observed = observed->data();
    b.seqs[0].observed_stride = kSlots;
    ASSERT_TRUE(run->model->Forward(b, *run->kv, run->ws, run->pool, &logits).ok());
    logits0->assign(logits.begin(), logits.begin() + V);
  };
  std::vector<float> alone, alone_obs, beside, beside_obs;
  decode(1, &alone, &alone_obs);
  decode(4, &beside, &beside_obs);
  for (int64_t j = 0; j < V; ++j) EXPECT_NEAR(alone[j], beside[j], 1e-4) << j;
  double mass = 0;
  for (size_t i = 0; i < alone_obs.size(); ++i) {
    EXPECT_NEAR(alone_obs[i], beside_obs[i], 1e-5) << i;
    mass += alone_obs[i];
  }
  // Every layer's weights sum to 1 per query head.
  EXPECT_NEAR(mass, static_cast<double>(c.n_layer * c.n_head), 1e-3);
}

// The legacy fused attn_kv_b (per head N key rows then Vh value rows of R columns), built here
// from the split tensors, loads and computes the same logits.
TEST(MlaForwardLegacy, FusedKvBEqualsTheSplitForm) {
  const std::string src = Fixture("deepseek2");
  auto f = gguf::GgufFile::Open(src);
  ASSERT_TRUE(f.ok());
  auto m = Model::Load(src);
  ASSERT_TRUE(m.ok());
  const MlaConfig& a = (*m)->config().mla;
  const int64_t H = (*m)->config().n_head, R = a.kv_lora_rank, N = a.nope_dim, Vh = a.v_head_dim;
  gguf::GgufWriter w;
  for (const auto& key : (*f)->keys()) w.CopyValue(key, *(*f)->Find(key));
  for (const auto& t : (*f)->tensors()) {
    const bool k_b = t.name.find("attn_k_b") != std::string::npos;
    if (t.name.find("attn_v_b") != std::string::npos) continue;
    if (!k_b) {
      ASSERT_TRUE(
          w.AddTensor(t.name, t.dtype, t.dims, std::vector<uint8_t>(t.data, t.data + t.nbytes))
              .ok());
      continue;
    }
    const std::string layer = t.name.substr(0, t.name.find("attn_k_b"));
    const float* kb = reinterpret_cast<const float*>(t.data);  // [H][R][N]
    const float* vb =
        reinterpret_cast<const float*>((*f)->FindTensor(layer + "attn_v_b.weight")->data);
    std::vector<float> kv(static_cast<size_t>(H * (N + Vh) * R));  // [H][N + Vh][R]
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < N; ++d)
        for (int64_t r = 0; r < R; ++r)
          kv[static_cast<size_t>((h * (N + Vh) + d) * R + r)] = kb[(h * R + r) * N + d];
      for (int64_t d = 0; d < Vh; ++d)
        for (int64_t r = 0; r < R; ++r)
          kv[static_cast<size_t>((h * (N + Vh) + N + d) * R + r)] = vb[(h * Vh + d) * R + r];
    }
    std::vector<uint8_t> bytes(kv.size() * 4);
    std::memcpy(bytes.data(), kv.data(), bytes.size());
    ASSERT_TRUE(w.AddTensor(layer + "attn_kv_b.weight", tensor::DType::kF32, {R, H * (N + Vh)},
                            std::move(bytes))
                    .ok());
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "kvf_deepseek2_kv_b.gguf").string();
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto split = MakeRun(src), fused = MakeRun(path);
  ASSERT_NE(split, nullptr);
  ASSERT_NE(fused, nullptr);
  const auto tokens = RandomTokens(30, 4);
  for (MlaAttention form : {MlaAttention::kAbsorbed, MlaAttention::kNaive}) {
    const auto x = Logits(*split, tokens, 30, form), y = Logits(*fused, tokens, 30, form);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-4) << i;
  }
}

// RouteToken's choices on random logits: distinct experts from the best groups, no eligible
// expert left out that scores above a chosen one, weights normalised and scaled.
TEST(MoeRouting, PropertiesOnRandomLogits) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int round = 0; round < 2000; ++round) {
    MoeConfig m;
    m.n_expert = 8 << (rng() % 3);
    m.n_group = (round % 3 == 0) ? 0 : 4;
    m.n_group_used = m.n_group == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 3);
    const int64_t eligible_max =
        m.n_group == 0 ? m.n_expert : m.n_group_used * (m.n_expert / m.n_group);
    m.n_expert_used = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(eligible_max));
    m.gating = round % 2 ? ExpertGating::kSigmoid : ExpertGating::kSoftmax;
    m.weights_norm = round % 4 < 2;
    m.weights_scale = round % 5 == 0 ? 2.5f : 1.0f;
    std::vector<float> logits(static_cast<size_t>(m.n_expert)), bias(logits.size());
    for (auto& x : logits) x = nd(rng);
    for (auto& x : bias) x = 0.1f * nd(rng);
    const bool use_bias = round % 7 < 4;
    std::vector<int32_t> ex(static_cast<size_t>(m.n_expert_used));
    std::vector<float> w(ex.size());
    RouteToken(m, logits.data(), use_bias ? bias.data() : nullptr, ex.data(), w.data());
    // Independent recomputation of probabilities and selection scores.
    std::vector<double> prob(logits.size()), sel(logits.size());
    double z = 0;
    for (size_t e = 0; e < prob.size(); ++e) z += std::exp(static_cast<double>(logits[e]));
    for (size_t e = 0; e < prob.size(); ++e) {
      prob[e] = m.gating == ExpertGating::kSigmoid ? 1 / (1 + std::exp(-double(logits[e])))
                                                   : std::exp(double(logits[e])) / z;
      sel[e] = prob[e] + (use_bias ? bias[e] : 0.0);
    }
    std::set<int64_t> groups;
    const int64_t per = m.n_group == 0 ? m.n_expert : m.n_expert / m.n_group;
    auto group_score = [&](int64_t g) {
      std::vector<double> s(sel.begin() + g * per, sel.begin() + (g + 1) * per);
      std::sort(s.rbegin(), s.rend());
      return s[0] + (s.size() > 1 ? s[1] : 0.0);
    };
    std::set<int32_t> seen(ex.begin(), ex.end());
    ASSERT_EQ(seen.size(), ex.size()) << "round " << round;
    for (int32_t e : ex) groups.insert(e / per);
    if (m.n_group > 0) {
      ASSERT_LE(static_cast<int64_t>(groups.size()), m.n_group_used);
      // Every chosen group is among the n_group_used best.
      for (int64_t g : groups) {
        int better = 0;
        for (int64_t o = 0; o < m.n_group; ++o) better += group_score(o) > group_score(g);
        ASSERT_LT(better, m.n_group_used) << "round " << round;
      }
    }
    const double worst_chosen = sel[static_cast<size_t>(ex.back())];
    for (size_t i = 1; i < ex.size(); ++i)
      ASSERT_GE(sel[static_cast<size_t>(ex[i - 1])], sel[static_cast<size_t>(ex[i])]);
    for (int32_t e = 0; e < m.n_expert; ++e) {
      if (seen.count(e)) continue;
      const bool eligible = m.n_group == 0 || [&] {
        int better = 0;
        for (int64_t o = 0; o < m.n_group; ++o) better += group_score(o) > group_score(e / per);
        return better < m.n_group_used;
      }();
      if (eligible) {
        ASSERT_LE(sel[static_cast<size_t>(e)], worst_chosen) << "round " << round;
      }
    }
    double sum = 0;
    for (size_t i = 0; i < ex.size(); ++i) sum += prob[static_cast<size_t>(ex[i])];
    for (size_t i = 0; i < ex.size(); ++i) {
      const double want = (m.weights_norm ? prob[static_cast<size_t>(ex[i])] / sum
                                          : prob[static_cast<size_t>(ex[i])]) *
                          m.weights_scale;
      ASSERT_NEAR(w[i], want, 1e-5) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace kvforge::model

namespace kvforge::model {
namespace {

// A small deepseek2 shape for make-model style tests: 128 wide, 4 heads, a 64 + 32 latent row.
RandomModelSpec SmallDeepseek2(int64_t layers) {
  RandomModelSpec s;
  s.arch = "deepseek2";
  s.dim = 128;
  s.layers = layers;
  s.heads = 4;
  s.kv_lora_rank = 64;
  s.qk_rope_dim = 32;
  return s;
}

// make-model --arch deepseek2 in its forms (q-lora on / off, dense / MoE with V2 or V3 routing,
// float and quantized weights) loads and matches the oracle; quantized weights (experts included)
// run through both paths alike.
TEST(MlaRandomModels, EveryFormMatchesTheOracle) {
  auto vocab = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/models/stories260K.gguf");
  ASSERT_TRUE(vocab.ok());
  struct Form {
    const char* name;
    int64_t q_lora, experts;
    bool sigmoid;
    tensor::DType dtype;
    double tol;  // vs the oracle
  };
  for (const Form& f : {Form{"lite-dense", 0, 0, false, tensor::DType::kF32, 2e-5},
                        Form{"qlora-dense", 32, 0, false, tensor::DType::kF16, 2e-5},
                        Form{"v2-moe", 0, 8, false, tensor::DType::kF32, 2e-5},
                        Form{"v3-moe", 32, 8, true, tensor::DType::kF32, 2e-5},
                        Form{"v3-moe-q8_0", 32, 8, true, tensor::DType::kQ8_0, 0.05}}) {
    RandomModelSpec s = SmallDeepseek2(3);
    s.q_lora_rank = f.q_lora;
    s.experts = f.experts;
    s.experts_used = 2;
    s.shared_experts = 1;
    s.expert_ffn = 64;
    s.sigmoid_gating = f.sigmoid;
    s.dtype = f.dtype;
    const std::string path =
        (std::filesystem::temp_directory_path() / (std::string("kvf_ds_") + f.name + ".gguf"))
            .string();
    ASSERT_TRUE(WriteRandomModel(s, **vocab, path).ok()) << f.name;
    auto run = MakeRun(path);
    ASSERT_NE(run, nullptr) << f.name;
    auto oracle = kvforge::testing::ReferenceDeepseek2::Load(path);
    ASSERT_TRUE(oracle.ok()) << oracle.error().ToString();
    const auto tokens = RandomTokens(24, 12);
    const auto want = (*oracle)->Logits(tokens);
    const auto absorbed = Logits(*run, tokens, 5, MlaAttention::kAbsorbed);
    const auto naive = Logits(*run, tokens, 24, MlaAttention::kNaive);
    EXPECT_LT(MaxRelError(absorbed, want), f.tol) << f.name;
    EXPECT_LT(MaxRelError(naive, want), f.tol) << f.name;
    std::vector<std::vector<double>> naive_rows(24);
    const size_t V = want[0].size();
    for (size_t i = 0; i < 24; ++i)
      naive_rows[i].assign(naive.begin() + i * V, naive.begin() + (i + 1) * V);
    EXPECT_LT(MaxRelError(absorbed, naive_rows), std::max(2e-5, f.tol)) << f.name;
  }
}

// Block codecs on latent rows: q8_0 and q4_0 need rows that are a multiple of 32 (64 + 32 = 96
// here). Both forms read the same quantized rows, so they agree closely; the cache's own rounding
// moves the logits from the f32 cache by a bounded amount (measured: q8_0 9e-4, q4_0 1.4e-2 of
// the largest logit). The two forms run different f16 matmuls one token at a time, so where decode
// rounds their activations to f16 (the AVX-512 kernels) they differ by that rounding too
// (measured 9.4e-4).
TEST(MlaRandomModels, BlockQuantizedLatentCache) {
  const double forms_bound =
      kernels::RoundsDecodeActivationsToHalf(kernels::Active(), kernels::WType::kF16) ? 2e-3
                                                                                      : 5e-4;
  auto vocab = gguf::GgufFile::Open(kvforge::testing::SharedDir() + "/models/stories260K.gguf");
  ASSERT_TRUE(vocab.ok());
  const RandomModelSpec s = SmallDeepseek2(2);
  const std::string path =
      (std::filesystem::temp_directory_path() / "kvf_ds_block_latent.gguf").string();
  ASSERT_TRUE(WriteRandomModel(s, **vocab, path).ok());
  const auto tokens = RandomTokens(30, 4);
  auto f32 = MakeRun(path);
  ASSERT_NE(f32, nullptr);
  const auto want = Logits(*f32, tokens, 30, MlaAttention::kNaive);
  std::vector<std::vector<double>> want_rows(30);
  const size_t V = want.size() / 30;
  for (size_t i = 0; i < 30; ++i)
    want_rows[i].assign(want.begin() + i * V, want.begin() + (i + 1) * V);
  struct Case {
    kvquant::KvDtype dtype;
    double vs_f32;
  };
  for (const Case& c : {Case{kvquant::KvDtype::kQ8_0, 3e-3}, Case{kvquant::KvDtype::kQ4_0, 0.05}}) {
    auto run = MakeRun(path, c.dtype);
    ASSERT_NE(run, nullptr);
    const auto absorbed = Logits(*run, tokens, 1, MlaAttention::kAbsorbed);
    const auto naive = Logits(*run, tokens, 1, MlaAttention::kNaive);
    std::vector<std::vector<double>> naive_rows(30);
    for (size_t i = 0; i < 30; ++i)
      naive_rows[i].assign(naive.begin() + i * V, naive.begin() + (i + 1) * V);
    const double err = MaxRelError(absorbed, want_rows);
    EXPECT_LT(MaxRelError(absorbed, naive_rows), forms_bound) << static_cast<int>(c.dtype);
    EXPECT_LT(err, c.vs_f32) << static_cast<int>(c.dtype);
    EXPECT_GT(err, 1e-6) << "the cache did not quantize";
  }
}

}  // namespace
}  // namespace kvforge::model
