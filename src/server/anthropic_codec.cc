// server/anthropic_codec.cc — Anthropic's Messages API JSON (see anthropic_codec.h).
#include "server/anthropic_codec.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "server/json_fields.h"
#include "server/template_input.h"

namespace kvforge::server {
namespace {

using namespace json_fields;  // NOLINT: the codec's own helpers

constexpr size_t kMaxTools = 128;
constexpr const char* kTopFields =
    "kvforge's Messages API takes model, max_tokens, messages, system, stop_sequences, "
    "temperature, top_p, top_k, stream, tools, tool_choice and metadata";

Status FailAt(std::string* param, const std::string& where, const std::string& message) {
  *param = where;
  return Status::InvalidArgument(message);
}

// cache_control asks Anthropic to cache the prefix up to a block; kvforge's prefix cache keeps
// every full block of every prompt anyway, so the marker is satisfied without doing anything.
Status CheckCacheControl(const Fields& f) {
  const json* c = f.Get("cache_control");
  if (c != nullptr && !c->is_object()) return f.WrongType("cache_control", "an object", *c);
  return Status::Ok();
}

Status BlockType(const Fields& f, const json& block, const std::string& where, std::string* type) {
  if (!block.is_object())
    return FailAt(f.param(), where, "'" + where + "' must be an object, not " + TypeName(block));
  const json* t = f.Get("type");
  if (t == nullptr || !t->is_string())
    return f.Fail("type", "'" + where + ".type' must be a string");
  *type = t->get<std::string>();
  return Status::Ok();
}

Status RequiredString(const Fields& f, const char* key, const std::string& where,
                      std::string* out) {
  const json* v = f.Get(key);
  if (v == nullptr || !v->is_string())
    return f.Fail(key, "'" + where + "." + key + "' must be a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

void Join(const std::string& more, std::string* text) {
  if (!text->empty()) *text += "\n";
  *text += more;
}

// {"type": "text", "text", "cache_control"?}: its text appended to *text.
Status ReadTextBlock(const json& block, const std::string& where, std::string* param,
                     std::string* text) {
  Fields bf(block, param, where + ".");
  KVF_RETURN_IF_ERROR(bf.OnlyKnown({"type", "text", "cache_control"},
                                   "a text block has type, text and cache_control"));
  std::string t;
  KVF_RETURN_IF_ERROR(RequiredString(bf, "text", where, &t));
  Join(t, text);
  return CheckCacheControl(bf);
}

// A string, or an array of text blocks (system prompts, tool results).
Status ReadText(const json& v, const std::string& where, std::string* param, std::string* text) {
  if (v.is_string()) {
    *text = v.get<std::string>();
    return Status::Ok();
  }
  if (!v.is_array())
    return FailAt(
        param, where,
        "'" + where + "' must be a string or an array of text blocks, not " + TypeName(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = StrFormat("%s[%zu]", where.c_str(), i);
    Fields bf(v[i], param, at + ".");
    std::string type;
    KVF_RETURN_IF_ERROR(BlockType(bf, v[i], at, &type));
    if (type != "text")
      return bf.Fail(
          "type",
          "'" + at + ".type' must be text here (kvforge serves text only), not '" + type + "'");
    KVF_RETURN_IF_ERROR(ReadTextBlock(v[i], at, param, text));
  }
  return Status::Ok();
}

// {"type": "tool_result", "tool_use_id", "content"?, "is_error"?}: a "tool" message. An error
// result is marked in its text, since chat templates have no place for the flag.
Status ReadToolResult(const json& block, const std::string& where, std::string* param,
                      json* message) {
  Fields bf(block, param, where + ".");
  KVF_RETURN_IF_ERROR(
      bf.OnlyKnown({"type", "tool_use_id", "content", "is_error", "cache_control"},
                   "a tool_result block has type, tool_use_id, content, is_error and "
                   "cache_control"));
  std::string id, text;
  KVF_RETURN_IF_ERROR(RequiredString(bf, "tool_use_id", where, &id));
  if (const json* c = bf.Get("content"))
    KVF_RETURN_IF_ERROR(ReadText(*c, where + ".content", param, &text));
  bool is_error = false;
  KVF_RETURN_IF_ERROR(bf.Bool("is_error", &is_error));
  KVF_RETURN_IF_ERROR(CheckCacheControl(bf));
  if (is_error) text = "Error: " + text;
  *message = {{"role", "tool"}, {"tool_call_id", id}, {"content", text}};
  return Status::Ok();
}

// {"type": "tool_use", "id", "name", "input"}: an OpenAI tool call.
Status ReadToolUse(const json& block, const std::string& where, std::string* param, json* call) {
  Fields bf(block, param, where + ".");
  KVF_RETURN_IF_ERROR(bf.OnlyKnown({"type", "id", "name", "input", "cache_control"},
                                   "a tool_use block has type, id, name, input and cache_control"));
  std::string id, name;
  KVF_RETURN_IF_ERROR(RequiredString(bf, "id", where, &id));
  KVF_RETURN_IF_ERROR(RequiredString(bf, "name", where, &name));
  const json* input = bf.Get("input");
  if (input == nullptr || !input->is_object())
    return bf.Fail("input", "'" + where + ".input' must be an object");
  KVF_RETURN_IF_ERROR(CheckCacheControl(bf));
  *call = {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", *input}}}};
  return Status::Ok();
}

// A user turn: runs of text blocks become user messages, tool results "tool" messages, in order.
Status ReadUserBlocks(const json& blocks, const std::string& where, std::string* param, json* out) {
  std::string text;
  bool pending = false;
  auto flush = [&] {
    if (pending) out->push_back({{"role", "user"}, {"content", text}});
    text.clear();
    pending = false;
  };
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string at = StrFormat("%s[%zu]", where.c_str(), i);
    Fields bf(blocks[i], param, at + ".");
    std::string type;
    KVF_RETURN_IF_ERROR(BlockType(bf, blocks[i], at, &type));
    if (type == "text") {
      KVF_RETURN_IF_ERROR(ReadTextBlock(blocks[i], at, param, &text));
      pending = true;
    } else if (type == "tool_result") {
      flush();
      json tool;
      KVF_RETURN_IF_ERROR(ReadToolResult(blocks[i], at, param, &tool));
      out->push_back(std::move(tool));
    } else {
      return bf.Fail("type", "'" + at + ".type' '" + type +
                                 "' is not supported in a user message (text and tool_result are)");
    }
  }
  flush();
  return Status::Ok();
}

// An assistant turn: text blocks joined into the content, tool_use blocks its tool_calls; the
// thinking of earlier turns is dropped, as Anthropic drops it from the context.
Status ReadAssistantBlocks(const json& blocks, const std::string& where, std::string* param,
                           std::string* text, json* calls) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string at = StrFormat("%s[%zu]", where.c_str(), i);
    Fields bf(blocks[i], param, at + ".");
    std::string type;
    KVF_RETURN_IF_ERROR(BlockType(bf, blocks[i], at, &type));
    if (type == "text") {
      KVF_RETURN_IF_ERROR(ReadTextBlock(blocks[i], at, param, text));
    } else if (type == "tool_use") {
      json call;
      KVF_RETURN_IF_ERROR(ReadToolUse(blocks[i], at, param, &call));
      calls->push_back(std::move(call));
    } else if (type != "thinking" && type != "redacted_thinking") {
      return bf.Fail("type", "'" + at + ".type' '" + type +
                                 "' is not supported in an assistant message (text, tool_use and "
                                 "thinking are)");
    }
  }
  return Status::Ok();
}

// One message into OpenAI-shaped messages; the last one, an assistant's, may be a prefill.
Status ReadMessage(const json& msg, size_t i, bool last, std::string* param, json* out,
                   MessagesRequest* req) {
  const std::string where = StrFormat("messages[%zu]", i);
  if (!msg.is_object())
    return FailAt(param, where, "'" + where + "' must be an object, not " + TypeName(msg));
  Fields mf(msg, param, where + ".");
  KVF_RETURN_IF_ERROR(mf.OnlyKnown({"role", "content"}, "a message has role and content"));
  std::string role;
  KVF_RETURN_IF_ERROR(RequiredString(mf, "role", where, &role));
  if (role != "user" && role != "assistant")
    return mf.Fail("role", "'" + where + ".role' must be user or assistant, not '" + role + "'");
  const json* content = mf.Get("content");
  if (content == nullptr || !(content->is_string() || content->is_array()))
    return mf.Fail("content", "'" + where + ".content' must be a string or an array of blocks");
  if (content->is_array() && content->empty())
    return mf.Fail("content", "'" + where + ".content' must not be empty");
  const std::string at = where + ".content";
  if (role == "user") {
    if (content->is_string()) {
      out->push_back({{"role", "user"}, {"content", *content}});
      return Status::Ok();
    }
    return ReadUserBlocks(*content, at, param, out);
  }
  std::string text;
  json calls = json::array();
  if (content->is_string())
    text = content->get<std::string>();
  else
    KVF_RETURN_IF_ERROR(ReadAssistantBlocks(*content, at, param, &text, &calls));
  if (last) {
    // Anthropic's prefill: the reply continues the final assistant turn.
    if (!calls.empty())
      return mf.Fail("content",
                     "the final message cannot be an assistant's tool_use: answer it with a "
                     "tool_result in a user message");
    if (text.empty()) return Status::Ok();  // nothing to continue: a fresh assistant turn
    req->prefill = text;
    req->chat.chat.add_generation_prompt = false;
  }
  json m = {{"role", "assistant"}, {"content", text}};
  if (!calls.empty()) {
    if (text.empty()) m["content"] = nullptr;  // as OpenAI clients send a calling turn
    m["tool_calls"] = std::move(calls);
  }
  out->push_back(std::move(m));
  return Status::Ok();
}

Status ReadConversation(const Fields& f, const CodecLimits& limits, MessagesRequest* req) {
  json messages = json::array();
  if (const json* s = f.Get("system")) {
    std::string text;
    KVF_RETURN_IF_ERROR(ReadText(*s, "system", f.param(), &text));
    if (!text.empty()) messages.push_back({{"role", "system"}, {"content", text}});
  }
  const json* m = f.Get("messages");
  if (m == nullptr) return f.Fail("messages", "'messages' is required");
  if (!m->is_array()) return f.WrongType("messages", "an array", *m);
  if (m->empty()) return f.Fail("messages", "'messages' must not be empty");
  for (size_t i = 0; i < m->size(); ++i)
    KVF_RETURN_IF_ERROR(ReadMessage((*m)[i], i, i + 1 == m->size(), f.param(), &messages, req));
  if (Status s = SetTemplateMessages(std::move(messages), limits, &req->chat.chat); !s.ok())
    return f.Fail("messages", s.message());
  return Status::Ok();
}

// tools: [{"name", "description"?, "input_schema", "type"?: "custom", "cache_control"?}].
Status ReadTools(const Fields& f, ChatRequest* req) {
  const json* t = f.Get("tools");
  if (t == nullptr) return Status::Ok();
  if (!t->is_array()) return f.WrongType("tools", "an array", *t);
  if (t->size() > kMaxTools)
    return f.Fail("tools", StrFormat("at most %zu tools per request", kMaxTools));
  json template_tools = json::array();
  for (size_t i = 0; i < t->size(); ++i) {
    const std::string where = StrFormat("tools[%zu]", i);
    const json& tool = (*t)[i];
    if (!tool.is_object())
      return FailAt(f.param(), where, "'" + where + "' must be an object, not " + TypeName(tool));
    Fields tf(tool, f.param(), where + ".");
    KVF_RETURN_IF_ERROR(tf.OnlyKnown(
        {"name", "description", "input_schema", "type", "cache_control"},
        "a tool has name, description, input_schema and cache_control; server tools are not "
        "served"));
    if (const json* type = tf.Get("type"); type != nullptr && *type != "custom")
      return tf.Fail("type", "'" + where + ".type' must be custom: kvforge runs no server tools");
    ToolFunction fn;
    KVF_RETURN_IF_ERROR(RequiredString(tf, "name", where, &fn.name));
    KVF_RETURN_IF_ERROR(CheckToolName(tf, where, fn.name, req->tools.tools));
    const json* description = tf.Get("description");
    if (description != nullptr && !description->is_string())
      return tf.WrongType("description", "a string", *description);
    const json* schema = tf.Get("input_schema");
    if (schema == nullptr || !schema->is_object())
      return tf.Fail("input_schema", "'" + where + ".input_schema' must be a JSON Schema object");
    KVF_RETURN_IF_ERROR(CheckCacheControl(tf));
    fn.parameters_json = Dump(*schema);
    template_tools.push_back(OpenAiTool(fn.name, description, schema));
    req->tools.tools.push_back(std::move(fn));
  }
  if (Status s = SetTemplateTools(template_tools, &req->chat); !s.ok())
    return f.Fail("tools", s.message());
  return Status::Ok();
}

// tool_choice: {"type": "auto" | "any" | "tool" | "none", "name"?, "disable_parallel_tool_use"?}.
Status ReadToolChoice(const Fields& f, ToolRequest* tools) {
  tools->choice = tools->tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
  const json* tc = f.Get("tool_choice");
  if (tc == nullptr) return Status::Ok();
  if (!tc->is_object()) return f.WrongType("tool_choice", "an object", *tc);
  Fields cf(*tc, f.param(), "tool_choice.");
  KVF_RETURN_IF_ERROR(cf.OnlyKnown({"type", "name", "disable_parallel_tool_use"},
                                   "tool_choice has type, name and disable_parallel_tool_use"));
  std::string type;
  KVF_RETURN_IF_ERROR(RequiredString(cf, "type", "tool_choice", &type));
  bool no_parallel = false;
  KVF_RETURN_IF_ERROR(cf.Bool("disable_parallel_tool_use", &no_parallel));
  tools->parallel = !no_parallel;
  if (type == "none") {
    tools->choice = ToolChoiceMode::kNone;
  } else if (type == "auto") {
    tools->choice = tools->tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
  } else if (type == "any") {
    tools->choice = ToolChoiceMode::kRequired;
  } else if (type == "tool") {
    tools->choice = ToolChoiceMode::kNamed;
    KVF_RETURN_IF_ERROR(RequiredString(cf, "name", "tool_choice", &tools->named));
    const bool known = std::any_of(tools->tools.begin(), tools->tools.end(),
                                   [&](const ToolFunction& t) { return t.name == tools->named; });
    if (!known)
      return cf.Fail(
          "name", "'tool_choice.name' names '" + tools->named + "', which is not among the tools");
  } else {
    return cf.Fail("type",
                   "'tool_choice.type' must be auto, any, tool or none, not '" + type + "'");
  }
  if (tools->choice != ToolChoiceMode::kNone && tools->choice != ToolChoiceMode::kAuto &&
      tools->tools.empty())
    return cf.Fail("type", "'tool_choice' " + type + " needs 'tools'");
  return Status::Ok();
}

Status ReadStopSequences(const Fields& f, const CodecLimits& limits, SamplingParams* p) {
  const json* s = f.Get("stop_sequences");
  if (s == nullptr) return Status::Ok();
  if (!s->is_array()) return f.WrongType("stop_sequences", "an array of strings", *s);
  if (s->size() > limits.max_stop)
    return f.Fail("stop_sequences", StrFormat("at most %zu stop sequences", limits.max_stop));
  for (const json& e : *s) {
    if (!e.is_string()) return f.WrongType("stop_sequences", "an array of strings", e);
    const std::string text = e.get<std::string>();
    if (text.empty()) return f.Fail("stop_sequences", "stop sequences must not be empty");
    if (text.size() > limits.max_stop_bytes)
      return f.Fail("stop_sequences",
                    StrFormat("stop sequences are limited to %zu bytes", limits.max_stop_bytes));
    p->stop.push_back(text);
  }
  return Status::Ok();
}

// metadata: {"user_id"}: an opaque id of the end user, which changes nothing in the reply.
Status ReadMetadata(const Fields& f) {
  const json* m = f.Get("metadata");
  if (m == nullptr) return Status::Ok();
  if (!m->is_object()) return f.WrongType("metadata", "an object", *m);
  Fields mf(*m, f.param(), "metadata.");
  KVF_RETURN_IF_ERROR(mf.OnlyKnown({"user_id"}, "metadata has user_id only"));
  std::string user;
  return mf.String("user_id", &user);
}

Status ReadGeneration(const Fields& f, const CodecLimits& limits, bool count_tokens,
                      GenerationFields* g) {
  SamplingParams& p = g->params;
  // Anthropic's defaults.
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.n = 1;
  KVF_RETURN_IF_ERROR(f.String("model", &g->model));
  bool given = false;
  int64_t v = 0;
  KVF_RETURN_IF_ERROR(f.Int("max_tokens", 1, kInt32Max, &given, &v));
  if (!given && !count_tokens) return f.Fail("max_tokens", "'max_tokens' is required");
  if (given) {
    g->max_tokens_given = true;
    p.max_tokens = static_cast<int32_t>(v);
  }
  KVF_RETURN_IF_ERROR(f.Number("temperature", 0, 1, false, &p.temperature));
  KVF_RETURN_IF_ERROR(f.Number("top_p", 0, 1, true, &p.top_p));
  KVF_RETURN_IF_ERROR(f.Int32("top_k", 0, kInt32Max, &p.top_k));
  KVF_RETURN_IF_ERROR(ReadStopSequences(f, limits, &p));
  KVF_RETURN_IF_ERROR(f.Bool("stream", &g->stream));
  return ReadMetadata(f);
}

json UsageJson(const Usage& u) {
  return {{"input_tokens", std::max<int64_t>(0, u.prompt_tokens - u.cached_tokens)},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

json Nullable(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json ToolInput(const std::string& text) {
  json input = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return input.is_object() ? input : json::object();  // the reply parser hands out objects only
}

json BlockJson(const AnthropicBlock& b) {
  switch (b.type) {
    case AnthropicBlockType::kThinking:
      // No signature: kvforge cannot sign its reasoning (and drops it from later turns).
      return {{"type", "thinking"}, {"thinking", b.text}, {"signature", ""}};
    case AnthropicBlockType::kToolUse:
      return {
          {"type", "tool_use"}, {"id", b.id}, {"name", b.name}, {"input", ToolInput(b.input_json)}};
    case AnthropicBlockType::kText:
      break;
  }
  return {{"type", "text"}, {"text", b.text}};
}

json MessageJson(const AnthropicMessage& m, bool with_content) {
  json content = json::array();
  if (with_content)
    for (const AnthropicBlock& b : m.content) content.push_back(BlockJson(b));
  return {{"id", m.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", m.model},
          {"content", std::move(content)},
          {"stop_reason", Nullable(m.stop_reason)},
          {"stop_sequence", Nullable(m.stop_sequence)},
          {"usage", UsageJson(m.usage)}};
}

const char* ErrorType(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}

}  // namespace

Status ParseMessagesRequest(std::string_view body, const CodecLimits& limits, bool count_tokens,
                            MessagesRequest* out, std::string* param) {
  param->clear();
  json j;
  KVF_RETURN_IF_ERROR(ParseObject(body, limits.max_depth, &j));
  Fields f(j, param);
  KVF_RETURN_IF_ERROR(
      f.OnlyKnown({"model", "max_tokens", "messages", "system", "stop_sequences", "temperature",
                   "top_p", "top_k", "stream", "tools", "tool_choice", "metadata"},
                  kTopFields));
  KVF_RETURN_IF_ERROR(ReadGeneration(f, limits, count_tokens, &out->chat.gen));
  KVF_RETURN_IF_ERROR(ReadConversation(f, limits, out));
  KVF_RETURN_IF_ERROR(ReadTools(f, &out->chat));
  return ReadToolChoice(f, &out->chat.tools);
}

std::string EncodeAnthropicMessage(const AnthropicMessage& m) { return Dump(MessageJson(m, true)); }

std::string EncodeAnthropicMessageStart(const AnthropicMessage& head) {
  return Dump({{"type", "message_start"}, {"message", MessageJson(head, false)}});
}

std::string EncodeAnthropicBlockStart(int32_t index, const AnthropicBlock& block) {
  json b;
  switch (block.type) {
    case AnthropicBlockType::kThinking:
      b = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
      break;
    case AnthropicBlockType::kToolUse:
      b = {{"type", "tool_use"}, {"id", block.id}, {"name", block.name}, {"input", json::object()}};
      break;
    case AnthropicBlockType::kText:
      b = {{"type", "text"}, {"text", ""}};
      break;
  }
  return Dump({{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(b)}});
}

std::string EncodeAnthropicBlockDelta(int32_t index, const AnthropicBlock& piece) {
  json d;
  switch (piece.type) {
    case AnthropicBlockType::kThinking:
      d = {{"type", "thinking_delta"}, {"thinking", piece.text}};
      break;
    case AnthropicBlockType::kToolUse:
      d = {{"type", "input_json_delta"}, {"partial_json", piece.input_json}};
      break;
    case AnthropicBlockType::kText:
      d = {{"type", "text_delta"}, {"text", piece.text}};
      break;
  }
  return Dump({{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(d)}});
}

std::string EncodeAnthropicBlockStop(int32_t index) {
  return Dump({{"type", "content_block_stop"}, {"index", index}});
}

std::string EncodeAnthropicMessageDelta(const AnthropicMessage& end) {
  return Dump({{"type", "message_delta"},
               {"delta",
                {{"stop_reason", Nullable(end.stop_reason)},
                 {"stop_sequence", Nullable(end.stop_sequence)}}},
               {"usage", UsageJson(end.usage)}});
}

std::string EncodeAnthropicMessageStop() { return Dump({{"type", "message_stop"}}); }

std::string EncodeAnthropicPing() { return Dump({{"type", "ping"}}); }

std::string EncodeAnthropicError(const ApiError& e) {
  const std::string message = e.param.empty() ? e.message : e.param + ": " + e.message;
  return Dump(
      {{"type", "error"}, {"error", {{"type", ErrorType(e.http_status)}, {"message", message}}}});
}

std::string EncodeAnthropicTokenCount(int64_t input_tokens) {
  return Dump({{"input_tokens", input_tokens}});
}

}  // namespace kvforge::server
