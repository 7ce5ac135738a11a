// Decode attention over a quantized paged KV cache: one query token against `depth` cached tokens
// of one layer shaped like a 110M llama (12 KV heads x 64), single thread, active kernel table,
// per KV dtype. Reports the cache bytes read per second (codes + scales; the KIVI f16 window
// included), which is what KV quantization changes in a decode step.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kvstore/paged_kv_cache.h"

namespace {

using kvforge::kvquant::KvDtype;

// rows: the whole-row decode kernel (attention_decode_part, one part) instead of the per-head
// attention entry; only plain f32 / f16 rows. Arguments: depth, layers (each iteration attends in
// every layer in turn: 12 layers at depth 2048 are 75 MB of f16 KV, past the last-level cache, as
// in a decode step; one layer at 2048 stays in it).
void RunDecodeAttention(benchmark::State& state, KvDtype dtype, bool rows) {
  const int32_t heads = 12, dim = 64, values = heads * dim;
  const int64_t depth = state.range(0);
  const auto layers = static_cast<int32_t>(state.range(1));
  kvforge::kvstore::PagedKvCacheConfig cfg;
  cfg.store.n_layer = layers;
  cfg.store.n_kv_head = heads;
  cfg.store.head_dim = dim;
  cfg.store.block_tokens = 32;
  cfg.store.num_blocks = (depth + 31) / 32 + 1;
  cfg.store.k_dtype = cfg.store.v_dtype = dtype;
  auto cache = kvforge::kvstore::PagedKvCache::Create(cfg);
  if (!cache.ok()) {
    state.SkipWithError(cache.error().message().c_str());
    return;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> k(static_cast<size_t>(depth * values)), v(k.size()),
      q(static_cast<size_t>(values)), out(q.size()), scratch(static_cast<size_t>(depth));
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (auto& x : q) x = nd(rng);
  (void)(*cache)->AddSequence(0, depth);
  // Prefill then one decode-step write, so a KIVI window is in its steady state (<= 128 tokens).
  for (int32_t layer = 0; layer < layers; ++layer) {
    (*cache)->Write(layer, 0, 0, depth - 1, k.data(), v.data(), values);
    (*cache)->Write(layer, 0, depth - 1, 1, k.data(), v.data(), values);
  }
  kvforge::kernels::AttentionArgs a;
  a.q = q.data();
  a.q_stride = values;
  a.out = out.data();
  a.out_stride = values;
  a.n_q = 1;
  a.slot0 = depth - 1;
  a.n_head = heads;
  a.n_kv_head = heads;
  a.head_dim = dim;
  a.scale = 0.125f;
  const auto& table = kvforge::kernels::Active();
  std::vector<float> m(static_cast<size_t>(heads)), l(m.size());
  for (auto _ : state) {
    for (int32_t layer = 0; layer < layers; ++layer) {
      a.k = (*cache)->KeyView(layer, 0);
      a.v = (*cache)->ValueView(layer, 0);
      if (rows)
        table.attention_decode_part(a, 0, depth, out.data(), m.data(), l.data());
      else
        table.attention(a, 0, heads, scratch.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double bytes = static_cast<double>((*cache)->store().bytes_per_token()) * depth;
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.SetLabel(table.name);
}

void BM_DecodeAttention(benchmark::State& state, KvDtype dtype) {
  RunDecodeAttention(state, dtype, /*rows=*/false);
}
void BM_DecodeAttentionRows(benchmark::State& state, KvDtype dtype) {
  RunDecodeAttention(state, dtype, /*rows=*/true);
}

#define KV_ATTN(name, dtype)                         \
  BENCHMARK_CAPTURE(BM_DecodeAttention, name, dtype) \
      ->Args({512, 1})                               \
      ->Args({2048, 1})                              \
      ->Args({8192, 1})

BENCHMARK_CAPTURE(BM_DecodeAttentionRows, f32, KvDtype::kF32)
    ->Args({512, 1})
    ->Args({2048, 1})
    ->Args({8192, 1});
BENCHMARK_CAPTURE(BM_DecodeAttentionRows, f16, KvDtype::kF16)
    ->Args({512, 1})
    ->Args({2048, 1})
    ->Args({2048, 12})
    ->Args({8192, 1});
BENCHMARK_CAPTURE(BM_DecodeAttention, f16_layers, KvDtype::kF16)->Args({2048, 12});
KV_ATTN(f32, KvDtype::kF32);
KV_ATTN(f16, KvDtype::kF16);
KV_ATTN(bf16, KvDtype::kBf16);
KV_ATTN(fp8_e4m3, KvDtype::kFp8E4M3);
KV_ATTN(fp8_e5m2, KvDtype::kFp8E5M2);
KV_ATTN(int8, KvDtype::kInt8);
KV_ATTN(q8_0, KvDtype::kQ8_0);
KV_ATTN(q4_0, KvDtype::kQ4_0);
KV_ATTN(kivi4, KvDtype::kKivi4);
KV_ATTN(kivi2, KvDtype::kKivi2);
KV_ATTN(kvquant3, KvDtype::kKvQuant3);
KV_ATTN(turbo4, KvDtype::kTurbo4);
KV_ATTN(turbo3, KvDtype::kTurbo3);

}  // namespace
