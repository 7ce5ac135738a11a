// Anthropic's Messages API over real HTTP, on the embedded model with its ChatML template: the
// message shape and its usage, the same greedy text as /v1/chat/completions for the same
// conversation, the typed event stream (order, names, deltas that reassemble to the whole
// reply), the system prompt reaching the prompt (count_tokens, and the same ids /tokenize makes
// of the equivalent OpenAI messages), stop_sequences and max_tokens as stop reasons, a forced
// tool use whose input validates and its tool_result follow-up, a prefilled assistant turn,
// thinking blocks under a reasoning parser, 4xx errors in Anthropic's shape naming the field,
// x-api-key, and the server serving on afterwards.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/sse.h"
#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

json Conversation(const std::string& user) {
  return json::array({{{"role", "user"}, {"content", user}}});
}

json Request(const std::string& user, int max_tokens, json extra = json::object()) {
  json r = {{"model", "stories260K"},
            {"max_tokens", max_tokens},
            {"temperature", 0},
            {"messages", Conversation(user)}};
  r.update(extra);
  return r;
}

std::string TextOf(const json& message) {
  std::string text;
  for (const json& b : message["content"])
    if (b["type"] == "text") text += b["text"].get<std::string>();
  return text;
}

int64_t CountTokens(const std::string& url, const json& body) {
  Reply r = Post(url, "/v1/messages/count_tokens", body);
  EXPECT_EQ(r.status, 200) << r.raw;
  return r.body.value("input_tokens", int64_t{-1});
}

// An Anthropic error: {"type": "error", "error": {"type", "message"}}.
void ExpectError(const Reply& r, int status, const std::string& type, const std::string& names,
                 const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.raw;
  EXPECT_EQ(r.body.value("type", ""), "error") << what << ": " << r.raw;
  ASSERT_TRUE(r.body.contains("error") && r.body["error"].is_object()) << what << ": " << r.raw;
  EXPECT_EQ(r.body["error"].value("type", ""), type) << what << ": " << r.raw;
  EXPECT_NE(r.body["error"].value("message", "").find(names), std::string::npos)
      << what << ": " << r.raw;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

const json kWeatherTool = json::parse(R"({
  "name": "get_weather", "description": "Weather in a city",
  "input_schema": {"type": "object",
                   "properties": {"city": {"type": "string", "maxLength": 12},
                                  "unit": {"enum": ["c", "f"]}},
                   "required": ["city", "unit"], "additionalProperties": false}})");

void ExpectWeatherInput(const json& input) {
  ASSERT_TRUE(input.is_object()) << input.dump();
  EXPECT_EQ(input.size(), 2u) << input.dump();
  ASSERT_TRUE(input["city"].is_string()) << input.dump();
  EXPECT_LE(CodePoints(input["city"].get<std::string>()), 12u);  // maxLength counts characters
  EXPECT_TRUE(input["unit"] == "c" || input["unit"] == "f") << input.dump();
}

// The stream's events in order: message_start, ping, then blocks (start, deltas, stop) and
// pings, message_delta, message_stop; each event's data names its own type. Returns the
// concatenated text deltas.
std::string CheckStreamShape(const EventStream& s) {
  EXPECT_FALSE(s.parse_error);
  EXPECT_TRUE(s.http.ok) << s.http.error;
  EXPECT_EQ(s.http.status, 200);
  std::string text;
  if (s.events.size() < 4) {
    ADD_FAILURE() << "too few events: " << s.events.size();
    return text;
  }
  EXPECT_EQ(s.events.front().first, "message_start");
  EXPECT_EQ(s.events[1].first, "ping");
  EXPECT_EQ(s.events[s.events.size() - 2].first, "message_delta");
  EXPECT_EQ(s.events.back().first, "message_stop");
  int open = -1, next = 0;
  for (const auto& [event, data] : s.events) {
    EXPECT_EQ(data.value("type", ""), event);
    if (event == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block opened inside another";
      EXPECT_EQ(data["index"], next);
      open = data["index"];
    } else if (event == "content_block_delta") {
      EXPECT_EQ(data["index"], open);
      if (data["delta"]["type"] == "text_delta") text += data["delta"]["text"].get<std::string>();
    } else if (event == "content_block_stop") {
      EXPECT_EQ(data["index"], open);
      open = -1;
      ++next;
    } else {
      EXPECT_TRUE(event == "message_start" || event == "ping" || event == "message_delta" ||
                  event == "message_stop")
          << event;
    }
  }
  EXPECT_EQ(open, -1) << "a block was left open";
  return text;
}

