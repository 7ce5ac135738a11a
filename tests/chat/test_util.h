// test_util.h — helpers shared by the chat-template tests: render a template over a fixed set of
// variables, and check "parity cases" whose expectations were produced with Python Jinja2 3.1.6
// configured like Hugging Face transformers (sandboxed, trim_blocks, lstrip_blocks, loopcontrols,
// HF's tojson, strftime_now fixed at 2026-01-15 12:00:00).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "chat/json.h"

namespace kvforge::chat::testing {

// The variables every parity case renders with.
inline constexpr const char* kVarsJson = R"({
  "x_list": [1, 2, 3], "d": {"a": 1, "b": [1, 2]}, "s": "Hello World", "n": 5, "f": 2.5,
  "e": "", "none_v": null, "uni": "héllo 猫",
  "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]})";

struct Rendered {
  bool ok = false;
  bool parse_error = false;
  std::string text;  // the output, or the error message
  StatusCode code = StatusCode::kOk;
};

inline Rendered RenderWith(std::string_view source, std::string_view vars_json = kVarsJson,
                           const Limits& limits = {}) {
  Rendered r;
  Result<ChatTemplate> tmpl = ChatTemplate::Parse(source, limits);
  if (!tmpl.ok()) {
    r.parse_error = true;
    r.text = tmpl.status().message();
    r.code = tmpl.status().code();
    return r;
  }
  Result<Value> vars = ParseJson(vars_json);
  EXPECT_TRUE(vars.ok()) << vars.status().ToString();
  ChatInputs inputs;
  inputs.now = MakeTime(2026, 1, 15, 12, 0, 0);
  if (vars.ok()) {
    for (const auto& [k, v] : vars->dict().entries) inputs.extra.emplace_back(k.str(), v);
    if (const Value* m = vars->dict().FindStr("messages")) inputs.messages = *m;
  }
  Result<std::string> out = tmpl->Render(inputs);
  r.ok = out.ok();
  r.text = out.ok() ? *out : out.status().message();
  r.code = out.ok() ? StatusCode::kOk : out.status().code();
  return r;
}

// Output text, or "ERROR: <message>".
inline std::string Render(std::string_view source, std::string_view vars_json = kVarsJson) {
  Rendered r = RenderWith(source, vars_json);
  return r.ok ? r.text : "ERROR: " + r.text;
}

struct ParityCase {
  const char* name;
  const char* source;
  const char* want;  // Python's output, or its "Type: message" error
  bool error;
};

// Python's compile-time errors (syntax, unknown filter/test) must be parse errors here; their
// text differs (kvforge adds the line), so only the kind is compared. Everything else must match
// byte for byte, including runtime error messages.
inline void CheckParity(const ParityCase& c) {
  SCOPED_TRACE(c.name);
  const Rendered r = RenderWith(c.source);
  const std::string want = c.want;
  if (!c.error) {
    EXPECT_TRUE(r.ok) << c.name << ": " << r.text;
    EXPECT_EQ(r.text, want) << c.name;
    return;
  }
  const bool compile_time = want.rfind("TemplateSyntaxError", 0) == 0 ||
                            want.rfind("TemplateAssertionError", 0) == 0 ||
                            want.rfind("SyntaxError", 0) == 0;
  if (compile_time) {
    EXPECT_TRUE(r.parse_error) << c.name << ": expected a parse error, got " << r.text;
    const std::string type = want.substr(0, want.find(':'));
    const std::string mine_type = r.text.substr(0, r.text.find(':'));
    EXPECT_TRUE(mine_type == "TemplateSyntaxError" || mine_type == "TemplateAssertionError")
        << c.name << ": " << r.text;
    if (type == "TemplateAssertionError") {
      EXPECT_EQ(mine_type, type) << c.name;
    }
    return;
  }
  EXPECT_FALSE(r.ok) << c.name << ": expected error '" << want << "', rendered '" << r.text << "'";
  EXPECT_FALSE(r.parse_error) << c.name << ": " << r.text;
  EXPECT_EQ(r.text, want) << c.name;
}

}  // namespace kvforge::chat::testing
