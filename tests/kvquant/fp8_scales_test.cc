// FP8 scale sets: first-batch amax calibration (vLLM's divisors), per tensor and per head, and
// the scales file (round trip, shape mismatch, garbage).
#include "kvquant/fp8_scales.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace kvforge::kvquant {
namespace {

std::string TmpPath(const char* name) {
  return ::testing::TempDir() + "/kvforge_" + name + std::to_string(::getpid());
}

TEST(Fp8ScalesTest, CalibrationUsesAmaxOverVllmDivisors) {
  // 2 tokens x 2 heads x 2 dims, rows 4 floats apart.
  const std::vector<float> k = {1, -400, 3, 2, /* token 1 */ 0, 5, -100, 1};
  const std::vector<float> v = {0, 0, 0, 0, /* token 1 */ 50, 0, 0, -10};
  Fp8Scales tensor(2, 2, false);
  EXPECT_FALSE(tensor.calibrated(1));
  tensor.Calibrate(1, k.data(), v.data(), 2, 2, 4);
  EXPECT_TRUE(tensor.calibrated(1));
  EXPECT_FLOAT_EQ(tensor.key(1)[0], 400.0f / 200);
  EXPECT_FLOAT_EQ(tensor.key(1)[1], 400.0f / 200);  // every head carries the layer's scale
  EXPECT_FLOAT_EQ(tensor.value(1)[0], 50.0f / 100);
  EXPECT_FLOAT_EQ(tensor.key(0)[0], 1.0f);  // layer 0 untouched

  Fp8Scales head(2, 2, true);
  head.Calibrate(0, k.data(), v.data(), 2, 2, 4);
  EXPECT_FLOAT_EQ(head.key(0)[0], 400.0f / 200);
  EXPECT_FLOAT_EQ(head.key(0)[1], 100.0f / 200);
  EXPECT_FLOAT_EQ(head.value(0)[0], 50.0f / 100);
  EXPECT_FLOAT_EQ(head.value(0)[1], 10.0f / 100);
  // An all-zero tensor keeps 1.0 rather than a zero scale.
  const std::vector<float> zero(8, 0.0f);
  head.Calibrate(1, zero.data(), zero.data(), 2, 2, 4);
  EXPECT_FLOAT_EQ(head.key(1)[0], 1.0f);
}

TEST(Fp8ScalesTest, FileRoundTripAndErrors) {
  Fp8Scales s(3, 2, true);
  const std::vector<float> k = {0.5f, -3, 7, 1e-3f}, v = {2, 2, 2, 9};
  for (int l = 0; l < 3; ++l) s.Calibrate(l, k.data(), v.data(), 1, 2, 4);
  const std::string path = TmpPath("scales");
  ASSERT_TRUE(s.Save(path).ok());
  auto back = Fp8Scales::Load(path, 3, 2);
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_TRUE(back->per_head());
  for (int l = 0; l < 3; ++l) {
    EXPECT_TRUE(back->calibrated(l));
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(back->key(l)[h], s.key(l)[h]);
      EXPECT_EQ(back->value(l)[h], s.value(l)[h]);
    }
  }
  EXPECT_FALSE(Fp8Scales::Load(path, 4, 2).ok());  // another model
  EXPECT_FALSE(Fp8Scales::Load(path + ".missing", 3, 2).ok());
  std::ofstream(path) << "kvforge-kv-scales 1\nlayers 1 heads 1 per_head 0\nk 0 -1\nv 0 1\n";
  EXPECT_FALSE(Fp8Scales::Load(path, 1, 1).ok());  // negative scale
  std::ofstream(path) << "kvforge-kv-scales 1\nlayers 1 heads 1 per_head 0\nk 0 0.5\n";
  EXPECT_FALSE(Fp8Scales::Load(path, 1, 1).ok());  // no v line
  std::ofstream(path) << "kvforge-kv-scales 1\nlayers 1 heads 2 per_head 0\nk 0 0.5\nv 0 4\n";
  auto ok = Fp8Scales::Load(path, 1, 2);
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_EQ(ok->key(0)[1], 0.5f);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kvforge::kvquant
