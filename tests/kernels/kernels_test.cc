// Every kernel table the CPU supports against the scalar reference, on odd sizes (block counts
// 1, 3, 7, 33; 1-33 rows; 1-5 tokens) and unaligned buffers. Tolerance for every format:
// 1e-5 * (4 sqrt(cols) + |y|). Float formats differ from the reference by float32
// reassociation; quantized formats compute the same integer dot product per block (32 or 256
// values) and differ only in how the per-block float terms are summed. Prepared activations
// must be bit-identical. The reference itself is checked against float dot products of the
// dequantized weights and activations (1e-4 relative to sum |w*x|).
#include "kernels/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "base/fp16.h"
#include "tensor/dequant.h"
#include "tensor/quantize.h"

namespace kvforge::kernels {
namespace {

std::vector<const KernelTable*> Simd() {
  std::vector<const KernelTable*> out;
  for (auto* t : AvailableTables())
    if (t != &ReferenceTable()) out.push_back(t);
  return out;
}

// The reference for a table that quantizes a large batch's float activations itself
// (QuantizesLargeBatches): each token alone, on prepare_act's activations. y: [n_tok][rows].
std::vector<float> TokenByTokenReference(WType w, const uint8_t* weights, size_t row_bytes,
                                         int64_t cols, const float* x, int64_t n_tok,
                                         int64_t rows) {
  const KernelTable& ref = ReferenceTable();
  std::vector<uint8_t> xq(PreparedRowBytes(w, cols));
  std::vector<float> y(static_cast<size_t>(n_tok * rows));
  for (int64_t t = 0; t < n_tok; ++t) {
    ref.prepare_act(w, x + t * cols, xq.data(), cols);
    ref.matmul_rows(w, weights, row_bytes, cols, xq.data(), 1, y.data() + t * rows, rows, 0, rows);
  }
  return y;
}

// The reference on activations rounded to bf16 (round to nearest even), for a table that rounds a
// large batch's activations on bf16 weights itself (RoundsBatchActivationsToBf16): its products
// are then exact up to f32 accumulation. x: [n_tok][cols] floats, y: [n_tok][rows].
std::vector<float> Bf16ActivationReference(WType w, const uint8_t* weights, size_t row_bytes,
                                           int64_t cols, const float* x, int64_t n_tok,
                                           int64_t rows) {
  std::vector<float> xr(static_cast<size_t>(n_tok * cols));
  for (size_t i = 0; i < xr.size(); ++i) xr[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
  std::vector<float> y(static_cast<size_t>(n_tok * rows));
  ReferenceTable().matmul_rows(w, weights, row_bytes, cols,
                               reinterpret_cast<const uint8_t*>(xr.data()), n_tok, y.data(), rows,
                               0, rows);
  return y;
}

TEST(KernelsTest, DispatchPicksAvailableTable) {
  const auto tables = AvailableTables();
  ASSERT_FALSE(tables.empty());
  EXPECT_STREQ(tables[0]->name, "ref");
  // The best table this CPU runs, unless KVFORGE_KERNELS chose another.
  if (std::getenv("KVFORGE_KERNELS") == nullptr) {
    EXPECT_EQ(&Active(), tables.back());
  }
  EXPECT_FALSE(SetActive("no-such-isa"));
}

class MatMulTest : public ::testing::TestWithParam<WType> {};

TEST_P(MatMulTest, SimdMatchesReferenceOnOddShapes) {
  const WType w = GetParam();
  const auto dt = static_cast<tensor::DType>(w);
  const int64_t block = tensor::Traits(dt).block_elems;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  // 256-value formats stop at 11 blocks to keep the test fast (quantizing is the slow part).
  for (int64_t cols :
       {block, 3 * block, 7 * block + (block == 1 ? 5 : 0), (block == 256 ? 11 : 33) * block}) {
    for (int64_t rows : {1, 7, 17, 33}) {
      // 33 tokens take the dequantize-then-float GEMM path for quantized weights.
      for (int64_t n_tok : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{9},
                            kDequantGemmMinTokens + 1}) {
        const size_t rb = *tensor::RowBytes(dt, cols);
        // One byte of offset makes every buffer unaligned.
        std::vector<uint8_t> wbuf(rb * rows + 1);
        std::vector<float> wrow(static_cast<size_t>(cols));
        for (int64_t r = 0; r < rows; ++r) {
          for (auto& v : wrow) v = nd(rng);
          ASSERT_TRUE(tensor::QuantizeRow(dt, wrow.data(), wbuf.data() + 1 + r * rb, cols).ok());
        }
        std::vector<float> x(static_cast<size_t>(n_tok * cols));
        for (auto& v : x) v = nd(rng);
        const size_t xr = PreparedRowBytes(w, cols, n_tok);
        const bool floats = ActFormatFor(w, n_tok) == ActFormat::kF32;
        std::vector<uint8_t> xref(xr * n_tok + 1), xsimd(xr * n_tok + 1);
        std::vector<float> yref(static_cast<size_t>(n_tok * rows)), ysimd(yref.size());
        const KernelTable& ref = ReferenceTable();
        for (int64_t t = 0; t < n_tok; ++t) {
          if (floats)
            std::memcpy(xref.data() + 1 + t * xr, x.data() + t * cols, xr);
          else
            ref.prepare_act(w, x.data() + t * cols, xref.data() + 1 + t * xr, cols);
        }
        ref.matmul_rows(w, wbuf.data() + 1, rb, cols, xref.data() + 1, n_tok, yref.data(), rows, 0,
                        rows);
        // The AVX-512 decode path for f16 and bf16 weights (1-2 tokens) rounds the activations to
        // f16: each product is off by at most 2^-11 of |w x|, so its bound adds 2^-11 times
        // sum |w| |x| (the reference on the absolute values) to the f32 one.
        std::vector<float> abs_dot(yref.size(), 0.0f);
        if ((w == WType::kF16 || w == WType::kBF16) && n_tok <= 2) {
          std::vector<uint8_t> wabs(wbuf), xabs(xref);
          for (size_t b = 2; b < wabs.size(); b += 2) wabs[b] &= 0x7f;  // f16/bf16 sign bits
          for (int64_t t = 0; t < n_tok; ++t) {
            auto* xf = reinterpret_cast<float*>(xabs.data() + 1 + t * xr);
            for (int64_t c = 0; c < cols; ++c) {
              float v;
              std::memcpy(&v, xf + c, 4);
              v = std::fabs(v);
              std::memcpy(xf + c, &v, 4);
            }
          }
          ref.matmul_rows(w, wabs.data() + 1, rb, cols, xabs.data() + 1, n_tok, abs_dot.data(),
                          rows, 0, rows);
        }
        for (const KernelTable* k : Simd()) {
          for (int64_t t = 0; t < n_tok; ++t) {
            if (floats)
              std::memcpy(xsimd.data() + 1 + t * xr, x.data() + t * cols, xr);
            else
              k->prepare_act(w, x.data() + t * cols, xsimd.data() + 1 + t * xr, cols);
          }
          // Prepared activations are bit-identical (same rounding rule).
          EXPECT_EQ(0, std::memcmp(xsimd.data() + 1, xref.data() + 1, xr * n_tok)) << k->name;
          const bool bf16_x = n_tok >= 3 && RoundsBatchActivationsToBf16(*k, w);
          const std::vector<float> expected =
              floats && QuantizesLargeBatches(*k, w)
                  ? TokenByTokenReference(w, wbuf.data() + 1, rb, cols, x.data(), n_tok, rows)
              : bf16_x
                  ? Bf16ActivationReference(w, wbuf.data() + 1, rb, cols, x.data(), n_tok, rows)
                  : yref;
          std::fill(ysimd.begin(), ysimd.end(), 0.0f);
          // Split the rows in two calls to test partial ranges.
          k->matmul_rows(w, wbuf.data() + 1, rb, cols, xsimd.data() + 1, n_tok, ysimd.data(), rows,
                         0, rows / 2);
          k->matmul_rows(w, wbuf.data() + 1, rb, cols, xsimd.data() + 1, n_tok, ysimd.data(), rows,
                         rows / 2, rows);
          for (size_t i = 0; i < yref.size(); ++i)
            ASSERT_NEAR(ysimd[i], expected[i],
                        1e-5 * (std::sqrt(static_cast<double>(cols)) * 4 + std::fabs(expected[i])) +
                            std::ldexp(static_cast<double>(abs_dot[i]), -11))
                << k->name << " cols " << cols << " rows " << rows << " ntok " << n_tok << " i "
                << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MatMulTest,
                         ::testing::Values(WType::kF32, WType::kF16, WType::kBF16, WType::kQ8_0,
                                           WType::kQ4_0, WType::kQ4_1, WType::kQ5_0, WType::kQ5_1,
                                           WType::kQ4_K, WType::kQ5_K, WType::kQ6_K),
                         [](const ::testing::TestParamInfo<WType>& pi) {
                           return std::string(
                               tensor::DTypeName(static_cast<tensor::DType>(pi.param)));
                         });

// Large batches (the packed GEMM for quantized weights, the dot-product tiles for float ones)
// on shapes that cross every one of the packed GEMM's block edges: more rows
// than one packed panel (128) and not a multiple of its 16-row tiles, depth over one 256-value
// panel and (for 1- and 32-value blocks) not a multiple of it, more tokens than one 72-token
// block and not a multiple of the 6-token tile, rows split at an odd boundary, buffers unaligned.
TEST_P(MatMulTest, PackedGemmMatchesReferenceAcrossBlockEdges) {
  const WType w = GetParam();
  const auto dt = static_cast<tensor::DType>(w);
  const int64_t block = tensor::Traits(dt).block_elems;
  const int64_t cols = block == 256 ? 512 : block == 32 ? 288 : 300;
  const int64_t n_tok = 79;
  const int64_t rows = 150, split = 77;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  const size_t rb = *tensor::RowBytes(dt, cols);
  std::vector<uint8_t> wbuf(rb * rows + 1);
  std::vector<float> wrow(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : wrow) v = nd(rng);
    ASSERT_TRUE(tensor::QuantizeRow(dt, wrow.data(), wbuf.data() + 1 + r * rb, cols).ok());
  }
  ASSERT_EQ(ActFormatFor(w, n_tok), ActFormat::kF32);
  std::vector<uint8_t> x(static_cast<size_t>(n_tok * cols) * 4 + 1);
  for (int64_t i = 0; i < n_tok * cols; ++i) {
    const float v = nd(rng);
    std::memcpy(x.data() + 1 + 4 * i, &v, 4);
  }
  std::vector<float> yref(static_cast<size_t>(n_tok * rows)), ysimd(yref.size());
  ReferenceTable().matmul_rows(w, wbuf.data() + 1, rb, cols, x.data() + 1, n_tok, yref.data(), rows,
                               0, rows);
  std::vector<float> xf(static_cast<size_t>(n_tok * cols));
  std::memcpy(xf.data(), x.data() + 1, xf.size() * 4);
  for (const KernelTable* k : Simd()) {
    std::fill(ysimd.begin(), ysimd.end(), 0.0f);
    k->matmul_rows(w, wbuf.data() + 1, rb, cols, x.data() + 1, n_tok, ysimd.data(), rows, 0, split);
    k->matmul_rows(w, wbuf.data() + 1, rb, cols, x.data() + 1, n_tok, ysimd.data(), rows, split,
                   rows);
    const std::vector<float> expected =
        QuantizesLargeBatches(*k, w)
            ? TokenByTokenReference(w, wbuf.data() + 1, rb, cols, xf.data(), n_tok, rows)
        : RoundsBatchActivationsToBf16(*k, w)
            ? Bf16ActivationReference(w, wbuf.data() + 1, rb, cols, xf.data(), n_tok, rows)
            : yref;
    for (size_t i = 0; i < yref.size(); ++i)
      ASSERT_NEAR(ysimd[i], expected[i],
                  1e-5 * (std::sqrt(static_cast<double>(cols)) * 4 + std::fabs(expected[i])))
          << k->name << " token " << i / rows << " row " << i % rows;
  }
}

// The AVX-512 float kernel gives every output one accumulator, the same lane order and the same
// final reduction whatever tile computes it, so a token's outputs are bit-identical in every batch
// of at least 3 tokens, at any position (smaller calls, decode, run the AVX2 kernel). Rows and
// columns cross the 6x4 and 4x5 tiles' and the 16-lane loop's edges.
// On a CPU without AVX-512 there is no such table and nothing to check.
TEST(KernelsTest, Avx512FloatMatMulDoesNotDependOnTheBatch) {
  for (const KernelTable* k : Simd()) {
    if (std::string(k->name) != "avx512") continue;
    for (WType w : {WType::kF32, WType::kF16, WType::kBF16}) {
      const auto dt = static_cast<tensor::DType>(w);
      const int64_t cols = 70, rows = 23, n_tok = 11;
      std::mt19937 rng(17);
      std::normal_distribution<float> nd;
      const size_t rb = *tensor::RowBytes(dt, cols);
      std::vector<uint8_t> wbuf(rb * rows);
      std::vector<float> wrow(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : wrow) v = nd(rng);
        ASSERT_TRUE(tensor::QuantizeRow(dt, wrow.data(), wbuf.data() + r * rb, cols).ok());
      }
      std::vector<float> x(static_cast<size_t>(n_tok * cols));  // [n_tok][cols]
      for (auto& v : x) v = nd(rng);
      const auto* xb = reinterpret_cast<const uint8_t*>(x.data());
      std::vector<float> batch(static_cast<size_t>(n_tok * rows));  // [n_tok][rows]
      k->matmul_rows(w, wbuf.data(), rb, cols, xb, n_tok, batch.data(), rows, 0, rows);
      for (int64_t m : {3, 4, 5, 7, 9, 10})
        for (int64_t first = 0; first + m <= n_tok; ++first) {
          std::vector<float> part(static_cast<size_t>(m * rows));  // [m][rows]
          k->matmul_rows(w, wbuf.data(), rb, cols, xb + first * cols * 4, m, part.data(), rows, 0,
                         rows);
          for (int64_t i = 0; i < m * rows; ++i)
            ASSERT_EQ(part[static_cast<size_t>(i)], batch[static_cast<size_t>(first * rows + i)])
                << tensor::DTypeName(dt) << " batch of " << m << " from token " << first
                << ": token " << first + i / rows << " row " << i % rows;
        }
    }
  }
}

// Activations beyond f16's range (65504, e.g. an outlier feature) keep the float path in the
// AVX-512 f16/bf16 decode kernel, and so does matmul_rows_exact always: the result matches the
// reference to f32 rounding, not f16's.
TEST(KernelsTest, HalfWeightDecodeKeepsFloatActivationsBeyondHalfRange) {
  const int64_t cols = 100, rows = 5;
  for (WType w : {WType::kF16, WType::kBF16}) {
    const auto dt = static_cast<tensor::DType>(w);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    const size_t rb = *tensor::RowBytes(dt, cols);
    std::vector<uint8_t> wbuf(rb * rows);
    std::vector<float> wrow(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : wrow) v = nd(rng);
      ASSERT_TRUE(tensor::QuantizeRow(dt, wrow.data(), wbuf.data() + r * rb, cols).ok());
    }
    // matmul_rows_exact keeps f32 activations in range too: f32 rounding against the reference.
    {
      std::vector<float> x(static_cast<size_t>(cols));
      for (auto& v : x) v = nd(rng);
      std::vector<float> yref(rows), ysimd(rows);
      const auto* xp = reinterpret_cast<const uint8_t*>(x.data());
      ReferenceTable().matmul_rows(w, wbuf.data(), rb, cols, xp, 1, yref.data(), rows, 0, rows);
      for (const KernelTable* k : Simd()) {
        k->matmul_rows_exact(w, wbuf.data(), rb, cols, xp, 1, ysimd.data(), rows, 0, rows);
        for (int64_t r = 0; r < rows; ++r)
          EXPECT_NEAR(ysimd[r], yref[r], 1e-5 * (std::sqrt(double{cols}) * 4 + std::fabs(yref[r])))
              << k->name << " exact " << tensor::DTypeName(dt) << " row " << r;
      }
    }
    for (float outlier : {1e5f, -7e4f}) {
      std::vector<float> x(static_cast<size_t>(cols));
      for (auto& v : x) v = nd(rng) * 1e-3f;  // small values f16 would round visibly
      x[37] = outlier;
      std::vector<float> yref(rows), ysimd(rows);
      const auto* xp = reinterpret_cast<const uint8_t*>(x.data());
      ReferenceTable().matmul_rows(w, wbuf.data(), rb, cols, xp, 1, yref.data(), rows, 0, rows);
      for (const KernelTable* k : Simd()) {
        k->matmul_rows(w, wbuf.data(), rb, cols, xp, 1, ysimd.data(), rows, 0, rows);
        for (int64_t r = 0; r < rows; ++r)
          EXPECT_NEAR(ysimd[r], yref[r], 1e-6 * std::fabs(outlier) * 4)
              << k->name << " " << tensor::DTypeName(dt) << " row " << r;
      }
    }
  }
}

TEST(KernelsTest, FmaLoopCountsItsOperations) {
  for (const KernelTable* k : AvailableTables()) {
    const int64_t one = k->fma_loop(1);
    EXPECT_GT(one, 0) << k->name;
    EXPECT_EQ(k->fma_loop(1000), 1000 * one) << k->name;
  }
}

// Decodes a prepared activation row back to floats (what the integer kernels multiply by).
std::vector<float> DecodePrepared(WType w, const uint8_t* p, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(cols));
  switch (ActFormatFor(w)) {
    case ActFormat::kF32:
      std::memcpy(out.data(), p, out.size() * 4);
      break;
    case ActFormat::kQ8_0:
    case ActFormat::kQ8_1: {
      const int64_t stride = ActFormatFor(w) == ActFormat::kQ8_0 ? 34 : 36;
      for (int64_t b = 0; b < cols / 32; ++b) {
        const uint8_t* blk = p + b * stride;
        uint16_t dh;
        std::memcpy(&dh, blk, 2);
        const int8_t* qs = reinterpret_cast<const int8_t*>(blk + stride - 32);
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
          out[static_cast<size_t>(b * 32 + j)] = Fp16ToFp32(dh) * qs[j];
          sum += qs[j];
        }
        if (stride == 36) {
          int16_t s;
          std::memcpy(&s, blk + 2, 2);
          EXPECT_EQ(s, sum);
        }
      }
      break;
    }
    case ActFormat::kQ8_K:
      for (int64_t b = 0; b < cols / 256; ++b) {
        const uint8_t* blk = p + b * 292;
        float d;
        std::memcpy(&d, blk, 4);
        const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 4);
        for (int g = 0; g < 16; ++g) {
          int sum = 0;
          for (int j = 0; j < 16; ++j) {
            out[static_cast<size_t>(b * 256 + 16 * g + j)] = d * qs[16 * g + j];
            sum += qs[16 * g + j];
          }
          int16_t s;
          std::memcpy(&s, blk + 260 + 2 * g, 2);
          EXPECT_EQ(s, sum);
        }
      }
      break;
  }
  return out;
}