class MessagesApiTest : public SharedServerTest<MessagesApiTest> {};

TEST_F(MessagesApiTest, ReplyHasAnthropicsShapeAndTheChatPipelinesText) {
  Reply r = Post(url(), "/v1/messages", Request("Tell me a story", 6));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& m = r.body;
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u) << r.raw;
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "stories260K");
  ASSERT_EQ(m["content"].size(), 1u) << r.raw;
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_EQ(m["stop_reason"], "max_tokens") << r.raw;
  EXPECT_TRUE(m["stop_sequence"].is_null());
  EXPECT_EQ(m["usage"]["output_tokens"], 6);
  EXPECT_GT(
      m["usage"]["input_tokens"].get<int>() + m["usage"]["cache_read_input_tokens"].get<int>(), 0);
  // The same conversation through /v1/chat/completions gives the same greedy text.
  Reply chat =
      Post(url(), "/v1/chat/completions",
           {{"messages", Conversation("Tell me a story")}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(TextOf(m), chat.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(m["usage"]["input_tokens"].get<int64_t>() +
                m["usage"]["cache_read_input_tokens"].get<int64_t>(),
            chat.body["usage"]["prompt_tokens"].get<int64_t>());
}

TEST_F(MessagesApiTest, StreamReassemblesToTheWholeReply) {
  const json req = Request("Once upon a time", 16, {{"metadata", {{"user_id", "u-1"}}}});
  Reply whole = Post(url(), "/v1/messages", req);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  json streamed = req;
  streamed["stream"] = true;
  const EventStream s = PostEventStream(url(), "/v1/messages", streamed);
  EXPECT_EQ(FindHeader(s.http.headers, "Content-Type").rfind("text/event-stream", 0), 0u);
  EXPECT_EQ(CheckStreamShape(s), TextOf(whole.body));
  const json start = s.Named("message_start").at(0)["message"];
  EXPECT_EQ(start["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_TRUE(start["content"].empty());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["output_tokens"], 0);
  const json end = s.Named("message_delta").at(0);
  EXPECT_EQ(end["delta"]["stop_reason"], whole.body["stop_reason"]);
  EXPECT_TRUE(end["delta"]["stop_sequence"].is_null());
  EXPECT_EQ(end["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);
  ASSERT_EQ(s.Named("content_block_start").size(), 1u);
  EXPECT_EQ(s.Named("content_block_start")[0]["content_block"],
            json({{"type", "text"}, {"text", ""}}));
}

TEST_F(MessagesApiTest, SystemPromptReachesThePrompt) {
  const json bare = {{"messages", Conversation("Hi")}};
  const int64_t without = CountTokens(url(), bare);
  json with = bare;
  with["system"] = "You are a storyteller.";
  const int64_t with_string = CountTokens(url(), with);
  with["system"] = json::array({{{"type", "text"}, {"text", "You are a storyteller."}}});
  const int64_t with_blocks = CountTokens(url(), with);
  EXPECT_GT(with_string, without);
  EXPECT_EQ(with_blocks, with_string);
  // The same ids the chat endpoints run for the equivalent OpenAI messages.
  Reply tok =
      Post(url(), "/tokenize",
           {{"messages", json::array({{{"role", "system"}, {"content", "You are a storyteller."}},
                                      {{"role", "user"}, {"content", "Hi"}}})}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  EXPECT_EQ(tok.body["count"].get<int64_t>(), with_string);
  // And /v1/messages runs that prompt.
  json req = with;
  req["max_tokens"] = 2;
  Reply r = Post(url(), "/v1/messages", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["usage"]["input_tokens"].get<int64_t>() +
                r.body["usage"]["cache_read_input_tokens"].get<int64_t>(),
            with_string);
}

TEST_F(MessagesApiTest, StopSequenceAndMaxTokensAreTheStopReasons) {
  Reply free_run = Post(url(), "/v1/messages", Request("Once upon a time", 32));
  ASSERT_EQ(free_run.status, 200) << free_run.raw;
  EXPECT_EQ(free_run.body["stop_reason"], "max_tokens");
  const std::string text = TextOf(free_run.body);
  ASSERT_GE(text.size(), 24u) << text;
  const std::string stop = text.substr(12, 5);
  json req = Request("Once upon a time", 32, {{"stop_sequences", {"#none#", stop}}});
  Reply cut = Post(url(), "/v1/messages", req);
  ASSERT_EQ(cut.status, 200) << cut.raw;
  EXPECT_EQ(cut.body["stop_reason"], "stop_sequence") << cut.raw;
  EXPECT_EQ(cut.body["stop_sequence"], stop) << cut.raw;
  EXPECT_EQ(TextOf(cut.body), text.substr(0, text.find(stop)));
  req["stream"] = true;
  const EventStream s = PostEventStream(url(), "/v1/messages", req);
  EXPECT_EQ(CheckStreamShape(s), TextOf(cut.body));
  const json end = s.Named("message_delta").at(0);
  EXPECT_EQ(end["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(end["delta"]["stop_sequence"], stop);
}

TEST_F(MessagesApiTest, ForcedToolUseValidatesAndItsResultIsAccepted) {
  json req =
      Request("What is the weather in Paris?", 200,
              {{"tools", json::array({kWeatherTool})},
               {"tool_choice",
                {{"type", "tool"}, {"name", "get_weather"}, {"disable_parallel_tool_use", true}}}});
  Reply r = Post(url(), "/v1/messages", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["stop_reason"], "tool_use") << r.raw;
  json use;
  for (const json& b : r.body["content"])
    if (b["type"] == "tool_use") use = b;
  ASSERT_TRUE(use.is_object()) << r.raw;
  EXPECT_EQ(use["id"].get<std::string>().rfind("toolu_", 0), 0u) << r.raw;
  EXPECT_EQ(use["name"], "get_weather");
  ExpectWeatherInput(use["input"]);

  // Streamed: one tool_use block whose input_json_delta pieces join to the same input.
  req["stream"] = true;
  const EventStream s = PostEventStream(url(), "/v1/messages", req);
  CheckStreamShape(s);
  std::string partial;
  json started;
  for (const json& e : s.Named("content_block_start"))
    if (e["content_block"]["type"] == "tool_use") started = e["content_block"];
  for (const json& e : s.Named("content_block_delta"))
    if (e["delta"]["type"] == "input_json_delta")
      partial += e["delta"]["partial_json"].get<std::string>();
  ASSERT_TRUE(started.is_object());
  EXPECT_EQ(started["name"], "get_weather");
  EXPECT_EQ(started["input"], json::object());
  EXPECT_EQ(json::parse(partial, nullptr, false), use["input"]) << partial;
  EXPECT_EQ(s.Named("message_delta").at(0)["delta"]["stop_reason"], "tool_use");

  // The follow-up turn: the tool use in the history and its result, in text blocks too.
  json messages = Conversation("What is the weather in Paris?");
  messages.push_back({{"role", "assistant"}, {"content", r.body["content"]}});
  messages.push_back(
      {{"role", "user"},
       {"content",
        json::array({{{"type", "tool_result"},
                      {"tool_use_id", use["id"]},
                      {"content", json::array({{{"type", "text"}, {"text", "Sunny, 21 C"}}})}},
                     {{"type", "text"}, {"text", "Thanks!"}}})}});
  json follow = {{"max_tokens", 4},
                 {"temperature", 0},
                 {"messages", messages},
                 {"tools", json::array({kWeatherTool})}};
  Reply next = Post(url(), "/v1/messages", follow);
  ASSERT_EQ(next.status, 200) << next.raw;
  EXPECT_EQ(next.body["stop_reason"], "max_tokens") << next.raw;
  // The call and its result are in the prompt (ChatML does not read tool_calls: the call is
  // written into the assistant turn as hermes, the result is a tool turn).
  follow.erase("max_tokens");
  const int64_t count = CountTokens(url(), follow);
  EXPECT_GT(count,
            CountTokens(url(), {{"messages", Conversation("What is the weather in Paris?")}}));
  EXPECT_EQ(next.body["usage"]["input_tokens"].get<int64_t>() +
                next.body["usage"]["cache_read_input_tokens"].get<int64_t>(),
            count);
  // The template saw what an OpenAI client sends for the same turns.
  std::string said;
  json calls = json::array();
  for (const json& b : r.body["content"]) {
    if (b["type"] == "text") said += b["text"].get<std::string>();
    if (b["type"] == "tool_use")
      calls.push_back({{"id", b["id"]},
                       {"type", "function"},
                       {"function", {{"name", b["name"]}, {"arguments", b["input"].dump()}}}});
  }
  const json openai =
      json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}},
                   {{"role", "assistant"},
                    {"content", said.empty() ? json(nullptr) : json(said)},
                    {"tool_calls", calls}},
                   {{"role", "tool"}, {"tool_call_id", use["id"]}, {"content", "Sunny, 21 C"}},
                   {{"role", "user"}, {"content", "Thanks!"}}});
  Reply tok = Post(url(), "/tokenize", {{"messages", openai}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  EXPECT_EQ(tok.body["count"].get<int64_t>(), count);
}

TEST_F(MessagesApiTest, BlocksBecomeTheOpenAiMessagesATemplateReads) {
  const json input = {{"city", "Oslo"}, {"unit", "c"}};
  const json anthropic =
      json::array({{{"role", "user"}, {"content", "Weather?"}},
                   {{"role", "assistant"},
                    {"content", json::array({{{"type", "text"}, {"text", "Let me see."}},
                                             {{"type", "tool_use"},
                                              {"id", "toolu_1"},
                                              {"name", "get_weather"},
                                              {"input", input}}})}},
                   {{"role", "user"},
                    {"content", json::array({{{"type", "tool_result"},
                                              {"tool_use_id", "toolu_1"},
                                              {"content", "no such city"},
                                              {"is_error", true}},
                                             {{"type", "text"}, {"text", "Try again"}},
                                             {{"type", "text"}, {"text", "please"}}})}}});
  const json openai = json::array(
      {{{"role", "user"}, {"content", "Weather?"}},
       {{"role", "assistant"},
        {"content", "Let me see."},
        {"tool_calls",
         {{{"id", "toolu_1"},
           {"type", "function"},
           {"function", {{"name", "get_weather"}, {"arguments", input.dump()}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "Error: no such city"}},
       {{"role", "user"}, {"content", "Try again\nplease"}}});
  Reply tok = Post(url(), "/tokenize", {{"messages", openai}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  EXPECT_EQ(CountTokens(url(), {{"messages", anthropic}}), tok.body["count"].get<int64_t>());
}

TEST_F(MessagesApiTest, AnyToolChoiceCallsSomeTool) {
  const json add = json::parse(R"({"name": "add", "input_schema": {"type": "object",
      "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}},
      "required": ["a"], "additionalProperties": false}})");
  for (int seed = 0; seed < 3; ++seed) {
    json req = Request("Weather?", 200,
                       {{"tools", json::array({kWeatherTool, add})},
                        {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
                        {"temperature", 1},
                        {"top_k", 40}});
    Reply r = Post(url(), "/v1/messages", req);
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body["stop_reason"], "tool_use") << r.raw;
    int uses = 0;
    for (const json& b : r.body["content"])
      if (b["type"] == "tool_use") {
        ++uses;
        if (b["name"] == "get_weather") {
          ExpectWeatherInput(b["input"]);
        } else {
          EXPECT_EQ(b["name"], "add") << r.raw;
          EXPECT_TRUE(b["input"]["a"].is_number_integer()) << r.raw;
        }
      }
    EXPECT_EQ(uses, 1) << r.raw;
  }
}

TEST_F(MessagesApiTest, FinalAssistantTurnIsContinued) {
  json messages = Conversation("Tell me a story");
  const json bare = {{"messages", messages}};
  messages.push_back({{"role", "assistant"}, {"content", "Once upon a time"}});
  const json prefilled = {{"messages", messages}};
  // The prompt ends inside the assistant turn: more tokens than the generation prompt alone.
  EXPECT_GT(CountTokens(url(), prefilled), CountTokens(url(), bare));
  json req = prefilled;
  req["max_tokens"] = 8;
  req["temperature"] = 0;
  Reply r = Post(url(), "/v1/messages", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_FALSE(TextOf(r.body).empty()) << r.raw;
  EXPECT_EQ(r.body["usage"]["input_tokens"].get<int64_t>() +
                r.body["usage"]["cache_read_input_tokens"].get<int64_t>(),
            CountTokens(url(), prefilled));
}

TEST_F(MessagesApiTest, BadRequestsAre4xxInAnthropicsShapeNamingTheField) {
  struct Case {
    json body;
    const char* names;
  };
  const json good = Request("Hi", 2);
  auto with = [&](const char* key, json v) {
    json b = good;
    b[key] = std::move(v);
    return b;
  };
  json no_max = good;
  no_max.erase("max_tokens");
  const Case cases[] = {
      {no_max, "max_tokens"},
      {with("max_tokens", "ten"), "max_tokens"},
      {with("max_tokens", 0), "max_tokens"},
      {with("frobnicate", true), "frobnicate"},
      {with("thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}), "thinking"},
      {with("temperature", 1.5), "temperature"},
      {with("top_k", "x"), "top_k"},
      {with("messages", "Hi"), "messages"},
      {with("messages", json::array()), "messages"},
      {with("messages", json::array({{{"role", "system"}, {"content", "x"}}})), "messages[0].role"},
      {with("messages", json::array({{{"role", "user"}, {"content", "x"}, {"name", "bob"}}})),
       "messages[0].name"},
      {with("messages",
            json::array({{{"role", "user"},
                          {"content", json::array({{{"type", "image"}, {"source", {}}}})}}})),
       "messages[0].content[0].type"},
      {with("messages",
            json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}}})}}})),
       "messages[0].content[0].text"},
      {with("system", 3), "system"},
      {with("stop_sequences", "x"), "stop_sequences"},
      {with("metadata", {{"session", "s"}}), "metadata.session"},
      {with("tools", json::array({{{"name", "f"}}})), "tools[0].input_schema"},
      {with("tools", json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}})),
       "tools[0].type"},
      {with("tool_choice", {{"type", "tool"}, {"name", "nope"}}), "tool_choice"},
      {with("tool_choice", {{"type", "any"}}), "tool_choice"},
  };
  for (const Case& c : cases)
    ExpectError(Post(url(), "/v1/messages", c.body), 400, "invalid_request_error", c.names,
                c.body.dump());
  ExpectError(Post(url(), "/v1/messages", "{not json"), 400, "invalid_request_error", "JSON",
              "malformed");
  ExpectError(Post(url(), "/v1/messages", with("model", "claude-sonnet-4")), 404, "not_found_error",
              "claude-sonnet-4", "unknown model");
  ExpectError(Post(url(), "/v1/messages/count_tokens", {{"messages", 1}}), 400,
              "invalid_request_error", "messages", "count_tokens");
  // The server serves on.
  Reply ok = Post(url(), "/v1/messages", good);
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["type"], "message");
}

// A server with a reasoning parser, whose template opens the reasoning block in the prompt: the
// reply is reasoning (the tiny model never closes it), given as a thinking block.
class MessagesThinkingTest : public SharedServerTest<MessagesThinkingTest> {
 public:
  static ServerOptions Options() {
    ServerOptions o;
    o.reasoning_parser = "deepseek_r1";
    o.chat_template =
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
        "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ "
        "'<|im_start|>assistant\\n<think>\\n' }}{% endif %}";
    return o;
  }
};

TEST_F(MessagesThinkingTest, ReasoningIsAThinkingBlock) {
  const json req = Request("Think", 8);
  Reply r = Post(url(), "/v1/messages", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_GE(r.body["content"].size(), 1u) << r.raw;
  const json& block = r.body["content"][0];
  EXPECT_EQ(block["type"], "thinking") << r.raw;
  EXPECT_FALSE(block["thinking"].get<std::string>().empty());
  EXPECT_EQ(block["signature"], "");
  json streamed = req;
  streamed["stream"] = true;
  const EventStream s = PostEventStream(url(), "/v1/messages", streamed);
  CheckStreamShape(s);
  std::string thinking;
  for (const json& e : s.Named("content_block_delta"))
    if (e["delta"]["type"] == "thinking_delta")
      thinking += e["delta"]["thinking"].get<std::string>();
  EXPECT_EQ(thinking, block["thinking"]);
  // A thinking block sent back in the history is accepted (and dropped from the prompt).
  json messages = Conversation("Think");
  messages.push_back({{"role", "assistant"}, {"content", r.body["content"]}});
  messages.push_back({{"role", "user"}, {"content", "Again"}});
  Reply again = Post(url(), "/v1/messages", {{"max_tokens", 2}, {"messages", messages}});
  EXPECT_EQ(again.status, 200) << again.raw;
}

class MessagesKeyTest : public SharedServerTest<MessagesKeyTest> {
 public:
  static ServerOptions Options() {
    ServerOptions o;
    o.api_key = "sk-test";
    return o;
  }
};

TEST_F(MessagesKeyTest, TakesXApiKeyOrBearer) {
  const json req = Request("Hi", 2);
  ExpectError(Post(url(), "/v1/messages", req), 401, "authentication_error", "x-api-key", "no key");
  ExpectError(Post(url(), "/v1/messages", req, {{"x-api-key", "sk-wrong"}}), 401,
              "authentication_error", "x-api-key", "wrong key");
  EXPECT_EQ(Post(url(), "/v1/messages", req, {{"x-api-key", "sk-test"}}).status, 200);
  EXPECT_EQ(Post(url(), "/v1/messages", req, {{"Authorization", "Bearer sk-test"}}).status, 200);
  EXPECT_EQ(Post(url(), "/v1/messages/count_tokens", req, {{"x-api-key", "sk-test"}}).status, 200);
  ExpectError(Post(url(), "/v1/messages/count_tokens", req), 401, "authentication_error",
              "x-api-key", "count_tokens without a key");
  // The OpenAI endpoints keep to the bearer header.
  EXPECT_EQ(Post(url(), "/v1/responses", {{"input", "Hi"}, {"max_output_tokens", 2}},
                 {{"x-api-key", "sk-test"}})
                .status,
            401);
}

// A stream the engine aborts (here: the server shutting down) ends with an error event.
TEST(MessagesShutdownTest, AbortMidStreamIsAnErrorEvent) {
  auto h = Harness::Start();
  ASSERT_NE(h, nullptr);
  std::thread stopper;
  json req = Request("Once upon a time", 2000);
  req["stream"] = true;
  const EventStream s = PostEventStream(h->url(), "/v1/messages", req, {},
                                        [&](const std::string& event, const json&) {
                                          if (event == "content_block_delta" && !stopper.joinable())
                                            stopper = std::thread([&] { h->server().Shutdown(); });
                                        });
  if (stopper.joinable()) stopper.join();
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.front().first, "message_start");
  EXPECT_EQ(s.events.back().first, "error");
  EXPECT_EQ(s.events.back().second["error"]["type"], "overloaded_error") << s.events.back().second;
  EXPECT_TRUE(s.Named("message_stop").empty());
}

TEST(SseParserTest, ReportsEventNames) {
  std::vector<std::pair<std::string, std::string>> got;
  SseParser p = SseParser::WithEventNames(
      [&](const std::string& event, const std::string& data) { got.emplace_back(event, data); });
  p.Feed(SseNamedEvent("ping", "{}") + ": comment\n\n" + SseEvent("x") +
         "event: a\r\ndata: 1\r\n\r\n");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], std::make_pair(std::string("ping"), std::string("{}")));
  EXPECT_EQ(got[1], std::make_pair(std::string(""), std::string("x")));
  EXPECT_EQ(got[2], std::make_pair(std::string("a"), std::string("1")));
}

}  // namespace
}  // namespace kvforge::server::testing
