// server/template_input.h — conversations that the Anthropic and Responses codecs translated into
// OpenAI chat messages (JSON) made into the chat template's ChatInput exactly as a chat
// completion's messages are: tool-call arguments as objects, calls written into the content for
// templates that do not read `tool_calls`, every value converted once (chat_values.h). Included by
// the codecs' .cc files only (nlohmann/json).
#pragma once

#include <string>
#include <vector>

#include "kvforge/status.h"
#include "server/api_types.h"
#include "server/json_fields.h"
#include "server/openai_codec.h"

namespace kvforge::server {

// `messages`: an array of {"role", "content": string or null, "tool_calls"?, "tool_call_id"?}.
// kInvalidArgument (nesting too deep) names the field in the message only.
Status SetTemplateMessages(json_fields::json messages, const CodecLimits& limits, ChatInput* chat);

// One function tool as OpenAI's chat API writes it, for templates that render tools.
json_fields::json OpenAiTool(const std::string& name, const json_fields::json* description,
                             const json_fields::json* parameters);

// `tools`: OpenAI chat tools (OpenAiTool); an empty array leaves chat->tools undefined, as a
// chat completion without tools does.
Status SetTemplateTools(const json_fields::json& tools, ChatInput* chat);

// A function name of 1 to 64 of [A-Za-z0-9_-] (chat::IsValidFunctionName), unique among `seen`;
// errors name `where`.name.
Status CheckToolName(const json_fields::Fields& f, const std::string& where,
                     const std::string& name, const std::vector<ToolFunction>& seen);

}  // namespace kvforge::server