TEST_P(MatMulTest, ReferenceMatchesDequantizedDot) {
  const WType w = GetParam();
  const auto dt = static_cast<tensor::DType>(w);
  const int64_t cols = 2 * 256 + (tensor::Traits(dt).block_elems == 256 ? 0 : 96);
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.3f, 1.0f);  // off-centre: exercises the minimums
  std::vector<float> wrow(static_cast<size_t>(cols)), wdeq(wrow.size()), x(wrow.size());
  std::vector<uint8_t> wq(*tensor::RowBytes(dt, cols)), xp(PreparedRowBytes(w, cols));
  for (int trial = 0; trial < 8; ++trial) {
    for (auto& v : wrow) v = nd(rng);
    for (auto& v : x) v = nd(rng) * 2;
    ASSERT_TRUE(tensor::QuantizeRow(dt, wrow.data(), wq.data(), cols).ok());
    ASSERT_TRUE(tensor::DequantizeRow(dt, wq.data(), wdeq.data(), cols).ok());
    ReferenceTable().prepare_act(w, x.data(), xp.data(), cols);
    const std::vector<float> xdeq = DecodePrepared(w, xp.data(), cols);
    double want = 0, mag = 0;
    for (int64_t i = 0; i < cols; ++i) {
      want += static_cast<double>(wdeq[i]) * xdeq[i];
      mag += std::fabs(static_cast<double>(wdeq[i]) * xdeq[i]);
    }
    float got = 0;
    ReferenceTable().matmul_rows(w, wq.data(), wq.size(), cols, xp.data(), 1, &got, 1, 0, 1);
    EXPECT_NEAR(got, want, 1e-4 * mag) << trial;
  }
}

