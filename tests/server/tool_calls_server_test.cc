// Tool calls and reasoning over real HTTP, on the embedded model with its ChatML template (which
// shows no tool format, so replies are read as hermes): tool_choice required and named always
// give calls that parse and validate, in one call or several; streamed tool-call deltas
// reassemble to the non-streamed reply; "auto" reads calls the reply writes (here forced by a
// grammar); reasoning_content apart from content, streaming and not, with the constraint
// applied after the reasoning; assistant tool calls in the history render; bad tool fields get
// a 400 naming the field and the server stays up.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object",
                  "properties": {"city": {"type": "string", "maxLength": 12},
                                 "unit": {"enum": ["c", "f"]}},
                  "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add",
   "parameters": {"type": "object",
                  "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                 "b": {"type": "integer", "minimum": 0, "maximum": 99}},
                  "required": ["a", "b"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "ping"}}])");

json ChatWithTools(json extra) {
  json req = {{"messages", json::array({{{"role", "user"}, {"content", "What is 2+3?"}}})},
              {"tools", kTools},
              {"max_tokens", 120}};
  req.update(extra);
  return req;
}

// A call validates against kTools: a known name, arguments a JSON object of the right shape.
void ExpectValidCall(const json& call, const std::string& what) {
  ASSERT_TRUE(call["id"].is_string()) << what;
  EXPECT_FALSE(call["id"].get<std::string>().empty()) << what;
  EXPECT_EQ(call["type"], "function") << what;
  const std::string name = call["function"]["name"];
  ASSERT_TRUE(call["function"]["arguments"].is_string()) << what;
  const json args = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << what << ": " << call.dump();
  if (name == "get_weather") {
    EXPECT_EQ(args.size(), 2u) << what;
    EXPECT_TRUE(args["city"].is_string()) << what;
    EXPECT_LE(args["city"].get<std::string>().size(), 12u) << what;
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << what;
  } else if (name == "add") {
    EXPECT_EQ(args.size(), 2u) << what;
    for (const char* k : {"a", "b"}) {
      ASSERT_TRUE(args[k].is_number_integer()) << what << ": " << args.dump();
      EXPECT_GE(args[k].get<int>(), 0) << what;
      EXPECT_LE(args[k].get<int>(), 99) << what;
    }
  } else {
    EXPECT_EQ(name, "ping") << what;
  }
}

// What a streamed chat reply says, reassembled the way OpenAI clients do: content and
// reasoning concatenated, tool calls by index with their argument pieces joined.
struct StreamedChat {
  std::string content, reasoning, finish;
  std::map<int, json> calls;  // index -> {id, name, arguments}
};

StreamedChat Reassemble(const StreamReply& s) {
  StreamedChat out;
  for (const json& e : s.events) {
    if (!e.contains("choices")) continue;
    for (const json& c : e["choices"]) {
      const json& d = c["delta"];
      if (d.contains("content") && d["content"].is_string()) out.content += d["content"];
      if (d.contains("reasoning_content")) out.reasoning += d["reasoning_content"];
      if (d.contains("tool_calls"))
        for (const json& t : d["tool_calls"]) {
          json& call = out.calls[t["index"].get<int>()];
          if (t.contains("id")) call["id"] = t["id"];
          if (t["function"].contains("name")) call["name"] = t["function"]["name"];
          call["arguments"] = call.value("arguments", std::string()) +
                              t["function"].value("arguments", std::string());
        }
      if (c["finish_reason"].is_string()) out.finish = c["finish_reason"];
    }
  }
  return out;
}

class ToolServerTest : public SharedServerTest<ToolServerTest> {};

