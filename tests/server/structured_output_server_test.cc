// Structured outputs over real HTTP: every request form (OpenAI response_format, vLLM
// structured_outputs and guided_*, llama.cpp grammar/json_schema) constrains completions and
// chat, streaming and not; logit_bias; conflicting forms, bad constraints and refused OpenAI
// fields get a 400 naming the field, and the server stays up.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>

#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

class StructuredServerTest : public SharedServerTest<StructuredServerTest> {};

const json kSchema = {{"type", "object"},
                      {"properties",
                       {{"name", {{"type", "string"}, {"maxLength", 10}}},
                        {"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 50}}}}},
                      {"required", {"name", "n"}}};

json Completion(json extra) {
  json req = {{"prompt", "Once upon a time"}, {"max_tokens", 80}, {"seed", 3}};
  req.update(extra);
  return req;
}

json Chat(json extra) {
  json req = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me."}}})},
              {"max_tokens", 80},
              {"seed", 5}};
  req.update(extra);
  return req;
}

void ExpectSchemaText(const std::string& text, const std::string& what) {
  const json j = json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << what << ": " << text;
  EXPECT_TRUE(j["name"].is_string()) << what << ": " << text;
  EXPECT_TRUE(j["n"].is_number_integer()) << what << ": " << text;
  EXPECT_LE(j["n"].get<int>(), 50) << what;
}

TEST_F(StructuredServerTest, EveryFormConstrainsCompletionsAndChat) {
  const json forms[] = {
      {{"response_format",
        {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", kSchema}}}}}},
      {{"structured_outputs", {{"json", kSchema}}}},
      {{"structured_outputs", {{"json", kSchema.dump()}}}},
      {{"guided_json", kSchema}},
      {{"json_schema", kSchema}},
  };
  for (const json& form : forms) {
    Reply c = Post(url(), "/v1/completions", Completion(form));
    ASSERT_EQ(c.status, 200) << form.dump() << ": " << c.raw;
    ASSERT_EQ(c.body["choices"][0]["finish_reason"], "stop") << c.raw;
    ExpectSchemaText(c.body["choices"][0]["text"], form.dump());
    Reply ch = Post(url(), "/v1/chat/completions", Chat(form));
    ASSERT_EQ(ch.status, 200) << form.dump() << ": " << ch.raw;
    if (ch.body["choices"][0]["finish_reason"] == "stop")
      ExpectSchemaText(ch.body["choices"][0]["message"]["content"], form.dump());
  }
  const std::regex re("(yes|no)-[0-9]{2}");
  for (const json& form :
       {json{{"guided_regex", "(yes|no)-[0-9]{2}"}},
        json{{"structured_outputs", {{"regex", "(yes|no)-[0-9]{2}"}}}},
        json{{"grammar", "root ::= (\"yes\" | \"no\") \"-\" [0-9]{2}"}},
        json{{"guided_grammar", "root ::= (\"yes\" | \"no\") \"-\" [0-9] [0-9]"}}}) {
    Reply c = Post(url(), "/v1/completions", Completion(form));
    ASSERT_EQ(c.status, 200) << c.raw;
    EXPECT_TRUE(std::regex_match(c.body["choices"][0]["text"].get<std::string>(), re)) << c.raw;
  }
  for (const json& form : {json{{"guided_choice", {"red", "blue"}}},
                           json{{"structured_outputs", {{"choice", {"red", "blue"}}}}}}) {
    Reply c = Post(url(), "/v1/chat/completions", Chat(form));
    ASSERT_EQ(c.status, 200) << c.raw;
    const std::string text = c.body["choices"][0]["message"]["content"];
    EXPECT_TRUE(text == "red" || text == "blue") << text;
  }
  Reply obj = Post(url(), "/v1/chat/completions",
                   Chat({{"response_format", {{"type", "json_object"}}}, {"max_tokens", 200}}));
  ASSERT_EQ(obj.status, 200) << obj.raw;
  if (obj.body["choices"][0]["finish_reason"] == "stop") {
    const json j = json::parse(obj.body["choices"][0]["message"]["content"].get<std::string>(),
                               nullptr, false);
    EXPECT_TRUE(j.is_object()) << obj.raw;
  }
}

TEST_F(StructuredServerTest, StreamingEqualsNonStreaming) {
  json req = Completion({{"guided_json", kSchema}, {"temperature", 0}});
  Reply whole = Post(url(), "/v1/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  req["stream"] = true;
  StreamReply s = PostStream(url(), "/v1/completions", req);
  ASSERT_TRUE(s.done);
  EXPECT_EQ(s.text[0], whole.body["choices"][0]["text"]);
  EXPECT_EQ(s.finish[0], "stop");
  json chat = Chat({{"structured_outputs", {{"json", kSchema}}}, {"temperature", 0}});
  Reply chat_whole = Post(url(), "/v1/chat/completions", chat);
  chat["stream"] = true;
  StreamReply cs = PostStream(url(), "/v1/chat/completions", chat);
  ASSERT_TRUE(cs.done);
  EXPECT_EQ(cs.text[0], chat_whole.body["choices"][0]["message"]["content"]);
}

TEST_F(StructuredServerTest, LogitBias) {
  json req = Completion({{"temperature", 0}, {"max_tokens", 12}});
  Reply plain = Post(url(), "/v1/completions", req);
  ASSERT_EQ(plain.status, 200);
  req["logit_bias"] = {{"300", 100}};
  Reply forced = Post(url(), "/v1/completions", req);
  ASSERT_EQ(forced.status, 200) << forced.raw;
  EXPECT_NE(forced.body["choices"][0]["text"], plain.body["choices"][0]["text"]);
  for (const json& bad : {json{{"x", 1}}, json{{"1", 101}}, json{{"1", "a"}}, json{{"-1", 1}},
                          json{{"999999", 1}}, json(3)}) {
    req["logit_bias"] = bad;
    Reply r = Post(url(), "/v1/completions", req);
    EXPECT_EQ(r.status, 400) << bad.dump() << ": " << r.raw;
  }
}

TEST_F(StructuredServerTest, BadRequestsAre400NamingTheField) {
  struct Case {
    json body;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {Completion({{"guided_json", kSchema}, {"guided_regex", "a"}}), "guided_regex", "only one"},
      {Completion({{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}}),
       "grammar", "only one"},
      {Completion({{"structured_outputs", {{"regex", "a"}, {"choice", {"b"}}}}}),
       "structured_outputs", "only one"},
      {Completion({{"structured_outputs", {{"jsn", kSchema}}}}), "structured_outputs.jsn",
       "unknown"},
      {Completion({{"grammar", "root ::= ("}}), "", "line 1"},
      {Completion({{"guided_regex", "a(?=b)"}}), "", "offset"},
      {Completion({{"guided_json", {{"type", "string"}, {"format", "email"}}}}), "", "email"},
      {Chat({{"response_format", {{"type", "xml"}}}}), "response_format.type", "json_schema"},
      {Chat({{"response_format", {{"type", "json_schema"}}}}), "response_format.json_schema",
       "json_schema"},
      {Chat({{"tool_choice", "required"}}), "tool_choice", "needs 'tools'"},
      {Chat({{"audio", {{"voice", "x"}}}}), "audio", "not supported"},
      {Chat({{"store", true}}), "store", "store"},
      {Completion({{"suffix", "x"}}), "suffix", "not supported"},
      {Completion({{"best_of", 3}}), "best_of", "best_of"},
  };
  for (const Case& c : cases) {
    const bool chat = c.body.contains("messages");
    Reply r = Post(url(), chat ? "/v1/chat/completions" : "/v1/completions", c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump() << ": " << r.raw;
    if (r.status != 400) continue;
    const json& param = r.body["error"]["param"];
    if (c.param[0] != '\0') {
      EXPECT_EQ(param, c.param) << r.raw;
    }
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(c.message), std::string::npos)
        << r.raw;
  }
  // Accepted metadata fields change nothing, and the server still answers.
  Reply ok = Post(url(), "/v1/chat/completions",
                  Chat({{"user", "u1"},
                        {"metadata", {{"k", "v"}}},
                        {"store", false},
                        {"tool_choice", "none"},
                        {"service_tier", "auto"}}));
  EXPECT_EQ(ok.status, 200) << ok.raw;
}

}  // namespace
}  // namespace kvforge::server::testing