TEST(KernelsTest, RmsNormAndSwiglu) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (int64_t n : {1, 7, 8, 31, 64, 4097}) {
    std::vector<float> x(static_cast<size_t>(n)), w(x.size()), a(x.size()), b(x.size()),
        r(x.size()), s(x.size());
    for (auto& v : x) v = nd(rng) * 3;
    for (auto& v : w) v = nd(rng);
    ReferenceTable().rms_norm(x.data(), w.data(), r.data(), n, 1e-5f);
    ReferenceTable().swiglu(x.data(), w.data(), a.data(), n);
    std::vector<float> ga(x.size()), gb(x.size()), pa(x.size()), pb(x.size());
    ReferenceTable().gelu(x.data(), w.data(), ga.data(), n);  // GeGLU
    ReferenceTable().gelu(x.data(), nullptr, pa.data(), n);   // plain GELU
    for (const KernelTable* k : Simd()) {
      k->gelu(x.data(), w.data(), gb.data(), n);
      k->gelu(x.data(), nullptr, pb.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        // One vectorised exp and a division: ~1e-6 of the value.
        EXPECT_NEAR(gb[i], ga[i], 2e-6 * (1 + std::fabs(ga[i]))) << "geglu " << x[i];
        EXPECT_NEAR(pb[i], pa[i], 2e-6 * (1 + std::fabs(pa[i]))) << "gelu " << x[i];
      }
    }
    for (const KernelTable* k : Simd()) {
      k->rms_norm(x.data(), w.data(), s.data(), n, 1e-5f);
      k->swiglu(x.data(), w.data(), b.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(s[i], r[i], 1e-5 * (1 + std::fabs(r[i])));
        EXPECT_NEAR(b[i], a[i], 2e-6 * (1 + std::fabs(a[i])));  // vectorised exp: ~2e-7 relative
      }
    }
  }
}

