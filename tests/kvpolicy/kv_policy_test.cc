// Unit tests for kvforge/kv_policy.h: policy names (parse / print round trip, the error for an
// unknown name) and ValidateKvPolicy's accepted and rejected parameter sets.
#include "kvforge/kv_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace kvforge {
namespace {

constexpr KvPolicyKind kAllKinds[] = {
    KvPolicyKind::kNone,  KvPolicyKind::kStreaming, KvPolicyKind::kH2O,       KvPolicyKind::kTova,
    KvPolicyKind::kKnorm, KvPolicyKind::kSnapKV,    KvPolicyKind::kPyramidKV, KvPolicyKind::kRandom,
    KvPolicyKind::kQuest, KvPolicyKind::kNsa,
};
constexpr std::string_view kAllNames[] = {"none",   "streaming", "h2o",    "tova",  "knorm",
                                          "snapkv", "pyramidkv", "random", "quest", "nsa"};

KvPolicy Policy(KvPolicyKind kind, double budget) {
  KvPolicy p;
  p.kind = kind;
  p.budget = budget;
  return p;
}

::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s.ToString();
}

::testing::AssertionResult IsInvalid(const Status& s) {
  if (s.code() == StatusCode::kInvalidArgument && !s.message().empty())
    return ::testing::AssertionSuccess() << s.ToString();
  return ::testing::AssertionFailure() << "expected INVALID_ARGUMENT, got " << s.ToString();
}

TEST(KvPolicyNameTest, RoundTripsEveryName) {
  static_assert(std::size(kAllKinds) == std::size(kAllNames));
  for (size_t i = 0; i < std::size(kAllKinds); ++i) {
    EXPECT_EQ(KvPolicyName(kAllKinds[i]), kAllNames[i]);
    Result<KvPolicyKind> r = ParseKvPolicyKind(kAllNames[i]);
    ASSERT_TRUE(r.ok()) << kAllNames[i] << ": " << r.error().ToString();
    EXPECT_EQ(*r, kAllKinds[i]) << kAllNames[i];
    Result<KvPolicyKind> again = ParseKvPolicyKind(KvPolicyName(*r));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, kAllKinds[i]);
  }
  EXPECT_EQ(KvPolicyNames(),
            "none, streaming, h2o, tova, knorm, snapkv, pyramidkv, random, quest, nsa");
}

TEST(KvPolicyNameTest, DefaultPolicyIsDisabled) {
  const KvPolicy p;
  EXPECT_EQ(p.kind, KvPolicyKind::kNone);
  EXPECT_FALSE(p.enabled());
  EXPECT_TRUE(Policy(KvPolicyKind::kRandom, 8).enabled());
  EXPECT_EQ(Policy(KvPolicyKind::kH2O, 8), Policy(KvPolicyKind::kH2O, 8));
  EXPECT_NE(Policy(KvPolicyKind::kH2O, 8), Policy(KvPolicyKind::kH2O, 9));
}

TEST(KvPolicyNameTest, UnknownNameListsTheKnownOnes) {
  for (std::string_view bad : {"", "H2O", "snap", "streaming ", "lru"}) {
    Result<KvPolicyKind> r = ParseKvPolicyKind(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    const std::string& msg = r.error().message();
    EXPECT_NE(msg.find("'" + std::string(bad) + "'"), std::string::npos) << msg;
    for (std::string_view name : kAllNames)
      EXPECT_NE(msg.find(name), std::string::npos) << name << " missing from: " << msg;
  }
}

TEST(ValidateKvPolicyTest, AcceptsValidPolicies) {
  KvPolicy disabled;
  disabled.budget = 0;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(disabled)));
  disabled.budget = -3;  // a disabled policy's parameters are not looked at
  disabled.pool_kernel = 4;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(disabled)));

  EXPECT_TRUE(IsOk(ValidateKvPolicy(Policy(KvPolicyKind::kSnapKV, 0.2))));
  KvPolicy streaming = Policy(KvPolicyKind::kStreaming, 64);
  streaming.sinks = 4;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(streaming)));
  streaming.sinks = 63;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(streaming)));
  streaming.sinks = 0;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(streaming)));

  for (KvPolicyKind kind : kAllKinds) {
    SCOPED_TRACE(KvPolicyName(kind));
    EXPECT_TRUE(IsOk(ValidateKvPolicy(Policy(kind, 128))));
    EXPECT_TRUE(IsOk(ValidateKvPolicy(Policy(kind, 0.5))));
  }
  KvPolicy h2o = Policy(KvPolicyKind::kH2O, 100);
  h2o.window = 99;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(h2o)));
  h2o.window = 0;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(h2o)));
  KvPolicy pyramid = Policy(KvPolicyKind::kPyramidKV, 256);
  pyramid.beta = 1.0f;
  pyramid.pool_kernel = 1;
  EXPECT_TRUE(IsOk(ValidateKvPolicy(pyramid)));
  EXPECT_TRUE(IsOk(ValidateKvPolicy(Policy(KvPolicyKind::kKnorm, 1))));
}

