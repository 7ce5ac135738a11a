// chat/tool_calls.cc — format names, detection from a template's markers, and call layouts.
#include "chat/tool_calls.h"

#include "base/strings.h"

namespace kvforge::chat {

namespace {

struct FormatName {
  ToolCallFormat format;
  const char* name;
};
constexpr FormatName kFormats[] = {{ToolCallFormat::kHermes, "hermes"},
                                   {ToolCallFormat::kLlama3Json, "llama3_json"},
                                   {ToolCallFormat::kMistral, "mistral"},
                                   {ToolCallFormat::kDeepSeekV3, "deepseek_v3"}};

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

Result<ToolCallFormat> ToolCallFormatFromName(std::string_view name) {
  for (const FormatName& f : kFormats)
    if (name == f.name) return f.format;
  return Status::InvalidArgument(
      base::StrFormat("unknown tool-call parser '%.*s' (expected one of %s)",
                      static_cast<int>(name.size()), name.data(), ToolCallFormatNames()));
}

const char* ToolCallFormatName(ToolCallFormat format) {
  for (const FormatName& f : kFormats)
    if (f.format == format) return f.name;
  return "?";
}

const char* ToolCallFormatNames() { return "hermes, llama3_json, mistral, deepseek_v3"; }

std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view source) {
  // Most specific markers first: DeepSeek and Mistral templates never mention <tool_call>.
  if (Contains(source,
               "tool\xE2\x96\x81"
               "calls\xE2\x96\x81"
               "begin"))
    return ToolCallFormat::kDeepSeekV3;
  if (Contains(source, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (Contains(source, "<tool_call>")) return ToolCallFormat::kHermes;
  if (Contains(source, "<|python_tag|>") ||
      (Contains(source, "<|start_header_id|>") && Contains(source, "\"parameters\"")))
    return ToolCallFormat::kLlama3Json;
  return std::nullopt;
}

ToolCallLayout LayoutOf(ToolCallFormat format) {
  ToolCallLayout l;
  switch (format) {
    case ToolCallFormat::kHermes:
      l.call_begin = "<tool_call>\n{\"name\": \"";
      l.name_end = "\", \"arguments\": ";
      l.call_end = "}\n</tool_call>";
      l.call_separator = "\n";
      break;
    case ToolCallFormat::kLlama3Json:
      l.call_begin = "{\"name\": \"";
      l.name_end = "\", \"parameters\": ";
      l.call_end = "}";
      l.call_separator = "; ";
      break;
    case ToolCallFormat::kMistral:
      l.calls_begin = "[TOOL_CALLS][";
      l.call_begin = "{\"name\": \"";
      l.name_end = "\", \"arguments\": ";
      l.call_end = "}";
      l.call_separator = ", ";
      l.calls_end = "]";
      break;
    case ToolCallFormat::kDeepSeekV3:
      l.calls_begin =
          "<\xEF\xBD\x9Ctool\xE2\x96\x81"
          "calls\xE2\x96\x81"
          "begin\xEF\xBD\x9C>";
      l.call_begin =
          "<\xEF\xBD\x9Ctool\xE2\x96\x81"
          "call\xE2\x96\x81"
          "begin\xEF\xBD\x9C>function"
          "<\xEF\xBD\x9Ctool\xE2\x96\x81"
          "sep\xEF\xBD\x9C>";
      l.name_end = "\n```json\n";
      l.call_end =
          "\n```<\xEF\xBD\x9Ctool\xE2\x96\x81"
          "call\xE2\x96\x81"
          "end\xEF\xBD\x9C>";
      l.call_separator = "\n";
      l.calls_end =
          "<\xEF\xBD\x9Ctool\xE2\x96\x81"
          "calls\xE2\x96\x81"
          "end\xEF\xBD\x9C>";
      break;
  }
  return l;
}

bool IsValidFunctionName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-'))
      return false;
  return true;
}

}  // namespace kvforge::chat
