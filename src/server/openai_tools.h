// server/openai_tools.h — the tool fields of a chat request (tools, tool_choice,
// parallel_tool_calls) read into a ToolRequest, and the assistant messages' tool calls made ready
// for chat templates. Included by the codec's .cc files only (nlohmann/json).
#pragma once

#include "chat/tool_calls.h"
#include "server/api_types.h"
#include "server/json_fields.h"

namespace kvforge::server {

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
// (at most 128); tool_choice: "none" | "auto" | "required" | {"type": "function", "function":
// {"name"}} naming one of the tools; parallel_tool_calls: a boolean. Errors name the field.
Status ParseToolFields(const json_fields::Fields& f, ToolRequest* out);

// Chat templates index a call's arguments as a mapping (`arguments | tojson`, `arguments | items`)
// while OpenAI clients send them as a JSON string: arguments that are a string holding a JSON
// object become that object. Other values are left as they are.
void NormalizeToolCallArguments(json_fields::json* messages);

// For templates that do not read `tool_calls`: each assistant message's calls (arguments already
// normalised) become text after its content, written as `format` writes them, and the field is
// dropped; such a message's null content becomes "" so templates that concatenate it render.
void WriteToolCallsIntoContent(chat::ToolCallFormat format, json_fields::json* messages);

}  // namespace kvforge::server