TEST_F(ToolServerTest, RequiredAlwaysGivesOneValidCall) {
  std::set<std::string> names;
  for (int seed = 0; seed < 12; ++seed) {
    Reply r = Post(url(), "/v1/chat/completions",
                   ChatWithTools({{"tool_choice", "required"},
                                  {"parallel_tool_calls", false},
                                  {"temperature", 1.0},
                                  {"seed", seed}}));
    ASSERT_EQ(r.status, 200) << r.raw;
    const json& choice = r.body["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << r.raw;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r.raw;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.raw;
    ExpectValidCall(choice["message"]["tool_calls"][0], "seed " + std::to_string(seed));
    names.insert(choice["message"]["tool_calls"][0]["function"]["name"]);
  }
  EXPECT_GE(names.size(), 2u) << "sampling should reach more than one tool";
}

TEST_F(ToolServerTest, ParallelCallsAreAllValid) {
  int several = 0;
  for (int seed = 0; seed < 8; ++seed) {
    Reply r = Post(url(), "/v1/chat/completions",
                   ChatWithTools({{"tool_choice", "required"},
                                  {"temperature", 1.0},
                                  {"seed", seed},
                                  {"max_tokens", 400}}));
    ASSERT_EQ(r.status, 200) << r.raw;
    const json& choice = r.body["choices"][0];
    // The model may still be calling when max_tokens hits: the calls it completed count.
    ASSERT_TRUE(choice["finish_reason"] == "tool_calls" || choice["finish_reason"] == "length")
        << r.raw;
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_GE(calls.size(), 1u) << r.raw;
    several += calls.size() > 1;
    std::set<std::string> ids;
    for (const json& c : calls) {
      ExpectValidCall(c, r.raw);
      ids.insert(c["id"].get<std::string>());
    }
    EXPECT_EQ(ids.size(), calls.size()) << "call ids are unique: " << r.raw;
  }
  EXPECT_GE(several, 1) << "some reply should make more than one call";
}

TEST_F(ToolServerTest, NamedFunctionIsTheOneCalled) {
  for (int seed = 0; seed < 6; ++seed) {
    Reply r = Post(
        url(), "/v1/chat/completions",
        ChatWithTools({{"tool_choice", {{"type", "function"}, {"function", {{"name", "add"}}}}},
                       {"temperature", 1.0},
                       {"seed", seed},
                       {"parallel_tool_calls", false}}));
    ASSERT_EQ(r.status, 200) << r.raw;
    const json& calls = r.body["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << r.raw;
    EXPECT_EQ(calls[0]["function"]["name"], "add");
    ExpectValidCall(calls[0], r.raw);
  }
  // A function without parameters gets an object of arguments all the same.
  Reply ping =
      Post(url(), "/v1/chat/completions",
           ChatWithTools({{"tool_choice", {{"type", "function"}, {"function", {{"name", "ping"}}}}},
                          {"temperature", 0},
                          {"parallel_tool_calls", false}}));
  ASSERT_EQ(ping.status, 200) << ping.raw;
  ExpectValidCall(ping.body["choices"][0]["message"]["tool_calls"][0], ping.raw);
}

TEST_F(ToolServerTest, StreamedCallsReassembleToTheReply) {
  for (const json& choice :
       {json("required"), json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}) {
    json req = ChatWithTools({{"tool_choice", choice}, {"temperature", 0}, {"max_tokens", 300}});
    Reply whole = Post(url(), "/v1/chat/completions", req);
    ASSERT_EQ(whole.status, 200) << whole.raw;
    req["stream"] = true;
    StreamReply s = PostStream(url(), "/v1/chat/completions", req);
    ASSERT_TRUE(s.done);
    const StreamedChat got = Reassemble(s);
    const json& message = whole.body["choices"][0]["message"];
    EXPECT_EQ(got.finish, whole.body["choices"][0]["finish_reason"]);
    EXPECT_EQ(got.content,
              message["content"].is_null() ? "" : message["content"].get<std::string>());
    const json calls = message.value("tool_calls", json::array());
    ASSERT_EQ(got.calls.size(), calls.size()) << whole.raw;
    for (size_t i = 0; i < calls.size(); ++i) {
      const json& g = got.calls.at(static_cast<int>(i));
      EXPECT_EQ(g["name"], calls[i]["function"]["name"]);
      EXPECT_EQ(g["arguments"], calls[i]["function"]["arguments"]);
      EXPECT_TRUE(g["id"].is_string());
    }
  }
}

TEST_F(ToolServerTest, AutoReadsTheCallsAReplyWrites) {
  // A grammar makes the model write text and then a hermes call; "auto" must find the call.
  const std::string gbnf =
      "root ::= \"Sure. <tool_call>\\n{\\\"name\\\": \\\"add\\\", \\\"arguments\\\": {\\\"a\\\": "
      "\" "
      "[1-9] \"}}\\n</tool_call>\"";
  json req = ChatWithTools({{"grammar", gbnf}, {"temperature", 0}});
  Reply r = Post(url(), "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& choice = r.body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.raw;
  EXPECT_EQ(choice["message"]["content"], "Sure. ") << r.raw;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.raw;
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "add");
  req["stream"] = true;
  const StreamedChat s = Reassemble(PostStream(url(), "/v1/chat/completions", req));
  EXPECT_EQ(s.content, "Sure. ");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls.at(0)["arguments"],
            choice["message"]["tool_calls"][0]["function"]["arguments"]);
  EXPECT_EQ(s.finish, "tool_calls");
  // tool_choice none: the same text is plain content.
  req["stream"] = false;
  req["tool_choice"] = "none";
  Reply none = Post(url(), "/v1/chat/completions", req);
  ASSERT_EQ(none.status, 200) << none.raw;
  EXPECT_EQ(none.body["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(none.body["choices"][0]["message"].contains("tool_calls"));
  EXPECT_NE(none.body["choices"][0]["message"]["content"].get<std::string>().find("<tool_call>"),
            std::string::npos);
}

TEST_F(ToolServerTest, ToolCallsInTheHistoryRender) {
  json messages =
      json::array({{{"role", "user"}, {"content", "Add 2 and 3"}},
                   {{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls",
                     {{{"id", "call_1"},
                       {"type", "function"},
                       {"function", {{"name", "add"}, {"arguments", "{\"a\": 2, \"b\": 3}"}}}}}}},
                   {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "5"}}});
  Reply r = Post(url(), "/v1/chat/completions",
                 ChatWithTools({{"messages", messages}, {"max_tokens", 8}}));
  EXPECT_EQ(r.status, 200) << r.raw;
  // ChatML does not read tool_calls: the call is written into the assistant turn as hermes.
  Reply tok = Post(url(), "/tokenize", {{"messages", messages}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  Reply text = Post(url(), "/detokenize", {{"tokens", tok.body["tokens"]}});
  ASSERT_EQ(text.status, 200) << text.raw;
  const std::string prompt = text.body["prompt"];
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}"
                        "\n</tool_call>"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("tool\n5"), std::string::npos) << prompt;
}

TEST_F(ToolServerTest, BadToolFieldsAre400NamingTheField) {
  struct Case {
    json extra;
    const char* param;
    const char* message;
  };
  const Case cases[] = {
      {{{"tools", "x"}}, "tools", "array"},
      {{{"tools", json::array({1})}}, "tools", "object"},
      {{{"tools", json::array({{{"type", "retrieval"}}})}}, "tools", "function"},
      {{{"tools", json::array({{{"type", "function"}, {"function", {{"name", "a b"}}}}})}},
       "tools",
       "name"},
      {{{"tools", json::array({{{"type", "function"}, {"function", {{"name", "f"}}}},
                               {{"type", "function"}, {"function", {{"name", "f"}}}}})}},
       "tools",
       "two tools"},
      {{{"tools",
         json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 3}}}}})}},
       "tools",
       "parameters"},
      {{{"tool_choice", "sometimes"}}, "tool_choice", "none, auto, required"},
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice",
       "not among"},
      {{{"tools", json::array()}, {"tool_choice", "required"}}, "tool_choice", "needs 'tools'"},
      {{{"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}},
       "tool_choice",
       "cannot be combined"},
      {{{"tool_choice", "required"},
        {"tools",
         json::array({{{"type", "function"},
                       {"function",
                        {{"name", "f"},
                         {"parameters", {{"type", "object"}, {"not", {{"type", "null"}}}}}}}}})}},
       "tools",
       "tools[0].function.parameters"},
      {{{"parallel_tool_calls", "yes"}}, "parallel_tool_calls", "boolean"},
  };
  for (const Case& c : cases) {
    Reply r = Post(url(), "/v1/chat/completions", ChatWithTools(c.extra));
    ASSERT_EQ(r.status, 400) << c.extra.dump() << ": " << r.raw;
    EXPECT_EQ(r.body["error"]["param"], c.param) << r.raw;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(c.message), std::string::npos)
        << r.raw;
  }
  EXPECT_EQ(Get(url(), "/health").status, 200);
}

