#include "base/strings.h"

#include <gtest/gtest.h>

namespace kvforge::base {
namespace {

TEST(StringsTest, JsonQuoteEscapesAndRepairsUtf8) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n\t"), "\"a\\\"b\\\\c\\n\\t\"");
  EXPECT_EQ(JsonQuote(std::string("\x01", 1)), "\"\\u0001\"");
  EXPECT_EQ(JsonQuote("h\xC3\xA9"), "\"h\xC3\xA9\"");
  EXPECT_EQ(JsonQuote("\xFF"), "\"\xEF\xBF\xBD\"");                  // invalid byte -> U+FFFD
  EXPECT_EQ(JsonQuote("\xE2\x82"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // truncated sequence
}

TEST(StringsTest, ParseByteSize) {
  uint64_t b = 0;
  ASSERT_TRUE(ParseByteSize("2GiB", &b));
  EXPECT_EQ(b, 2ull << 30);
  ASSERT_TRUE(ParseByteSize("512MiB", &b));
  EXPECT_EQ(b, 512ull << 20);
  ASSERT_TRUE(ParseByteSize("1000", &b));
  EXPECT_EQ(b, 1000u);
  EXPECT_FALSE(ParseByteSize("", &b));
  EXPECT_FALSE(ParseByteSize("-1G", &b));
  EXPECT_FALSE(ParseByteSize("12parsecs", &b));
}

TEST(StringsTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(3ull << 30), "3 GiB (3221225472 bytes)");
}

}  // namespace
}  // namespace kvforge::base
