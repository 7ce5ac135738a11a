// server/openai_tools.cc — tools, tool_choice and parallel_tool_calls; see openai_tools.h.
#include "server/openai_tools.h"

#include "chat/json.h"
#include "chat/tool_calls.h"

namespace kvforge::server {

using json_fields::Dump;
using json_fields::Fields;
using json_fields::json;
using json_fields::StrFormat;
using json_fields::TypeName;

namespace {

constexpr size_t kMaxTools = 128;

Status ParseTool(const Fields& f, size_t i, const json& tool, ToolFunction* out) {
  const std::string where = StrFormat("tools[%zu]", i);
  auto fail = [&](const std::string& what) { return f.Fail("tools", "'" + where + "' " + what); };
  if (!tool.is_object()) return fail(std::string("must be an object, not ") + TypeName(tool));
  auto type = tool.find("type");
  if (type == tool.end() || *type != "function")
    return fail("must have \"type\": \"function\" (the only tool type kvforge serves)");
  auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object()) return fail("needs a 'function' object");
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() ||
      !chat::IsValidFunctionName(name->get<std::string>()))
    return fail("function.name must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'");
  out->name = name->get<std::string>();
  if (auto params = fn->find("parameters"); params != fn->end() && !params->is_null()) {
    if (!params->is_object()) return fail("function.parameters must be a JSON Schema object");
    out->parameters_json = Dump(*params);
  }
  for (auto it = fn->begin(); it != fn->end(); ++it)
    if (it.key() != "name" && it.key() != "description" && it.key() != "parameters" &&
        it.key() != "strict")
      return fail("function has an unknown field '" + it.key() + "'");
  return Status::Ok();
}

Status ParseToolChoice(const Fields& f, const json& tc, ToolRequest* out) {
  if (tc.is_string()) {
    const std::string s = tc.get<std::string>();
    if (s == "none") {
      out->choice = ToolChoiceMode::kNone;
    } else if (s == "auto") {
      out->choice = ToolChoiceMode::kAuto;
    } else if (s == "required") {
      out->choice = ToolChoiceMode::kRequired;
    } else {
      return f.Fail("tool_choice", "'tool_choice' must be none, auto, required or a function");
    }
  } else if (tc.is_object()) {
    // Pointers, not iterators: iterators of `tc` and of its 'function' member do not compare.
    auto type = tc.find("type");
    auto fn = tc.find("function");
    const json* name = nullptr;
    if (fn != tc.end() && fn->is_object())
      if (auto it = fn->find("name"); it != fn->end()) name = &*it;
    if (type == tc.end() || *type != "function" || name == nullptr || !name->is_string())
      return f.Fail("tool_choice",
                    "a named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": "
                    "...}}");
    out->choice = ToolChoiceMode::kNamed;
    out->named = name->get<std::string>();
  } else {
    return f.WrongType("tool_choice", "a string or an object", tc);
  }
  const bool needs_tools =
      out->choice == ToolChoiceMode::kRequired || out->choice == ToolChoiceMode::kNamed;
  if (needs_tools && out->tools.empty())
    return f.Fail("tool_choice", "'tool_choice' required or named needs 'tools'");
  if (out->choice == ToolChoiceMode::kNamed) {
    bool found = false;
    for (const ToolFunction& t : out->tools) found = found || t.name == out->named;
    if (!found)
      return f.Fail("tool_choice",
                    "'tool_choice' names '" + out->named + "', which is not among the tools");
  }
  return Status::Ok();
}

// json.dumps spelling ({"a": 2}), the one chat models are trained on, falling back to compact.
std::string AsPythonJson(const json& v) {
  const std::string compact = Dump(v);
  auto value = chat::ParseJson(compact);
  if (!value.ok()) return compact;
  auto text = chat::ToJson(*value);
  return text.ok() ? *text : compact;
}

}  // namespace

Status ParseToolFields(const Fields& f, ToolRequest* out) {
  if (const json* t = f.Get("tools")) {
    if (!t->is_array()) return f.WrongType("tools", "an array", *t);
    if (t->size() > kMaxTools)
      return f.Fail("tools", StrFormat("at most %zu tools per request", kMaxTools));
    for (size_t i = 0; i < t->size(); ++i) {
      ToolFunction fn;
      KVF_RETURN_IF_ERROR(ParseTool(f, i, (*t)[i], &fn));
      for (const ToolFunction& other : out->tools)
        if (other.name == fn.name) return f.Fail("tools", "two tools are named '" + fn.name + "'");
      out->tools.push_back(std::move(fn));
    }
  }
  out->choice = out->tools.empty() ? ToolChoiceMode::kNone : ToolChoiceMode::kAuto;
  if (const json* tc = f.Get("tool_choice")) KVF_RETURN_IF_ERROR(ParseToolChoice(f, *tc, out));
  return f.Bool("parallel_tool_calls", &out->parallel);
}

void NormalizeToolCallArguments(json* messages) {
  for (json& m : *messages) {
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (json& call : *calls) {
      if (!call.is_object()) continue;
      auto fn = call.find("function");
      if (fn == call.end() || !fn->is_object()) continue;
      auto args = fn->find("arguments");
      if (args == fn->end() || !args->is_string()) continue;
      json parsed = json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_object()) *args = std::move(parsed);
    }
  }
}

void WriteToolCallsIntoContent(chat::ToolCallFormat format, json* messages) {
  const chat::ToolCallLayout l = chat::LayoutOf(format);
  for (json& m : *messages) {
    if (!m.is_object() || !m.contains("tool_calls")) continue;
    std::string text;
    if (auto calls = m.find("tool_calls"); calls != m.end()) {
      if (calls->is_array()) {
        std::string written;
        for (const json& call : *calls) {
          const json* fn =
              call.is_object() && call.contains("function") ? &call["function"] : nullptr;
          if (fn == nullptr || !fn->is_object() || !fn->contains("name")) continue;
          const json& args = fn->contains("arguments") ? (*fn)["arguments"] : json::object();
          if (!written.empty()) written += l.call_separator;
          written += l.call_begin + fn->value("name", std::string()) + l.name_end +
                     (args.is_string() ? args.get<std::string>() : AsPythonJson(args)) + l.call_end;
        }
        if (!written.empty()) text = l.calls_begin + written + l.calls_end;
      }
      m.erase("tool_calls");
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      m["content"] = text;
    } else if (content->is_string() && !text.empty()) {
      *content = content->get<std::string>() + text;
    }
  }
}

}  // namespace kvforge::server