// A server with a reasoning parser: <think>...</think> becomes reasoning_content.
class ReasoningServerTest : public SharedServerTest<ReasoningServerTest> {
 public:
  static ServerOptions Options() {
    ServerOptions o;
    o.reasoning_parser = "qwen3";
    return o;
  }
};

TEST_F(ReasoningServerTest, ReasoningIsApartFromContentStreamingOrNot) {
  // The reply does not open with a <think> token, so the grammar applies from its first token
  // and can itself write the reasoning block.
  json req = {{"messages", json::array({{{"role", "user"}, {"content", "Yes or no?"}}})},
              {"grammar", "root ::= \"<think>\" [a-z]{3,12} \"</think>\\n\\n\" (\"yes\" | \"no\")"},
              {"temperature", 0},
              {"max_tokens", 60}};
  Reply r = Post(h_->url(), "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& m = r.body["choices"][0]["message"];
  ASSERT_TRUE(m["reasoning_content"].is_string()) << r.raw;
  const std::string reasoning = m["reasoning_content"];
  EXPECT_GE(reasoning.size(), 3u);
  EXPECT_EQ(reasoning.find_first_not_of("abcdefghijklmnopqrstuvwxyz"), std::string::npos);
  EXPECT_TRUE(m["content"] == "yes" || m["content"] == "no") << r.raw;
  req["stream"] = true;
  const StreamedChat s = Reassemble(PostStream(h_->url(), "/v1/chat/completions", req));
  EXPECT_EQ(s.reasoning, reasoning);
  EXPECT_EQ(s.content, m["content"]);
  // A reply without a reasoning block is all content, with reasoning_content null.
  Reply plain = Post(h_->url(), "/v1/chat/completions",
                     {{"messages", req["messages"]}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(plain.status, 200) << plain.raw;
  EXPECT_TRUE(plain.body["choices"][0]["message"]["reasoning_content"].is_null()) << plain.raw;
  EXPECT_FALSE(plain.body["choices"][0]["message"]["content"].get<std::string>().empty());
}

TEST(ReasoningServerOptions, UnknownParsersAreRefusedAtStart) {
  auto engine = AsyncEngine::Create(TestEngineConfig());
  ASSERT_TRUE(engine.ok()) << engine.error().message();
  ServerOptions o;
  o.reasoning_parser = "sometimes";
  auto s = Server::Create(engine->get(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("deepseek_r1"), std::string::npos);
  o.reasoning_parser.clear();
  o.tool_call_parser = "pythonic";
  s = Server::Create(engine->get(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("hermes"), std::string::npos);
}

}  // namespace
}  // namespace kvforge::server::testing
