// ReplyParser: tool calls read back from what the real chat templates of tests/data write for an
// assistant turn with tool calls (one template per format family), the reasoning split, text that
// does not parse, and the streaming property: any split of a reply into pieces gives the same
// reasoning, content and calls as the whole reply.
#include "chat/reply_parser.h"

#include <gtest/gtest.h>

#include <random>

#include "chat/chat_template.h"
#include "chat/json.h"
#include "support/test_paths.h"

namespace kvforge::chat {
namespace {

const char kTools[] = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"]}}},
  {"type": "function", "function": {"name": "add", "description": "Adds two numbers",
   "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                                                   "b": {"type": "integer"}}}}}])";

std::string Render(const std::string& source, const std::string& messages, bool add_prompt) {
  auto tmpl = ChatTemplate::Parse(source);
  EXPECT_TRUE(tmpl.ok()) << tmpl.error().message();
  ChatInputs in;
  in.messages = *ParseJson(messages);
  in.tools = *ParseJson(kTools);
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.add_generation_prompt = add_prompt;
  auto out = tmpl->Render(in);
  EXPECT_TRUE(out.ok()) << out.error().message();
  return out.ok() ? *out : std::string();
}

// The text a template writes for the assistant's turn: the rendering of the conversation with
// that turn from the format's first marker on (after the rendering of the conversation before
// it), less the end-of-turn marker that the engine's stop token would take off.
std::string AssistantTurn(const std::string& source, ToolCallFormat format,
                          const std::string& calls_json) {
  const std::string user = R"({"role": "user", "content": "Weather in Paris, and 2+3?"})";
  const std::string before = Render(source, "[" + user + "]", false);
  const std::string with = Render(source,
                                  "[" + user + R"(, {"role": "assistant", "content": "",
                                     "tool_calls": )" +
                                      calls_json + "}]",
                                  false);
  EXPECT_EQ(with.compare(0, before.size(), before), 0) << with;
  const ToolCallLayout layout = LayoutOf(format);
  const std::string first = !layout.calls_begin.empty() ? layout.calls_begin.substr(0, 8)
                                                        : layout.call_begin.substr(0, 8);
  const size_t start = with.find(first, before.size());
  EXPECT_NE(start, std::string::npos) << with;
  std::string turn = with.substr(std::min(start, with.size()));
  // The turn ends at the first end-of-turn marker (the engine stops on that token).
  for (const char* end : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>",
                          "<\xEF\xBD\x9C"
                          "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"})
    turn = turn.substr(0, turn.find(end));
  return turn;
}

std::string CallJson(const char* id, const char* name, const char* args) {
  return std::string(R"({"id": ")") + id + R"(", "type": "function", "function": {"name": ")" +
         name + R"(", "arguments": )" + args + "}}";
}

// Feeds `text` in pieces cut at `cuts` (sorted offsets) and gathers every delta.
ReplyDelta FeedInPieces(const ReplyOptions& o, const std::string& text, std::vector<size_t> cuts) {
  ReplyParser p(o);
  ReplyDelta all;
  size_t at = 0;
  cuts.push_back(text.size());
  for (size_t c : cuts) {
    all.Append(p.Feed(std::string_view(text).substr(at, c - at)));
    at = c;
  }
  all.Append(p.Finish());
  return all;
}

void ExpectSame(const ReplyDelta& a, const ReplyDelta& b, const std::string& what) {
  EXPECT_EQ(a.reasoning, b.reasoning) << what;
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.tool_calls, b.tool_calls) << what;
}

// Every single cut, and 50 random multi-cut splits.
void ExpectStreamingMatches(const ReplyOptions& o, const std::string& text) {
  const ReplyDelta whole = ParseReply(o, text);
  for (size_t c = 0; c <= text.size(); ++c)
    ExpectSame(FeedInPieces(o, text, {c}), whole, "one cut at " + std::to_string(c));
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 0; i < text.size(); ++i)
      if (rng() % 4 == 0) cuts.push_back(i);
    ExpectSame(FeedInPieces(o, text, cuts), whole, "round " + std::to_string(round));
  }
}

struct TemplateCase {
  const char* file;
  ToolCallFormat format;
  bool one_call;  // the template refuses more than one call per turn
};

