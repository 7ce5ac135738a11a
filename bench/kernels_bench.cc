// Kernel micro-benchmarks: matmul per weight format (decode GEMV and a 32-token GEMM), for every
// kernel table this CPU supports, with bytes/s of weights streamed and FLOP/s. 768 x 768
// weights (a multiple of the 256-value k-quant super-block); activation preparation
// (quantizing x for quantized formats) is outside the timed loop, as it is O(cols) per token.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/quantize.h"

namespace {

using kvforge::kernels::WType;

// rows x cols weights times n_tok tokens on one thread.
void RunMatMul(benchmark::State& state, const char* table_name, WType w, int64_t rows, int64_t cols,
               int64_t n_tok) {
  const kvforge::kernels::KernelTable* table = nullptr;
  for (auto* t : kvforge::kernels::AvailableTables())
    if (std::string(t->name) == table_name) table = t;
  if (table == nullptr) {
    state.SkipWithError("kernel table not supported on this CPU");
    return;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> wf(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n_tok * cols));
  for (auto& v : wf) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  const auto dt = static_cast<kvforge::tensor::DType>(w);
  const size_t rb = *kvforge::tensor::RowBytes(dt, cols);
  std::vector<uint8_t> wq(rb * rows);
  for (int64_t r = 0; r < rows; ++r)
    (void)kvforge::tensor::QuantizeRow(dt, wf.data() + r * cols, wq.data() + r * rb, cols);
  // Large batches of quantized weights take float activations (dequantize-then-FMA GEMM).
  const size_t xr = kvforge::kernels::PreparedRowBytes(w, cols, n_tok);
  const bool floats = kvforge::kernels::ActFormatFor(w, n_tok) == kvforge::kernels::ActFormat::kF32;
  std::vector<uint8_t> xp(xr * n_tok);
  for (int64_t t = 0; t < n_tok; ++t) {
    if (floats)
      std::memcpy(xp.data() + t * xr, x.data() + t * cols, xr);
    else
      table->prepare_act(w, x.data() + t * cols, xp.data() + t * xr, cols);
  }
  std::vector<float> y(static_cast<size_t>(n_tok * rows));
  for (auto _ : state) {
    table->matmul_rows(w, wq.data(), rb, cols, xp.data(), n_tok, y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(rb * rows));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * cols * n_tok * state.iterations(),
                                                benchmark::Counter::kIsRate);
}

void BM_MatMul(benchmark::State& state, const char* table_name, WType w) {
  RunMatMul(state, table_name, w, 768, 768, state.range(0));
}

// Prefill-sized GEMMs: the 110M model's FFN shapes (rows x cols = 2048 x 768 up/gate, 768 x 2048
// down) and the 1.1B shape's 2048 x 2048, at 512 tokens (llama-bench's pp512).
void BM_Gemm(benchmark::State& state, const char* table_name, WType w) {
  RunMatMul(state, table_name, w, state.range(0), state.range(1), state.range(2));
}

#define KVF_MATMUL_BENCH(table, wt)                                \
  BENCHMARK_CAPTURE(BM_MatMul, table##_##wt, #table, WType::k##wt) \
      ->Arg(1)                                                     \
      ->Arg(2)                                                     \
      ->Arg(4)                                                     \
      ->Arg(8)                                                     \
      ->Arg(16)                                                    \
      ->Arg(32)                                                    \
      ->Arg(128)

#define KVF_GEMM_BENCH_ON(table, wt)                             \
  BENCHMARK_CAPTURE(BM_Gemm, table##_##wt, #table, WType::k##wt) \
      ->Args({2048, 768, 512})                                   \
      ->Args({768, 2048, 512})                                   \
      ->Args({2048, 2048, 512})                                  \
      ->Args({2048, 8192, 64})                                   \
      ->Args({2048, 8192, 128})                                  \
      ->Args({2048, 2048, 64})                                   \
      ->Unit(benchmark::kMillisecond)

KVF_GEMM_BENCH_ON(avx2, F32);
KVF_GEMM_BENCH_ON(avx2, F16);
KVF_GEMM_BENCH_ON(avx2, BF16);
KVF_GEMM_BENCH_ON(avx2, Q8_0);
KVF_GEMM_BENCH_ON(avx2, Q4_0);
KVF_GEMM_BENCH_ON(avx2, Q4_K);
KVF_GEMM_BENCH_ON(avx2, Q6_K);
// The AVX-512 table's own matmuls (float weights; quantized ones in large batches); "not
// supported" on AVX2-only CPUs.
KVF_GEMM_BENCH_ON(avx512, F32);
KVF_GEMM_BENCH_ON(avx512, F16);
KVF_GEMM_BENCH_ON(avx512, BF16);
KVF_GEMM_BENCH_ON(avx512, Q8_0);
KVF_GEMM_BENCH_ON(avx512, Q4_K);

KVF_MATMUL_BENCH(ref, F32);
KVF_MATMUL_BENCH(avx2, F32);
KVF_MATMUL_BENCH(ref, F16);
KVF_MATMUL_BENCH(avx2, F16);
KVF_MATMUL_BENCH(avx2, BF16);
KVF_MATMUL_BENCH(avx512, F16);
KVF_MATMUL_BENCH(ref, Q8_0);
KVF_MATMUL_BENCH(avx2, Q8_0);
KVF_MATMUL_BENCH(avx2, Q4_0);
KVF_MATMUL_BENCH(avx2, Q4_1);
KVF_MATMUL_BENCH(avx2, Q5_0);
KVF_MATMUL_BENCH(avx2, Q5_1);
KVF_MATMUL_BENCH(ref, Q4_K);
KVF_MATMUL_BENCH(avx2, Q4_K);
KVF_MATMUL_BENCH(avx512vnni, Q4_K);
KVF_MATMUL_BENCH(avx512vnni, Q5_K);
KVF_MATMUL_BENCH(avx2, Q5_K);
KVF_MATMUL_BENCH(avx2, Q6_K);

}  // namespace
