// server/responses_codec.cc — OpenAI's Responses API JSON (see responses_codec.h).
#include "server/responses_codec.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "server/json_fields.h"
#include "server/template_input.h"

namespace kvforge::server {
namespace {

using namespace json_fields;  // NOLINT: the codec's own helpers

constexpr size_t kMaxTools = 128;
constexpr size_t kMaxMetadata = 16;  // OpenAI's limit of metadata pairs
constexpr const char* kTopFields =
    "kvforge's Responses API takes model, input, instructions, max_output_tokens, temperature, "
    "top_p, stream, tools, tool_choice, parallel_tool_calls, text, store, metadata, user, "
    "safety_identifier, prompt_cache_key, service_tier, truncation, include and background";

Status FailAt(std::string* param, const std::string& where, const std::string& message) {
  *param = where;
  return Status::InvalidArgument(message);
}

Status RequiredString(const Fields& f, const char* key, const std::string& where,
                      std::string* out) {
  const json* v = f.Get(key);
  if (v == nullptr || !v->is_string())
    return f.Fail(key, "'" + where + "." + key + "' must be a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

// Fields of OpenAI's Responses API that need state or features kvforge does not have; each is a
// 400 that says why (the rest of the unknown fields get the list of what is taken).
Status RefuseStateful(const Fields& f) {
  struct Refused {
    const char* key;
    const char* why;
  };
  static constexpr Refused kRefused[] = {
      {"previous_response_id",
       "kvforge stores no responses: send the whole conversation in 'input'"},
      {"conversation", "kvforge stores no conversations: send the whole conversation in 'input'"},
      {"prompt", "kvforge has no stored prompts"},
      {"reasoning", "reasoning options are not supported"},
      {"max_tool_calls", "'max_tool_calls' is not supported"},
      {"top_logprobs", "log-probabilities are not supported by the Responses API here"},
  };
  for (const Refused& r : kRefused)
    if (f.Get(r.key) != nullptr)
      return f.Fail(r.key, std::string("'") + r.key + "' is not supported: " + r.why);
  if (const json* b = f.Get("background"); b != nullptr && *b != false)
    return f.Fail("background",
                  "'background': true is not supported (responses run in the "
                  "request)");
  if (const json* inc = f.Get("include"); inc != nullptr && *inc != json::array())
    return f.Fail("include", "'include' is not supported (only an empty list is accepted)");
  if (const json* t = f.Get("truncation"); t != nullptr && *t != "disabled")
    return f.Fail("truncation",
                  "only 'truncation': \"disabled\" is supported (a prompt over the "
                  "context is an error)");
  if (const json* t = f.Get("service_tier"); t != nullptr && *t != "auto" && *t != "default")
    return f.Fail("service_tier", "'service_tier' must be auto or default");
  return Status::Ok();
}

// A string, or an array of {"type": "input_text" | "output_text", "text"} parts.
Status ReadContent(const json& v, const std::string& where, std::string* param, std::string* text) {
  if (v.is_string()) {
    *text = v.get<std::string>();
    return Status::Ok();
  }
  if (!v.is_array())
    return FailAt(param, where,
                  "'" + where + "' must be a string or an array of text parts, not " + TypeName(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = StrFormat("%s[%zu]", where.c_str(), i);
    if (!v[i].is_object())
      return FailAt(param, at, "'" + at + "' must be an object, not " + TypeName(v[i]));
    Fields pf(v[i], param, at + ".");
    std::string type, part;
    KVF_RETURN_IF_ERROR(RequiredString(pf, "type", at, &type));
    if (type != "input_text" && type != "output_text")
      return pf.Fail("type", "'" + at + ".type' must be input_text or output_text (kvforge " +
                                 "serves text only), not '" + type + "'");
    KVF_RETURN_IF_ERROR(pf.OnlyKnown({"type", "text", "annotations", "logprobs"},
                                     "a text part has type, text, annotations and logprobs"));
    KVF_RETURN_IF_ERROR(RequiredString(pf, "text", at, &part));
    if (!text->empty()) *text += "\n";
    *text += part;
  }
  return Status::Ok();
}

Status ReadMessageItem(const Fields& f, const json& item, const std::string& where,
                       json* messages) {
  KVF_RETURN_IF_ERROR(f.OnlyKnown({"type", "role", "content", "id", "status"},
                                  "a message item has type, role, content, id and status"));
  std::string role, text;
  KVF_RETURN_IF_ERROR(RequiredString(f, "role", where, &role));
  if (role != "user" && role != "assistant" && role != "system" && role != "developer")
    return f.Fail("role", "'" + where +
                              ".role' must be user, assistant, system or developer, "
                              "not '" +
                              role + "'");
  auto content = item.find("content");
  if (content == item.end() || content->is_null())
    return f.Fail("content", "'" + where + ".content' is required");
  KVF_RETURN_IF_ERROR(ReadContent(*content, where + ".content", f.param(), &text));
  messages->push_back({{"role", role}, {"content", text}});
  return Status::Ok();
}

// A call joins the assistant message right before it (the same turn), or opens one.
Status ReadFunctionCall(const Fields& f, const std::string& where, json* messages) {
  KVF_RETURN_IF_ERROR(
      f.OnlyKnown({"type", "call_id", "name", "arguments", "id", "status"},
                  "a function_call item has type, call_id, name, arguments, id and status"));
  std::string call_id, name, arguments;
  KVF_RETURN_IF_ERROR(RequiredString(f, "call_id", where, &call_id));
  KVF_RETURN_IF_ERROR(RequiredString(f, "name", where, &name));
  KVF_RETURN_IF_ERROR(RequiredString(f, "arguments", where, &arguments));
  json call = {{"id", call_id},
               {"type", "function"},
               {"function", {{"name", name}, {"arguments", arguments}}}};
  if (messages->empty() || messages->back().value("role", "") != "assistant")
    messages->push_back({{"role", "assistant"}, {"content", nullptr}});
  json& turn = messages->back();
  if (!turn.contains("tool_calls")) turn["tool_calls"] = json::array();
  turn["tool_calls"].push_back(std::move(call));
  return Status::Ok();
}

Status ReadFunctionCallOutput(const Fields& f, const json& item, const std::string& where,
                              json* messages) {
  KVF_RETURN_IF_ERROR(
      f.OnlyKnown({"type", "call_id", "output", "id", "status"},
                  "a function_call_output item has type, call_id, output, id and status"));
  std::string call_id, text;
  KVF_RETURN_IF_ERROR(RequiredString(f, "call_id", where, &call_id));
  auto output = item.find("output");
  if (output == item.end() || output->is_null())
    return f.Fail("output", "'" + where + ".output' is required");
  KVF_RETURN_IF_ERROR(ReadContent(*output, where + ".output", f.param(), &text));
  messages->push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", text}});
  return Status::Ok();
}

Status ReadItem(const json& item, const std::string& where, std::string* param, json* messages) {
  if (!item.is_object())
    return FailAt(param, where, "'" + where + "' must be an object, not " + TypeName(item));
  Fields f(item, param, where + ".");
  std::string type = "message";  // the "easy input message" has no type
  KVF_RETURN_IF_ERROR(f.String("type", &type));
  if (type == "message") return ReadMessageItem(f, item, where, messages);
  if (type == "function_call") return ReadFunctionCall(f, where, messages);
  if (type == "function_call_output") return ReadFunctionCallOutput(f, item, where, messages);
  if (type == "reasoning") {
    // The reasoning of earlier turns is not shown to the model again (as chat templates drop
    // reasoning_content of past turns).
    return f.OnlyKnown({"type", "id", "summary", "content", "encrypted_content", "status"},
                       "a reasoning item has type, id, summary, content, encrypted_content and "
                       "status");
  }
  return f.Fail("type", "'" + where + ".type' '" + type +
                            "' is not supported (message, function_call, function_call_output "
                            "and reasoning items are)");
}

Status ReadConversation(const Fields& f, const CodecLimits& limits, ResponsesRequest* req) {
  json messages = json::array();
  if (const json* ins = f.Get("instructions")) {
    if (!ins->is_string()) return f.WrongType("instructions", "a string", *ins);
    messages.push_back({{"role", "system"}, {"content", *ins}});
    req->echo.instructions = Dump(*ins);
  }
  const json* in = f.Get("input");
  if (in == nullptr) return f.Fail("input", "'input' is required");
  if (in->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *in}});
  } else if (in->is_array()) {
    if (in->empty()) return f.Fail("input", "'input' must not be empty");
    for (size_t i = 0; i < in->size(); ++i)
      KVF_RETURN_IF_ERROR(ReadItem((*in)[i], StrFormat("input[%zu]", i), f.param(), &messages));
  } else {
    return f.WrongType("input", "a string or an array of items", *in);
  }
  if (Status s = SetTemplateMessages(std::move(messages), limits, &req->chat.chat); !s.ok())
    return f.Fail("input", s.message());
  return Status::Ok();
}

// tools: [{"type": "function", "name", "description"?, "parameters"?, "strict"?}].
Status ReadTools(const Fields& f, ResponsesRequest* req) {
  const json* t = f.Get("tools");
  if (t == nullptr) return Status::Ok();
  if (!t->is_array()) return f.WrongType("tools", "an array", *t);
  if (t->size() > kMaxTools)
    return f.Fail("tools", StrFormat("at most %zu tools per request", kMaxTools));
  ToolRequest& tools = req->chat.tools;
  json template_tools = json::array();
  for (size_t i = 0; i < t->size(); ++i) {
    const std::string where = StrFormat("tools[%zu]", i);
    const json& tool = (*t)[i];
    if (!tool.is_object())
      return FailAt(f.param(), where, "'" + where + "' must be an object, not " + TypeName(tool));
    Fields tf(tool, f.param(), where + ".");
    std::string type;
    KVF_RETURN_IF_ERROR(RequiredString(tf, "type", where, &type));
    if (type != "function")
      return tf.Fail("type", "'" + where +
                                 ".type' must be function: kvforge runs no hosted "
                                 "tools (not '" +
                                 type + "')");
    KVF_RETURN_IF_ERROR(tf.OnlyKnown({"type", "name", "description", "parameters", "strict"},
                                     "a function tool has type, name, description, parameters "
                                     "and strict"));
    ToolFunction fn;
    KVF_RETURN_IF_ERROR(RequiredString(tf, "name", where, &fn.name));
    KVF_RETURN_IF_ERROR(CheckToolName(tf, where, fn.name, tools.tools));
    const json* description = tf.Get("description");
    if (description != nullptr && !description->is_string())
      return tf.WrongType("description", "a string", *description);
    const json* params = tf.Get("parameters");
    if (params != nullptr && !params->is_object())
      return tf.Fail("parameters", "'" + where + ".parameters' must be a JSON Schema object");
    bool strict = false;
    KVF_RETURN_IF_ERROR(tf.Bool("strict", &strict));  // kvforge's tool grammars are always exact
    if (params != nullptr) fn.parameters_json = Dump(*params);
    template_tools.push_back(OpenAiTool(fn.name, description, params));
    tools.tools.push_back(std::move(fn));
  }
  if (Status s = SetTemplateTools(template_tools, &req->chat.chat); !s.ok())
    return f.Fail("tools", s.message());
  req->echo.tools = Dump(*t);
  return Status::Ok();
}

// tool_choice: "auto" | "none" | "required" | {"type": "function", "name"}.
Status ReadToolChoice(const Fields& f, ResponsesRequest* req) {
  ToolRequest& tools = req->chat.tools;
  tools.choice = tools.tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
  KVF_RETURN_IF_ERROR(f.Bool("parallel_tool_calls", &tools.parallel));
  req->echo.parallel_tool_calls = tools.parallel;
  const json* tc = f.Get("tool_choice");
  if (tc == nullptr) return Status::Ok();
  req->echo.tool_choice = Dump(*tc);
  if (tc->is_string()) {
    const std::string s = tc->get<std::string>();
    if (s == "none") {
      tools.choice = ToolChoiceMode::kNone;
    } else if (s == "required") {
      tools.choice = ToolChoiceMode::kRequired;
    } else if (s != "auto") {
      return f.Fail("tool_choice", "'tool_choice' must be auto, none, required or a function");
    }
  } else if (tc->is_object()) {
    Fields cf(*tc, f.param(), "tool_choice.");
    KVF_RETURN_IF_ERROR(cf.OnlyKnown({"type", "name"}, "a named tool_choice has type and name"));
    std::string type;
    KVF_RETURN_IF_ERROR(RequiredString(cf, "type", "tool_choice", &type));
    if (type != "function")
      return cf.Fail("type",
                     "'tool_choice.type' must be function (kvforge runs no hosted "
                     "tools), not '" +
                         type + "'");
    KVF_RETURN_IF_ERROR(RequiredString(cf, "name", "tool_choice", &tools.named));
    tools.choice = ToolChoiceMode::kNamed;
    bool known = false;
    for (const ToolFunction& t : tools.tools) known = known || t.name == tools.named;
    if (!known)
      return cf.Fail(
          "name", "'tool_choice.name' names '" + tools.named + "', which is not among the tools");
  } else {
    return f.WrongType("tool_choice", "a string or an object", *tc);
  }
  if ((tools.choice == ToolChoiceMode::kRequired || tools.choice == ToolChoiceMode::kNamed) &&
      tools.tools.empty())
    return f.Fail("tool_choice", "'tool_choice' required or named needs 'tools'");
  return Status::Ok();
}

// text: {"format": {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "name",
// "schema", "strict"?, "description"?}}: the structured output constraint.
Status ReadTextFormat(const Fields& f, ResponsesRequest* req) {
  const json* text = f.Get("text");
  if (text == nullptr) return Status::Ok();
  if (!text->is_object()) return f.WrongType("text", "an object", *text);
  Fields tf(*text, f.param(), "text.");
  KVF_RETURN_IF_ERROR(tf.OnlyKnown({"format"}, "text has format only"));
  req->echo.text = Dump(*text);
  const json* format = tf.Get("format");
  if (format == nullptr) return Status::Ok();
  if (!format->is_object()) return tf.WrongType("format", "an object", *format);
  Fields ff(*format, f.param(), "text.format.");
  std::string type;
  KVF_RETURN_IF_ERROR(RequiredString(ff, "type", "text.format", &type));
  StructuredOutputs& so = req->chat.gen.params.structured_outputs;
  if (type == "text") return ff.OnlyKnown({"type"}, "a text format has type only");
  if (type == "json_object") {
    KVF_RETURN_IF_ERROR(ff.OnlyKnown({"type"}, "a json_object format has type only"));
    so.json_object = true;
    return Status::Ok();
  }
  if (type != "json_schema")
    return ff.Fail(
        "type", "'text.format.type' must be text, json_object or json_schema, not '" + type + "'");
  KVF_RETURN_IF_ERROR(ff.OnlyKnown({"type", "name", "schema", "strict", "description"},
                                   "a json_schema format has type, name, schema, strict and "
                                   "description"));
  std::string name;
  KVF_RETURN_IF_ERROR(ff.String("name", &name));
  bool strict = false;
  KVF_RETURN_IF_ERROR(ff.Bool("strict", &strict));  // kvforge's grammar is always exact
  const json* schema = ff.Get("schema");
  if (schema == nullptr || !(schema->is_object() || schema->is_boolean()))
    return ff.Fail("schema", "'text.format.schema' must be a JSON Schema object");
  so.json = Dump(*schema);
  return Status::Ok();
}

Status ReadMetadata(const Fields& f, ResponsesRequest* req) {
  const json* m = f.Get("metadata");
  if (m == nullptr) return Status::Ok();
  if (!m->is_object()) return f.WrongType("metadata", "an object of strings", *m);
  if (m->size() > kMaxMetadata)
    return f.Fail("metadata", StrFormat("at most %zu metadata pairs", kMaxMetadata));
  for (auto it = m->begin(); it != m->end(); ++it)
    if (!it->is_string()) return f.Fail("metadata", "'metadata." + it.key() + "' must be a string");
  req->echo.metadata = Dump(*m);
  return Status::Ok();
}

Status ReadGeneration(const Fields& f, ResponsesRequest* req) {
  GenerationFields& g = req->chat.gen;
  SamplingParams& p = g.params;
  // OpenAI's defaults.
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.n = 1;
  KVF_RETURN_IF_ERROR(f.String("model", &g.model));
  bool given = false;
  int64_t v = 0;
  KVF_RETURN_IF_ERROR(f.Int("max_output_tokens", 1, kInt32Max, &given, &v));
  if (given) {
    g.max_tokens_given = true;
    p.max_tokens = static_cast<int32_t>(v);
    req->echo.max_output_tokens = v;
  }
  KVF_RETURN_IF_ERROR(f.Number("temperature", 0, 2, false, &p.temperature));
  KVF_RETURN_IF_ERROR(f.Number("top_p", 0, 1, true, &p.top_p));
  if (const json* t = f.Get("temperature")) req->echo.temperature = t->get<double>();
  if (const json* t = f.Get("top_p")) req->echo.top_p = t->get<double>();
  KVF_RETURN_IF_ERROR(f.Bool("stream", &g.stream));
  bool store = false;
  KVF_RETURN_IF_ERROR(f.Bool("store", &store));  // accepted either way: nothing is stored
  std::string ignored;
  KVF_RETURN_IF_ERROR(f.String("user", &ignored));
  if (const json* u = f.Get("user")) req->echo.user = Dump(*u);
  // Identifiers for OpenAI's abuse checks and cache routing: nothing to do (caching is automatic).
  KVF_RETURN_IF_ERROR(f.String("safety_identifier", &ignored));
  KVF_RETURN_IF_ERROR(f.String("prompt_cache_key", &ignored));
  return ReadMetadata(f, req);
}

json UsageJson(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json OutputTextPart(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", json::array()},
          {"logprobs", json::array()}};
}

json SummaryPart(const std::string& text) { return {{"type", "summary_text"}, {"text", text}}; }

json ItemJson(const ResponseItem& item) {
  switch (item.type) {
    case ResponseItemType::kReasoning: {
      json summary = json::array();
      if (!item.text.empty()) summary.push_back(SummaryPart(item.text));
      return {{"type", "reasoning"}, {"id", item.id}, {"summary", std::move(summary)}};
    }
    case ResponseItemType::kFunctionCall:
      return {{"type", "function_call"},     {"id", item.id},
              {"call_id", item.call_id},     {"name", item.name},
              {"arguments", item.arguments}, {"status", item.status}};
    case ResponseItemType::kMessage:
      break;
  }
  // An item just opened in a stream has no content part yet.
  json content = json::array();
  if (item.status != "in_progress") content.push_back(OutputTextPart(item.text));
  return {{"type", "message"},
          {"id", item.id},
          {"status", item.status},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

json Echoed(const std::string& text) {
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

json ResponseJson(const ResponseObject& r) {
  json output = json::array();
  for (const ResponseItem& item : r.output) output.push_back(ItemJson(item));
  const ResponseEcho& e = r.echo;
  return {
      {"id", r.id},
      {"object", "response"},
      {"created_at", r.created_at},
      {"status", r.status},
      {"error", nullptr},
      {"incomplete_details",
       r.incomplete_reason.empty() ? json(nullptr) : json{{"reason", r.incomplete_reason}}},
      {"instructions", Echoed(e.instructions)},
      {"max_output_tokens", e.max_output_tokens > 0 ? json(e.max_output_tokens) : json(nullptr)},
      {"model", r.model},
      {"output", std::move(output)},
      {"parallel_tool_calls", e.parallel_tool_calls},
      {"previous_response_id", nullptr},
      {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
      {"store", false},  // whatever the request said: nothing is kept
      {"temperature", e.temperature},
      {"text", Echoed(e.text)},
      {"tool_choice", Echoed(e.tool_choice)},
      {"tools", Echoed(e.tools)},
      {"top_p", e.top_p},
      {"truncation", "disabled"},
      {"usage", r.with_usage ? UsageJson(r.usage) : json(nullptr)},
      {"user", Echoed(e.user)},
      {"metadata", Echoed(e.metadata)},
  };
}

}  // namespace

Status ParseResponsesRequest(std::string_view body, const CodecLimits& limits,
                             ResponsesRequest* out, std::string* param) {
  param->clear();
  json j;
  KVF_RETURN_IF_ERROR(ParseObject(body, limits.max_depth, &j));
  Fields f(j, param);
  KVF_RETURN_IF_ERROR(RefuseStateful(f));
  KVF_RETURN_IF_ERROR(f.OnlyKnown({"model",
                                   "input",
                                   "instructions",
                                   "max_output_tokens",
                                   "temperature",
                                   "top_p",
                                   "stream",
                                   "tools",
                                   "tool_choice",
                                   "parallel_tool_calls",
                                   "text",
                                   "store",
                                   "metadata",
                                   "user",
                                   "safety_identifier",
                                   "prompt_cache_key",
                                   "service_tier",
                                   "truncation",
                                   "include",
                                   "background"},
                                  kTopFields));
  KVF_RETURN_IF_ERROR(ReadGeneration(f, out));
  KVF_RETURN_IF_ERROR(ReadConversation(f, limits, out));
  KVF_RETURN_IF_ERROR(ReadTools(f, out));
  KVF_RETURN_IF_ERROR(ReadToolChoice(f, out));
  return ReadTextFormat(f, out);
}

std::string EncodeResponse(const ResponseObject& r) { return Dump(ResponseJson(r)); }

const char* ResponseEventName(ResponseEventKind kind) {
  switch (kind) {
    case ResponseEventKind::kCreated:
      return "response.created";
    case ResponseEventKind::kInProgress:
      return "response.in_progress";
    case ResponseEventKind::kCompleted:
      return "response.completed";
    case ResponseEventKind::kIncomplete:
      return "response.incomplete";
    case ResponseEventKind::kItemAdded:
      return "response.output_item.added";
    case ResponseEventKind::kItemDone:
      return "response.output_item.done";
    case ResponseEventKind::kContentPartAdded:
      return "response.content_part.added";
    case ResponseEventKind::kContentPartDone:
      return "response.content_part.done";
    case ResponseEventKind::kTextDelta:
      return "response.output_text.delta";
    case ResponseEventKind::kTextDone:
      return "response.output_text.done";
    case ResponseEventKind::kArgumentsDelta:
      return "response.function_call_arguments.delta";
    case ResponseEventKind::kArgumentsDone:
      return "response.function_call_arguments.done";
    case ResponseEventKind::kSummaryPartAdded:
      return "response.reasoning_summary_part.added";
    case ResponseEventKind::kSummaryPartDone:
      return "response.reasoning_summary_part.done";
    case ResponseEventKind::kSummaryDelta:
      return "response.reasoning_summary_text.delta";
    case ResponseEventKind::kSummaryDone:
      return "response.reasoning_summary_text.done";
  }
  return "error";
}

std::string EncodeResponseEvent(const ResponseEvent& e) {
  json j = {{"type", ResponseEventName(e.kind)}, {"sequence_number", e.sequence_number}};
  using K = ResponseEventKind;
  switch (e.kind) {
    case K::kCreated:
    case K::kInProgress:
    case K::kCompleted:
    case K::kIncomplete:
      j["response"] = ResponseJson(*e.response);
      return Dump(j);
    case K::kItemAdded:
    case K::kItemDone:
      j["output_index"] = e.output_index;
      j["item"] = ItemJson(*e.item);
      return Dump(j);
    default:
      break;
  }
  j["item_id"] = e.item->id;
  j["output_index"] = e.output_index;
  switch (e.kind) {
    case K::kContentPartAdded:
    case K::kContentPartDone:
      j["content_index"] = 0;
      j["part"] = OutputTextPart(e.text);
      break;
    case K::kTextDelta:
    case K::kTextDone:
      j["content_index"] = 0;
      j[e.kind == K::kTextDelta ? "delta" : "text"] = e.text;
      j["logprobs"] = json::array();
      break;
    case K::kArgumentsDelta:
      j["delta"] = e.text;
      break;
    case K::kArgumentsDone:
      j["name"] = e.item->name;
      j["arguments"] = e.text;
      break;
    case K::kSummaryPartAdded:
    case K::kSummaryPartDone:
      j["summary_index"] = 0;
      j["part"] = SummaryPart(e.text);
      break;
    case K::kSummaryDelta:
    case K::kSummaryDone:
      j["summary_index"] = 0;
      j[e.kind == K::kSummaryDelta ? "delta" : "text"] = e.text;
      break;
    default:
      break;
  }
  return Dump(j);
}

std::string EncodeResponseStreamError(const ApiError& e, int64_t sequence_number) {
  return Dump({{"type", "error"},
               {"sequence_number", sequence_number},
               {"code", e.code.empty() ? json(nullptr) : json(e.code)},
               {"message", e.message},
               {"param", e.param.empty() ? json(nullptr) : json(e.param)}});
}

}  // namespace kvforge::server
