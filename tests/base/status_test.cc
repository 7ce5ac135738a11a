#include "kvforge/status.h"

#include <gtest/gtest.h>

namespace kvforge {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd");
  return x / 2;
}

Status UseMacros(int x, int* out) {
  KVF_ASSIGN_OR_RETURN(int h, Half(x));
  KVF_ASSIGN_OR_RETURN(int q, Half(h));
  *out = q;
  return Status::Ok();
}

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndContext) {
  Status s = Status::DataLoss("truncated").WithContext("model.gguf");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "model.gguf: truncated");
  EXPECT_EQ(s.ToString(), "DATA_LOSS: model.gguf: truncated");
}

TEST(StatusTest, ResultAndMacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(UseMacros(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = UseMacros(6, &out);  // 6 -> 3 is odd
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  Result<int> r = Status::Ok();  // misuse becomes an internal error, never a fake value
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace kvforge
