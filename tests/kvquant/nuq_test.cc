// KVQuant nuq3 rows, lookup-table fitting, RoPE table and calibration files.
#include "kvquant/nuq.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kvquant/nuq_calibration.h"

namespace kvforge::kvquant {
namespace {

std::vector<float> Gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

TEST(NuqTest, RowBytesCountCodesOutlierSlotsAndValueRange) {
  // 512 channels: 192 B of 3-bit codes; keys 11 slots (2%), values 6 slots (1%) + c, r.
  EXPECT_EQ(NuqCodeBytes(512), 192);
  EXPECT_EQ(NuqOutlierSlots(512, true), 11);
  EXPECT_EQ(NuqOutlierSlots(512, false), 6);
  EXPECT_EQ(NuqRowBytes(512, true), 192 + 44);
  EXPECT_EQ(NuqRowBytes(512, false), 192 + 24 + 4);
  EXPECT_EQ(NuqOutlierSlots(32, true), 1);
  EXPECT_EQ(NuqOutlierSlots(32, false), 1);
}

TEST(NuqTest, KMeansFindsWellSeparatedClustersAndStaysSorted) {
  std::vector<float> z;
  const float centers[kNuqLevels] = {-0.9f, -0.6f, -0.35f, -0.1f, 0.1f, 0.3f, 0.6f, 0.95f};
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.01f);
  for (int i = 0; i < 4000; ++i) z.push_back(centers[i % kNuqLevels] + nd(rng));
  float lut[kNuqLevels];
  NuqFitLut(&z, lut);
  for (int c = 0; c < kNuqLevels; ++c) EXPECT_NEAR(lut[c], centers[c], 2e-3f) << c;
  // Uniform data: centroids ascending and symmetric within sampling noise.
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  z.clear();
  for (int i = 0; i < 100000; ++i) z.push_back(ud(rng));
  NuqFitLut(&z, lut);
  for (int c = 0; c < kNuqLevels; ++c) {
    EXPECT_NEAR(lut[c], -1.0f + (2.0f * c + 1.0f) / kNuqLevels, 0.02f) << c;
    if (c > 0) {
      EXPECT_GT(lut[c], lut[c - 1]);
    }
  }
  std::vector<float> empty;
  NuqFitLut(&empty, lut);
  EXPECT_FLOAT_EQ(lut[0], -0.875f);
  std::vector<float> constant(100, 0.25f);  // one distinct value: still strictly ascending
  NuqFitLut(&constant, lut);
  for (int c = 1; c < kNuqLevels; ++c) EXPECT_GT(lut[c], lut[c - 1]);
}

TEST(NuqTest, NearestCentroid) {
  const float lut[kNuqLevels] = {-1, -0.5f, -0.25f, 0, 0.25f, 0.5f, 0.75f, 1};
  EXPECT_EQ(NuqNearest(lut, -2.0f), 0);
  EXPECT_EQ(NuqNearest(lut, -0.7f), 1);
  EXPECT_EQ(NuqNearest(lut, 0.1f), 3);
  EXPECT_EQ(NuqNearest(lut, 0.13f), 4);
  EXPECT_EQ(NuqNearest(lut, 0.99f), 7);
}

// Brute-force reference decoder: the spec written out element by element.
float DecodeOne(const std::vector<float>& x, const NuqLayer& L, int64_t i, bool key, float c,
                float r) {
  const float cc = key ? L.center[static_cast<size_t>(i)] : c;
  const float rr = key ? L.radius[static_cast<size_t>(i)] : r;
  const float z = std::clamp((x[static_cast<size_t>(i)] - cc) / rr, -1.0f, 1.0f);
  return L.lut[NuqNearest(L.lut, z)] * rr + cc;
}

TEST(NuqTest, KeyRowsKeepOutliersExactlyAndQuantizeInliersToTheTable) {
  const int64_t values = 256;
  NuqCalibration cal(1, values);
  const std::vector<float> calib = Gaussian(static_cast<size_t>(values * 400), 5);
  cal.Calibrate(0, calib.data(), nullptr, 400, values);
  const NuqLayer& L = cal.key(0);
  std::vector<float> x = Gaussian(static_cast<size_t>(values), 9);
  x[7] = 40.0f;  // far outside every channel's range
  x[100] = -25.0f;
  std::vector<uint8_t> row(static_cast<size_t>(NuqRowBytes(values, true)));
  NuqEncodeKeyRow(x.data(), values, L, row.data());
  std::vector<float> y(static_cast<size_t>(values));
  NuqDecode(row.data(), values, true, L, 0, values, y.data());
  EXPECT_EQ(y[7], 40.0f);
  EXPECT_EQ(y[100], -25.0f);
  int exact = 0;
  for (int64_t i = 0; i < values; ++i) {
    const size_t u = static_cast<size_t>(i);
    const float z = (x[u] - L.center[u]) / L.radius[u];
    if (std::fabs(z) > 1.0f) {
      // An outlier: exact in f16, or (beyond the slots) clamped to the table's edge.
      ++exact;
      continue;
    }
    EXPECT_NEAR(y[u], DecodeOne(x, L, i, true, 0, 0), 1e-5f) << i;
  }
  EXPECT_GE(exact, 2);
  // Decoding a slice (one head) gives the same numbers, outliers included: slots are stored in
  // channel order and a head's decoder stops at the first slot past it.
  x[70] = 30.0f;
  x[200] = -30.0f;
  x[201] = 31.0f;
  NuqEncodeKeyRow(x.data(), values, L, row.data());
  NuqDecode(row.data(), values, true, L, 0, values, y.data());
  std::vector<float> head(64);
  for (int64_t h = 0; h < values / 64; ++h) {
    NuqDecode(row.data(), values, true, L, 64 * h, 64, head.data());
    for (int64_t i = 0; i < 64; ++i)
      EXPECT_EQ(head[static_cast<size_t>(i)], y[static_cast<size_t>(64 * h + i)]) << h << " " << i;
  }
  for (int64_t i : {7, 70, 100, 200, 201})
    EXPECT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)]) << i;
}

