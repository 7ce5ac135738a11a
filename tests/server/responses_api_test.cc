// OpenAI's Responses API over real HTTP, on the embedded model with its ChatML template: the
// response object (output items, usage, echoed request fields), the same greedy text as
// /v1/chat/completions, max_output_tokens as an incomplete response, the typed event stream
// (order, sequence numbers, deltas that reassemble to the whole response), instructions reaching
// the prompt, a forced function call whose arguments validate and its function_call_output
// follow-up, text.format as structured output, reasoning items under a reasoning parser, 400s
// naming the field in OpenAI's shape, and the server serving on afterwards.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "server_test_util.h"

namespace kvforge::server::testing {
namespace {

json Request(const std::string& input, int max_output_tokens, json extra = json::object()) {
  json r = {{"model", "stories260K"},
            {"input", input},
            {"max_output_tokens", max_output_tokens},
            {"temperature", 0}};
  r.update(extra);
  return r;
}

std::string OutputText(const json& response) {
  std::string text;
  for (const json& item : response["output"])
    if (item["type"] == "message")
      for (const json& part : item["content"])
        if (part["type"] == "output_text") text += part["text"].get<std::string>();
  return text;
}

json ItemOfType(const json& response, const std::string& type) {
  for (const json& item : response["output"])
    if (item["type"] == type) return item;
  return nullptr;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

const json kWeatherTool = json::parse(R"({
  "type": "function", "name": "get_weather", "description": "Weather in a city",
  "parameters": {"type": "object",
                 "properties": {"city": {"type": "string", "maxLength": 12},
                                "unit": {"enum": ["c", "f"]}},
                 "required": ["city", "unit"], "additionalProperties": false},
  "strict": true})");

void ExpectWeatherArguments(const std::string& arguments) {
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << arguments;
  EXPECT_EQ(args.size(), 2u) << arguments;
  ASSERT_TRUE(args["city"].is_string()) << arguments;
  EXPECT_LE(CodePoints(args["city"].get<std::string>()), 12u);  // maxLength counts characters
  EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << arguments;
}

// Every event names its type in its data, sequence numbers count from 0, the stream opens with
// response.created and response.in_progress and ends with response.completed or
// response.incomplete. Returns that last event's response.
json CheckStreamShape(const EventStream& s) {
  EXPECT_FALSE(s.parse_error);
  EXPECT_TRUE(s.http.ok) << s.http.error;
  EXPECT_EQ(s.http.status, 200);
  if (s.events.size() < 3) {
    ADD_FAILURE() << "too few events: " << s.events.size();
    return json::object();
  }
  for (size_t i = 0; i < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i].second.value("type", ""), s.events[i].first);
    EXPECT_EQ(s.events[i].second.value("sequence_number", -1), static_cast<int>(i));
  }
  EXPECT_EQ(s.events[0].first, "response.created");
  EXPECT_EQ(s.events[0].second["response"]["status"], "in_progress");
  EXPECT_TRUE(s.events[0].second["response"]["output"].empty());
  EXPECT_EQ(s.events[1].first, "response.in_progress");
  const std::string last = s.events.back().first;
  EXPECT_TRUE(last == "response.completed" || last == "response.incomplete") << last;
  return s.events.back().second["response"];
}

class ResponsesApiTest : public SharedServerTest<ResponsesApiTest> {};

