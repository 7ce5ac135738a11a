// CORS decisions (server/cors.h) and the flag-list parser.
#include "server/cors.h"

#include <gtest/gtest.h>

#include "kvforge/server.h"

namespace kvforge::server {
namespace {

HttpRequest Preflight(const std::string& origin, const std::string& method) {
  HttpRequest r;
  r.method = "OPTIONS";
  r.path = "/v1/chat/completions";
  r.headers = {{"Origin", origin},
               {"Access-Control-Request-Method", method},
               {"Access-Control-Request-Headers", "authorization,content-type"}};
  return r;
}

TEST(CorsTest, ParsesFlagLists) {
  auto json = ParseCorsFlagList(R"(["https://a.example", 'http://b:8080'])", "allowed-origins");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, (std::vector<std::string>{"https://a.example", "http://b:8080"}));
  auto words = ParseCorsFlagList("GET, POST", "allowed-methods");
  ASSERT_TRUE(words.ok());
  EXPECT_EQ(*words, (std::vector<std::string>{"GET", "POST"}));
  EXPECT_TRUE(ParseCorsFlagList("[]", "allowed-origins")->empty());
  EXPECT_TRUE(ParseCorsFlagList("", "allowed-origins")->empty());
  auto empty_entry = ParseCorsFlagList("a,,b", "allowed-origins");
  ASSERT_FALSE(empty_entry.ok());
  EXPECT_NE(empty_entry.error().message().find("--allowed-origins"), std::string::npos);
  EXPECT_FALSE(ParseCorsFlagList(R"(["a"b"])", "allowed-origins").ok());
}

TEST(CorsTest, OffByDefault) {
  CorsPolicy off;
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(CorsResponseHeaders(off, "http://a.example").empty());
}

TEST(CorsTest, AllowedOriginIsEchoed) {
  CorsPolicy p;
  p.origins = {"http://a.example"};
  const HttpHeaders h = CorsResponseHeaders(p, "http://a.example");
  EXPECT_EQ(FindHeader(h, "Access-Control-Allow-Origin"), "http://a.example");
  EXPECT_EQ(FindHeader(h, "Vary"), "Origin");
  EXPECT_EQ(FindHeader(h, "Access-Control-Allow-Credentials"), "");
  // Another origin, or the same host on another port or scheme, gets no grant.
  for (const char* o : {"http://b.example", "http://a.example:81", "https://a.example", ""})
    EXPECT_EQ(FindHeader(CorsResponseHeaders(p, o), "Access-Control-Allow-Origin"), "") << o;
  p.allow_credentials = true;
  EXPECT_EQ(
      FindHeader(CorsResponseHeaders(p, "http://a.example"), "Access-Control-Allow-Credentials"),
      "true");
  CorsPolicy any;
  any.origins = {"*"};
  EXPECT_EQ(FindHeader(CorsResponseHeaders(any, "http://z.example"), "Access-Control-Allow-Origin"),
            "http://z.example");
}

TEST(CorsTest, Preflight) {
  CorsPolicy p;
  p.origins = {"http://a.example"};
  EXPECT_TRUE(IsPreflight(Preflight("http://a.example", "POST")));
  HttpRequest plain_options = Preflight("http://a.example", "POST");
  plain_options.headers.pop_back();
  plain_options.headers.pop_back();
  EXPECT_FALSE(IsPreflight(plain_options));
  const HttpResponse ok = PreflightResponse(p, Preflight("http://a.example", "POST"));
  EXPECT_EQ(ok.status, 204);
  EXPECT_EQ(FindHeader(ok.headers, "Access-Control-Allow-Methods"), "GET, POST, OPTIONS");
  EXPECT_EQ(FindHeader(ok.headers, "Access-Control-Allow-Headers"), "authorization,content-type");
  EXPECT_EQ(FindHeader(ok.headers, "Access-Control-Max-Age"), "600");
  EXPECT_EQ(PreflightResponse(p, Preflight("http://evil.example", "POST")).status, 403);
  EXPECT_EQ(PreflightResponse(p, Preflight("http://a.example", "DELETE")).status, 403);
  p.headers = {"Content-Type"};
  EXPECT_EQ(FindHeader(PreflightResponse(p, Preflight("http://a.example", "POST")).headers,
                       "Access-Control-Allow-Headers"),
            "Content-Type");
}

}  // namespace
}  // namespace kvforge::server
