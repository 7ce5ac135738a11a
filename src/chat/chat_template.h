// chat_template.h — public entry point: render an LLM chat template (Jinja2) over a conversation.
//
// ChatTemplate::Parse compiles a template once (Jinja2 syntax, configured the way Hugging Face
// transformers renders chat templates: sandboxed, trim_blocks, lstrip_blocks, loop controls,
// `tojson` without HTML escaping, `raise_exception(msg)`, `strftime_now(fmt)`); Render then
// produces the prompt text for a ChatInputs. See docs/chat_templates.md for the supported subset
// and deliberate differences from Python Jinja2.
//
// Errors: Parse fails with kInvalidArgument ("TemplateSyntaxError: ... (line N)") for malformed
// templates; Render fails with kInvalidArgument and Python-style text such as
// "UndefinedError: 'functions' is undefined" or "TemplateError: System role not supported" (the
// latter from raise_exception), or with kResourceExhausted when a Limits bound is hit. No exception
// escapes this API.
//
// Thread-safety: a ChatTemplate is immutable after Parse; Render may run concurrently from many
// threads on one instance. ChatInputs values are frozen on first use (see value.h), so inputs
// shared between threads should come from ParseJson (already frozen).
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/limits.h"
#include "chat/value.h"
#include "kvforge/status.h"

namespace kvforge::chat {

struct Template;

struct ChatInputs {
  Value messages;  // a list of {"role": ..., "content": ...} dicts, typically from ParseJson
  std::optional<std::string> bos_token;  // unset: undefined inside the template
  std::optional<std::string> eos_token;
  bool add_generation_prompt = false;
  Value tools;  // undefined (the default) means "not passed", as when no tools are given
  // Further template variables (documents, enable_thinking, ...). The named fields above win
  // over an extra variable of the same name.
  std::vector<std::pair<std::string, Value>> extra;
  // The clock strftime_now reads; unset means the current local time.
  std::optional<std::tm> now;
};

// The template used when the model carries none and none is given: ChatML.
extern const char kDefaultChatTemplate[];

class ChatTemplate {
 public:
  static Result<ChatTemplate> Parse(std::string_view source, const Limits& limits = {});

  Result<std::string> Render(const ChatInputs& inputs) const;

  const Limits& limits() const { return limits_; }

 private:
  ChatTemplate(std::shared_ptr<const Template> tmpl, const Limits& limits)
      : tmpl_(std::move(tmpl)), limits_(limits) {}
  std::shared_ptr<const Template> tmpl_;
  Limits limits_;
};

// A std::tm for a civil date and time with tm_wday/tm_yday filled in (no time zone applied).
std::tm MakeTime(int year, int month, int day, int hour, int minute, int second);
// Parses "YYYY-MM-DD", "YYYY-MM-DDTHH:MM" or "YYYY-MM-DDTHH:MM:SS" (a space may replace 'T').
Result<std::tm> ParseIsoTime(std::string_view text);

}  // namespace kvforge::chat
