// chat/tool_calls.h — the tool-call formats chat templates teach their models, and how a call is
// written in each (what a grammar for tool_choice "required" or a named function reproduces).
//
// Formats (vLLM's --tool-call-parser names):
//   hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (Hermes, Qwen 2.5+)
//   llama3_json  {"name": "f", "parameters": {...}}, optionally after <|python_tag|>, several
//                separated by ';'                                               (Llama 3.1-3.3)
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]          (v3, Nemo)
//                [TOOL_CALLS]f[ARGS]{...} or [TOOL_CALLS]f[CALL_ID]id[ARGS]{...} (v11+, Small 3.2)
//   deepseek_v3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}
//                \n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>                   (V3, R1)
//                or <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>      (V3.1)
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kvforge/status.h"

namespace kvforge::chat {

enum class ToolCallFormat { kHermes, kLlama3Json, kMistral, kDeepSeekV3 };

Result<ToolCallFormat> ToolCallFormatFromName(std::string_view name);
const char* ToolCallFormatName(ToolCallFormat format);
// "hermes, llama3_json, mistral, deepseek_v3" (for messages).
const char* ToolCallFormatNames();

// The format a template writes tool calls in, read from the markers it contains; nullopt when
// the template shows none.
std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view template_source);

// One call as the reply states it.
struct ToolCall {
  std::string name;
  std::string arguments;  // the arguments object as JSON text (json.dumps style)
  bool operator==(const ToolCall& o) const { return name == o.name && arguments == o.arguments; }
};

// How calls are written, text around names (bare, JSON-safe: names are [A-Za-z0-9_-]) and
// arguments (a JSON object):
//   calls_begin (call_begin NAME name_end ARGS call_end) (call_separator ...)* calls_end
struct ToolCallLayout {
  std::string calls_begin;
  std::string call_begin;
  std::string name_end;
  std::string call_end;
  std::string call_separator;
  std::string calls_end;
};
ToolCallLayout LayoutOf(ToolCallFormat format);

// Whether `name` is a valid function name (OpenAI: [A-Za-z0-9_-], 1 to 64 characters).
bool IsValidFunctionName(std::string_view name);

}  // namespace kvforge::chat