TEST_F(ResponsesApiTest, ResponseObjectHasTheChatPipelinesText) {
  Reply r = Post(url(), "/v1/responses", Request("Tell me a story", 40, {{"store", false}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  const json& b = r.body;
  EXPECT_EQ(b["id"].get<std::string>().rfind("resp_", 0), 0u) << r.raw;
  EXPECT_EQ(b["object"], "response");
  EXPECT_TRUE(b["created_at"].is_number_integer());
  EXPECT_EQ(b["model"], "stories260K");
  EXPECT_TRUE(b["error"].is_null());
  ASSERT_EQ(b["output"].size(), 1u) << r.raw;
  const json& msg = b["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_EQ(msg["content"][0]["annotations"], json::array());
  const json& u = b["usage"];
  EXPECT_EQ(u["total_tokens"], u["input_tokens"].get<int>() + u["output_tokens"].get<int>());
  EXPECT_TRUE(u["input_tokens_details"]["cached_tokens"].is_number_integer());
  EXPECT_EQ(u["output_tokens_details"]["reasoning_tokens"], 0);
  // The echoed request fields.
  EXPECT_EQ(b["max_output_tokens"], 40);
  EXPECT_EQ(b["temperature"], 0);
  EXPECT_EQ(b["top_p"], 1);
  EXPECT_EQ(b["tools"], json::array());
  EXPECT_EQ(b["tool_choice"], "auto");
  EXPECT_EQ(b["parallel_tool_calls"], true);
  EXPECT_EQ(b["text"], json({{"format", {{"type", "text"}}}}));
  EXPECT_TRUE(b["instructions"].is_null());
  EXPECT_TRUE(b["previous_response_id"].is_null());
  EXPECT_EQ(b["store"], false);
  // The same conversation through /v1/chat/completions gives the same greedy text.
  Reply chat =
      Post(url(), "/v1/chat/completions",
           {{"messages", json::array({{{"role", "user"}, {"content", "Tell me a story"}}})},
            {"max_tokens", 40},
            {"temperature", 0}});
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(OutputText(b), chat.body["choices"][0]["message"]["content"]);
  EXPECT_EQ(u["input_tokens"], chat.body["usage"]["prompt_tokens"]);
  const bool cut = chat.body["choices"][0]["finish_reason"] == "length";
  EXPECT_EQ(b["status"], cut ? "incomplete" : "completed");
}

TEST_F(ResponsesApiTest, MaxOutputTokensMakesItIncomplete) {
  Reply r = Post(url(), "/v1/responses", Request("Once upon a time", 3));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "incomplete") << r.raw;
  EXPECT_EQ(r.body["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(r.body["output"][0]["status"], "incomplete");
  EXPECT_EQ(r.body["usage"]["output_tokens"], 3);
}

TEST_F(ResponsesApiTest, StreamReassemblesToTheWholeResponse) {
  const json req = Request("Once upon a time", 16, {{"metadata", {{"topic", "tales"}}}});
  Reply whole = Post(url(), "/v1/responses", req);
  ASSERT_EQ(whole.status, 200) << whole.raw;
  EXPECT_EQ(whole.body["metadata"], json({{"topic", "tales"}}));
  json streamed = req;
  streamed["stream"] = true;
  const EventStream s = PostEventStream(url(), "/v1/responses", streamed);
  const json last = CheckStreamShape(s);
  std::vector<std::string> names;
  std::string deltas;
  for (const auto& [event, data] : s.events) {
    if (event == "response.output_text.delta") {
      deltas += data["delta"].get<std::string>();
      if (!names.empty() && names.back() == event) continue;  // one entry per run of deltas
    }
    names.push_back(event);
  }
  const std::vector<std::string> expected = {
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      whole.body["status"] == "incomplete" ? "response.incomplete" : "response.completed"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(deltas, OutputText(whole.body));
  EXPECT_EQ(s.Named("response.output_text.done").at(0)["text"], deltas);
  const json added = s.Named("response.output_item.added").at(0);
  EXPECT_EQ(added["item"]["status"], "in_progress");
  EXPECT_EQ(added["item"]["content"], json::array());
  const json done = s.Named("response.output_item.done").at(0);
  EXPECT_EQ(done["item"]["id"], added["item"]["id"]);
  EXPECT_EQ(s.Named("response.output_text.delta").at(0)["item_id"], added["item"]["id"]);
  EXPECT_EQ(OutputText(last), deltas);
  EXPECT_EQ(last["status"], whole.body["status"]);
  EXPECT_EQ(last["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);
  EXPECT_EQ(last["metadata"], whole.body["metadata"]);
}

TEST_F(ResponsesApiTest, InstructionsReachThePrompt) {
  Reply bare = Post(url(), "/v1/responses", Request("Hi", 2));
  Reply told =
      Post(url(), "/v1/responses", Request("Hi", 2, {{"instructions", "You are a storyteller."}}));
  ASSERT_EQ(bare.status, 200) << bare.raw;
  ASSERT_EQ(told.status, 200) << told.raw;
  EXPECT_EQ(told.body["instructions"], "You are a storyteller.");
  const int64_t with = told.body["usage"]["input_tokens"];
  EXPECT_GT(with, bare.body["usage"]["input_tokens"].get<int64_t>());
  Reply tok =
      Post(url(), "/tokenize",
           {{"messages", json::array({{{"role", "system"}, {"content", "You are a storyteller."}},
                                      {{"role", "user"}, {"content", "Hi"}}})}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  EXPECT_EQ(tok.body["count"].get<int64_t>(), with);
  // Message items with typed parts are the same conversation.
  Reply items =
      Post(url(), "/v1/responses",
           Request("", 2,
                   {{"instructions", "You are a storyteller."},
                    {"input", json::array({{{"type", "message"},
                                            {"role", "user"},
                                            {"content", json::array({{{"type", "input_text"},
                                                                      {"text", "Hi"}}})}}})}}));
  ASSERT_EQ(items.status, 200) << items.raw;
  EXPECT_EQ(items.body["usage"]["input_tokens"].get<int64_t>(), with);
}

TEST_F(ResponsesApiTest, ForcedFunctionCallValidatesAndItsOutputIsAccepted) {
  json req = Request("What is the weather in Paris?", 200,
                     {{"tools", json::array({kWeatherTool})},
                      {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
                      {"parallel_tool_calls", false}});
  Reply r = Post(url(), "/v1/responses", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"], "completed") << r.raw;
  const json call = ItemOfType(r.body, "function_call");
  ASSERT_TRUE(call.is_object()) << r.raw;
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["status"], "completed");
  ExpectWeatherArguments(call["arguments"]);
  EXPECT_EQ(r.body["tools"][0]["name"], "get_weather");
  EXPECT_EQ(r.body["tool_choice"], json({{"type", "function"}, {"name", "get_weather"}}));
  EXPECT_EQ(r.body["parallel_tool_calls"], false);

  // Streamed: the call's item, its arguments delta and done, the same arguments.
  req["stream"] = true;
  const EventStream s = PostEventStream(url(), "/v1/responses", req);
  const json last = CheckStreamShape(s);
  std::string args;
  for (const json& e : s.Named("response.function_call_arguments.delta"))
    args += e["delta"].get<std::string>();
  EXPECT_EQ(args, call["arguments"]);
  ASSERT_EQ(s.Named("response.function_call_arguments.done").size(), 1u);
  EXPECT_EQ(s.Named("response.function_call_arguments.done")[0]["arguments"], args);
  EXPECT_EQ(s.Named("response.function_call_arguments.done")[0]["name"], "get_weather");
  EXPECT_EQ(ItemOfType(last, "function_call")["arguments"], args);
  EXPECT_EQ(s.events.back().first, "response.completed");

  // The follow-up: the call item as it came back, and its output.
  json input = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
  for (const json& item : r.body["output"]) input.push_back(item);
  input.push_back(
      {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "Sunny, 21 C"}});
  Reply next =
      Post(url(), "/v1/responses",
           {{"input", input}, {"tools", json::array({kWeatherTool})}, {"max_output_tokens", 4}});
  ASSERT_EQ(next.status, 200) << next.raw;
  EXPECT_GT(next.body["usage"]["input_tokens"].get<int64_t>(),
            r.body["usage"]["input_tokens"].get<int64_t>());
  // The template saw what an OpenAI chat client sends for the same turns.
  const std::string said = OutputText(r.body);
  const json openai = json::array(
      {{{"role", "user"}, {"content", "What is the weather in Paris?"}},
       {{"role", "assistant"},
        {"content", said.empty() ? json(nullptr) : json(said)},
        {"tool_calls",
         {{{"id", call["call_id"]},
           {"type", "function"},
           {"function", {{"name", "get_weather"}, {"arguments", call["arguments"]}}}}}}},
       {{"role", "tool"}, {"tool_call_id", call["call_id"]}, {"content", "Sunny, 21 C"}}});
  Reply tok = Post(url(), "/tokenize", {{"messages", openai}});
  ASSERT_EQ(tok.status, 200) << tok.raw;
  EXPECT_EQ(tok.body["count"], next.body["usage"]["input_tokens"]);
}

TEST_F(ResponsesApiTest, TextFormatIsStructuredOutput) {
  const json format = {{"type", "json_schema"},
                       {"name", "answer"},
                       {"strict", true},
                       {"schema",
                        {{"type", "object"},
                         {"properties", {{"answer", {{"type", "string"}, {"maxLength", 8}}}}},
                         {"required", {"answer"}},
                         {"additionalProperties", false}}}};
  Reply r =
      Post(url(), "/v1/responses", Request("Answer in JSON", 80, {{"text", {{"format", format}}}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["status"], "completed") << r.raw;
  const json out = json::parse(OutputText(r.body), nullptr, false);
  ASSERT_TRUE(out.is_object()) << r.raw;
  EXPECT_TRUE(out["answer"].is_string()) << r.raw;
  EXPECT_EQ(r.body["text"]["format"]["type"], "json_schema");
  Reply obj = Post(url(), "/v1/responses",
                   Request("JSON please", 80, {{"text", {{"format", {{"type", "json_object"}}}}}}));
  ASSERT_EQ(obj.status, 200) << obj.raw;
  if (obj.body["status"] == "completed") {
    EXPECT_TRUE(json::parse(OutputText(obj.body), nullptr, false).is_object()) << obj.raw;
  }
}

TEST_F(ResponsesApiTest, BadRequestsAre400NamingTheField) {
  struct Case {
    json extra;
    const char* param;
  };
  const Case cases[] = {
      {{{"previous_response_id", "resp_1"}}, "previous_response_id"},
      {{{"conversation", "conv_1"}}, "conversation"},
      {{{"reasoning", {{"effort", "low"}}}}, "reasoning"},
      {{{"background", true}}, "background"},
      {{{"include", {"file_search_call.results"}}}, "include"},
      {{{"truncation", "auto"}}, "truncation"},
      {{{"frobnicate", 1}}, "frobnicate"},
      {{{"input", 3}}, "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", json::array({{{"role", "user"},
                                {"content", json::array({{{"type", "input_image"},
                                                          {"image_url", "http://x"}}})}}})}},
       "input[0].content[0].type"},
      {{{"input", json::array({{{"type", "item_reference"}, {"id", "msg_1"}}})}}, "input[0].type"},
      {{{"input", json::array({{{"role", "robot"}, {"content", "x"}}})}}, "input[0].role"},
      {{{"input", json::array({{{"type", "function_call"}, {"name", "f"}}})}}, "input[0].call_id"},
      {{{"max_output_tokens", 0}}, "max_output_tokens"},
      {{{"max_output_tokens", "many"}}, "max_output_tokens"},
      {{{"temperature", 3}}, "temperature"},
      {{{"tools", json::array({{{"type", "web_search"}}})}}, "tools[0].type"},
      {{{"tools", json::array({{{"type", "function"}, {"name", "a b"}}})}}, "tools[0].name"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"tools", json::array({kWeatherTool})},
        {"tool_choice", {{"type", "function"}, {"name", "nope"}}}},
       "tool_choice.name"},
      {{{"text", {{"format", {{"type", "xml"}}}}}}, "text.format.type"},
      {{{"text", {{"verbosity", "low"}}}}, "text.verbosity"},
      {{{"metadata", {{"n", 1}}}}, "metadata"},
  };
  for (const Case& c : cases) {
    Reply r = Post(url(), "/v1/responses", Request("Hi", 2, c.extra));
    ASSERT_EQ(r.status, 400) << c.extra.dump() << ": " << r.raw;
    EXPECT_EQ(r.body["error"]["type"], "invalid_request_error") << r.raw;
    EXPECT_EQ(r.body["error"]["param"], c.param) << r.raw;
    EXPECT_NE(r.body["error"]["message"].get<std::string>().find(c.param), std::string::npos)
        << r.raw;
  }
  json no_input = Request("Hi", 2);
  no_input.erase("input");
  Reply missing = Post(url(), "/v1/responses", no_input);
  EXPECT_EQ(missing.status, 400) << missing.raw;
  EXPECT_EQ(missing.body["error"]["param"], "input");
  Reply model = Post(url(), "/v1/responses", Request("Hi", 2, {{"model", "gpt-5"}}));
  EXPECT_EQ(model.status, 404) << model.raw;
  EXPECT_EQ(model.body["error"]["code"], "model_not_found");
  // Too long for the context: the Responses API's own field is named.
  Reply room = Post(url(), "/v1/responses", Request("Hi", 100000));
  EXPECT_EQ(room.status, 400) << room.raw;
  EXPECT_EQ(room.body["error"]["param"], "max_output_tokens") << room.raw;
  // The server serves on; store: true is accepted (nothing is stored either way).
  Reply ok = Post(url(), "/v1/responses", Request("Hi", 2, {{"store", true}, {"user", "u-1"}}));
  ASSERT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["store"], false);
  EXPECT_EQ(ok.body["user"], "u-1");
}

// A stream the engine aborts (here: the server shutting down) ends with an error event.
TEST(ResponsesShutdownTest, AbortMidStreamIsAnErrorEvent) {
  auto h = Harness::Start();
  ASSERT_NE(h, nullptr);
  std::thread stopper;
  json req = Request("Once upon a time", 2000);
  req["stream"] = true;
  const EventStream s = PostEventStream(
      h->url(), "/v1/responses", req, {}, [&](const std::string& event, const json&) {
        if (event == "response.output_text.delta" && !stopper.joinable())
          stopper = std::thread([&] { h->server().Shutdown(); });
      });
  if (stopper.joinable()) stopper.join();
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.front().first, "response.created");
  const json& last = s.events.back().second;
  EXPECT_EQ(s.events.back().first, "error") << last;
  EXPECT_EQ(last["code"], "service_unavailable") << last;
  EXPECT_EQ(last["sequence_number"], static_cast<int>(s.events.size()) - 1);
  EXPECT_TRUE(s.Named("response.completed").empty());
}

// A server with a reasoning parser, whose template opens the reasoning block in the prompt: the
// reply is reasoning (the tiny model never closes it), given as a reasoning item.
class ResponsesReasoningTest : public SharedServerTest<ResponsesReasoningTest> {
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

TEST_F(ResponsesReasoningTest, ReasoningIsAReasoningItem) {
  const json req = Request("Think", 8);
  Reply r = Post(url(), "/v1/responses", req);
  ASSERT_EQ(r.status, 200) << r.raw;
  const json item = ItemOfType(r.body, "reasoning");
  ASSERT_TRUE(item.is_object()) << r.raw;
  EXPECT_EQ(item["id"].get<std::string>().rfind("rs_", 0), 0u);
  ASSERT_EQ(item["summary"].size(), 1u) << r.raw;
  EXPECT_EQ(item["summary"][0]["type"], "summary_text");
  const std::string summary = item["summary"][0]["text"];
  EXPECT_FALSE(summary.empty());
  json streamed = req;
  streamed["stream"] = true;
  const EventStream s = PostEventStream(url(), "/v1/responses", streamed);
  CheckStreamShape(s);
  std::string deltas;
  for (const json& e : s.Named("response.reasoning_summary_text.delta"))
    deltas += e["delta"].get<std::string>();
  EXPECT_EQ(deltas, summary);
  ASSERT_EQ(s.Named("response.reasoning_summary_part.added").size(), 1u);
  EXPECT_EQ(s.Named("response.reasoning_summary_text.done").at(0)["text"], summary);
  // The reasoning item sent back in the input is accepted (and not shown to the model again).
  json input = json::array(
      {{{"role", "user"}, {"content", "Think"}}, item, {{"role", "user"}, {"content", "Again"}}});
  Reply again = Post(url(), "/v1/responses", {{"input", input}, {"max_output_tokens", 2}});
  EXPECT_EQ(again.status, 200) << again.raw;
}

}  // namespace
}  // namespace kvforge::server::testing