TEST(NuqTest, ValueRowsUseTheirOwnRangeAndTheFarthestValuesAsOutliers) {
  const int64_t values = 128;
  NuqCalibration cal(1, values);
  const std::vector<float> calib = Gaussian(static_cast<size_t>(values * 64), 6);
  cal.Calibrate(0, nullptr, calib.data(), 64, values);
  const NuqLayer& L = cal.value(0);
  std::vector<float> x = Gaussian(static_cast<size_t>(values), 11, 0.5f);
  x[3] = 9.0f;  // the farthest from the median: the row's one outlier slot (1% of 128 -> 2)
  std::vector<uint8_t> row(static_cast<size_t>(NuqRowBytes(values, false)));
  NuqEncodeValueRow(x.data(), values, L, row.data());
  std::vector<float> y(static_cast<size_t>(values));
  NuqDecode(row.data(), values, false, L, 0, values, y.data());
  EXPECT_EQ(y[3], 9.0f);
  std::vector<std::pair<float, int64_t>> outliers;
  const NuqValueRange range = NuqValueRowRange(x.data(), values, &outliers);
  ASSERT_EQ(outliers.size(), 2u);
  EXPECT_EQ(outliers[0].second, 3);
  double err = 0, var = 0;
  for (int64_t i = 0; i < values; ++i) {
    const size_t u = static_cast<size_t>(i);
    if (i == outliers[0].second || i == outliers[1].second) {
      EXPECT_NEAR(y[u], x[u], std::fabs(x[u]) * 1e-3f);
      continue;
    }
    EXPECT_NEAR(y[u], DecodeOne(x, L, i, false, range.center, range.radius), 1e-5f) << i;
    err += (y[u] - x[u]) * (y[u] - x[u]);
    var += x[u] * x[u];
  }
  // 3-bit k-means on Gaussian data: relative MSE about 0.03-0.05 (Lloyd-Max for N(0,1): 0.035).
  EXPECT_LT(err / var, 0.08);
}