class RealTemplateTest : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(RealTemplateTest, CallsTheTemplateWritesReadBack) {
  const TemplateCase& c = GetParam();
  const std::string source =
      kvforge::testing::ReadFileOrDie(kvforge::testing::SharedDir() + "/chat-templates/" + c.file);
  ASSERT_EQ(DetectToolCallFormat(source), c.format) << c.file;
  std::string calls = "[" + CallJson("call00001", "get_weather", R"({"city": "Paris"})");
  if (!c.one_call) calls += ", " + CallJson("call00002", "add", R"({"a": 2, "b": 3})");
  calls += "]";
  const std::string turn = AssistantTurn(source, c.format, calls);
  SCOPED_TRACE(turn);
  ReplyOptions o;
  o.tool_format = c.format;
  const ReplyDelta d = ParseReply(o, turn);
  std::vector<ToolCall> want = {{"get_weather", R"({"city": "Paris"})"}};
  if (!c.one_call) want.push_back({"add", R"({"a": 2, "b": 3})"});
  EXPECT_EQ(d.tool_calls, want);
  EXPECT_EQ(d.content, "");
  ExpectStreamingMatches(o, turn);
}

INSTANTIATE_TEST_SUITE_P(
    Families, RealTemplateTest,
    ::testing::Values(
        TemplateCase{"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::kHermes,
                     false},
        TemplateCase{"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes, false},
        TemplateCase{"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::kHermes, false},
        TemplateCase{"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3Json, true},
        TemplateCase{"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::kLlama3Json, true},
        TemplateCase{"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::kMistral, false},
        TemplateCase{"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallFormat::kMistral, false},
        TemplateCase{"deepseek-ai-DeepSeek-V3.1.jinja", ToolCallFormat::kDeepSeekV3, false},
        TemplateCase{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolCallFormat::kDeepSeekV3,
                     false}));

TEST(ReplyParserTest, TemplatesWithoutToolMarkersHaveNoFormat) {
  EXPECT_EQ(DetectToolCallFormat(kDefaultChatTemplate), std::nullopt);
  const std::string gemma = kvforge::testing::ReadFileOrDie(
      kvforge::testing::SharedDir() + "/chat-templates/google-gemma-2-2b-it.jinja");
  EXPECT_EQ(DetectToolCallFormat(gemma), std::nullopt);
}

TEST(ReplyParserTest, FormatNamesRoundTripAndUnknownNamesAreRefused) {
  for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
                           ToolCallFormat::kMistral, ToolCallFormat::kDeepSeekV3})
    EXPECT_EQ(*ToolCallFormatFromName(ToolCallFormatName(f)), f);
  auto bad = ToolCallFormatFromName("pythonic");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("hermes"), std::string::npos);
}

TEST(ReplyParserTest, LayoutsAreReadBackByTheirParser) {
  for (ToolCallFormat f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
                           ToolCallFormat::kMistral, ToolCallFormat::kDeepSeekV3}) {
    const ToolCallLayout l = LayoutOf(f);
    const std::string text = l.calls_begin + l.call_begin + "f1" + l.name_end +
                             R"({"x": [1, "}"]})" + l.call_end + l.call_separator + l.call_begin +
                             "f2" + l.name_end + "{}" + l.call_end + l.calls_end;
    ReplyOptions o;
    o.tool_format = f;
    const ReplyDelta d = ParseReply(o, text);
    EXPECT_EQ(d.tool_calls, (std::vector<ToolCall>{{"f1", R"({"x": [1, "}"]})"}, {"f2", "{}"}}))
        << ToolCallFormatName(f) << ": " << text;
    EXPECT_EQ(d.content, "") << ToolCallFormatName(f);
    ExpectStreamingMatches(o, text);
  }
}

TEST(ReplyParserTest, ContentAroundHermesCalls) {
  ReplyOptions o;
  o.tool_format = ToolCallFormat::kHermes;
  const std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n\nDone <b>.";
  const ReplyDelta d = ParseReply(o, text);
  EXPECT_EQ(d.content, "Let me look.\nDone <b>.");
  EXPECT_EQ(d.tool_calls, (std::vector<ToolCall>{{"a", "{}"}}));
  ExpectStreamingMatches(o, text);
}

