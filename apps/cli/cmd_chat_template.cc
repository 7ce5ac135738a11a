// kvforge chat-template — renders an LLM chat template (Jinja2) over a conversation, the way
// Hugging Face transformers would, and prints the prompt text exactly (no added newline).
// Exit codes: 0 rendered; 1 a file could not be read/parsed or the template failed (the template's
// message goes to stderr); 2 bad flags.
#include <cstdio>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/json.h"
#include "commands.h"
#include "flags.h"
#include "read_file.h"

namespace kvforge::cli {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "kvforge chat-template: %s\n", message.c_str());
  return 1;
}

}  // namespace

int ChatTemplateMain(const Args& args) {
  std::string template_path;
  std::string messages_path;
  std::string tools_path;
  std::string bos;
  std::string eos;
  std::string now_text;
  bool add_generation_prompt = false;

  FlagParser p(
      "chat-template",
      "Render a Jinja2 chat template over a conversation (Hugging Face semantics).\n"
      "  kvforge chat-template --template FILE --messages FILE [--tools FILE]\n"
      "                        [--bos S] [--eos S] [--add-generation-prompt]\n"
      "                        [--now 2026-01-15T12:00:00]\n"
      "--messages holds a JSON array of {\"role\", \"content\", ...} objects (or an object\n"
      "with a \"messages\" array). The rendering is printed exactly, without a newline.");
  p.AddString("template", &template_path, "chat template file (Jinja2)");
  p.AddString("messages", &messages_path, "JSON file with the conversation");
  p.AddString("tools", &tools_path, "JSON file with a list of tool definitions (optional)");
  p.AddString("bos", &bos, "value of bos_token (undefined when not given)");
  p.AddString("eos", &eos, "value of eos_token (undefined when not given)");
  p.AddBool("add-generation-prompt", &add_generation_prompt,
            "end with the header that starts the assistant's reply");
  p.AddString("now", &now_text, "fixed time for strftime_now, YYYY-MM-DD[THH:MM[:SS]]");
  p.Require("template");
  p.Require("messages");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;

  chat::ChatInputs inputs;
  if (p.Given("now")) {
    Result<std::tm> now = chat::ParseIsoTime(now_text);
    if (!now.ok()) {
      std::fprintf(stderr, "kvforge chat-template: --now: %s\n(see kvforge chat-template --help)\n",
                   now.status().message().c_str());
      return 2;
    }
    inputs.now = *now;
  }
  if (p.Given("bos")) inputs.bos_token = bos;
  if (p.Given("eos")) inputs.eos_token = eos;
  inputs.add_generation_prompt = add_generation_prompt;

  std::string source;
  if (!ReadFile(template_path, &source)) return Fail("cannot read template " + template_path);
  std::string messages_text;
  if (!ReadFile(messages_path, &messages_text)) {
    return Fail("cannot read messages " + messages_path);
  }
  Result<chat::Value> messages = chat::ParseJson(messages_text);
  if (!messages.ok()) return Fail(messages_path + ": " + messages.status().message());
  if (messages->is_dict()) {
    const chat::Value* inner = messages->dict().FindStr("messages");
    if (inner == nullptr) return Fail(messages_path + ": expected a \"messages\" array");
    inputs.messages = *inner;
  } else {
    inputs.messages = *messages;
  }
  if (!inputs.messages.is_list()) return Fail(messages_path + ": messages must be a JSON array");
  if (p.Given("tools")) {
    std::string tools_text;
    if (!ReadFile(tools_path, &tools_text)) return Fail("cannot read tools " + tools_path);
    Result<chat::Value> tools = chat::ParseJson(tools_text);
    if (!tools.ok()) return Fail(tools_path + ": " + tools.status().message());
    inputs.tools = *tools;
  }

  Result<chat::ChatTemplate> tmpl = chat::ChatTemplate::Parse(source);
  if (!tmpl.ok()) {
    std::fprintf(stderr, "%s\n", tmpl.status().message().c_str());
    return 1;
  }
  Result<std::string> out = tmpl->Render(inputs);
  if (!out.ok()) {
    std::fprintf(stderr, "%s\n", out.status().message().c_str());
    return 1;
  }
  std::fwrite(out->data(), 1, out->size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace kvforge::cli
