// server/tool_grammar.h — tool_choice "required" and named functions enforced: the grammar of the
// replies that call the tools, in the layout of the model's tool-call format, each call's
// arguments compiled from its function's parameters schema. A reply the grammar allows always
// parses as tool calls whose arguments validate.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "chat/tool_calls.h"
#include "kvforge/status.h"
#include "server/api_types.h"

namespace kvforge::server {

// required: one call of any tool (one or more with parallel_tool_calls); named: of that tool.
// Errors (a schema the compiler refuses) name the tool: "tools[2].function.parameters: ...".
Result<std::string> ToolCallGbnf(chat::ToolCallFormat format, const ToolRequest& req);

}  // namespace kvforge::server