TEST(ReplyParserTest, TextThatDoesNotParseIsContent) {
  ReplyOptions o;
  o.tool_format = ToolCallFormat::kHermes;
  for (const std::string text :
       {"<tool_call>{not json}</tool_call>", "<tool_call>{\"name\": \"a\", \"arguments\": {}}",
        "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>[1]</tool_call>", "<tool_ca"}) {
    const ReplyDelta d = ParseReply(o, text);
    EXPECT_EQ(d.content, text);
    EXPECT_TRUE(d.tool_calls.empty()) << text;
    ExpectStreamingMatches(o, text);
  }
  // A good call, then a broken one: the good one stands, the rest is content.
  const std::string mixed =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>oops</tool_call>";
  const ReplyDelta d = ParseReply(o, mixed);
  EXPECT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.content, "<tool_call>oops</tool_call>");
  ExpectStreamingMatches(o, mixed);
}

TEST(ReplyParserTest, Llama3CallsOnlyWhenTheReplyOpensWithOne) {
  ReplyOptions o;
  o.tool_format = ToolCallFormat::kLlama3Json;
  EXPECT_EQ(ParseReply(o, "The answer is {\"name\": \"a\"}").content,
            "The answer is {\"name\": \"a\"}");
  const ReplyDelta plain_json = ParseReply(o, "{\"x\": 1}");
  EXPECT_EQ(plain_json.content, "{\"x\": 1}");  // a JSON object, but not a call
  EXPECT_TRUE(plain_json.tool_calls.empty());
  const std::string two =
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"x;y\"}}; {\"name\": \"b\", "
      "\"parameters\": \"{\\\"n\\\": 1}\"}";
  const ReplyDelta d = ParseReply(o, two);
  EXPECT_EQ(d.tool_calls, (std::vector<ToolCall>{{"a", R"({"q": "x;y"})"}, {"b", R"({"n": 1})"}}));
  EXPECT_EQ(d.content, "");
  ExpectStreamingMatches(o, two);
}

TEST(ReplyParserTest, ReasoningSplits) {
  ReplyOptions o;
  o.reasoning = true;
  ReplyDelta d = ParseReply(o, "<think>\nI should greet.\n</think>\n\nHello!");
  EXPECT_EQ(d.reasoning, "\nI should greet.\n");
  EXPECT_EQ(d.content, "Hello!");
  d = ParseReply(o, "Hello without thinking");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Hello without thinking");
  d = ParseReply(o, "<think>never closed");
  EXPECT_EQ(d.reasoning, "never closed");
  EXPECT_EQ(d.content, "");
  o.starts_in_reasoning = true;  // DeepSeek-R1: the prompt opened the block
  d = ParseReply(o, "thinking</think>answer");
  EXPECT_EQ(d.reasoning, "thinking");
  EXPECT_EQ(d.content, "answer");
  for (const std::string text : {"thinking</think>answer", "a</thin", "</think>", "x</think>\n"})
    ExpectStreamingMatches(o, text);
  o.starts_in_reasoning = false;
  for (const std::string text : {"<think>a</think>b", "  <thi", "<thinking>", "<think></think>"})
    ExpectStreamingMatches(o, text);
}

TEST(ReplyParserTest, ReasoningThenToolCalls) {
  ReplyOptions o;
  o.reasoning = true;
  o.tool_format = ToolCallFormat::kHermes;
  const std::string text =
      "<think>The user wants weather; <tool_call> is how I call.</think>\n<tool_call>\n{\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const ReplyDelta d = ParseReply(o, text);
  EXPECT_EQ(d.reasoning, "The user wants weather; <tool_call> is how I call.");
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(d.tool_calls, (std::vector<ToolCall>{{"get_weather", R"({"city": "Oslo"})"}}));
  ExpectStreamingMatches(o, text);
}

TEST(ReplyParserTest, MistralV11NamesAreChecked) {
  ReplyOptions o;
  o.tool_format = ToolCallFormat::kMistral;
  const ReplyDelta bad = ParseReply(o, "[TOOL_CALLS]not a name[ARGS]{}");
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_EQ(bad.content, "[TOOL_CALLS]not a name[ARGS]{}");
  const ReplyDelta ok = ParseReply(o, "[TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]{\"a\": 1}");
  EXPECT_EQ(ok.tool_calls, (std::vector<ToolCall>{{"f", R"({"a": 1})"}}));
}

}  // namespace
}  // namespace kvforge::chat