TEST(NuqTest, ZeroAndConstantRowsDecodeExactly) {
  const int64_t values = 64;
  NuqCalibration cal(1, values);
  std::vector<float> zeros(static_cast<size_t>(values), 0.0f);
  cal.Calibrate(0, zeros.data(), zeros.data(), 1, values);  // degenerate one-token batch
  std::vector<uint8_t> row(static_cast<size_t>(NuqRowBytes(values, false)));
  std::vector<float> y(static_cast<size_t>(values), 1.0f);
  NuqEncodeValueRow(zeros.data(), values, cal.value(0), row.data());
  NuqDecode(row.data(), values, false, cal.value(0), 0, values, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
  std::vector<float> constant(static_cast<size_t>(values), 2.5f);
  NuqEncodeValueRow(constant.data(), values, cal.value(0), row.data());
  NuqDecode(row.data(), values, false, cal.value(0), 0, values, y.data());
  for (float v : y) EXPECT_EQ(v, 2.5f);
  for (float r : cal.key(0).radius) EXPECT_GT(r, 0.0f);
  // Non-finite input does not poison the row.
  std::vector<float> bad = Gaussian(static_cast<size_t>(values), 2);
  bad[5] = std::nanf("");
  bad[6] = INFINITY;
  NuqEncodeValueRow(bad.data(), values, cal.value(0), row.data());
  NuqDecode(row.data(), values, false, cal.value(0), 0, values, y.data());
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST(NuqTest, RopeTableMatchesTheKernelAndInverts) {
  for (bool neox : {false, true}) {
    RopeTable t(64, 64, 10000.0f, 0.5f, neox);
    t.Reserve(300);
    for (int64_t pos : {0, 1, 17, 299}) {
      std::vector<float> a = Gaussian(64, static_cast<uint32_t>(pos + 1)), b = a, orig = a;
      t.Apply(a.data(), pos, false);
      kernels::Rope(b.data(), 1, 64, 64, pos, 10000.0f, 0.5f, neox);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << pos << " " << i;
      t.Apply(a.data(), pos, true);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], orig[i], 1e-5f);
    }
  }
  // Partial rotation (rot_dim < head_dim) leaves the tail alone.
  RopeTable p(16, 8, 10000.0f, 1.0f, false);
  p.Reserve(5);
  std::vector<float> x = Gaussian(16, 4), y = x;
  p.Apply(x.data(), 4, false);
  for (size_t i = 8; i < 16; ++i) EXPECT_EQ(x[i], y[i]);
}

TEST(NuqTest, DecodedKeysAreRotatedToTheirPosition) {
  const int64_t values = 64;  // 2 heads x 32
  NuqCalibration cal(1, values);
  const std::vector<float> calib = Gaussian(static_cast<size_t>(values * 100), 8);
  cal.Calibrate(0, calib.data(), nullptr, 100, values);
  RopeTable rope(32, 32, 10000.0f, 1.0f, false);
  rope.Reserve(50);
  std::vector<float> x = Gaussian(static_cast<size_t>(values), 12);
  std::vector<uint8_t> row(static_cast<size_t>(NuqRowBytes(values, true)));
  NuqEncodeKeyRow(x.data(), values, cal.key(0), row.data());
  std::vector<float> plain(static_cast<size_t>(values)), rotated(static_cast<size_t>(values));
  NuqDecode(row.data(), values, true, cal.key(0), 0, values, plain.data());
  NuqDecode(row.data(), values, true, cal.key(0), 0, values, rotated.data(), &rope, 42);
  kernels::Rope(plain.data(), 2, 32, 32, 42, 10000.0f, 1.0f, false);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i], rotated[i]);
}

TEST(NuqTest, CalibrationFileRoundTripsAndRejectsBadFiles) {
  const int64_t values = 16;
  NuqCalibration cal(2, values);
  const std::vector<float> k = Gaussian(static_cast<size_t>(values * 50), 1);
  const std::vector<float> v = Gaussian(static_cast<size_t>(values * 50), 2);
  cal.Calibrate(0, k.data(), v.data(), 50, values);
  cal.Calibrate(1, v.data(), k.data(), 50, values);
  const std::string path = ::testing::TempDir() + "/nuq_calib.txt";
  ASSERT_TRUE(cal.Save(path).ok());
  auto back = NuqCalibration::Load(path, 2, values);
  ASSERT_TRUE(back.ok()) << back.error().message();
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_TRUE(back->calibrated(l));
    EXPECT_EQ(back->key(l).center, cal.key(l).center);
    EXPECT_EQ(back->key(l).radius, cal.key(l).radius);
    for (int c = 0; c < kNuqLevels; ++c) {
      EXPECT_EQ(back->key(l).lut[c], cal.key(l).lut[c]);
      EXPECT_EQ(back->value(l).lut[c], cal.value(l).lut[c]);
    }
  }
  EXPECT_FALSE(NuqCalibration::Load(path, 3, values).ok());  // other shape
  EXPECT_FALSE(NuqCalibration::Load(path + ".missing", 2, values).ok());
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write_and_load = [&](const std::string& body) {
    std::ofstream(path) << body;
    return NuqCalibration::Load(path, 2, values);
  };
  EXPECT_FALSE(write_and_load(text.substr(0, text.size() / 2)).ok());  // truncated
  EXPECT_FALSE(write_and_load("kvforge-kv-scales 1\n").ok());          // wrong magic
  std::string negative = text;
  negative.replace(negative.find("kr 0 ") + 5, 0, "-");  // a negative radius
  EXPECT_FALSE(write_and_load(negative).ok());
  EXPECT_FALSE(write_and_load(text + "garbage\n").ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kvforge::kvquant