TEST(KernelsTest, RopeNormalAndNeoxPairs) {
  // At position 0 nothing rotates; at position 1 the first pair rotates by 1 radian.
  float x[8] = {1, 0, 1, 0, 1, 0, 1, 0};
  Rope(x, 1, 8, 8, 0, 10000.0f, 1.0f, false);
  EXPECT_FLOAT_EQ(x[0], 1.0f);
  Rope(x, 1, 8, 8, 1, 10000.0f, 1.0f, false);
  EXPECT_NEAR(x[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0f), 1e-6);
  float y[8] = {1, 1, 1, 1, 0, 0, 0, 0};
  Rope(y, 1, 8, 8, 1, 10000.0f, 1.0f, true);  // neox pairs (0,4): rotate (1,0)
  EXPECT_NEAR(y[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(y[4], std::sin(1.0f), 1e-6);
  // Linear scaling by 2 at position 2 equals position 1 unscaled.
  float a[4] = {1, 0, 0, 1}, b[4] = {1, 0, 0, 1};
  Rope(a, 1, 4, 4, 2, 10000.0f, 0.5f, false);
  Rope(b, 1, 4, 4, 1, 10000.0f, 1.0f, false);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

// Paged attention: shuffled block tables, partial last blocks, GQA groups, f32 and f16 caches.
TEST(KernelsTest, AttentionOverShuffledPagesMatchesReference) {
  std::mt19937 rng(21);
  std::normal_distribution<float> nd;
  for (bool f16 : {false, true}) {
    for (auto [n_head, n_kv, hd] : {std::make_tuple(4, 4, 8), std::make_tuple(8, 2, 16),
                                    std::make_tuple(4, 1, 12), std::make_tuple(2, 1, 64)}) {
      // 13 queries (at least kPrefillAttentionMinQueries) take the AVX2 prefill GEMM path when
      // the head width is a multiple of 16; 4 the per-query path.
      for (const int64_t n_q : {int64_t{4}, int64_t{13}}) {
        const int32_t block_tokens = 5;
        const int64_t pos0 = 13, total = pos0 + n_q;
        const int64_t n_blocks = (total + block_tokens - 1) / block_tokens;
        const size_t elem = f16 ? 2 : 4;
        const size_t token_stride = static_cast<size_t>(n_kv * hd) * elem;
        const size_t block_stride = token_stride * block_tokens;
        std::vector<int32_t> table(static_cast<size_t>(n_blocks));
        for (int64_t i = 0; i < n_blocks; ++i)
          table[static_cast<size_t>(i)] = static_cast<int32_t>(n_blocks - 1 - i);  // reversed
        std::vector<uint8_t> kbuf(block_stride * n_blocks), vbuf(kbuf.size());
        for (size_t i = 0; i < kbuf.size() / elem; ++i) {
          const float kv = nd(rng), vv = nd(rng);
          if (f16) {
            const uint16_t kh = Fp32ToFp16(kv), vh = Fp32ToFp16(vv);
            std::memcpy(kbuf.data() + 2 * i, &kh, 2);
            std::memcpy(vbuf.data() + 2 * i, &vh, 2);
          } else {
            std::memcpy(kbuf.data() + 4 * i, &kv, 4);
            std::memcpy(vbuf.data() + 4 * i, &vv, 4);
          }
        }
        std::vector<float> q(static_cast<size_t>(n_q * n_head * hd));
        for (auto& v : q) v = nd(rng);
        AttentionArgs a;
        a.q = q.data();
        a.q_stride = n_head * hd;
        a.out_stride = n_head * hd;
        a.n_q = n_q;
        a.slot0 = pos0;
        a.n_head = n_head;
        a.n_kv_head = n_kv;
        a.head_dim = hd;
        a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
        a.k.base = kbuf.data();
        a.k.block_table = table.data();
        a.k.block_tokens = block_tokens;
        a.k.block_stride = block_stride;
        a.k.token_stride = token_stride;
        a.k.head_stride = static_cast<size_t>(hd) * elem;
        a.k.dtype = f16 ? kvquant::KvDtype::kF16 : kvquant::KvDtype::kF32;
        a.k.head_dim = hd;
        a.k.row_values = n_kv * hd;
        a.v = a.k;
        a.v.base = vbuf.data();
        std::vector<float> want(q.size()), got(q.size()),
            scratch(static_cast<size_t>(total * n_head));
        a.out = want.data();
        ReferenceTable().attention(a, 0, n_kv, scratch.data());
        for (const KernelTable* k : Simd()) {
          a.out = got.data();
          k->attention(a, 0, n_kv, scratch.data());
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 1e-5) << k->name << " f16 " << f16 << " n_q " << n_q;
        }
      }
    }
  }
}

// Slots are not positions (docs/adr/0005): dead slots get no weight and the observer sums the
// softmax weights per slot. Checked against a brute-force softmax over the live slots, for the
// reference, the plain-float AVX2 path and the tiled path (a residual window that holds nothing
// sends f32 rows there).
// 3 queries take the per-query path, 14 the prefill GEMM path (head width 16).
class AttentionDeadSlots : public ::testing::TestWithParam<int64_t> {};

TEST_P(AttentionDeadSlots, SkipsDeadSlotsAndObservesWeights) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const int32_t n_head = 4, n_kv = 2, hd = 16, group = n_head / n_kv, block_tokens = 4;
  const int64_t n_q = GetParam();
  const int64_t slot0 = 17, total = slot0 + n_q, dead_begin = 5, dead_end = 11;
  const int64_t observe_from = 1;
  const int64_t n_blocks = (total + block_tokens - 1) / block_tokens;
  const size_t token_stride = static_cast<size_t>(n_kv * hd) * 4;
  const size_t block_stride = token_stride * block_tokens;
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t i = 0; i < n_blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  std::vector<float> kf(static_cast<size_t>(n_blocks * block_tokens * n_kv * hd)), vf(kf.size());
  for (auto& x : kf) x = nd(rng);
  for (auto& x : vf) x = nd(rng);
  std::vector<float> q(static_cast<size_t>(n_q * n_head * hd));
  for (auto& x : q) x = nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Brute force: out[i][h], and the observed weights per slot.
  std::vector<double> want(q.size(), 0.0), want_obs(static_cast<size_t>(total), 0.0);
  for (int64_t i = 0; i < n_q; ++i)
    for (int32_t h = 0; h < n_head; ++h) {
      const int32_t kvh = h / group;
      std::vector<double> w(static_cast<size_t>(total), 0.0);
      double mx = -1e300, sum = 0;
      for (int64_t p = 0; p <= slot0 + i; ++p) {
        if (p >= dead_begin && p < dead_end) continue;
        double dot = 0;
        for (int32_t d = 0; d < hd; ++d)
          dot += q[static_cast<size_t>((i * n_head + h) * hd + d)] *
                 kf[static_cast<size_t>((p * n_kv + kvh) * hd + d)];
        w[static_cast<size_t>(p)] = dot * scale;
        mx = std::max(mx, dot * scale);
      }
      for (int64_t p = 0; p <= slot0 + i; ++p) {
        if (p >= dead_begin && p < dead_end) continue;
        w[static_cast<size_t>(p)] = std::exp(w[static_cast<size_t>(p)] - mx);
        sum += w[static_cast<size_t>(p)];
      }
      for (int64_t p = 0; p <= slot0 + i; ++p) {
        if (p >= dead_begin && p < dead_end) continue;
        const double wp = w[static_cast<size_t>(p)] / sum;
        if (i >= observe_from) want_obs[static_cast<size_t>(p)] += wp;
        for (int32_t d = 0; d < hd; ++d)
          want[static_cast<size_t>((i * n_head + h) * hd + d)] +=
              wp * vf[static_cast<size_t>((p * n_kv + kvh) * hd + d)];
      }
    }
  AttentionArgs a;
  a.q = q.data();
  a.q_stride = n_head * hd;
  a.out_stride = n_head * hd;
  a.n_q = n_q;
  a.slot0 = slot0;
  a.dead_begin = dead_begin;
  a.dead_end = dead_end;
  a.observe_from = observe_from;
  a.n_head = n_head;
  a.n_kv_head = n_kv;
  a.head_dim = hd;
  a.scale = scale;
  a.k.base = reinterpret_cast<const uint8_t*>(kf.data());
  a.k.block_table = table.data();
  a.k.block_tokens = block_tokens;
  a.k.block_stride = block_stride;
  a.k.token_stride = token_stride;
  a.k.head_stride = static_cast<size_t>(hd) * 4;
  a.k.dtype = kvquant::KvDtype::kF32;
  a.k.head_dim = hd;
  a.k.row_values = n_kv * hd;
  a.v = a.k;
  a.v.base = reinterpret_cast<const uint8_t*>(vf.data());
  const uint16_t empty_window[1] = {0};
  for (bool tiled : {false, true}) {
    AttentionArgs t = a;
    if (tiled) {
      t.k.recent = t.v.recent = reinterpret_cast<const uint8_t*>(empty_window);
      t.k.recent_begin = t.v.recent_begin = total;  // the window holds no token
      t.k.recent_stride = t.v.recent_stride = static_cast<size_t>(n_kv * hd) * 2;
    }
    for (const KernelTable* k : AvailableTables()) {
      std::vector<float> got(q.size()), obs(static_cast<size_t>(total), 0.0f),
          scratch(static_cast<size_t>(total * n_head));
      t.out = got.data();
      t.slot_scores = obs.data();
      k->attention(t, 0, n_kv, scratch.data());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 2e-5) << k->name << " tiled " << tiled << " at " << i;
      for (int64_t p = 0; p < total; ++p)
        ASSERT_NEAR(obs[static_cast<size_t>(p)], want_obs[static_cast<size_t>(p)], 2e-5)
            << k->name << " tiled " << tiled << " slot " << p;
      // Dead slots got exactly nothing; the observed weights of each query-head sum to 1.
      for (int64_t p = dead_begin; p < dead_end; ++p) EXPECT_EQ(obs[static_cast<size_t>(p)], 0.0f);
      double total_weight = 0;
      for (float x : obs) total_weight += x;
      EXPECT_NEAR(total_weight, static_cast<double>((n_q - observe_from) * n_head), 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Queries, AttentionDeadSlots, ::testing::Values(3, 14));

}  // namespace
}  // namespace kvforge::kernels