TEST(ValidateKvPolicyTest, RejectsBadBudgets) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (KvPolicyKind kind : kAllKinds) {
    if (kind == KvPolicyKind::kNone) continue;
    for (double budget : {0.0, -1.0, -0.5, 1.5, 100.25, nan, inf, -inf, 1e12}) {
      SCOPED_TRACE(::testing::Message() << KvPolicyName(kind) << " budget " << budget);
      EXPECT_TRUE(IsInvalid(ValidateKvPolicy(Policy(kind, budget))));
    }
  }
  const Status s = ValidateKvPolicy(Policy(KvPolicyKind::kH2O, 1.5));
  EXPECT_NE(s.message().find("budget"), std::string::npos) << s.message();
}

TEST(ValidateKvPolicyTest, RejectsBadParameters) {
  for (int32_t kernel : {0, -1, 2, 4, 8, 1024, 1025}) {
    KvPolicy p = Policy(KvPolicyKind::kSnapKV, 128);
    p.pool_kernel = kernel;
    EXPECT_TRUE(IsInvalid(ValidateKvPolicy(p))) << "pool_kernel " << kernel;
  }
  for (float beta : {0.0f, 0.5f, 0.999f, -2.0f, std::numeric_limits<float>::quiet_NaN(),
                     std::numeric_limits<float>::infinity()}) {
    KvPolicy p = Policy(KvPolicyKind::kPyramidKV, 128);
    p.beta = beta;
    EXPECT_TRUE(IsInvalid(ValidateKvPolicy(p))) << "beta " << beta;
  }
  for (int32_t window : {-2, -100, (1 << 20) + 1}) {
    KvPolicy p = Policy(KvPolicyKind::kH2O, 0.5);
    p.window = window;
    EXPECT_TRUE(IsInvalid(ValidateKvPolicy(p))) << "window " << window;
  }
  {
    KvPolicy p = Policy(KvPolicyKind::kStreaming, 0.5);
    p.sinks = -1;
    EXPECT_TRUE(IsInvalid(ValidateKvPolicy(p)));
  }
}

TEST(ValidateKvPolicyTest, RejectsSinksAndWindowsThatFillTheBudget) {
  for (int32_t sinks : {64, 65, 1000}) {
    KvPolicy p = Policy(KvPolicyKind::kStreaming, 64);
    p.sinks = sinks;
    const Status s = ValidateKvPolicy(p);
    EXPECT_TRUE(IsInvalid(s)) << "sinks " << sinks;
    EXPECT_NE(s.message().find("sinks"), std::string::npos) << s.message();
  }
  {
    KvPolicy p = Policy(KvPolicyKind::kStreaming, 1);
    p.sinks = 1;
    EXPECT_TRUE(IsInvalid(ValidateKvPolicy(p)));
  }
  for (KvPolicyKind kind : {KvPolicyKind::kH2O, KvPolicyKind::kSnapKV, KvPolicyKind::kPyramidKV}) {
    for (int32_t window : {100, 101, 5000}) {
      KvPolicy p = Policy(kind, 100);
      p.window = window;
      const Status s = ValidateKvPolicy(p);
      EXPECT_TRUE(IsInvalid(s)) << KvPolicyName(kind) << " window " << window;
      EXPECT_NE(s.message().find(std::string(KvPolicyName(kind))), std::string::npos)
          << s.message();
    }
  }
  // Sinks / windows do not concern the other kinds.
  for (KvPolicyKind kind : {KvPolicyKind::kTova, KvPolicyKind::kKnorm, KvPolicyKind::kRandom}) {
    KvPolicy p = Policy(kind, 16);
    p.sinks = 100;
    p.window = 100;
    EXPECT_TRUE(IsOk(ValidateKvPolicy(p))) << KvPolicyName(kind);
  }
}

TEST(ValidateKvPolicyTest, RejectsUnknownKind) {
  KvPolicy p = Policy(static_cast<KvPolicyKind>(200), 16);
  EXPECT_TRUE(p.enabled());
  EXPECT_EQ(KvPolicyName(p.kind), "?");
  EXPECT_TRUE(IsInvalid(ValidateKvPolicy(p)));
}

}  // namespace
}  // namespace kvforge
