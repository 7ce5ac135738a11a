// server/template_input.cc — see template_input.h.
#include "server/template_input.h"

#include <utility>

#include "chat/tool_calls.h"
#include "server/chat_values.h"
#include "server/openai_tools.h"

namespace kvforge::server {

using json_fields::json;

Status SetTemplateMessages(json messages, const CodecLimits& limits, ChatInput* chat) {
  for (const json& m : messages) {
    const auto content = m.find("content");
    const bool text = content != m.end() && content->is_string();
    chat->messages.emplace_back(m.value("role", std::string()),
                                text ? content->get<std::string>() : std::string());
  }
  NormalizeToolCallArguments(&messages);
  if (limits.tool_calls_as_text) WriteToolCallsIntoContent(*limits.tool_calls_as_text, &messages);
  KVF_ASSIGN_OR_RETURN(chat->template_messages, ChatValueOf(messages));
  return Status::Ok();
}

json OpenAiTool(const std::string& name, const json* description, const json* parameters) {
  json fn = {{"name", name}};
  if (description != nullptr) fn["description"] = *description;
  if (parameters != nullptr) fn["parameters"] = *parameters;
  return {{"type", "function"}, {"function", std::move(fn)}};
}

Status SetTemplateTools(const json& tools, ChatInput* chat) {
  if (tools.empty()) return Status::Ok();
  KVF_ASSIGN_OR_RETURN(chat->tools, ChatValueOf(tools));
  return Status::Ok();
}

Status CheckToolName(const json_fields::Fields& f, const std::string& where,
                     const std::string& name, const std::vector<ToolFunction>& seen) {
  if (!chat::IsValidFunctionName(name))
    return f.Fail(
        "name",
        "'" + where + ".name' must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-', not '" + name + "'");
  for (const ToolFunction& t : seen)
    if (t.name == name)
      return f.Fail("name", "'" + where + ".name': two tools are named '" + name + "'");
  return Status::Ok();
}

}  // namespace kvforge::server
